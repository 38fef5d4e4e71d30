"""Graph-editing helpers the passes share: fresh names, Transposes."""

from __future__ import annotations

import itertools
from typing import Sequence

import onnx_ir as ir


class Names:
    """Fresh value/node names that do not collide with anything in the graph (its subgraphs included)."""

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
