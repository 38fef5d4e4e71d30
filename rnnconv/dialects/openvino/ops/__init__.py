"""ONE table of ONNX <-> OpenVINO IR op mappings, both directions side by side, and each IR type's shape rule.

`TABLE`: ONNX op -> `OpMapping` (the IR operations it becomes, `to_openvino`); `reverse_index()` gives it keyed by
IR type. `REVERSE`: IR type -> the function turning such a layer back into ONNX nodes (`LayerContext`). Each op
family module (`elementwise`, `matrix`, `movement`, `indexing`, `generation`, `convolution`, `normalization`,
`resize`, `signal`) defines an op's two directions next to each other and registers the shape rule of the IR
types it writes (`registry.shape`), all into the type's one entry (`registry.IR_OPS`, where the engine adds the
interpreter kernel). Each mapping's docstring cites both spec pages: ONNX Operators.md (onnx.ai/onnx/operators/
onnx__<Op>.html) and the OpenVINO operation spec (docs.openvino.ai, Operation Specifications, <Op>-<version>).
GRU/LSTM/RNN are not here: see rnnconv.dialects.openvino.from_onnx and rnnconv.dialects.openvino.to_onnx; nor
If / Loop / TensorIterator (rnnconv.dialects.openvino.control_flow); `structural` says so in their entries. An IR
type is registered in one spelling (`graph.canonical_type` reads the others).
"""

from __future__ import annotations

import onnx_ir as ir

from rnnconv.layer import KINDS

from rnnconv.dialects.openvino.ops import (  # noqa: F401  (registers)
    convolution,
    elementwise,
    generation,
    indexing,
    matrix,
    movement,
    normalization,
    resize,
    signal,
    structural,
)
from rnnconv.dialects.openvino.ops.elementwise import BINARY, UNARY
from rnnconv.dialects.openvino.ops.table import (
    REVERSE,
    TABLE,
    Context,
    Key,
    LayerContext,
    OpMapping,
    attr,
    mapping,
    reverse,
    reverse_index,
)

__all__ = ["BINARY", "REVERSE", "RECURRENT", "TABLE", "UNARY", "Context", "Key", "LayerContext", "OpMapping", "attr",
           "mapping", "reverse", "reverse_index", "unsupported_ops"]

RECURRENT = KINDS  # the recurrent ops rnnconv maps itself, not through this table


def unsupported_ops(model: ir.Model) -> list[str]:
    """Every op type of the main graph that neither the table nor the recurrent mapping handles."""
    bad = set()
    for node in model.graph:
        if node.domain not in ("", "ai.onnx"):
            bad.add(f"{node.domain}.{node.op_type}")
        elif node.op_type not in TABLE and node.op_type not in RECURRENT:
            bad.add(node.op_type)
    return sorted(bad)
