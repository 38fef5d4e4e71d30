"""Opset conversion of the non-recurrent nodes, one node at a time.

onnx's version converter converts whole models, stops at the first op it has no adapter for, and cannot take a
model over 2 GB. Here each node that changes schema between the two opsets is stepped from one schema version to
the next: through rnnconv's table of compatible steps (below) or onnx's adapter for that step, run on a small model
holding just the node and its small constant inputs (never the weights). Every failure is collected, so the error
names every node at once.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import onnx_ir as ir

from rnnconv import io
from rnnconv.dialects.onnx_recurrent import OPS, constant_array
from rnnconv.errors import Unsupported
from rnnconv.passes.rewrite import Names

SMALL_CONSTANT = 1 << 20  # constant inputs up to this size go into the one-node model (adapters may read them)


@dataclasses.dataclass(frozen=True)
class Compatible:
    """A schema step whose only change is a wider type list, new attributes (at these defaults), or
    negative axes (`non_negative`: going down, the listed attributes must hold no negative value).

    Going down, the step applies when the node meets those conditions and its tensor types are in the older
    schema's type list; going up there is nothing to do. The semantics are unchanged per the ONNX changelog;
    tests/test_opset_graph.py checks each entry's structure against the installed onnx's schemas.
    """

    op: str
    older: int
    newer: int
    attributes_at_default: tuple[tuple[str, object], ...] = ()
    non_negative: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # new attributes with no neutral default: the node must not carry them
    non_negative_inputs: tuple[int, ...] = ()  # inputs that must be absent or constants with no negative value


def _steps(op: str, versions: tuple[int, ...], **kw) -> list[Compatible]:
    return [Compatible(op, a, b, **kw) for a, b in zip(versions, versions[1:])]


_TABLE = [
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
    Compatible("Where", 9, 16), Compatible("Expand", 8, 13), *_steps("Neg", (6, 13)), *_steps("Sqrt", (6, 13)),
    Compatible("LeakyRelu", 6, 16), *_steps("Tile", (6, 13)), *_steps("Max", (8, 12, 13)),
    *_steps("Min", (8, 12, 13)), Compatible("Clip", 12, 13), Compatible("Pow", 13, 15),
    *_steps("Less", (9, 13)), *_steps("Greater", (9, 13)), *_steps("Equal", (7, 11, 13, 19)),
]
COMPATIBLE = {(c.op, c.older, c.newer): c for c in _TABLE}


def slice_10_1(node: ir.Node) -> ir.Node:
    """Slice-10 -> Slice-1: constant starts/ends/axes inputs become attributes; steps must be absent or 1."""
    ins = list(node.inputs) + [None] * (5 - len(node.inputs))
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
    attrs = [ir.AttrInt64s(k, v) for k, v in consts.items()]
    return ir.Node("", "Slice", inputs=[ins[0]], outputs=[ir.Value(name=o.name) for o in node.outputs],
                   name=node.name, attributes=attrs)


# Structural steps down that onnx lacks: (op, newer, older) -> the older node.
DOWN_ADAPTERS = {("Slice", 10, 1): slice_10_1}


def since(op: str, opset: int, domain: str = "") -> Optional[int]:
    return io.schema_since_version(op, opset, domain)


def first_opset(op: str, domain: str = "") -> Optional[int]:
    for opset in range(1, io.latest_opset() + 1):
        if since(op, opset, domain) is not None:
            return opset
    return None


def _types_ok(node: ir.Node, older: int) -> bool:
    ins, outs = io.schema_type_lists(node.op_type, older)
    for values, formals in ((node.inputs, ins), (node.outputs, outs)):
        for i, value in enumerate(values):
            constraint = formals[min(i, len(formals) - 1)] if formals else None
            if value is None or constraint is None or value.dtype is None:
                continue
            if value.dtype.name.lower() not in constraint:
                return False
    return True


def _compatible_step(node: ir.Node, older: int, newer: int, down: bool) -> bool:
    entry = COMPATIBLE.get((node.op_type, older, newer))
    if entry is None:
        return False
    if not down:
        return True
    for name, default in entry.attributes_at_default:
        a = node.attributes.get(name)
        if a is not None and a.value != default:
            return False
    for name in entry.absent:
        if name in node.attributes:
            return False
    for name in entry.non_negative:
        a = node.attributes.get(name)
        values = [] if a is None else a.value if isinstance(a.value, (list, tuple)) else [a.value]
        if any(v < 0 for v in values):
            return False
    for index in entry.non_negative_inputs:
        value = node.inputs[index] if index < len(node.inputs) else None
        if value is None:
            continue
        arr = constant_array(value)
        if arr is None or (arr < 0).any():
            return False
    return _types_ok(node, older)


class OpsetConverter:
    def __init__(self, model: ir.Model, target: int):
        self.model = model
        self.graph = model.graph
        self.source = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
        self.target = target
        self.names = Names(self.graph)
        self.failures: list[str] = []
        self.changed: list[str] = []

    def run(self) -> None:
        missing: dict[str, list[str]] = {}
        work = []
        for node in self.graph:
            if node.domain not in ("", "ai.onnx") or node.op_type in OPS:
                continue
            if since(node.op_type, self.target) is None:
                missing.setdefault(node.op_type, []).append(node.name or node.outputs[0].name)
            elif self._needs(node, self.source):
                work.append((node, self.source))
        for op, nodes in missing.items():
            first = first_opset(op)
            where = f"first exists at opset {first}" if first else "does not exist in this onnx"
            self.failures.append(f"{op} ({len(nodes)} node(s): {', '.join(nodes[:5])}) "
                                 f"does not exist at opset {self.target}; {where}")
        if self.failures:  # report what cannot exist at all before spending time on adapters
            raise Unsupported(f"cannot convert to opset {self.target}: " + "; ".join(self.failures))
        while work:
            node, frm = work.pop(0)
            try:
                for n, reached in self._step(node, frm):
                    if self._needs(n, reached):
                        work.append((n, reached))
            except Unsupported as err:
                self.failures.append(f"{node.op_type} node {node.name!r}: {err}")
                continue
            self.changed.append(node.name or node.op_type)
        if self.failures:
            raise Unsupported(f"cannot convert to opset {self.target}: " + "; ".join(self.failures))

    def _needs(self, node: ir.Node, opset: int) -> bool:
        return since(node.op_type, opset) != since(node.op_type, self.target)

    def _step(self, node: ir.Node, frm: int) -> list[tuple[ir.Node, int]]:
        """One schema step of `node` (valid at opset `frm`) toward the target; returns nodes and their opset."""
        op, to = node.op_type, self.target
        current = since(op, frm)
        if to < frm:
            older, newer = since(op, current - 1) if current > 1 else None, current
            reached = max(to, current - 1)
        else:
            older, newer = current, next(o for o in range(frm + 1, to + 1) if since(op, o) == o)
            reached = newer
        if older is None:
            raise Unsupported(f"{op} does not exist below opset {current}")
        if _compatible_step(node, older, newer, to < frm):
            return [(node, reached)]
        adapter = DOWN_ADAPTERS.get((op, newer, older)) if to < frm else None
        if adapter is not None:
            new = adapter(node)
            self._replace(node, [new], list(new.outputs))
            return [(new, reached)]
        new_nodes, outputs = self._onnx_step(node, frm, reached)
        self._replace(node, new_nodes, outputs)
        return [(n, reached) for n in new_nodes]

    def _onnx_step(self, node: ir.Node, frm: int, to: int) -> tuple[list[ir.Node], list[ir.Value]]:
        inputs, inits = [], []
        mini_values: dict[str, ir.Value] = {}
        for v in node.inputs:
            if v is None or v.name in mini_values:
                continue
            c = ir.Value(name=v.name, type=v.type, shape=v.shape)
            arr = constant_array(v)
            if arr is not None and arr.nbytes <= SMALL_CONSTANT:
                c.const_value = ir.tensor(arr, name=v.name)
                inits.append(c)
            else:
                c.type = v.type or ir.TensorType(ir.DataType.FLOAT)
                inputs.append(c)
            mini_values[v.name] = c
        outs = [ir.Value(name=o.name or f"rnnconv_output_{i}", type=o.type, shape=o.shape)
                for i, o in enumerate(node.outputs)]
        clone = ir.Node(node.domain, node.op_type,
                        inputs=[mini_values.get(v.name) if v is not None else None for v in node.inputs],
                        outputs=outs, name=node.name, attributes=list(node.attributes.values()))
        graph = ir.Graph(inputs + (inits if frm < 4 else []), outs, nodes=[clone], initializers=inits,
                         opset_imports={"": frm})
        mini = ir.Model(graph, ir_version=io.min_ir_version(max(frm, to)))
        try:
            converted = io.convert_version(mini, to)
        except Unsupported as err:
            raise Unsupported(f"no adapter from opset {frm} to {to} ({err})") from err
        return self._adopt(converted, node)

    def _adopt(self, converted: ir.Model, node: ir.Node) -> tuple[list[ir.Node], list[ir.Value]]:
        """The converted one-node model's nodes, wired to the main graph's values; plus its outputs in order."""
        by_name = {v.name: v for v in node.inputs if v is not None}
        g = converted.graph
        mapped: dict[int, ir.Value] = {}

        def fresh(v: ir.Value) -> ir.Value:
            if id(v) not in mapped:
                mapped[id(v)] = ir.Value(name=self.names(v.name or "rnnconv_value"), type=v.type, shape=v.shape)
            return mapped[id(v)]

        for name, init in g.initializers.items():
            if name in by_name:
                mapped[id(init)] = by_name[name]
            else:
                value = fresh(init)
                value.const_value = init.const_value
                value.const_value.name = value.name
                self.graph.register_initializer(value)
        for v in g.inputs:
            if id(v) not in mapped:
                mapped[id(v)] = by_name[v.name]
        new_nodes = []
        for n in g:
            ins = [None if v is None else fresh(v) if id(v) not in mapped else mapped[id(v)] for v in n.inputs]
            outs = [fresh(o) for o in n.outputs]
            new_nodes.append(ir.Node(n.domain, n.op_type, inputs=ins, outputs=outs,
                                     name=self.names(n.name or n.op_type), attributes=list(n.attributes.values())))
        return new_nodes, [mapped[id(o)] for o in g.outputs]

    def _replace(self, node: ir.Node, replacement: list[ir.Node], outputs: list[ir.Value]) -> None:
        for old, new in zip(node.outputs, outputs):
            name = old.name
            old.name = None
            new.name = name
            new.type = new.type or old.type
            new.shape = new.shape or old.shape
        ir.convenience.replace_all_uses_with(list(node.outputs), outputs, replace_graph_outputs=True)
        self.graph.insert_after(node, replacement)
        self.graph.remove(node, safe=True)
