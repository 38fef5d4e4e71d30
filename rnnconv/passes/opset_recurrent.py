"""Opset adapters for GRU, LSTM and RNN: one line per (op, from, to) step, composed along the version chain.

onnx's version converter has none of these across opset 7 (either way), none for GRU 2->3, and refuses to move
a layout=1 node below 14; onnxruntime has no kernel below version 7. Specs: onnx Operators.md, ../shared/spec/.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import INPUTS, OUTPUTS, VERSIONS, RecurrentNode
from rnnconv.errors import Unsupported
from rnnconv.passes import layout as layout_pass
from rnnconv.passes.rewrite import Names, NodeRewrite

CAST_BFLOAT16_SINCE = 13  # Cast's type list holds bfloat16 from opset 13 on.


@dataclasses.dataclass
class Plan:
    """What the steps decided for one node; `build` turns it into graph nodes."""

    rn: RecurrentNode
    version: int
    attrs: dict
    layout_to_0: bool = False
    cast_to_float32: bool = False
    what: list[str] = dataclasses.field(default_factory=list)


Step = Callable[[Plan, int], None]
ADAPTERS: dict[tuple[str, int, int], Step] = {}


def register(op: str, frm: int, to: int, step: Step) -> None:
    ADAPTERS[(op, frm, to)] = step


def _compatible(plan: Plan, opset: int) -> None:
    """The newer version only adds an attribute at its default or widens the type list."""


def _drop_output_sequence(plan: Plan, opset: int) -> None:
    if plan.attrs.pop("output_sequence", None) is not None:
        plan.what.append("output_sequence dropped (Y is always available from version 7)")


def _add_output_sequence(plan: Plan, opset: int) -> None:
    y = plan.rn.outputs.get("Y")
    if y is not None and (y.uses() or y.is_graph_output()):
        plan.attrs["output_sequence"] = 1
        plan.what.append("output_sequence=1 (Y is used)")


def _refuse_linear_before_reset(plan: Plan, opset: int) -> None:
    if plan.attrs.pop("linear_before_reset", 0):
        raise Unsupported(
            f"GRU node {plan.rn.name!r}: linear_before_reset=1 cannot be expressed in GRU-1 (opsets 1-2); "
            "the lowest opset that can hold it is 3 (use --opset 3 or higher)"
        )


def _layout_to_0(plan: Plan, opset: int) -> None:
    if plan.attrs.pop("layout", 0) == 1:
        plan.layout_to_0 = True
        plan.what.append("layout=1 -> layout 0 with Transposes (layout exists from version 14)")


def _bfloat16_to_float32(plan: Plan, opset: int) -> None:
    if _dtype_name(plan.rn) != "bfloat16":
        return
    if opset < CAST_BFLOAT16_SINCE:
        raise Unsupported(
            f"{plan.rn.op} node {plan.rn.name!r}: bfloat16 needs Casts around the node below version 22, and Cast "
            f"holds bfloat16 only from opset {CAST_BFLOAT16_SINCE}; use --opset {CAST_BFLOAT16_SINCE} or higher"
        )
    plan.cast_to_float32 = True
    plan.what.append("bfloat16 computed as float32 between Casts (exact inputs; outputs rounded back)")


for _op in ("GRU", "LSTM", "RNN"):
    register(_op, 7, 14, _compatible)
    register(_op, 14, 7, _layout_to_0)
    register(_op, 14, 22, _compatible)
    register(_op, 22, 14, _bfloat16_to_float32)
register("GRU", 1, 3, _compatible)
register("GRU", 3, 1, _refuse_linear_before_reset)
register("GRU", 3, 7, _drop_output_sequence)
register("GRU", 7, 3, _add_output_sequence)
register("LSTM", 1, 7, _drop_output_sequence)
register("LSTM", 7, 1, _add_output_sequence)
register("RNN", 1, 7, _drop_output_sequence)
register("RNN", 7, 1, _add_output_sequence)


def _dtype_name(rn: RecurrentNode) -> str:
    x = rn.inputs["X"]
    if x is not None and x.dtype is not None:
        return x.dtype.name.lower()
    return getattr(rn.layer.dtype, "name", "")


def path(op: str, frm: int, to: int) -> list[tuple[int, int]]:
    chain = VERSIONS[op]
    i, j = chain.index(frm), chain.index(to)
    seq = chain[i: j + 1] if i <= j else chain[j: i + 1][::-1]
    return list(zip(seq, seq[1:]))


def plan(rn: RecurrentNode, target_version: int, target_opset: int) -> Plan:
    attrs = {k: a.value for k, a in rn.node.attributes.items()}
    p = Plan(rn, rn.version, attrs)
    for frm, to in path(rn.op, rn.version, target_version):
        ADAPTERS[(rn.op, frm, to)](p, target_opset)
        p.version = to
    return p


def _attr(name: str, value) -> ir.Attr:
    return ir.convenience.convert_attribute(name, value)


def build(p: Plan, names: Names) -> NodeRewrite:
    """Graph nodes for a plan: the node at its new version, with Transposes / Casts when the plan asks."""
    rn = p.rn
    old = rn.node
    inputs = list(old.inputs)
    outs = []
    out_names = OUTPUTS[rn.op]
    n_out = len(old.outputs)
    if p.version < 7 and (n_out < 2 or not (old.outputs[1] is not None and old.outputs[1].name)):
        n_out = max(n_out, 2)  # Y_h is required in version 1: give it a name
    for i in range(n_out):
        o = old.outputs[i] if i < len(old.outputs) else None
        if o is not None and o.name:
            outs.append(ir.Value(name=names(o.name + f"_v{p.version}")))
        elif out_names[i] == "Y_h" and p.version < 7:
            outs.append(ir.Value(name=names(f"{rn.name}_Y_h")))
        else:
            outs.append(ir.Value(name=""))
    what = list(p.what)
    before, after, new_inits = [], [], []
    if p.layout_to_0:
        before, inputs = layout_pass.transpose_inputs(rn, inputs, 0, names)
    if p.cast_to_float32:
        casts, inputs, new_inits = _cast_inputs(rn, inputs, names)
        before += casts
    node = ir.Node("", rn.op, inputs=inputs, outputs=outs, name=old.name,
                   attributes=[_attr(k, v) for k, v in p.attrs.items()])
    replaced = {k: v for k, v in zip(out_names, outs) if rn.outputs.get(k) is not None}
    if p.cast_to_float32:
        for key, inner in list(replaced.items()):
            out = ir.Value(name=names(inner.name + "_bf16"))
            after.append(ir.Node("", "Cast", inputs=[inner], outputs=[out], name=names(f"{inner.name}_cast"),
                                 attributes=[ir.AttrInt64("to", ir.DataType.BFLOAT16.value)]))
            replaced[key] = out
    if p.layout_to_0:
        transposes, replaced = layout_pass.transpose_outputs(rn, replaced, 0, names)
        after += transposes
    what.insert(0, f"{rn.op}-{rn.version} -> {rn.op}-{p.version}")
    return NodeRewrite(rn, [*before, node, *after], replaced, what, new_inits)


def _cast_inputs(rn: RecurrentNode, inputs, names: Names):
    before, new_inits = [], []
    keys = INPUTS[rn.op]
    out = list(inputs)
    for i, value in enumerate(inputs):
        if value is None or keys[i] == "sequence_lens":
            continue
        if value.const_value is not None:
            arr = value.const_value.numpy().astype(np.float32)
            c = ir.Value(name=names(f"{value.name}_f32"), const_value=ir.tensor(arr, name=None))
            c.const_value.name = c.name
            c.type = ir.TensorType(ir.DataType.FLOAT)
            c.shape = ir.Shape(arr.shape)
            new_inits.append(c)
            out[i] = c
        else:
            c = ir.Value(name=names(f"{value.name}_f32"))
            before.append(ir.Node("", "Cast", inputs=[value], outputs=[c], name=names(f"{value.name}_cast"),
                                  attributes=[ir.AttrInt64("to", ir.DataType.FLOAT.value)]))
            out[i] = c
    return before, out, new_inits
