"""The opset adapters' registry and what an adapter edits: a `NodePlan`, the node as it will be at the step's
target version, plus the nodes and constants the step adds. The steps themselves are in `adapters` (the table)."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import RecurrentNode, constant_array
from rnnconv.passes.edit import Names


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
    WHAT[(op, frm, to)] = what if what is not None else first_line(adapter.__doc__)


def first_line(doc: Optional[str]) -> str:
    """A docstring's first paragraph on one line, as the coverage table shows it."""
    return " ".join((doc or "").strip().split("\n\n")[0].split()).rstrip(".")
