"""Opset adapters: ONE registry, one line per (op, from version, to version) step, recurrent ops and the others alike
(onnx's version-converter table, `registerAdapter("GRU", 13, 14, ...)`, is the model).

An adapter edits a `NodePlan`: the node's attributes and inputs as they will be at the step's target version, plus
the nodes and constants the step adds. It raises `NotApplicable` when its conditions do not hold (the opset pass
then tries onnx's own adapter for that step) and `Unsupported` when nothing can express the node at the target.
Recurrent steps follow the recurrent version chains (GRU 1, 3, 7, 14, 22; LSTM/RNN 1, 7, 14, 22); the others follow
schema versions. A step to `None` takes an op below its first version (it replaces the node by other ops).

The other ops' steps are the table `STEPS`: each line a `Step` between adjacent schema versions whose change is
only the type lists (every step checks the node's types against the target version's lists) plus the generic
kinds below: a new attribute at its default (`Default`, removed going down), a new attribute with no neutral value
(`Absent`), an attribute the older version requires (`Required`), a new optional input (`NewInput`), an input that
became optional (`Fill`: the old default is supplied), an attribute that became an input (`ToAttribute`: a
constant input goes back to the attribute), negative axes (`Negative`: normalised with the known rank).
tests/passes/test_adapter_table.py re-derives every line from the installed onnx's schemas. Steps the kinds cannot
express alone carry a specific adapter (`special`). Changes the schemas do not show (If-11's branches of
different shapes, Pad-19's mode "wrap", Resize-19's "half_pixel_symmetric", ScatterElements-18's max/min) were
read in the ONNX changelog (Changelog.md). A step that reads a value as constant may fold the small chain of
constant-only nodes computing it (`fold`), and says so in its `what`.

Negative indices (Gather, ScatterElements, GatherElements, from opset 11): constant indices are normalised with
the static dimension (exact); indices computed at run time are converted with a warning naming the assumption
that they are never negative. Reshape-14's allowzero=1 with a shape computed at run time likewise (the assumption:
no tensor it reshapes is empty).

onnx's version converter has no GRU/LSTM/RNN adapter across opset 7 (either way), none for GRU 2->3, and refuses
to move a layout=1 node below 14; onnxruntime has no kernel below version 7. Specs: onnx Operators.md and
Changelog.md, ../shared/spec/. `python -m rnnconv.passes.adapters` prints the coverage table of docs/opsets.md.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects.onnx_recurrent import (
    CAST_BFLOAT16_SINCE,
    RecurrentNode,
    constant_array,
)
from rnnconv.errors import Unsupported
from rnnconv.passes.edit import Names

INT64_MAX = np.iinfo(np.int64).max


class NotApplicable(Exception):
    """The adapter's conditions do not hold for this node (the opset pass falls back to onnx's adapter)."""


@dataclasses.dataclass
class Scope:
    """What a non-recurrent step may need from the model around its node (the opset pass provides it)."""

    names: Names
    fold: Callable[[ir.Value], Optional[tuple[np.ndarray, list[ir.Node]]]]  # a constant chain's value and nodes
    in_function: bool = False  # a model-local function: no initializers, constants are Constant nodes


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
    # Other nodes (the opset pass sets these): the node's path for messages, the opset the step lands in (nodes
    # the step adds must be valid there), and the model around it.
    label: str = ""
    opset: int = 0
    scope: Optional[Scope] = None
    before: list[ir.Node] = dataclasses.field(default_factory=list)  # inserted before the node
    replacement: Optional[list[ir.Node]] = None  # nodes taking the node's place (its outputs: `outputs`)
    outputs: Optional[list[ir.Value]] = None
    initializers: list[ir.Value] = dataclasses.field(default_factory=list)  # new, for the main graph
    warnings: list[str] = dataclasses.field(default_factory=list)
    folded: list[ir.Node] = dataclasses.field(default_factory=list)  # nodes a fold read (removed once unused)

    @classmethod
    def of(cls, node: ir.Node, version: int, rn: Optional[RecurrentNode] = None) -> "NodePlan":
        return cls(node, version, dict(node.attributes), list(node.inputs), rn=rn)

    @property
    def op(self) -> str:
        return self.node.op_type

    def attr(self, name: str, default=None):
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

    def input(self, index: int) -> Optional[ir.Value]:
        return self.inputs[index] if index < len(self.inputs) else None

    def set_input(self, index: int, value: Optional[ir.Value]) -> None:
        self.inputs.extend([None] * (index + 1 - len(self.inputs)))
        self.inputs[index] = value
        self.changed = True

    def constant_input(self, index: int, why: str = "") -> Optional[np.ndarray]:
        """Input `index` as an array when it is constant; a small chain of constant nodes behind it is folded
        into a new constant (`why`: what needs it constant, for the step's `what`)."""
        value = self.input(index)
        array = constant_array(value)
        if array is not None or value is None or self.scope is None:
            return array
        found = self.scope.fold(value)
        if found is None:
            return None
        array, nodes = found
        self.set_input(index, self.constant(array, value.name or "folded"))
        self.folded.extend(nodes)
        self.what.append(f"{value.name} folded from {len(nodes)} constant node(s){' (' + why + ')' if why else ''}")
        return array

    def constant(self, array: np.ndarray, hint: str) -> ir.Value:
        """A new constant value: an initializer of the main graph (visible in every subgraph), or in a function a
        Constant node before the node."""
        array = np.asarray(array)
        name = self.scope.names(hint)
        type_, shape, tensor = ir.TensorType(ir.DataType.from_numpy(array.dtype)), ir.Shape(array.shape), ir.tensor(
            array, name=name)
        if self.scope.in_function:
            value = ir.Value(name=name, type=type_, shape=shape)
            self.before.append(ir.Node("", "Constant", [], attributes=[ir.AttrTensor("value", tensor)],
                                       outputs=[value], name=self.scope.names(f"{hint}_constant")))
        else:
            value = ir.Value(name=name, type=type_, shape=shape, const_value=tensor)
            self.initializers.append(value)
        return value

    def make(self, op: str, inputs, attributes: Optional[dict] = None, like: Optional[ir.Value] = None,
             dtype: Optional[ir.DataType] = None, outputs: int = 1) -> ir.Node:
        """A new node with fresh outputs (typed as `like`, or `dtype`)."""
        base = self.node.name or self.op
        type_ = ir.TensorType(dtype) if dtype is not None else like.type if like is not None else None
        outs = [ir.Value(name=self.scope.names(f"{base}_{op.lower()}"), type=type_) for _ in range(outputs)]
        attrs = [ir.convenience.convert_attribute(k, v) for k, v in (attributes or {}).items()]
        return ir.Node("", op, list(inputs), attributes=attrs, outputs=outs, name=self.scope.names(f"{base}_{op}"))

    def replace(self, nodes: list[ir.Node], outputs: list[ir.Value]) -> None:
        """The node becomes `nodes`; `outputs` stand for its outputs, in order."""
        self.replacement, self.outputs = nodes, outputs
        self.changed = True

    def warn(self, message: str) -> None:
        self.warnings.append(f"{self.label}: {message}")


Adapter = Callable[[NodePlan, int], None]  # (plan, target opset)
ADAPTERS: dict[tuple[str, int, Optional[int]], Adapter] = {}
WHAT: dict[tuple[str, int, Optional[int]], str] = {}  # what each registered step does (the coverage table)


def register(op: str, frm: int, to: Optional[int], adapter: Adapter, what: Optional[str] = None) -> None:
    if (op, frm, to) in ADAPTERS:
        raise ValueError(f"adapter {op} {frm} -> {to} registered twice")
    ADAPTERS[(op, frm, to)] = adapter
    WHAT[(op, frm, to)] = what if what is not None else _first_line(adapter.__doc__)


def _first_line(doc: Optional[str]) -> str:
    """A docstring's first paragraph on one line, as the coverage table shows it."""
    return " ".join((doc or "").strip().split("\n\n")[0].split()).rstrip(".")


# -- recurrent ops ----------------------------------------------------------------------------------------------

def _nothing(plan: NodePlan, opset: int) -> None:
    """The newer version only adds an attribute at its default or widens the type list."""


def _drop_output_sequence(plan: NodePlan, opset: int) -> None:
    """output_sequence dropped (Y is always available from version 7)."""
    if plan.drop("output_sequence") is not None:
        plan.what.append("output_sequence dropped (Y is always available from version 7)")


def _add_output_sequence(plan: NodePlan, opset: int) -> None:
    """output_sequence=1 when Y is used."""
    y = plan.rn.outputs.get("Y")
    if y is not None and (y.uses() or y.is_graph_output()):
        plan.set("output_sequence", 1)
        plan.what.append("output_sequence=1 (Y is used)")


def _refuse_linear_before_reset(plan: NodePlan, opset: int) -> None:
    """linear_before_reset=1 refused (no GRU-1 holds it)."""
    if plan.drop("linear_before_reset"):
        raise Unsupported(f"GRU node {plan.rn.name!r}: linear_before_reset=1 cannot be expressed in GRU-1 "
                          f"(opsets 1-2); the lowest opset that can hold it is 3", fixes=("opset=3",))


def _layout_to_0(plan: NodePlan, opset: int) -> None:
    """layout=1: the node goes to layout 0 between Transposes."""
    if plan.drop("layout") == 1:
        plan.layout_to_0 = True
        plan.what.append("layout=1 -> layout 0 with Transposes (layout exists from version 14)")


def _bfloat16_to_float32(plan: NodePlan, opset: int) -> None:
    """bfloat16: computed in float32 between Casts (Cast holds bfloat16 from opset 13)."""
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
    register(_op, 7, 14, _nothing, what="")
    register(_op, 14, 7, _layout_to_0)
    register(_op, 14, 22, _nothing, what="")
    register(_op, 22, 14, _bfloat16_to_float32)
register("GRU", 1, 3, _nothing, what="")
register("GRU", 3, 1, _refuse_linear_before_reset)
register("GRU", 3, 7, _drop_output_sequence)
register("GRU", 7, 3, _add_output_sequence)
register("LSTM", 1, 7, _drop_output_sequence)
register("LSTM", 7, 1, _add_output_sequence)
register("RNN", 1, 7, _drop_output_sequence)
register("RNN", 7, 1, _add_output_sequence)


# -- the generic kinds of change, each going down ----------------------------------------------------------------

def _values(value) -> list:
    return [] if value is None else list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]


@dataclasses.dataclass(frozen=True)
class Default:
    """A new attribute; the node must hold its default (or leave it out), and it is removed."""

    name: str
    value: object

    def down(self, plan: NodePlan, step: "Step") -> None:
        value = plan.attr(self.name, self.value)
        if value != self.value:
            raise NotApplicable(f"{self.name}={value!r} exists only from version {step.newer}")
        plan.drop(self.name)

    def describe(self) -> str:
        return f"`{self.name}={self.value!r}` removed"


@dataclasses.dataclass(frozen=True)
class Absent:
    """A new attribute without a default: it must be absent, or (`each`) hold its neutral value in every entry."""

    name: str
    each: object = None

    def down(self, plan: NodePlan, step: "Step") -> None:
        if self.name not in plan.attrs:
            return
        if self.each is not None and all(v == self.each for v in _values(plan.attr(self.name))):
            plan.drop(self.name)
            return
        raise NotApplicable(f"{self.name} exists only from version {step.newer}")

    def describe(self) -> str:
        return f"`{self.name}` must be absent" + (f" (or all {self.each})" if self.each is not None else "")


@dataclasses.dataclass(frozen=True)
class Required:
    """An attribute the older version requires (the newer one has alternatives): the node must hold it."""

    name: str

    def down(self, plan: NodePlan, step: "Step") -> None:
        if self.name not in plan.attrs:
            raise NotApplicable(f"{step.op}-{step.older} needs the attribute {self.name}")

    def describe(self) -> str:
        return f"`{self.name}` must be given"


@dataclasses.dataclass(frozen=True)
class NewInput:
    """A new optional input: it must be absent, or (`neutral`) a constant holding that value in every entry."""

    index: int
    name: str
    neutral: object = None

    def down(self, plan: NodePlan, step: "Step") -> None:
        if plan.input(self.index) is None:
            return
        array = constant_array(plan.input(self.index)) if self.neutral is not None else None
        if array is not None and (array == self.neutral).all():
            plan.set_input(self.index, None)
            return
        raise NotApplicable(f"input {self.name} exists only from version {step.newer}")

    def describe(self) -> str:
        return f"input `{self.name}` must be absent" + (f" (or all {self.neutral})" if self.neutral is not None
                                                        else "")


FILLS = {"zero": "0 of the data type", "empty": "an empty tensor"}


@dataclasses.dataclass(frozen=True)
class Fill:
    """An input that became optional: when absent, the older version's default is given (`fill`, see FILLS)."""

    index: int
    name: str
    fill: str

    def down(self, plan: NodePlan, step: "Step") -> None:
        if plan.input(self.index) is not None:
            return
        if self.fill == "empty":
            array = np.zeros([0], np.float32)
        else:
            dtype = plan.input(0).dtype if plan.input(0) is not None else None
            if dtype is None:
                raise NotApplicable(f"the element type of the absent {self.name} is unknown")
            array = np.zeros([1], dtype.numpy())
        plan.set_input(self.index, plan.constant(array, f"{plan.node.name or plan.op}_{self.name}"))

    def describe(self) -> str:
        return f"absent `{self.name}` given as {FILLS[self.fill]}"


@dataclasses.dataclass(frozen=True)
class ToAttribute:
    """An attribute that became input `index`: the constant input goes back to the attribute (absent: left out)."""

    index: int
    attribute: str

    def down(self, plan: NodePlan, step: "Step") -> None:
        if plan.input(self.index) is None:
            return
        array = plan.constant_input(self.index, f"{step.op}-{step.older} holds it as an attribute")
        if array is None:
            raise Unsupported(f"its input {self.index} is computed at run time; {step.op}-{step.older} needs it "
                              f"constant (the attribute {self.attribute})")
        kind = schemas.attribute_type(step.op, step.older, self.attribute)
        if kind in ("INT", "FLOAT") and array.size != 1:
            raise Unsupported(f"its input {self.index} holds {array.size} values; {step.op}-{step.older}'s "
                              f"{self.attribute} holds one")
        value = {"INTS": lambda: [int(v) for v in array.ravel()], "FLOATS": lambda: [float(v) for v in array.ravel()],
                 "INT": lambda: int(array.ravel()[0]), "FLOAT": lambda: float(array.ravel()[0])}[kind]()
        plan.set(self.attribute, value)
        plan.set_input(self.index, None)

    def describe(self) -> str:
        return f"constant input {self.index} back to attribute `{self.attribute}`"


@dataclasses.dataclass(frozen=True)
class Negative:
    """Negative values of attribute `name` (or of constant input `index`) are allowed from the newer version:
    normalised with the rank of input 0 (`output_rank`: of the output, which has one dimension per value more)."""

    name: str
    index: Optional[int] = None
    output_rank: bool = False

    def down(self, plan: NodePlan, step: "Step") -> None:
        if self.index is None:
            values = [int(v) for v in _values(plan.attr(self.name))]
        else:
            if plan.input(self.index) is None:
                return
            array = plan.constant_input(self.index, f"negative {self.name} exist only from version {step.newer}")
            if array is None:
                raise Unsupported(f"its {self.name} are computed at run time and may be negative; "
                                  f"{step.op}-{step.older} takes only non-negative ones")
            values = [int(v) for v in array.ravel()]
        if all(v >= 0 for v in values):
            return
        rank = _rank(plan.input(0))
        if rank is None:
            raise Unsupported(f"negative {self.name} {values} with an input of unknown rank; {step.op}-{step.older} "
                              f"takes only non-negative ones")
        rank += len(values) if self.output_rank else 0
        fixed = [v + rank if v < 0 else v for v in values]
        if self.output_rank:  # positions in the output: in increasing order, as older readers insert them
            fixed.sort()
        if self.index is not None:
            plan.set_input(self.index, plan.constant(np.array(fixed, dtype=array.dtype).reshape(array.shape),
                                                     self.name))
        elif isinstance(plan.attr(self.name), (list, tuple)):
            plan.set(self.name, fixed)
        else:
            plan.set(self.name, fixed[0])

    def describe(self) -> str:
        return f"negative `{self.name}` normalised with the rank"


def _rank(value: Optional[ir.Value]) -> Optional[int]:
    return None if value is None or value.shape is None else len(value.shape)


def _static_shape(value: Optional[ir.Value]) -> Optional[tuple[int, ...]]:
    if value is None or value.shape is None or not all(isinstance(d, int) for d in value.shape):
        return None
    return tuple(value.shape)


def _type_str(type_) -> Optional[str]:
    """An onnx_ir type as onnx's schemas write it: tensor(float), seq(tensor(int64)), optional(...)."""
    if isinstance(type_, ir.TensorType):
        return f"tensor({type_.dtype.name.lower()})"
    if isinstance(type_, ir.SparseTensorType):
        return f"sparse_tensor({type_.dtype.name.lower()})"
    if isinstance(type_, ir.SequenceType):
        inner = _type_str(type_.elem_type)
        return None if inner is None else f"seq({inner})"
    if isinstance(type_, ir.OptionalType):
        inner = _type_str(type_.elem_type)
        return None if inner is None else f"optional({inner})"
    return None


def type_problem(op: str, version: int, inputs, outputs) -> Optional[str]:
    """Why these inputs and outputs cannot be those of `op`-`version` (an element type outside its type lists, or
    formals sharing a type parameter with different types); None when they can. Unknown types pass."""
    formal_ins, formal_outs = schemas.schema_formals(op, version)
    seen: dict[str, str] = {}
    for values, formals in ((inputs, formal_ins), (outputs, formal_outs)):
        for i, value in enumerate(values):
            if value is None or not formals or (i >= len(formals) and not formals[-1][2]):
                continue
            param, allowed, _ = formals[min(i, len(formals) - 1)]
            t = _type_str(value.type)
            if t is None:
                continue
            if t not in allowed:
                return f"{t} is not in {op}-{version}'s type list"
            if seen.setdefault(param, t) != t:
                return f"{op}-{version} needs one type for {seen[param]} and {t}"
    return None


@dataclasses.dataclass(frozen=True)
class Step:
    """A step between adjacent schema versions `older` and `newer` of `op`: the node's element types must be in the
    target version's type lists, and each of `changes` is undone going down. Going up nothing else changes, but
    for an attribute that became an input, or a change of meaning (`onnx_up`), which onnx's adapters take on.
    `special`: a specific adapter that takes the step down, calling `generic` for the changes it leaves (its
    docstring says what)."""

    op: str
    older: int
    newer: int
    changes: tuple = ()
    special: Optional[Callable[[NodePlan, int, "Step"], None]] = None
    onnx_up: bool = False

    def up(self, plan: NodePlan, opset: int) -> None:
        if self.onnx_up or any(isinstance(c, ToAttribute) for c in self.changes):
            raise NotApplicable(f"onnx's adapter takes {self.op}-{self.older} up")
        problem = type_problem(self.op, self.newer, plan.inputs, plan.node.outputs)
        if problem:
            raise NotApplicable(problem)

    def down(self, plan: NodePlan, opset: int) -> None:
        if self.special is not None:
            self.special(plan, opset, self)
        else:
            self.generic(plan)

    def generic(self, plan: NodePlan) -> None:
        for change in self.changes:
            change.down(plan, self)
        problem = type_problem(self.op, self.older, plan.inputs, plan.node.outputs)
        if problem:
            raise NotApplicable(problem)

    def describe(self) -> str:
        parts = [c.describe() for c in self.changes]
        if self.special is not None:
            parts = [_first_line(self.special.__doc__)]
        return "; ".join(p for p in parts if p)


def step(op: str, older: int, newer: int, *changes, special=None, onnx_up: bool = False) -> Step:
    return Step(op, older, newer, tuple(changes), special, onnx_up)


def chain(op: str, *versions: int) -> list[Step]:
    """Steps between consecutive versions whose only change is the type lists."""
    return [Step(op, a, b) for a, b in zip(versions, versions[1:])]


# -- specific adapters (each `special` of a table line, or a step to None) ----------------------------------------

def reshape_14_13(plan: NodePlan, opset: int, step: Step) -> None:
    """`allowzero` removed: exact at 0, and at 1 with a constant shape without 0; at 1 with a run-time shape, a
    warning (a 0 in the shape then keeps the dimension: the same unless the data is empty)."""
    if plan.drop("allowzero"):
        shape = constant_array(plan.input(1))
        if shape is not None and (shape == 0).any():
            raise Unsupported("allowzero=1 with a 0 in its constant shape (an empty output) has no Reshape-13 form")
        if shape is None:
            plan.warn("allowzero=1 dropped (Reshape-13 reads a 0 in the shape as 'keep that dimension'): exact as "
                      "long as no tensor it reshapes is empty")
    step.generic(plan)


def constant_12_11(plan: NodePlan, opset: int, step: Step) -> None:
    """value_int(s) / value_float(s) / value_string(s) become the value tensor."""
    for name in ("value_int", "value_ints", "value_float", "value_floats", "value_string", "value_strings"):
        if name in plan.attrs:
            array = constant_array(plan.node.outputs[0])
            plan.drop(name)
            plan.set("value", ir.tensor(array))
    step.generic(plan)


def constant_types(plan: NodePlan, opset: int, step: Step) -> None:
    """a value the older Constant cannot hold (e.g. int64 below 9) becomes an initializer."""
    try:
        step.generic(plan)
        return
    except NotApplicable:
        if plan.scope.in_function:
            raise Unsupported(f"a function's Constant-{step.newer} value of this type has no Constant-{step.older} "
                              f"form, and functions hold no initializers")
    out = plan.node.outputs[0]
    value = plan.constant(constant_array(out), out.name or "constant")
    if out.is_graph_output():  # a graph output keeps its name on an Identity
        identity = plan.make("Identity", [value], like=out)
        plan.replace([identity], list(identity.outputs))
    else:
        plan.replace([], [value])
    plan.what.append(f"its {out.dtype.name.lower()} value becomes an initializer (Constant-{step.older} cannot "
                     f"hold it)")


def _non_negative_indices(plan: NodePlan, index: int, axis: int, newer: int) -> None:
    """Negative indices exist from version `newer`: constant ones are normalised with the static dimension, run-time
    ones are converted with a warning."""
    indices = constant_array(plan.input(index))
    if indices is None:
        plan.warn(f"indices computed at run time are assumed never negative (negative indices exist from "
                  f"{plan.op}-{newer})")
        return
    if not (indices < 0).any():
        return
    shape = plan.input(0).shape if plan.input(0) is not None else None
    rank = None if shape is None else len(shape)
    size = None if rank is None else shape[axis + rank if axis < 0 else axis]
    if not isinstance(size, int):
        raise Unsupported(f"negative constant indices into a dimension of unknown size; they exist only from "
                          f"{plan.op}-{newer}")
    plan.set_input(index, plan.constant(np.where(indices < 0, indices + size, indices).astype(indices.dtype),
                                        "indices"))


def gather_11_1(plan: NodePlan, opset: int, step: Step) -> None:
    """negative constant indices normalised; run-time ones assumed non-negative (warning)."""
    _non_negative_indices(plan, 1, plan.attr("axis", 0), step.newer)
    step.generic(plan)


def scatter_elements_below_11(plan: NodePlan, opset: int) -> None:
    """Scatter-9 (the same op before it was renamed); negative indices as Gather's."""
    if schemas.schema_since_version("Scatter", plan.opset) is None:
        raise Unsupported("Scatter, its older name, exists only from opset 9")
    _non_negative_indices(plan, 1, plan.attr("axis", 0), 11)
    node = plan.make("Scatter", plan.inputs, {k: a.value for k, a in plan.attrs.items()}, like=plan.node.outputs[0])
    plan.replace([node], list(node.outputs))


def gather_elements_below_11(plan: NodePlan, opset: int) -> None:
    """constant indices into data of static shape: a Gather of the flattened data at the flat indices."""
    data, indices = plan.input(0), constant_array(plan.input(1))
    shape = _static_shape(data)
    if indices is None or shape is None:
        raise Unsupported("below opset 11 it needs constant indices and data of static shape (it is a Gather of "
                          "the flattened data then)")
    axis = plan.attr("axis", 0) % len(shape)
    coords = list(np.indices(indices.shape))
    coords[axis] = np.where(indices < 0, indices + shape[axis], indices)
    flat = np.ravel_multi_index(tuple(coords), shape).astype(np.int64)
    reshape = plan.make("Reshape", [data, plan.constant(np.array([-1], np.int64), "flat_shape")], like=data)
    gather = plan.make("Gather", [reshape.outputs[0], plan.constant(flat, "flat_indices")], {"axis": 0},
                       like=plan.node.outputs[0])
    plan.replace([reshape, gather], list(gather.outputs))


def scatter_elements_18_16(plan: NodePlan, opset: int, step: Step) -> None:
    """reduction "max" / "min" refused (they exist from version 18)."""
    if plan.attr("reduction", "none") in ("max", "min"):
        raise Unsupported(f"reduction={plan.attr('reduction')!r} exists only from ScatterElements-18")
    step.generic(plan)


def pad_18_13(plan: NodePlan, opset: int, step: Step) -> None:
    """constant axes: pads spread over every axis (0 elsewhere)."""
    if plan.input(3) is not None:
        axes, pads, rank = constant_array(plan.input(3)), plan.constant_input(1), _rank(plan.input(0))
        if axes is None or pads is None or rank is None:
            raise Unsupported("Pad-13 has no axes input: it needs constant axes and pads and a known rank")
        full = np.zeros(2 * rank, np.int64)
        for j, a in enumerate(int(a) % rank for a in axes.ravel()):
            full[a], full[a + rank] = pads[j], pads[j + len(axes)]
        plan.set_input(1, plan.constant(full, "pads"))
        plan.set_input(3, None)
    step.generic(plan)


def pad_19_18(plan: NodePlan, opset: int, step: Step) -> None:
    """mode "wrap" refused (it exists from version 19)."""
    if plan.attr("mode", "constant") == "wrap":
        raise Unsupported("mode 'wrap' exists only from Pad-19")
    step.generic(plan)


def pow_12_7(plan: NodePlan, opset: int, step: Step) -> None:
    """an exponent of another type than the base: a constant one re-typed (when exact), a run-time one Cast
    (warning)."""
    x, y = plan.input(0), plan.input(1)
    if x is not None and y is not None and x.dtype is not None and y.dtype is not None and x.dtype != y.dtype:
        exponent = constant_array(y)
        if exponent is not None:
            cast = exponent.astype(x.dtype.numpy())
            if not np.array_equal(cast.astype(exponent.dtype), exponent):
                raise Unsupported(f"its exponent does not survive a cast to {x.dtype.name.lower()} (Pow-7 needs "
                                  f"one type)")
            plan.set_input(1, plan.constant(cast, y.name or "exponent"))
        else:
            node = plan.make("Cast", [y], {"to": x.dtype.value}, dtype=x.dtype)
            plan.before.append(node)
            plan.set_input(1, node.outputs[0])
            plan.warn(f"run-time exponent cast from {y.dtype.name.lower()} to {x.dtype.name.lower()} (Pow-7 needs "
                      f"one type): exact for integer exponents below 2**24")
    step.generic(plan)


def split_18_13(plan: NodePlan, opset: int, step: Step) -> None:
    """num_outputs: an even split needs nothing, an uneven one (static dimension) gets explicit sizes."""
    n = plan.drop("num_outputs")
    if n is not None and plan.input(1) is None:
        shape = plan.input(0).shape if plan.input(0) is not None else None
        axis = plan.attr("axis", 0)
        size = None if shape is None else shape[axis % len(shape)]
        if not isinstance(size, int):
            raise Unsupported("num_outputs over a dimension of unknown size (Split-13 splits evenly or by sizes)")
        if size % n:
            chunk = math.ceil(size / n)
            sizes = [chunk] * (n - 1) + [size - chunk * (n - 1)]
            plan.set_input(1, plan.constant(np.array(sizes, np.int64), "split"))
    step.generic(plan)


def reduce_noop(plan: NodePlan, opset: int, step: Step) -> None:
    """constant `axes` input back to the attribute; `noop_with_empty_axes` removed (at 1 without axes: an
    Identity)."""
    if plan.attr("noop_with_empty_axes", 0):
        axes = plan.constant_input(1, "axes are an attribute below")
        if plan.input(1) is None or (axes is not None and axes.size == 0):
            identity = plan.make("Identity", [plan.input(0)], like=plan.node.outputs[0])
            plan.replace([identity], list(identity.outputs))
            return
        plan.drop("noop_with_empty_axes")
    step.generic(plan)


def shape_15_13(plan: NodePlan, opset: int, step: Step) -> None:
    """start / end: Shape then Slice."""
    start, end = plan.drop("start") or 0, plan.drop("end")
    if start or end is not None:
        shape = plan.make("Shape", [plan.input(0)], dtype=ir.DataType.INT64)
        bounds = [plan.constant(np.array([v], np.int64), n)
                  for v, n in ((start, "start"), (INT64_MAX if end is None else end, "end"), (0, "axes"))]
        sliced = plan.make("Slice", [shape.outputs[0], *bounds], like=plan.node.outputs[0])
        plan.replace([shape, sliced], list(sliced.outputs))
        return
    step.generic(plan)


def softmax_13_11(plan: NodePlan, opset: int, step: Step) -> None:
    """one axis (13) against a 2-D coercion at axis (11): the same for the last axis, another axis is moved last
    by Transposes around the node."""
    axis = plan.attr("axis", -1)
    rank = _rank(plan.input(0))
    if axis != -1 and rank is None:
        raise Unsupported(f"axis={axis} of an input of unknown rank: {plan.op}-11 normalises over the last axes")
    if axis in (-1, (rank or 0) - 1):
        plan.set("axis", -1)
        step.generic(plan)
        return
    axis %= rank
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    before = plan.make("Transpose", [plan.input(0)], {"perm": perm}, like=plan.input(0))
    node = plan.make(plan.op, before.outputs, {"axis": -1}, like=plan.node.outputs[0])
    after = plan.make("Transpose", node.outputs, {"perm": perm}, like=plan.node.outputs[0])
    plan.replace([before, node, after], list(after.outputs))


def resize_19_18(plan: NodePlan, opset: int, step: Step) -> None:
    """coordinate_transformation_mode "half_pixel_symmetric" refused (it exists from version 19)."""
    if plan.attr("coordinate_transformation_mode") == "half_pixel_symmetric":
        raise Unsupported("coordinate_transformation_mode 'half_pixel_symmetric' exists only from Resize-19")
    step.generic(plan)


def if_11_1(plan: NodePlan, opset: int, step: Step) -> None:
    """branches whose outputs differ in shape refused (If-1 needs one shape)."""
    def shapes(graph):
        return [None if o.shape is None else [d if isinstance(d, int) else None for d in o.shape]
                for o in graph.outputs]

    for i, (a, b) in enumerate(zip(shapes(plan.attr("then_branch")), shapes(plan.attr("else_branch")))):
        if a is not None and b is not None and (len(a) != len(b) or any(
                x is not None and y is not None and x != y for x, y in zip(a, b))):
            raise Unsupported(f"its branches give output {i} the shapes {a} and {b}; If-1 needs one shape (branches "
                              f"of different shapes exist from If-11)")
    step.generic(plan)


def quantize_13_10(plan: NodePlan, opset: int, step: Step) -> None:
    """per-tensor only: a scalar (or one-value) scale and zero point; per-axis refused (`axis` exists from version
    13)."""
    plan.drop("axis")  # read only for a 1-D scale
    for index, name in ((1, "scale"), (2, "zero point")):
        value = plan.input(index)
        if value is None:
            continue
        shape = None if value.shape is None else list(value.shape)
        if shape == []:
            continue
        size = None if shape is None or not all(isinstance(d, int) for d in shape) else int(np.prod(shape))
        if size is None:
            raise Unsupported(f"its {name} has an unknown shape; {step.op}-{step.older} takes a scalar {name} only "
                              f"(per-axis quantization exists from {step.op}-{step.newer})")
        if size != 1:
            raise Unsupported(f"per-axis quantization ({name} of shape {shape}) exists only from "
                              f"{step.op}-{step.newer}; {step.op}-{step.older} takes one scale and zero point per "
                              f"tensor (keep opset {step.newer} or higher)")
        array = constant_array(value)
        if array is not None:
            plan.set_input(index, plan.constant(array.reshape(()), value.name or name.replace(" ", "_")))
        else:
            reshape = plan.make("Reshape", [value, plan.constant(np.zeros([0], np.int64), "scalar_shape")],
                                like=value)
            plan.before.append(reshape)
            plan.set_input(index, reshape.outputs[0])
    step.generic(plan)


# -- the table: every step of the other ops (checked against the schemas by tests/passes/test_adapter_table.py) --

_REDUCE_AXES = (ToAttribute(1, "axes"), Default("noop_with_empty_axes", 0))
_UNARY_13 = ("Abs", "Ceil", "Exp", "Floor", "Log", "Neg", "Reciprocal", "Sigmoid", "Sqrt", "Tanh")

STEPS: list[Step] = [
    *[s for op in ("Add", "Sub", "Mul", "Div") for s in chain(op, 7, 13, 14)],
    *[s for op in _UNARY_13 for s in chain(op, 6, 13)],
    *chain("Relu", 6, 13, 14), *chain("Erf", 9, 13), *chain("Sign", 9, 13), *chain("Round", 11, 22),
    *chain("Sin", 7, 22), *chain("Cos", 7, 22), *chain("Softplus", 1, 22), *chain("LeakyRelu", 6, 16),
    *chain("Elu", 6, 22), *chain("Selu", 6, 22), *chain("HardSigmoid", 6, 22), *chain("PRelu", 7, 9, 16),
    *chain("Pow", 12, 13, 15), step("Pow", 7, 12, special=pow_12_7),
    *chain("Max", 8, 12, 13), *chain("Min", 8, 12, 13), *chain("Mod", 10, 13),
    *chain("Equal", 7, 11, 13, 19), *chain("Greater", 7, 9, 13), *chain("Less", 7, 9, 13),
    *chain("GreaterOrEqual", 12, 16), *chain("LessOrEqual", 12, 16), *chain("Where", 9, 16),
    *chain("MatMul", 1, 9, 13), *chain("Gemm", 7, 9), step("Gemm", 9, 11, Fill(2, "C", "zero")),
    *chain("Gemm", 11, 13),
    *chain("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25),
    *chain("Cast", 6, 9, 13), step("Cast", 13, 19, Default("saturate", 1)), *chain("Cast", 19, 21, 23),
    step("Cast", 23, 24, Default("round_mode", "up")), *chain("Cast", 24, 25, 28),
    step("Constant", 1, 9, special=constant_types),
    step("Constant", 9, 11, Absent("sparse_value"), Required("value")),
    step("Constant", 11, 12, *(Absent(n) for n in ("value_float", "value_floats", "value_int", "value_ints",
                                                   "value_string", "value_strings")), special=constant_12_11),
    *[step("Constant", a, b, special=constant_types) for a, b in ((12, 13), (13, 19), (19, 21), (21, 23), (23, 24),
                                                                 (24, 25))],
    *chain("ConstantOfShape", 9, 20, 21, 23, 24, 25), *chain("Expand", 8, 13),
    *chain("Size", 1, 13, 19, 21, 23, 24, 25),
    *chain("Shape", 1, 13), step("Shape", 13, 15, Default("start", 0), Absent("end"), special=shape_15_13),
    *chain("Shape", 15, 19, 21, 23, 24, 25),
    *chain("Reshape", 5, 13), step("Reshape", 13, 14, Default("allowzero", 0), special=reshape_14_13),
    *chain("Reshape", 14, 19, 21, 23, 24, 25),
    *chain("Transpose", 1, 13, 21, 23, 24, 25),
    step("Squeeze", 1, 11, Negative("axes")), step("Squeeze", 11, 13, ToAttribute(1, "axes")),
    *chain("Squeeze", 13, 21, 23, 24, 25),
    step("Unsqueeze", 1, 11, Negative("axes", output_rank=True)), step("Unsqueeze", 11, 13, ToAttribute(1, "axes")),
    *chain("Unsqueeze", 13, 21, 23, 24, 25),
    step("Flatten", 1, 9), step("Flatten", 9, 11, Negative("axis")), *chain("Flatten", 11, 13, 21, 23, 24, 25),
    step("Concat", 4, 11, Negative("axis")), *chain("Concat", 11, 13),
    step("Split", 2, 11, Negative("axis")), step("Split", 11, 13, ToAttribute(1, "split")),
    step("Split", 13, 18, Absent("num_outputs"), special=split_18_13),
    step("Slice", 1, 10, ToAttribute(1, "starts"), ToAttribute(2, "ends"), ToAttribute(3, "axes"),
         NewInput(4, "steps", neutral=1)),
    step("Slice", 10, 11, Negative("axes", index=3)), *chain("Slice", 11, 13),
    step("Gather", 1, 11, special=gather_11_1), *chain("Gather", 11, 13),
    *chain("GatherElements", 11, 13),
    *chain("ScatterElements", 11, 13), step("ScatterElements", 13, 16, Default("reduction", "none")),
    step("ScatterElements", 16, 18, special=scatter_elements_18_16),
    *chain("Tile", 6, 13), *chain("CumSum", 11, 14), *chain("NonZero", 9, 13),
    step("OneHot", 9, 11, Negative("axis", output_rank=True)), *chain("OneHot", 11, 28), *chain("Einsum", 12, 28),
    step("Range", 11, 27, Default("stash_type", 1)),
    step("Pad", 2, 11, ToAttribute(1, "pads"), ToAttribute(2, "value")), *chain("Pad", 11, 13),
    step("Pad", 13, 18, NewInput(3, "axes"), special=pad_18_13), step("Pad", 18, 19, special=pad_19_18),
    *chain("Pad", 19, 21, 23, 24, 25),
    step("Clip", 6, 11, ToAttribute(1, "min"), ToAttribute(2, "max")), *chain("Clip", 11, 12, 13),
    *(step(op, 1, 11, Negative("axes")) for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum")),
    *chain("ReduceMean", 11, 13), step("ReduceMean", 13, 18, *_REDUCE_AXES, special=reduce_noop),
    *chain("ReduceMax", 11, 12, 13), step("ReduceMax", 13, 18, *_REDUCE_AXES, special=reduce_noop),
    *chain("ReduceMax", 18, 20),
    *chain("ReduceMin", 11, 12, 13), step("ReduceMin", 13, 18, *_REDUCE_AXES, special=reduce_noop),
    *chain("ReduceMin", 18, 20),
    step("ReduceSum", 11, 13, *_REDUCE_AXES, special=reduce_noop),
    step("ArgMax", 1, 11, Negative("axis")), step("ArgMax", 11, 12, Default("select_last_index", 0)),
    *chain("ArgMax", 12, 13),
    step("Softmax", 1, 11, Negative("axis")), step("Softmax", 11, 13, special=softmax_13_11, onnx_up=True),
    step("LogSoftmax", 1, 11, Negative("axis")), step("LogSoftmax", 11, 13, special=softmax_13_11, onnx_up=True),
    *chain("Conv", 1, 11, 22), *chain("ConvTranspose", 1, 11, 22),
    step("MaxPool", 8, 10, Default("ceil_mode", 0), Absent("dilations", each=1)), *chain("MaxPool", 10, 11, 12, 22),
    step("AveragePool", 1, 7, Default("count_include_pad", 0)), step("AveragePool", 7, 10, Default("ceil_mode", 0)),
    step("AveragePool", 10, 11), step("AveragePool", 11, 19, Absent("dilations", each=1)),
    *chain("AveragePool", 19, 22), *chain("GlobalAveragePool", 1, 22), *chain("InstanceNormalization", 6, 22),
    step("Resize", 11, 13, Fill(1, "roi", "empty"), Fill(2, "scales", "empty")),
    step("Resize", 13, 18, Default("antialias", 0), Default("keep_aspect_ratio_policy", "stretch"), Absent("axes")),
    step("Resize", 18, 19, special=resize_19_18),
    step("If", 1, 11, special=if_11_1), *chain("If", 11, 13, 16, 19, 21, 23, 24, 25),
    *chain("Loop", 11, 13, 16, 19, 21, 23, 24, 25), *chain("Scan", 11, 16, 19, 21, 23, 24, 25),
    *chain("SplitToSequence", 11, 24),
    step("QuantizeLinear", 10, 13, special=quantize_13_10), step("QuantizeLinear", 13, 19, Default("saturate", 1)),
    step("QuantizeLinear", 19, 21, Default("block_size", 0), Default("output_dtype", 0)),
    step("QuantizeLinear", 21, 23, Default("precision", 0)), *chain("QuantizeLinear", 23, 24, 25, 28),
    step("DequantizeLinear", 10, 13, special=quantize_13_10), *chain("DequantizeLinear", 13, 19),
    step("DequantizeLinear", 19, 21, Default("block_size", 0)),
    step("DequantizeLinear", 21, 23, Default("output_dtype", 0)), *chain("DequantizeLinear", 23, 24, 25, 28),
]
for _s in STEPS:
    register(_s.op, _s.older, _s.newer, _s.up, what="")
    register(_s.op, _s.newer, _s.older, _s.down, what=_s.describe())
register("ScatterElements", 11, None, scatter_elements_below_11)
register("GatherElements", 11, None, gather_elements_below_11)


def coverage() -> str:
    """docs/opsets.md's coverage table: each op with the versions rnnconv moves it between and what its steps down do
    beyond checking that the node's types exist in the older version (steps doing the same thing share a line)."""
    versions: dict[str, set] = {}
    downs: dict[str, dict[str, list[str]]] = {}
    for (op, frm, to), what in sorted(WHAT.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        versions.setdefault(op, set()).update(v for v in (frm, to) if v is not None)
        if (to is None or to < frm) and what:
            downs.setdefault(op, {}).setdefault(what, []).append(f"{frm} → {to if to is not None else 'below'}")
    lines = ["| op | versions | going down |", "| --- | --- | --- |"]
    for op in sorted(downs):
        steps = "; ".join(f"{', '.join(s)}: {what}" for what, s in downs[op].items())
        lines.append(f"| {op} | {' '.join(map(str, sorted(versions[op])))} | {steps} |")
    plain = [f"{op} {min(v)}-{max(v)}" for op, v in sorted(versions.items()) if op not in downs]
    lines.append(f"| {len(plain)} more | | type lists only: {', '.join(plain)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(coverage(), end="")
