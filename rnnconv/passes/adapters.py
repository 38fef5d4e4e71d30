"""Opset adapters: ONE registry, one line per (op, from version, to version) step, recurrent ops and the others alike
(onnx's version-converter table, `registerAdapter("GRU", 13, 14, ...)`, is the model).

An adapter edits a `NodePlan`: the node's attributes and inputs as they will be at the step's target version. It
raises `NotApplicable` when its conditions do not hold (the opset pass then tries onnx's own adapter for that
step) and `Unsupported` when nothing can express the node at the target. Recurrent steps follow the recurrent
version chains (GRU 1, 3, 7, 14, 22; LSTM/RNN 1, 7, 14, 22); the others follow schema versions.

onnx's version converter has no GRU/LSTM/RNN adapter across opset 7 (either way), none for GRU 2->3, and refuses
to move a layout=1 node below 14; onnxruntime has no kernel below version 7. Specs: onnx Operators.md and
Changelog.md, ../shared/spec/. tests/passes/test_adapters.py checks each compatible step against the schemas.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects.onnx_recurrent import (
    CAST_BFLOAT16_SINCE,
    RecurrentNode,
    constant_array,
)
from rnnconv.errors import Unsupported


class NotApplicable(Exception):
    """The adapter's conditions do not hold for this node (the opset pass falls back to onnx's adapter)."""


@dataclasses.dataclass
class NodePlan:
    """A node on its way through version steps: what it will be at `version`."""

    node: ir.Node
    version: int
    attrs: dict[str, ir.Attr]
    inputs: list[Optional[ir.Value]]
    what: list[str] = dataclasses.field(default_factory=list)
    rn: Optional[RecurrentNode] = None  # recurrent nodes: the layer as read
    layout_to_0: bool = False  # recurrent: the node goes to layout 0 between Transposes
    cast_to_float32: bool = False  # recurrent: the node computes in float32 between Casts
    changed: bool = False  # attributes or inputs differ from the node's

    @classmethod
    def of(cls, node: ir.Node, version: int, rn: Optional[RecurrentNode] = None) -> "NodePlan":
        return cls(node, version, dict(node.attributes), list(node.inputs), rn=rn)

    def value(self, name: str, default=None):
        a = self.attrs.get(name)
        return default if a is None else a.value

    def set(self, name: str, value) -> None:
        self.attrs[name] = ir.convenience.convert_attribute(name, value)
        self.changed = True

    def drop(self, name: str):
        """Remove an attribute; returns its value (None when absent)."""
        a = self.attrs.pop(name, None)
        self.changed = self.changed or a is not None
        return None if a is None else a.value


Adapter = Callable[[NodePlan, int], None]  # (plan, target opset)
ADAPTERS: dict[tuple[str, int, int], Adapter] = {}


def register(op: str, frm: int, to: int, adapter: Adapter) -> None:
    if (op, frm, to) in ADAPTERS:
        raise ValueError(f"adapter {op} {frm} -> {to} registered twice")
    ADAPTERS[(op, frm, to)] = adapter


# -- recurrent ops ----------------------------------------------------------------------------------------------

def _nothing(plan: NodePlan, opset: int) -> None:
    """The newer version only adds an attribute at its default or widens the type list."""


def _drop_output_sequence(plan: NodePlan, opset: int) -> None:
    if plan.drop("output_sequence") is not None:
        plan.what.append("output_sequence dropped (Y is always available from version 7)")


def _add_output_sequence(plan: NodePlan, opset: int) -> None:
    y = plan.rn.outputs.get("Y")
    if y is not None and (y.uses() or y.is_graph_output()):
        plan.set("output_sequence", 1)
        plan.what.append("output_sequence=1 (Y is used)")


def _refuse_linear_before_reset(plan: NodePlan, opset: int) -> None:
    if plan.drop("linear_before_reset"):
        raise Unsupported(f"GRU node {plan.rn.name!r}: linear_before_reset=1 cannot be expressed in GRU-1 "
                          f"(opsets 1-2); the lowest opset that can hold it is 3", fixes=("opset=3",))


def _layout_to_0(plan: NodePlan, opset: int) -> None:
    if plan.drop("layout") == 1:
        plan.layout_to_0 = True
        plan.what.append("layout=1 -> layout 0 with Transposes (layout exists from version 14)")


def _bfloat16_to_float32(plan: NodePlan, opset: int) -> None:
    x = plan.rn.inputs["X"]
    dtype = x.dtype.name.lower() if x is not None and x.dtype is not None else getattr(plan.rn.layer.dtype, "name",
                                                                                         "")
    if dtype != "bfloat16":
        return
    if opset < CAST_BFLOAT16_SINCE:
        raise Unsupported(f"{plan.rn.op} node {plan.rn.name!r}: bfloat16 needs Casts around the node below version "
                          f"22, and Cast holds bfloat16 only from opset {CAST_BFLOAT16_SINCE}",
                          fixes=(f"opset={CAST_BFLOAT16_SINCE}",))
    plan.cast_to_float32 = True
    plan.what.append("bfloat16 computed as float32 between Casts (exact inputs; outputs rounded back)")


for _op in ("GRU", "LSTM", "RNN"):
    register(_op, 7, 14, _nothing)
    register(_op, 14, 7, _layout_to_0)
    register(_op, 14, 22, _nothing)
    register(_op, 22, 14, _bfloat16_to_float32)
register("GRU", 1, 3, _nothing)
register("GRU", 3, 1, _refuse_linear_before_reset)
register("GRU", 3, 7, _drop_output_sequence)
register("GRU", 7, 3, _add_output_sequence)
register("LSTM", 1, 7, _drop_output_sequence)
register("LSTM", 7, 1, _add_output_sequence)
register("RNN", 1, 7, _drop_output_sequence)
register("RNN", 7, 1, _add_output_sequence)


# -- other ops: steps between adjacent schema versions -----------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Compatible:
    """A schema step whose only change is a wider type list, new attributes (at these defaults), or negative
    axes (`non_negative`: going down, the listed attributes must hold no negative value).

    Going down, the step applies when the node meets those conditions and its tensor types are in the older
    schema's type list; attributes at their default are removed (the older schema does not know them). Going up
    there is nothing to do. The semantics are unchanged per the ONNX changelog."""

    op: str
    older: int
    newer: int
    attributes_at_default: tuple[tuple[str, object], ...] = ()
    non_negative: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # new attributes with no neutral default: the node must not carry them
    non_negative_inputs: tuple[int, ...] = ()  # inputs that must be absent or constants with no negative value

    def up(self, plan: NodePlan, opset: int) -> None:
        pass

    def down(self, plan: NodePlan, opset: int) -> None:
        for name, default in self.attributes_at_default:
            if plan.value(name, default) != default:
                raise NotApplicable(f"{name}={plan.value(name)} (only {default} exists below version {self.newer})")
        for name in self.absent:
            if name in plan.attrs:
                raise NotApplicable(f"{name} does not exist below version {self.newer}")
        for name in self.non_negative:
            value = plan.value(name)
            values = [] if value is None else value if isinstance(value, (list, tuple)) else [value]
            if any(v < 0 for v in values):
                raise NotApplicable(f"negative {name} exists from version {self.newer}")
        for index in self.non_negative_inputs:
            value = plan.inputs[index] if index < len(plan.inputs) else None
            if value is None:
                continue
            arr = constant_array(value)
            if arr is None or (arr < 0).any():
                raise NotApplicable(f"input {index} may be negative (allowed from version {self.newer})")
        if not types_ok(plan.node, self.older):
            raise NotApplicable(f"its element types exist only from version {self.newer}")
        for name, _ in self.attributes_at_default:
            plan.drop(name)


def _steps(op: str, versions: tuple[int, ...], **kw) -> list[Compatible]:
    return [Compatible(op, a, b, **kw) for a, b in zip(versions, versions[1:])]


COMPATIBLE = [
    *_steps("Reshape", (5, 13)), Compatible("Reshape", 13, 14, (("allowzero", 0),)),
    *_steps("Reshape", (14, 19, 21, 23, 24, 25)),
    Compatible("Shape", 1, 13), Compatible("Shape", 13, 15, (("start", 0),), absent=("end",)),
    *_steps("Shape", (15, 19, 21, 23, 24, 25)),
    *_steps("Transpose", (1, 13, 21, 23, 24, 25)),
    Compatible("Squeeze", 1, 11, non_negative=("axes",)), *_steps("Squeeze", (13, 21, 23, 24, 25)),
    Compatible("Unsqueeze", 1, 11, non_negative=("axes",)), *_steps("Unsqueeze", (13, 21, 23, 24, 25)),
    Compatible("Slice", 10, 11, non_negative_inputs=(3,)), Compatible("Slice", 11, 13),
    Compatible("Gather", 1, 11, non_negative=("axis",), non_negative_inputs=(1,)), Compatible("Gather", 11, 13),
    Compatible("Concat", 4, 11, non_negative=("axis",)), Compatible("Concat", 11, 13),
    *_steps("Cast", (6, 9, 13)), Compatible("Cast", 13, 19, (("saturate", 1),)), *_steps("Cast", (19, 21, 23)),
    Compatible("Cast", 23, 24, (("round_mode", "up"),)), *_steps("Cast", (24, 25)),
    *[c for op in ("Add", "Sub", "Mul", "Div") for c in _steps(op, (7, 13, 14))],
    *_steps("MatMul", (1, 9, 13)),
    *_steps("Gemm", (7, 9)), Compatible("Gemm", 11, 13),
    Compatible("Constant", 9, 11, absent=("sparse_value",)),
    Compatible("Constant", 11, 12, absent=("value_float", "value_floats", "value_int", "value_ints",
                                           "value_string", "value_strings")),
    *_steps("Constant", (12, 13, 19, 21, 23, 24, 25)),
    *_steps("ConstantOfShape", (9, 20, 21, 23, 24, 25)),
    Compatible("Expand", 8, 13),
    Compatible("Split", 13, 18, absent=("num_outputs",)),
    *_steps("Identity", (1, 13)), *_steps("Identity", (14, 16, 19, 21, 23, 24, 25)),
    *_steps("Relu", (6, 13, 14)), *_steps("Tanh", (6, 13)), *_steps("Sigmoid", (6, 13)),
    Compatible("ReduceMean", 1, 11, non_negative=("axes",)), Compatible("ReduceMean", 11, 13),
    Compatible("Flatten", 1, 9), Compatible("Flatten", 9, 11, non_negative=("axis",)),
    *_steps("Flatten", (11, 13, 21, 23, 24, 25)),
    Compatible("Where", 9, 16), *_steps("Neg", (6, 13)), *_steps("Sqrt", (6, 13)),
    Compatible("LeakyRelu", 6, 16), *_steps("Tile", (6, 13)), *_steps("Max", (8, 12, 13)),
    *_steps("Min", (8, 12, 13)), Compatible("Clip", 12, 13), Compatible("Pow", 13, 15),
    *_steps("Less", (9, 13)), *_steps("Greater", (9, 13)), *_steps("Equal", (7, 11, 13, 19)),
]
for _c in COMPATIBLE:
    register(_c.op, _c.older, _c.newer, _c.up)
    register(_c.op, _c.newer, _c.older, _c.down)


def slice_10_1(plan: NodePlan, opset: int) -> None:
    """Slice-10 -> Slice-1: constant starts/ends/axes inputs become attributes; steps must be absent or 1."""
    ins = list(plan.inputs) + [None] * (5 - len(plan.inputs))
    consts = {}
    for i, name in enumerate(("starts", "ends", "axes", "steps"), start=1):
        if ins[i] is None:
            continue
        arr = constant_array(ins[i])
        if arr is None:
            raise Unsupported(f"Slice-1 needs a constant {name}; this one is computed at run time")
        consts[name] = [int(v) for v in arr.ravel()]
    if any(v != 1 for v in consts.pop("steps", [])):
        raise Unsupported("Slice-1 has no steps; this node steps by other than 1")
    for k, v in consts.items():
        plan.set(k, v)
    plan.inputs = [ins[0]]
    plan.changed = True


register("Slice", 10, 1, slice_10_1)


def types_ok(node: ir.Node, version: int) -> bool:
    """Every element type the node's inputs and outputs have is in the type lists of `op`-`version`."""
    ins, outs = schemas.schema_type_lists(node.op_type, version)
    for values, formals in ((node.inputs, ins), (node.outputs, outs)):
        for i, value in enumerate(values):
            constraint = formals[min(i, len(formals) - 1)] if formals else None
            if value is None or constraint is None or value.dtype is None:
                continue
            if value.dtype.name.lower() not in constraint:
                return False
    return True

