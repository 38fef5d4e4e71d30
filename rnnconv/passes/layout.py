"""Layout change of one recurrent node: the node gets the target layout, Transposes keep the interface.

ONNX (>= 14) layout 0: X [T,N,I], Y [T,D,N,H], states [D,N,H]; layout 1: X [N,T,I], Y [N,T,D,H], states [N,D,H].
"""

from __future__ import annotations

from typing import Optional, Sequence

import onnx_ir as ir

from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.errors import Unsupported, UsageError
from rnnconv.passes.base import Rewrite, RewritePass
from rnnconv.passes.edit import Names, transpose

# perm applied to a tensor in layout `src` to give it layout `dst`.
X_PERM = (1, 0, 2)
STATE_PERM = (1, 0, 2)
Y_PERM = {(0, 1): (2, 0, 1, 3), (1, 0): (1, 2, 0, 3)}
STATE_INPUTS = ("initial_h", "initial_c")
STATE_OUTPUTS = ("Y_h", "Y_c")


def transpose_inputs(rn, inputs: list, to: int, names: Names) -> tuple[list[ir.Node], list]:
    """Transposes X and the initial states (positions of `rn`'s inputs) into layout `to`."""
    before, inputs = [], list(inputs)
    for i, key in enumerate(_input_names(rn)):
        value = inputs[i]
        if value is None or (key != "X" and key not in STATE_INPUTS):
            continue
        t, inputs[i] = transpose(value, X_PERM if key == "X" else STATE_PERM, names, f"{value.name}_layout{to}")
        before.append(t)
    return before, inputs


def transpose_outputs(rn, inner: dict, to: int, names: Names) -> tuple[list[ir.Node], dict]:
    """Transposes Y / Y_h / Y_c of a node in layout `to` back to `rn`'s own layout."""
    src = rn.layer.layout
    after, replaced = [], {}
    for key, value in inner.items():
        perm = Y_PERM[(to, src)] if key == "Y" else STATE_PERM
        t, replaced[key] = transpose(value, perm, names, f"{rn.outputs[key].name}_layout{src}")
        after.append(t)
    return after, replaced


def relayout(rn, to: int, names: Names) -> Rewrite:
    """Rewrite `rn` (layout a) as Transposes -> the node with layout `to` -> Transposes back to layout a."""
    original = rn.node
    before, inputs = transpose_inputs(rn, list(original.inputs), to, names)
    attrs = [a for k, a in original.attributes.items() if k != "layout"]
    if to:
        attrs.append(ir.AttrInt64("layout", to))
    outs = [ir.Value(name=names(f"{o.name}_layout{to}")) if o is not None and o.name else ir.Value(name="")
            for o in original.outputs]
    node = ir.Node(original.domain, original.op_type, inputs=inputs, outputs=outs, name=original.name,
                   attributes=attrs, version=original.version)
    inner = {k: v for k, v in zip(_output_names(rn), outs) if rn.outputs.get(k) is not None}
    after, replaced = transpose_outputs(rn, inner, to, names)
    return Rewrite(rn, [*before, node, *after], replaced, [f"layout {rn.layer.layout} -> {to} with Transposes"])


def _input_names(rn):
    return onnx_recurrent.INPUTS[rn.op][: len(rn.node.inputs)]


def _output_names(rn):
    return onnx_recurrent.OUTPUTS[rn.op][: len(rn.node.outputs)]


def select(model: ir.Model, nodes: Optional[Sequence[str]], to: int = 0) -> list[onnx_recurrent.RecurrentNode]:
    """The recurrent nodes named in `nodes` (all when None); an unknown name is a usage error listing the
    model's recurrent nodes. A com.microsoft DynamicQuantizeLSTM selected for layout 1 is refused (Unsupported):
    the op has no layout attribute and computes time-major only."""
    found, quantized = onnx_recurrent.find(model), onnx_quantized.find(model)
    chosen = [*found, *quantized] if nodes is None else None
    if nodes is not None:
        by_name = {rn.name: rn for rn in [*found, *quantized]}
        unknown = [n for n in nodes if n not in by_name]
        if unknown:
            listed = ", ".join(f"{rn.name} ({rn.op})" for rn in by_name.values()) or "none"
            raise UsageError(f"no recurrent node named {', '.join(map(repr, unknown))}; the model has: {listed}")
        chosen = [by_name[n] for n in dict.fromkeys(nodes)]
    stuck = [rn.name for rn in chosen if isinstance(rn, onnx_quantized.QuantizedLSTM)]
    if stuck and to == 1:
        floats = [rn.name for rn in found]
        raise Unsupported(
            f"{onnx_quantized.OP} node(s) {', '.join(map(repr, stuck))} ({onnx_quantized.DOMAIN}) have no layout "
            f"attribute: the op computes sequence-major only. What would work: `rnnconv dequantize` first (a float "
            f"LSTM, which takes layout 1)" + (f", or select only the float nodes ({', '.join(floats)})"
                                               if floats else ""), fixes=tuple(f"nodes={n}" for n in floats[:1]))
    return [rn for rn in chosen if not isinstance(rn, onnx_quantized.QuantizedLSTM)]


class LayoutPass(RewritePass):
    """Case 1: a selected node in the other layout becomes the node in layout `to` between Transposes that keep
    the graph's values as they were (FoldTransposes then cancels the ones that meet). Case 2: a node already in
    layout `to` is left alone. Layout 1 needs the nodes at version 14 or newer (the caller upgrades first)."""

    def __init__(self, to: int, nodes: Optional[Sequence[str]] = None, observe=None):
        super().__init__(observe)
        if to not in (0, 1):
            raise UsageError(f"layout must be 0 (sequence-major) or 1 (batch-major), got {to}")
        self.to, self.nodes = to, nodes

    def plan(self, model: ir.Model) -> list[Rewrite]:
        names = Names(model.graph)
        return [relayout(rn, self.to, names) for rn in select(model, self.nodes, self.to)
                if rn.layer.layout != self.to]
