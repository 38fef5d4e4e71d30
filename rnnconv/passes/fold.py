"""Constant folding of the small all-constant chain behind one value, for a step that must read it as constant.

PyTorch's legacy exporter computes e.g. Pad's pads through ConstantOfShape / Concat / Reshape / Slice / Transpose /
Cast nodes fed by constants only; Pad-2 holds pads as an attribute. Only the chain such a step reads is folded,
with rnnconv's engine (onnx's reference ops), never a chain that reads a graph input, draws random numbers or holds
a subgraph.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects.onnx_recurrent import constant_array
from rnnconv.engine.onnx_graph import run_onnx

MAX_ELEMENTS = 1 << 16  # no constant of the chain, nor the result, is larger
MAX_NODES = 64
NOT_FOLDED = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                        "Bernoulli", "Dropout", "If", "Loop", "Scan"})


def chain(value: ir.Value) -> Optional[tuple[list[ir.Node], dict[str, np.ndarray]]]:
    """The nodes that compute `value` from constants only (in order: the Constant nodes first) and the constants
    they read; None when a graph input, a big constant or a node that must not be folded is on the way."""
    nodes: list[ir.Node] = []
    constants: list[ir.Node] = []
    leaves: dict[str, np.ndarray] = {}
    seen: set[int] = set()

    def visit(v: ir.Value) -> bool:
        array = constant_array(v)
        if array is not None:
            leaves[v.name] = array
            if v.producer() is not None and v.producer() not in constants:
                constants.append(v.producer())
            return array.size <= MAX_ELEMENTS
        node = v.producer()
        if node is None or node.domain not in ("", "ai.onnx") or node.op_type in NOT_FOLDED:
            return False
        if id(node) in seen:
            return True
        seen.add(id(node))
        if len(seen) > MAX_NODES or not all(i is None or visit(i) for i in node.inputs):
            return False
        nodes.append(node)
        return True

    return ([*constants, *nodes], leaves) if visit(value) and nodes else None


def fold(value: ir.Value, opset: int) -> Optional[tuple[np.ndarray, list[ir.Node]]]:
    """`value` computed from its constant chain by the engine (the chain's nodes valid at default-domain `opset`),
    with the chain's nodes (Constant nodes first); None when the value is not such a chain's result."""
    found = chain(value)
    if found is None:
        return None
    nodes, leaves = found
    computed = [n for n in nodes if n.op_type != "Constant"]  # the Constants' values are the leaves
    values: dict[str, ir.Value] = {}
    initializers = []
    for name, array in leaves.items():
        v = ir.Value(name=name, const_value=ir.tensor(array, name=name))
        values[name] = v
        initializers.append(v)

    def mapped(v: Optional[ir.Value]) -> Optional[ir.Value]:
        if v is None:
            return None
        if v.name not in values:
            values[v.name] = ir.Value(name=v.name, type=v.type)
        return values[v.name]

    clones = [ir.Node(n.domain, n.op_type, inputs=[mapped(i) for i in n.inputs],
                      outputs=[mapped(o) for o in n.outputs], attributes=list(n.attributes.values()), name=n.name)
              for n in computed]
    graph = ir.Graph([], [values[value.name]], nodes=clones, initializers=initializers, opset_imports={"": opset})
    try:
        array = run_onnx(ir.Model(graph, ir_version=schemas.min_ir_version(opset)), {})[value.name]
    except Exception:  # a chain the reference ops cannot run stays as it is (the step then refuses)
        return None
    array = np.asarray(array)
    if value.dtype is not None and array.dtype != value.dtype.numpy():
        array = array.astype(value.dtype.numpy())
    return (array, nodes) if array.size <= MAX_ELEMENTS else None
