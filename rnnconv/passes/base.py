"""The one shape of every rewrite: an onnx_ir in-place pass, `pass_(model) -> PassResult`.

`PassResult` says whether the model changed (as onnx_ir's) and lists the nodes the pass replaced (`rewrites`), so
that the verification pipeline can check each replaced node against its replacement. A pass that meets a node it
cannot rewrite collects the reason and, before changing anything, raises Unsupported naming every such node.
Passes over OpenVINO IR graphs have the same shape (the "model" is then an IRGraph).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import RecurrentNode
from rnnconv.errors import Unsupported


@dataclasses.dataclass
class Rewrite:
    """A recurrent node replaced by `nodes`; `outputs` maps each of its outputs (Y, Y_h, Y_c) to its replacement.

    `opset`: the default-domain opset the replacement is written for (None: the model's own)."""

    original: RecurrentNode
    nodes: list[ir.Node]
    outputs: dict[str, ir.Value]
    what: list[str] = dataclasses.field(default_factory=list)
    new_initializers: list[ir.Value] = dataclasses.field(default_factory=list)
    opset: Optional[int] = None

    @property
    def name(self) -> str:
        return self.original.name


@dataclasses.dataclass
class PassResult(ir.passes.PassResult):
    rewrites: list[Rewrite] = dataclasses.field(default_factory=list)
    changes: list[str] = dataclasses.field(default_factory=list)  # what changed beside the rewrites, one line each
    fp16_weights: bool = False  # the rewrites stored weights as float16 (a Tolerances fact)


class Pass(ir.passes.InPlacePass):
    """Base of rnnconv's passes: `call(model)` returns a PassResult."""

    def call(self, model) -> PassResult:  # pragma: no cover - abstract
        raise NotImplementedError


def refuse(what: str, refusals: list[str], fixes=()) -> None:
    """Raise Unsupported naming every refusal, if there is any."""
    if refusals:
        raise Unsupported(f"{what}: " + "; ".join(refusals), fixes=fixes)


class RewritePass(Pass):
    """A pass that replaces recurrent nodes one by one: `plan` decides each Rewrite (refusing with Unsupported,
    every node named, before anything changes), `observe` sees each one before it is applied (the pipeline
    extracts the node and its replacement to check them), then all are applied where the nodes are, subgraphs
    included."""

    def __init__(self, observe: Optional[Callable[[Rewrite], None]] = None):
        super().__init__()
        self.observe = observe or (lambda rewrite: None)

    def plan(self, model: ir.Model) -> list[Rewrite]:  # pragma: no cover - abstract
        raise NotImplementedError

    def call(self, model: ir.Model) -> PassResult:
        rewrites = self.plan(model)
        for r in rewrites:
            self.observe(r)
        for r in rewrites:
            apply(r)
        return PassResult(model, bool(rewrites), rewrites)


def apply(rewrite: Rewrite) -> None:
    """Put the rewrite's nodes in place of the original node, in the graph that holds it; its users and the
    graph's outputs follow, under the original output names."""
    node = rewrite.original.node
    graph = node.graph
    old_values, new_values = [], []
    for key, new in rewrite.outputs.items():
        old = rewrite.original.outputs.get(key)
        if old is not None:
            old_values.append(old)
            new_values.append(new)
    for value in rewrite.new_initializers:
        graph.register_initializer(value)
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

