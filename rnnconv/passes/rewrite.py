"""Small graph-editing helpers shared by the passes: node rewrites, Transposes, standalone extracts."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Optional, Sequence

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import RecurrentNode, constant_array  # noqa: F401 (re-exported)


@dataclasses.dataclass
class NodeRewrite:
    """A recurrent node replaced by `nodes`; `outputs` maps each original output value to its replacement."""

    original: RecurrentNode
    nodes: list[ir.Node]
    outputs: dict[str, ir.Value]  # by ONNX output name (Y, Y_h, Y_c)
    what: list[str] = dataclasses.field(default_factory=list)
    new_initializers: list[ir.Value] = dataclasses.field(default_factory=list)


class Names:
    """Fresh value/node names that do not collide with anything in the graph."""

    def __init__(self, graph: ir.Graph):
        self.taken = {v.name for v in graph.inputs} | set(graph.initializers)
        for node in ir.traversal.RecursiveGraphIterator(graph):
            self.taken.update(v.name for v in node.outputs if v.name)
            if node.name:
                self.taken.add(node.name)
        self._counter = itertools.count()

    def __call__(self, hint: str) -> str:
        name = hint
        while name in self.taken:
            name = f"{hint}_{next(self._counter)}"
        self.taken.add(name)
        return name


def transpose(value: ir.Value, perm: Sequence[int], names: Names, hint: str) -> tuple[ir.Node, ir.Value]:
    out = ir.Value(name=names(hint))
    node = ir.Node("", "Transpose", inputs=[value], outputs=[out], name=names(hint + "_node"),
                   attributes=[ir.AttrInt64s("perm", list(perm))])
    if value.type is not None:
        out.type = value.type
    if value.shape is not None:
        out.shape = ir.Shape([value.shape[p] for p in perm])
    return node, out


def apply(graph: ir.Graph, rewrite: NodeRewrite) -> None:
    """Put the rewrite's nodes in place of the original node; users and graph outputs follow."""
    node = rewrite.original.node
    old_values, new_values = [], []
    for key, new in rewrite.outputs.items():
        old = rewrite.original.outputs.get(key)
        if old is not None:
            old_values.append(old)
            new_values.append(new)
    for value in rewrite.new_initializers:
        graph.register_initializer(value)
    # Keep the original output names on the values the rest of the graph sees.
    for old, new in zip(old_values, new_values):
        name = old.name
        old.name = None
        if new.type is None:
            new.type = old.type
        if new.shape is None:
            new.shape = old.shape
        new.name = name
    ir.convenience.replace_all_uses_with(old_values, new_values, replace_graph_outputs=True)
    graph.insert_after(node, rewrite.nodes)
    graph.remove(node, safe=True)


def extract(nodes: Sequence[ir.Node], inputs: Sequence[ir.Value], outputs: Sequence[ir.Value],
            opset_imports: dict[str, int], ir_version: int) -> ir.Model:
    """A standalone model holding clones of `nodes`: `inputs` become graph inputs (constants stay initializers)."""
    mapping: dict[int, ir.Value] = {}
    graph_inputs, initializers = [], []

    def clone_value(v: ir.Value) -> ir.Value:
        c = ir.Value(name=v.name, type=v.type, shape=v.shape)
        mapping[id(v)] = c
        return c

    def lookup(v: Optional[ir.Value]) -> Optional[ir.Value]:
        if v is None:
            return None
        if id(v) in mapping:
            return mapping[id(v)]
        c = clone_value(v)
        if v.const_value is not None:
            c.const_value = v.const_value
            initializers.append(c)
        elif constant_array(v) is not None:  # a Constant node's output
            c.const_value = ir.tensor(constant_array(v), name=v.name)
            initializers.append(c)
        else:
            graph_inputs.append(c)
        return c

    for v in inputs:
        lookup(v)
    new_nodes = []
    for node in nodes:
        ins = [lookup(v) for v in node.inputs]
        outs = [ir.Value(name=o.name, type=o.type, shape=o.shape) for o in node.outputs]
        for o, c in zip(node.outputs, outs):
            mapping[id(o)] = c
        new_nodes.append(ir.Node(node.domain, node.op_type, inputs=ins, outputs=outs, name=node.name,
                                 attributes=list(node.attributes.values()), version=node.version))
    graph = ir.Graph(graph_inputs, [mapping[id(o)] for o in outputs], nodes=new_nodes,
                     initializers=initializers, opset_imports=dict(opset_imports))
    if ir_version < 4:
        graph.inputs.extend(v for v in initializers if v not in graph.inputs)
    return ir.Model(graph, ir_version=ir_version, producer_name="rnnconv")

