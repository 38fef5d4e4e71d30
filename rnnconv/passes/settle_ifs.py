"""Settle the If nodes whose branch the model's shapes decide, so that every value keeps a static rank.

PyTorch's legacy exporter writes `x.squeeze(-1)` and `if x.dim() == 2: ...` (LSTMCell) as If nodes on shapes;
their branches give values of two ranks, which OpenVINO (and other runtimes that need static ranks) refuse
downstream. Repeated until nothing changes:

Case 1: an If whose condition the declared input shapes and the constants settle (onnx's shape inference, then
    Shape / Size / Gather / Slice / Concat / Squeeze / Unsqueeze / Cast / Equal / Not / And / Or / comparisons and
    integer arithmetic folded) is replaced by the branch it takes.
Case 2: an If whose condition reads only shapes, and whose branches give values of different ranks, is replaced
    by one branch when the other provably fails: with that other branch in its place (and Case 1 run again),
    onnx's strict shape inference fails in a node of the If's own graph that the model's outputs need, so that
    node runs after it on every input and no input taking that branch reaches the outputs. Nothing is proven (and
    nothing changes) when the model fails strict inference as it is.
Case 3: with any If settled, the Identity nodes left go (see `drop_identities`).
Ifs on values (`sr == 16000`) stay. Ifs of Case 2 where both branches type-check are genuinely rank-polymorphic:
they stay, and `polymorphic` names the root ones (those whose condition no other such If decides).

The interface is untouched: the inputs and outputs keep their names, types and declared dims.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

import numpy as np
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass

from rnnconv import schemas
from rnnconv.dialects.onnx_recurrent import constant_array, node_label
from rnnconv.passes.base import Pass, PassResult

BRANCHES = ("then_branch", "else_branch")
# Ops folded over known values; the shape ops below read their input's shape, not its values.
_NUMPY = {"Equal": np.equal, "Greater": np.greater, "Less": np.less, "GreaterOrEqual": np.greater_equal,
          "LessOrEqual": np.less_equal, "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor,
          "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Not": np.logical_not, "Neg": np.negative,
          "Abs": np.abs, "Identity": lambda a: a, "Max": np.maximum, "Min": np.minimum, "Floor": np.floor,
          "Ceil": np.ceil, "Div": lambda a, b: (np.trunc(a / b).astype(a.dtype) if a.dtype.kind in "iu" else a / b)}
SHAPE_OPS = ("Shape", "Size")


def ifs(model: ir.Model) -> list[ir.Node]:
    """Every default-domain If node, outer ones before the ones in their branches."""
    found = []

    def visit(graph):
        for node in graph:
            if node.op_type == "If" and node.domain in ("", "ai.onnx"):
                found.append(node)
            for attr in node.attributes.values():
                for body in ([attr.value] if attr.type == ir.AttributeType.GRAPH else
                             list(attr.value) if attr.type == ir.AttributeType.GRAPHS else []):
                    visit(body)

    visit(model.graph)
    return found


@dataclasses.dataclass
class Polymorphic:
    """An If left whose branches give two ranks, and that no other such If decides: the rank is decided at run
    time, by the shapes of `reads` (which come from the graph inputs `inputs`)."""

    node: str
    ranks: tuple  # (output index, rank in then_branch, rank in else_branch)
    reads: list[str]
    inputs: list[str]

    def __str__(self) -> str:
        k, a, b = self.ranks
        return (f"If node {self.node!r} decides the rank of its output {k} at run time (rank {a} in then_branch, "
                f"{b} in else_branch; neither provably fails downstream), from the shape of "
                f"{', '.join(repr(r) for r in self.reads)}" +
                (f" (from input(s) {', '.join(repr(i) for i in self.inputs)})" if self.inputs else ""))


class SettleIfs(Pass):
    """See the module's docstring. The result's `changes` say each If settled and why; after the call
    `by_failure` names the Ifs Case 2 settled, `polymorphic` the root Ifs left whose branches give two ranks."""

    def __init__(self):
        super().__init__()
        self.by_failure: list[str] = []
        self.polymorphic: list[Polymorphic] = []
        self.settled: list[tuple[str, str]] = []  # (If node, which branch and why), in the order settled

    def call(self, model: ir.Model) -> PassResult:
        if not ifs(model):
            return PassResult(model, False)
        while True:
            self.settled += settle_by_shapes(model)  # Case 1
            step = _settle_by_failure(model)  # Case 2
            if step is None:
                break
            self.by_failure.append(step[0])
            self.settled.append(step)
        changes = [f"If node {name!r}: {what}" for name, what in self.settled]
        self.polymorphic = _roots(model)
        if changes:
            RemoveUnusedNodesPass()(model)
            drop_identities(model)  # Case 3
        return PassResult(model, bool(changes), changes=changes)


@dataclasses.dataclass
class Settled:
    model: ir.Model  # the source itself when nothing was settled, else a settled copy
    changes: list[str]
    by_failure: list[str]
    polymorphic: list[Polymorphic]

    def refusal(self) -> Optional[str]:
        """What a runtime that needs static ranks cannot take, in one line (None: nothing)."""
        if not self.polymorphic:
            return None
        return ("the rank of a value is decided at run time: " + "; ".join(map(str, self.polymorphic)) +
                ". What would work: a model whose declared input shapes fix what the condition reads")


def settle(model: ir.Model) -> Settled:
    """SettleIfs on a copy of `model` (the source stays as it is, to be verified against)."""
    if not ifs(model):
        return Settled(model, [], [], [])
    copy = model.clone()
    settler = SettleIfs()
    result = settler(copy)
    return Settled(copy if result.modified else model, result.changes, settler.by_failure, settler.polymorphic)


def settle_by_shapes(model: ir.Model) -> list[tuple[str, str]]:
    """Case 1, until no If is left that the shapes settle: (If node, which branch and why) for each."""
    done = []
    while True:
        shapes, _ = schemas.infer_shapes(model)
        fold = ShapeFold(shapes)
        decided = [(node, fold.condition(node)) for node in ifs(model)]
        decided = [(node, taken) for node, taken in decided if taken is not None]
        if not decided:
            return done
        live = {id(n) for n in ifs(model)}
        for node, taken in decided:
            if id(node) not in live:  # in a branch an earlier If of this round dropped
                continue
            inline(node, BRANCHES[0] if taken else BRANCHES[1])
            done.append((node_label(node), f"{BRANCHES[0] if taken else BRANCHES[1]} taken (its condition is "
                                            f"{taken} for every input the declared shapes allow)"))
            live = {id(n) for n in ifs(model)}


def _settle_by_failure(model: ir.Model) -> Optional[tuple[str, str]]:
    """Case 2 for the first If it settles: its name and which branch and why, or None."""
    shapes, error = schemas.infer_shapes(model, strict=True)
    if error is not None:
        return None
    for node in ifs(model):
        if not (_reads_only_shapes(node.inputs[0]) and _ranks_differ(node, shapes)):
            continue
        failures = {branch: _fails(model, node, branch) for branch in BRANCHES}
        failed = [b for b in BRANCHES if failures[b] is not None]
        if len(failed) == 1:
            kept = BRANCHES[1 - BRANCHES.index(failed[0])]
            inline(node, kept)
            why = f"{failed[0]} can never reach the outputs: {failures[failed[0]]}"
            return node_label(node), f"{kept} kept ({why})"
    return None


def _fails(model: ir.Model, node: ir.Node, branch: str) -> Optional[str]:
    """Why the model with `branch` in the If's place fails strict shape inference in a node of the If's graph that
    the outputs need (None: it does not, or not provably there)."""
    trial = model.clone()
    copy = ifs(trial)[ifs(model).index(node)]  # a clone keeps the nodes' order
    graph = copy.graph
    inline(copy, branch)
    settle_by_shapes(trial)
    _, error = schemas.infer_shapes(trial, strict=True)
    if error is None:
        return None
    where = re.findall(r"\(op_type:(\w+), node name: ([^)]*)\): (?:\[\w+\] )?", error)
    if not where:
        return None
    op, name = where[-1]
    failing = [n for n in graph if n.name == name and n.op_type == op]
    if len(failing) != 1 or not _needed(failing[0], graph):
        return None
    reason = error.rsplit("): ", 1)[-1].split("] ", 1)[-1]
    if "existing" in reason:  # a declaration (a body's input) disagrees with the ops: no run-time failure
        return None
    return f"{op} node {name!r} fails on it, onnx strict shape inference: {reason}"


def _needed(node: ir.Node, graph: ir.Graph) -> bool:
    """Whether the graph's outputs read `node` (through nodes of the graph, or of their branches and bodies)."""
    owner = {}
    for n in graph:
        for sub in _inner_nodes(n):
            owner[id(sub)] = n
    outputs = {id(v) for v in graph.outputs}
    seen, queue = set(), [node]
    while queue:
        n = queue.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for v in n.outputs:
            if id(v) in outputs:
                return True
            for user, _ in v.uses():
                queue.append(user if user.graph is graph else owner.get(id(user), user))
    return False


def _inner_nodes(node: ir.Node):
    for attr in node.attributes.values():
        for body in ([attr.value] if attr.type == ir.AttributeType.GRAPH else
                     list(attr.value) if attr.type == ir.AttributeType.GRAPHS else []):
            for n in body:
                yield n
                yield from _inner_nodes(n)


def _reads_only_shapes(value: Optional[ir.Value]) -> bool:
    """Whether `value` is computed from constants and the shapes (not the values) of other values."""
    seen, queue = set(), [value]
    while queue:
        v = queue.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        if constant_array(v) is not None:
            continue
        producer = v.producer()
        if producer is None or producer.op_type in ("If", "Loop", "Scan") or producer.domain not in ("", "ai.onnx"):
            return False
        if producer.op_type not in SHAPE_OPS:
            queue.extend(producer.inputs)
    return True


def _ranks_differ(node: ir.Node, shapes: dict) -> Optional[tuple]:
    """The first output with a known, different rank in the two branches: (index, then rank, else rank)."""
    then, other = (node.attributes[b].value for b in BRANCHES)
    for k, (a, b) in enumerate(zip(then.outputs, other.outputs)):
        ranks = [_rank(v, shapes) for v in (a, b)]
        if None not in ranks and ranks[0] != ranks[1]:
            return (k, *ranks)
    return None


def _rank(value: ir.Value, shapes: dict) -> Optional[int]:
    """The inferred rank, else the declared one (it only picks the Ifs Case 2 tries: the proof is inference's)."""
    shape = shapes.get(value.name)
    if shape is None:
        return None if value.shape is None else len(value.shape)
    return len(shape)


def _roots(model: ir.Model) -> list[Polymorphic]:
    """The Ifs on shapes left whose branches give two ranks, without those whose condition reads the shape of
    another one's output."""
    shapes, _ = schemas.infer_shapes(model)
    left = [n for n in ifs(model) if _reads_only_shapes(n.inputs[0]) and _ranks_differ(n, shapes)]
    inputs = {id(v): v.name for v in model.graph.inputs}
    found = []
    for node in left:
        read = _shapes_read(node.inputs[0])
        upstream = _upstream(read)
        if not any(other is not node and id(other) in upstream for other in left):
            found.append(Polymorphic(node_label(node), _ranks_differ(node, shapes), [v.name for v in read],
                                     [name for k, name in inputs.items() if k in upstream]))
    return found


def _shapes_read(value: ir.Value) -> list[ir.Value]:
    seen, queue, read = set(), [value], []
    while queue:
        v = queue.pop()
        if v is None or id(v) in seen or constant_array(v) is not None or v.producer() is None:
            continue
        seen.add(id(v))
        if v.producer().op_type in SHAPE_OPS:
            read.append(v.producer().inputs[0])
        else:
            queue.extend(v.producer().inputs)
    return read


def _upstream(values: list[ir.Value]) -> set[int]:
    """The ids of every node and value the values depend on (an If's branches read what they read from outside
    them too)."""
    seen: set[int] = set()
    queue: list = list(values)
    while queue:
        v = queue.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        n = v.producer()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        queue.extend(n.inputs)
        for inner in _inner_nodes(n):
            queue.extend(inner.inputs)
    return seen


def drop_identities(model: ir.Model) -> None:
    """Case 3: the Identity nodes (the branches' own, mostly) go; one that gives a graph output stays unless its
    input is made in that graph for it alone, which then takes the output's name, type and declared shape.
    (OpenVINO's import keeps an Identity before an output as an Identity-16 layer, which from-openvino reads as
    no ONNX op.)"""
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        if node.op_type != "Identity" or node.domain not in ("", "ai.onnx") or node.graph is None:
            continue
        graph, x, y = node.graph, node.inputs[0], node.outputs[0]
        if y in graph.outputs:
            if x is None or x.producer() is None or x.producer().graph is not graph or x in graph.outputs \
                    or len(x.uses()) != 1 or y.uses():
                continue
            name, type_, shape = y.name, y.type, y.shape
            graph.outputs[graph.outputs.index(y)] = x
            y.name = None
            x.name, x.type, x.shape = name, type_ or x.type, shape
        else:
            ir.convenience.replace_all_uses_with(y, x)
        graph.remove(node, safe=True)


def inline(node: ir.Node, branch: str) -> None:
    """Put the nodes of the If's `branch` in place of the If; its outputs take the If's output names."""
    graph, body = node.graph, node.attributes[branch].value
    moved = list(body)
    produced = {id(v) for n in moved for v in n.outputs}
    for n in moved:
        body.remove(n)
    for name, value in list(body.initializers.items()):
        body.initializers.pop(name)
        graph.register_initializer(value)
    results = list(body.outputs)
    body.outputs.clear()
    graph.insert_before(node, moved)
    outputs = {id(v) for v in graph.outputs}
    for old, new in zip(node.outputs, results):
        if id(new) not in produced:  # the branch passes an outer value through: an Identity keeps the If's name
            identity = ir.Node("", "Identity", [new], name=f"{node.name}/{branch}/Identity")
            graph.insert_before(node, identity)
            new = identity.outputs[0]
        if new.type is None:
            new.type = old.type
        if new.shape is None or id(old) in outputs:
            new.shape = old.shape
        name, old.name = old.name, None
        ir.convenience.replace_all_uses_with(old, new, replace_graph_outputs=True)
        new.name = name
    graph.remove(node, safe=True)


class ShapeFold:
    """Values known whatever the input: constants, and what shape ops make of the inferred shapes (a Shape's
    vector may hold unknown dims, as None in an object array, which only Gather / Slice / Concat / Squeeze /
    Unsqueeze / Identity carry along)."""

    def __init__(self, shapes: dict):
        self.shapes = shapes
        self.memo: dict[int, object] = {}

    def condition(self, node: ir.Node) -> Optional[bool]:
        array = self.known(node.inputs[0])
        if array is None or array.size != 1:
            return None
        return bool(array.reshape(()))

    def known(self, value: Optional[ir.Value]) -> Optional[np.ndarray]:
        array = self.value(value)
        if array is None or (array.dtype == object and any(x is None for x in array.flat)):
            return None
        return array.astype(np.int64) if array.dtype == object else array

    def value(self, value: Optional[ir.Value]):
        if value is None:
            return None
        if id(value) not in self.memo:
            self.memo[id(value)] = None  # a cycle reads as unknown
            array = self._value(value)
            # np.take of one element of an object array gives the element itself
            self.memo[id(value)] = array if array is None or isinstance(array, np.ndarray) else \
                np.asarray(array, dtype=object if array is None or isinstance(array, int) else None)
        return self.memo[id(value)]

    def shape(self, value: ir.Value) -> Optional[tuple]:
        if value.producer() is None and value.shape is not None and self.shapes.get(value.name) is None:
            return tuple(d if isinstance(d, int) else None for d in value.shape)  # a graph input: its declared dims
        return self.shapes.get(value.name)

    def _value(self, value: ir.Value):
        array = constant_array(value)
        if array is not None:
            return array
        node = value.producer()
        if node is None or node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
            return None
        op, attrs = node.op_type, node.attributes
        if op in SHAPE_OPS:
            shape = self.shape(node.inputs[0])
            if shape is None:
                return None
            if op == "Size":
                return None if None in shape else np.array(int(np.prod(shape)), np.int64)
            start = attrs["start"].value if "start" in attrs else 0
            end = attrs["end"].value if "end" in attrs else len(shape)
            return np.array(list(shape)[slice(start, end)], dtype=object)
        args = [self.value(v) for v in node.inputs]
        if any(a is None for a, v in zip(args, node.inputs) if v is not None):
            return None
        try:
            return self._apply(op, attrs, args)
        except (ValueError, IndexError, TypeError, KeyError):
            return None

    def _apply(self, op: str, attrs, args: list):
        data = args[0]
        if op == "Gather":
            return np.take(data, self._ints(args[1]), axis=attrs["axis"].value if "axis" in attrs else 0)
        if op in ("Squeeze", "Unsqueeze"):
            axes = self._ints(args[1]) if len(args) > 1 and args[1] is not None else \
                (list(attrs["axes"].value) if "axes" in attrs else None)
            if op == "Squeeze":
                return np.squeeze(data, axis=None if axes is None else tuple(int(a) for a in np.ravel(axes)))
            out = data
            for a in sorted(int(a) % (data.ndim + len(np.ravel(axes))) for a in np.ravel(axes)):
                out = np.expand_dims(out, a)
            return out
        if op == "Concat":
            return np.concatenate(args, axis=attrs["axis"].value)
        if op == "Slice":
            return self._slice(data, args[1:])
        if op == "Transpose":
            return np.transpose(data, list(attrs["perm"].value) if "perm" in attrs else None)
        if any(a is not None and a.dtype == object and any(x is None for x in a.flat) for a in args):
            return None  # an unknown dim in arithmetic or a comparison
        if op == "Reshape" and not (attrs["allowzero"].value if "allowzero" in attrs else 0):
            shape = [data.shape[i] if d == 0 else int(d) for i, d in enumerate(self._ints(args[1]))]
            return np.reshape(data, shape)
        if op == "ConstantOfShape" and np.prod(self._ints(data)) <= 64:  # small fills (torch's Pad pads)
            fill = attrs["value"].value.numpy() if "value" in attrs else np.zeros(1, np.float32)
            return np.full(self._ints(data), fill.reshape(-1)[0], dtype=fill.dtype)
        args = [a.astype(np.int64) if a is not None and a.dtype == object else a for a in args]
        if op == "Cast":
            dtype = ir.DataType(attrs["to"].value).numpy()
            return args[0].astype(dtype)
        if op in _NUMPY:
            return np.asarray(_NUMPY[op](*args))
        return None

    @staticmethod
    def _ints(array) -> np.ndarray:
        return np.asarray(array).astype(np.int64)

    def _slice(self, data, rest: list):
        starts, ends = self._ints(rest[0]), self._ints(rest[1])
        axes = self._ints(rest[2]) if len(rest) > 2 and rest[2] is not None else np.arange(len(starts))
        steps = self._ints(rest[3]) if len(rest) > 3 and rest[3] is not None else np.ones(len(starts), np.int64)
        index = [slice(None)] * data.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            index[int(a)] = slice(int(s), int(e), int(st))
        return data[tuple(index)]
