"""The generic kinds of change between two adjacent schema versions of an op, each undone going down (`Default`,
`Absent`, `Required`, `NewInput`, `Fill`, `ToAttribute`, `Negative`), and the `Step` a line of the adapter table
(`adapters.STEPS`) is made of."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects.onnx_recurrent import constant_array
from rnnconv.errors import Unsupported
from rnnconv.passes.adapter_plan import NodePlan, NotApplicable, first_line


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
        rank = rank_of(plan.input(0))
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


def rank_of(value: Optional[ir.Value]) -> Optional[int]:
    return None if value is None or value.shape is None else len(value.shape)


def static_shape(value: Optional[ir.Value]) -> Optional[tuple[int, ...]]:
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
            param, allowed, _, homogeneous = formals[min(i, len(formals) - 1)]
            t = _type_str(value.type)
            if t is None:
                continue
            if t not in allowed:
                return f"{t} is not in {op}-{version}'s type list"
            if homogeneous and seen.setdefault(param, t) != t:
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
            parts = [first_line(self.special.__doc__)]
        return "; ".join(p for p in parts if p)


def step(op: str, older: int, newer: int, *changes, special=None, onnx_up: bool = False) -> Step:
    return Step(op, older, newer, tuple(changes), special, onnx_up)


def chain(op: str, *versions: int) -> list[Step]:
    """Steps between consecutive versions whose only change is the type lists."""
    return [Step(op, a, b) for a, b in zip(versions, versions[1:])]
