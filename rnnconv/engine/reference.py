"""onnx's reference implementation of one default-domain op: the per-op classes of onnx.reference.ops, never
the whole ReferenceEvaluator (rnnconv's engine walks the graph itself, see onnx_graph.py).

An op is built once per node and called with numpy arrays (None for an absent optional input); weights are
passed as the (memory-mapped) arrays they are, never copied into protobuf.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import onnx
import onnx_ir as ir


class NoReference(Exception):
    """onnx's reference has no implementation of this op at this version."""


def op(op_type: str, version: int, attributes: Sequence[ir.Attr], n_inputs: int, n_outputs: int,
       opsets: Mapping[str, int]) -> Callable[..., tuple]:
    """`run(*inputs) -> outputs` for one default-domain node: op_type at opset `version`, with `attributes`
    (references to a function's attributes already resolved); NoReference when onnx lacks it."""
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import RuntimeContextError
    from onnx.reference.ops import load_op

    if op_type == "Scatter":
        # Scatter-9/10 is ScatterElements under its older name, which onnx's reference ops lack.
        op_type, version = "ScatterElements", 11
    try:
        # evaluator_cls: ops the reference implements as their schema's function body run it in onnx's evaluator.
        cls = load_op("", op_type, version, evaluator_cls=ReferenceEvaluator)
    except (NotImplementedError, RuntimeContextError, RuntimeError, ValueError) as err:
        raise NoReference(str(err).splitlines()[0] if str(err) else type(err).__name__) from err
    node = onnx.helper.make_node(op_type, [f"in{k}" for k in range(n_inputs)], [f"out{k}" for k in range(n_outputs)])
    node.attribute.extend(ir.serde.serialize_attribute(a) for a in attributes)
    instance = cls(node, {"log": lambda *args: None, "opsets": dict(opsets), "verbose": 0, "new_ops": {},
                          "existing_functions": {}, "evaluator_cls": ReferenceEvaluator})
    return instance.run
