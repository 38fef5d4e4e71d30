"""Partitioned execution: a graph's nodes split between two "providers", as onnxruntime splits a graph among its
execution providers by capability (GetCapability):

- onnxruntime, for every node it runs as the spec says: maximal subgraphs, one session each (`Segment`);
- rnnconv, for the nodes it must run itself (`rnnconv_reason`): recurrent nodes onnxruntime refuses or has no kernel
  for (versions below 7, layout 1, other element types than float32), If/Loop/Scan and function calls whose bodies
  hold such nodes (their bodies are partitioned in turn), nodes that refer to a function's attributes.

Segments are levels of the graph: an onnxruntime segment reads only graph inputs, outer values and values made in
earlier segments, so each runs once, in order, and together they are as few as the rnnconv nodes allow.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import BFLOAT16_SINCE, MODERN_SINCE, OPS, bodies, version_of
from rnnconv.engine import ONNXRUNTIME, RNNCONV
# Constant inputs of a segment up to this size go inside its model (shapes, axes, quantization parameters: some
# kernels want them constant); bigger ones are fed at each run, never copied into protobuf.
EMBEDDED_CONSTANT_BYTES = 1 << 16


@dataclasses.dataclass(eq=False)
class Segment:
    """Nodes of one graph that run together, in the graph's order: in one onnxruntime session, or one by one in
    rnnconv. `inputs`: values the nodes read from outside the segment; `outputs`: values made here that later
    nodes, bodies or the graph's outputs read."""

    place: str
    nodes: list
    inputs: list = dataclasses.field(default_factory=list)
    outputs: list = dataclasses.field(default_factory=list)
    constants: set = dataclasses.field(default_factory=set)  # inputs that go inside the segment's model

    def fed(self, arrays: list) -> dict:
        """The inputs a run feeds (every one but the constants inside), by name."""
        return {v.name: a for v, a in zip(self.inputs, arrays) if v not in self.constants}


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def _float32(value: Optional[ir.Value]) -> bool:
    return value is None or value.dtype in (None, ir.DataType.FLOAT)


def onnxruntime_refusals(op: str, version: int, layout: int, dtype: Optional[str]) -> dict[str, str]:
    """What onnxruntime refuses of a GRU/LSTM/RNN node (measured: tests/commands/test_check.py observes each), by
    cause ("version", "layout", "float64", "bfloat16"); empty when it runs the node. `dtype`: the numpy name of
    the node's element type."""
    found = {}
    if version < MODERN_SINCE:
        found["version"] = f"no CPU kernel for {op}-{version} (onnxruntime runs {op} from opset {MODERN_SINCE})"
    if layout == 1:
        found["layout"] = ('layout=1 is refused at session creation ("Batchwise recurrent operations (layout == 1) '
                           'are not supported")')
    if dtype == "float64":
        found["float64"] = f"float64 {op} is not run (no double kernel)"
    if dtype == "bfloat16":
        found["bfloat16"] = (f"no CPU kernel for bfloat16 {op} (below opset {BFLOAT16_SINCE} rnnconv runs the node in "
                             f"float32 between Casts)")
    return found


def _dtype(node: ir.Node) -> Optional[str]:
    """The numpy name of a recurrent node's element type (X, W or R, the first whose type is known)."""
    for value in node.inputs[:3]:
        if value is not None and value.dtype is not None:
            try:
                return np.dtype(value.dtype.numpy()).name
            except (TypeError, ValueError):  # a type numpy has no name for: none onnxruntime refuses by name
                return None
    return None


def rnnconv_reason(node: ir.Node, opsets: Mapping[str, int], functions: Mapping[tuple, ir.Function],
                   memo: Optional[dict] = None) -> Optional[str]:
    """Why rnnconv runs `node` itself rather than onnxruntime (None: onnxruntime runs it as the spec says).
    `memo`: reasons already found, by node (bodies are read once however deep they nest)."""
    memo = {} if memo is None else memo
    if node not in memo:
        memo[node] = _reason(node, opsets, functions, memo)
    return memo[node]


def _reason(node: ir.Node, opsets: Mapping[str, int], functions: Mapping[tuple, ir.Function], memo: dict
            ) -> Optional[str]:
    if any(a.is_ref() for a in node.attributes.values()):
        return "refers to a function's attributes"
    domain = _domain(node.domain)
    if domain == "" and node.op_type in OPS:
        version = version_of(node.op_type, opsets.get("", 1))
        layout = node.attributes.get("layout")
        refused = onnxruntime_refusals(node.op_type, version, 0 if layout is None else layout.value, _dtype(node))
        if refused:
            return "onnxruntime: " + "; ".join(refused.values())
        if not all(_float32(v) for v in node.inputs[:3]):
            return "onnxruntime runs float32 recurrent nodes only"
        return None
    function = functions.get((node.domain, node.op_type, node.overload))
    if function is not None:
        inner = {**opsets, **{_domain(d): v for d, v in function.opset_imports.items()}}
        if any(rnnconv_reason(n, inner, functions, memo) for n in function):
            return "its function holds nodes rnnconv runs"
        return None
    for body in bodies(node):
        if any(rnnconv_reason(n, opsets, functions, memo) for n in body):
            return "its body holds nodes rnnconv runs"
    return None


def uses(node: ir.Node) -> list[ir.Value]:
    """The values a node reads: its inputs, and whatever its bodies read or return (outer values included)."""
    found = [v for v in node.inputs if v is not None]
    for body in bodies(node):
        for inner in body:
            found += uses(inner)
        found += list(body.outputs)
    return found


def _defined_inside(node: ir.Node) -> set:
    """Values a node's bodies define (their inputs, initializers and node outputs): never read from outside."""
    found: set = set()
    for body in bodies(node):
        found.update(body.inputs)
        found.update(getattr(body, "initializers", {}).values())
        for inner in body:
            found.update(inner.outputs)
            found |= _defined_inside(inner)
    return found


def split(graph, opsets: Mapping[str, int], functions: Mapping[tuple, ir.Function]) -> list[Segment]:
    """The graph's nodes as segments, in an order that runs (levels: even ones onnxruntime's, odd ones rnnconv's)."""
    nodes = list(graph)
    memo: dict = {}
    read = {node: uses(node) for node in nodes}
    made_by: dict = {}
    for i, node in enumerate(nodes):
        for v in node.outputs:
            made_by[v] = i
    levels: list[int] = []
    for i, node in enumerate(nodes):
        own = rnnconv_reason(node, opsets, functions, memo) is not None
        level = 1 if own else 0
        for v in read[node]:
            j = made_by.get(v)
            if j is None or j >= i:
                continue
            before = levels[j]
            level = max(level, before + (1 if (before % 2 == 0) == own else 0))
        levels.append(level)
    by_level: dict[int, list] = {}
    for node, level in zip(nodes, levels):
        by_level.setdefault(level, []).append(node)
    segments = [Segment(RNNCONV if level % 2 else ONNXRUNTIME, members) for level, members in sorted(by_level.items())]
    _wire(segments, graph, read)
    return segments


def _wire(segments: list[Segment], graph, read: Mapping) -> None:
    read_by: dict = {}
    for k, seg in enumerate(segments):
        for node in seg.nodes:
            for v in read[node]:
                read_by.setdefault(v, set()).add(k)
    graph_outputs, graph_inputs = set(graph.outputs), set(graph.inputs)
    for k, seg in enumerate(segments):
        made = {v for node in seg.nodes for v in node.outputs if v.name}
        inside: set = set()
        for node in seg.nodes:
            inside |= _defined_inside(node)
        seen: set = set()
        for node in seg.nodes:
            for v in read[node]:
                if v not in made and v not in inside and v not in seen:
                    seen.add(v)
                    seg.inputs.append(v)
        seg.outputs = [v for node in seg.nodes for v in node.outputs
                       if v in made and (v in graph_outputs or read_by.get(v, set()) - {k})]
        # a graph input with a default (an initializer of the same name) takes what it is fed
        seg.constants = {v for v in seg.inputs if v.const_value is not None and v not in graph_inputs
                         and v.const_value.nbytes <= EMBEDDED_CONSTANT_BYTES}


def _typed(name: str, array) -> ir.Value:
    """A graph input typed after the array it gets (element type and rank; every dim dynamic)."""
    if isinstance(array, list):
        elem = np.asarray(array[0]).dtype if array else np.dtype(np.float32)
        return ir.Value(name=name, type=ir.SequenceType(ir.TensorType(ir.DataType.from_numpy(elem))))
    array = np.asarray(array)
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                    shape=ir.Shape([None] * array.ndim))


def segment_model(seg: Segment, arrays: list, opsets: Mapping[str, int], functions, ir_version: int) -> ir.Model:
    """A standalone model of an onnxruntime segment, its inputs typed after `arrays` (the values they hold now).
    Small constants are initializers inside it; every other input is fed at each run. The nodes are new ones
    sharing the originals' attributes (bodies included): the model is for serializing, never for editing."""
    new: dict = {}
    inputs, initializers = [], []
    for value, array in zip(seg.inputs, arrays):
        const = value.const_value
        if value in seg.constants:
            new[value] = ir.Value(name=value.name, type=ir.TensorType(const.dtype), shape=ir.Shape(const.shape),
                                  const_value=const)
            initializers.append(new[value])
        else:
            new[value] = _typed(value.name, array)
            inputs.append(new[value])
    nodes = []
    for node in seg.nodes:
        outputs = [ir.Value(name=v.name) for v in node.outputs]
        nodes.append(ir.Node(node.domain, node.op_type, [None if v is None else new.get(v, v) for v in node.inputs],
                             attributes=list(node.attributes.values()), overload=node.overload, outputs=outputs,
                             name=node.name))
        new.update(zip(node.outputs, outputs))
    graph = ir.Graph(inputs, [new[v] for v in seg.outputs], nodes=nodes, initializers=initializers,
                     opset_imports=dict(opsets), name="segment")
    return ir.Model(graph, ir_version=ir_version, functions=list(functions.values()), producer_name="rnnconv")
