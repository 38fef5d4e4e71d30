"""Loop nodes whose body is one cell step, as tf2onnx writes a TensorFlow while-loop (Keras 3's LSTM, GRU and
SimpleRNN, which tf2onnx's own rewriters leave as Loops under mixed precision) and as a hand-written ONNX Loop
over Gather(sequence, iteration number) (part of `fuse`; tf2onnx/rewriter/unit_rnn_rewriter_base.py walks the
same loop on the TensorFlow side).

Case 1: the Loop runs exactly T steps over a sequence X of T steps along axis 0, which is proven, not assumed:
    every value the proof reads is an affine function of the iteration i and of T (T static, or X's axis 0 read
    through Shape), computed through Cast, Add, Sub, Mul, Shape, Gather, Slice and (Un)Squeeze:
    - the trip count is T, and the condition is absent, true, or a comparison (Less, Greater, ...; And, Or) that
      holds on entry and after every step but the last (tf2onnx: counter + 1 < T and i < T);
    - the body reads X at Gather(X, index) with index = i: the iteration number, or a loop-carried counter that
      starts at 0 and grows by 1 (tf2onnx's TensorArray read);
    - the loop-carried values are the step's state (h, and c for LSTM: state in as the step's input, state out as
      the step's output or an Identity of it), counters, and values passed through unchanged: the weights
      (float32 constants cast in the body when Keras computes in float16), read as the constants they are;
    - every scan output is the step's h (or an Identity of it): it becomes Y;
    - the body computes nothing else.
    X given as ReverseSequence(X0, lengths all T) along axis 0 (Keras' go_backwards, the backward half of a
    Bidirectional) is read as a reverse recurrence over X0, whose Y is flipped back to the Loop's order.
Case 2: a body holding the step and more (Keras masking: the state kept where a per-step mask is false, which
    ONNX's sequence_lens cannot hold for masks that are not a prefix of each sequence), a condition or trip
    count that is not proven, or an index that is not the iteration: left as it is, with the reason.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Optional, Union

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import constant_array
from rnnconv.passes.fuse_keras import find_steps
from rnnconv.passes.fuse_match import Step, attr, const, producer, users
from rnnconv.passes.fuse_scan import BODY_SINCE, BodyStep

Affine = tuple  # (coefficient of i, coefficient of T, constant), Fractions
PASS_THROUGH = ("Identity", "Cast", "Squeeze", "Unsqueeze", "Reshape")
SHAPE_OPS = ("Shape", "Gather", "Slice", "Concat", "Cast", "Unsqueeze", "Squeeze", "Reshape", "Identity")


class Proof:
    """Affine values and the predicates that hold over the iterations, of one graph (the Loop's or its body)."""

    def __init__(self, T: Optional[int], root: tuple, env: dict, body: bool):
        self.T, self.root, self.env, self.body = T, root, env, body
        self.used: dict[int, ir.Node] = {}

    def value(self, v: Optional[ir.Value]) -> Optional[Affine]:
        if v is None:
            return None
        if id(v) in self.env:
            return self.env[id(v)]
        a = constant_array(v)
        if a is not None:
            if a.size != 1 or a.dtype.kind not in "iuf" or not np.isfinite(a).all():
                return None
            return (Fraction(0), Fraction(0), Fraction(a.reshape(-1)[0].item()))
        node = producer(v)
        if node is None:
            return None
        got = self._value(node, v)
        if got is not None:
            self.used[id(node)] = node
        return got

    def _value(self, node: ir.Node, v: ir.Value) -> Optional[Affine]:
        op, ins = node.op_type, node.inputs
        if op in PASS_THROUGH:
            a = self.value(ins[0])
            if a is not None and op == "Cast" and ir.DataType(attr(node, "to")).numpy().kind in "iu" \
                    and any(x.denominator != 1 for x in a):
                return None
            return a
        if op in ("Add", "Sub", "Mul"):
            a, b = self.value(ins[0]), self.value(ins[1])
            if a is None or b is None:
                return None
            if op == "Mul":
                if a[:2] == (0, 0):
                    return tuple(a[2] * x for x in b)
                return tuple(b[2] * x for x in a) if b[:2] == (0, 0) else None
            return tuple(x + y if op == "Add" else x - y for x, y in zip(a, b))
        if op in ("Gather", "Slice"):
            shape = self._shape_of(ins[0])
            if shape is None:
                return None
            value, start = shape
            if op == "Gather":
                k = constant_array(ins[1])
                if k is None or k.size != 1:
                    return None
                axis = int(k.reshape(-1)[0])
            else:
                starts, ends = (constant_array(ins[j]) if len(ins) > j else None for j in (1, 2))
                if starts is None or ends is None or starts.size != 1 or int(ends.reshape(-1)[0]) != int(
                        starts.reshape(-1)[0]) + 1 or (len(ins) > 4 and ins[4] is not None):
                    return None
                axis = int(starts.reshape(-1)[0])
            return self.length(value, axis + start)
        return None

    def _shape_of(self, v: ir.Value):
        """(value, first axis) when `v` is Shape(value), through Casts."""
        node = producer(v)
        while node is not None and node.op_type in ("Cast", "Identity"):
            self.used[id(node)] = node
            node = producer(node.inputs[0])
        if node is None or node.op_type != "Shape" or attr(node, "end") is not None:
            return None
        self.used[id(node)] = node
        return node.inputs[0], attr(node, "start", 0)

    def length(self, v: ir.Value, axis: int) -> Optional[Affine]:
        n = static_length(v, axis) if axis >= 0 else None
        if n is not None:
            return (Fraction(0), Fraction(0), Fraction(n))
        return (Fraction(0), Fraction(1), Fraction(0)) if root(v, axis) == self.root else None

    def holds(self, v: Optional[ir.Value]) -> bool:
        """The boolean `v` is true at every iteration but the last (in the body), or on entry (outside)."""
        if v is None:
            return True
        if id(v) in self.env:
            return self.env[id(v)] is True
        a = constant_array(v)
        if a is not None:
            return a.size == 1 and bool(a.reshape(-1)[0])
        node = producer(v)
        if node is None:
            return False
        op, ins = node.op_type, node.inputs
        if op in ("Identity", "Squeeze", "Unsqueeze", "Reshape"):
            ok = self.holds(ins[0])
        elif op in ("And", "Or"):
            first = self.holds(ins[0])
            ok = (first and self.holds(ins[1])) if op == "And" else (first or self.holds(ins[1]))
        elif op in ("Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
            a, b = self.value(ins[0]), self.value(ins[1])
            if a is None or b is None:
                return False
            small, big = (a, b) if op.startswith("Less") else (b, a)
            ok = self._positive(tuple(y - x for x, y in zip(small, big)), strict=not op.endswith("OrEqual"))
        else:
            return False
        if ok:
            self.used[id(node)] = node
        return ok

    def _positive(self, d: Affine, strict: bool) -> bool:
        """a*i + b*T + c > 0 (>= 0) for every i of the range, for the static T or every T >= 1."""
        a, b, c = d
        ok = (lambda x: x > 0) if strict else (lambda x: x >= 0)
        if not self.body:  # on entry: i = 0, T >= 1
            if a != 0:
                return False
            return ok(b * self.T + c) if self.T is not None else b >= 0 and ok(b + c)
        if self.T is not None:  # i from 0 to T - 2: linear, so its ends
            return self.T < 2 or (ok(b * self.T + c) and ok(a * (self.T - 2) + b * self.T + c))
        # for every T >= 2, at i = 0 and i = T - 2: p*T + q with p >= 0 and 2p + q past the bound
        return all(p >= 0 and ok(2 * p + q) for p, q in ((b, c), (a + b, c - 2 * a)))


def static_length(v: ir.Value, axis: int) -> Optional[int]:
    """`v`'s axis length when it is static there or where `root` follows it to (a graph input's declared shape)."""
    while True:
        if v.shape is not None and axis < len(v.shape) and isinstance(v.shape[axis], int):
            return v.shape[axis]
        found = _follow(v, axis)
        if found is None:
            return None
        v, axis = found


def root(v: ir.Value, axis: int) -> tuple:
    """The value and axis whose length `v`'s axis has, through nodes that keep it (Cast, ReverseSequence...)."""
    while True:
        found = _follow(v, axis)
        if found is None:
            return id(v), axis
        v, axis = found


def _follow(v: ir.Value, axis: int) -> Optional[tuple]:
    """(input, axis) of `v`'s producer when that axis of its output is that axis of its input."""
    node = producer(v)
    if node is None or node.op_type not in ("Cast", "Identity", "ReverseSequence", "Transpose"):
        return None
    if node.op_type == "Transpose":
        perm = attr(node, "perm")
        if perm is None or axis >= len(perm):
            return None
        axis = list(perm)[axis]
    return node.inputs[0], axis


def _copy_of(v: ir.Value, h: ir.Value) -> Optional[list]:
    """The Identity nodes through which `v` is `h` ([] when it is `h`), or None."""
    chain = []
    while v is not h:
        node = producer(v, "Identity")
        if node is None:
            return None
        chain.append(node)
        v = node.inputs[0]
    return chain


def loop_step(loop: ir.Node, opset: int) -> Union[BodyStep, str, None]:
    """The Loop as Case 1; a reason string for Case 2; None when its body holds no step at all."""
    body = attr(loop, "body")
    if body is None or opset < BODY_SINCE:
        return None
    K = len(loop.inputs) - 2
    ins, outs = list(body.inputs), list(body.outputs)
    if K < 1 or len(ins) != K + 2 or len(outs) < K + 1:
        return None
    carried = [loop.inputs[2 + k] for k in range(K)]
    passed = [k for k in range(K) if outs[1 + k] is ins[2 + k]]
    pinned = {}
    for k in passed:
        a = const(carried[k])
        if a is not None:
            pinned[k] = ins[2 + k]
            ins[2 + k].const_value = ir.tensor(a)
    try:
        steps = find_steps(body)
    finally:
        for v in pinned.values():
            v.const_value = None
    if not steps:
        return None
    if len(steps) != 1:
        return f"its body holds {len(steps)} steps"
    return _prove(loop, body, steps[0], carried, passed, pinned)


def _prove(loop, body, step: Step, carried, passed, pinned) -> Union[BodyStep, str]:
    K, ins, outs = len(carried), list(body.inputs), list(body.outputs)
    states = [step.h_in] + ([step.c_in] if step.op == "LSTM" else [])
    slots = [next((k for k in range(K) if ins[2 + k] is s), None) for s in states]
    if None in slots or step.h_const is not None:
        return "its body's state inputs are not the step's"
    copies = []
    for k, s in zip(slots, [step.h_out, step.c_out][:len(slots)]):
        chain = _copy_of(outs[1 + k], s)
        if chain is None:
            return _masked(step) or "its body's state outputs are not the step's"
        copies += chain
    for v in outs[1 + K:]:
        chain = _copy_of(v, step.h_out)
        if chain is None:
            return "its scan outputs are not the step's hidden state"
        copies += chain
    gather = producer(step.x, "Gather")
    X = gather.inputs[0] if gather is not None and attr(gather, "axis", 0) == 0 else None
    if X is None or X.producer() is not None and X.producer().graph is body or X in body.inputs:
        return "its body's input is not Gather(sequence, index) of a sequence outside it"
    if X.shape is not None and len(X.shape) != 3:
        return "the sequence its body reads is not 3-D"
    T = static_length(X, 0)
    outer = Proof(T, root(X, 0), {}, body=False)
    trips = outer.value(loop.inputs[0])
    want = (0, 0, T) if T is not None else (0, 1, 0)
    if trips != want:
        shown = trips[2] if trips is not None and trips[:2] == (0, 0) else None
        return f"its trip count ({shown if shown is None else int(shown)}) is not the static length of the " \
               f"sequence it reads ({T})" if T is not None else "its trip count is not the length of the " \
                                                                 "sequence it reads"
    if not outer.holds(loop.inputs[1]):
        return "its condition is not proven true on entry"
    env = {id(ins[0]): (Fraction(1), Fraction(0), Fraction(0)), id(ins[1]): True}
    counters, updates = [], []
    for k in range(K):
        if k in slots or k in pinned:
            continue
        start = outer.value(carried[k])
        if k in passed:
            if start is not None:
                env[id(ins[2 + k])] = start
            continue
        add = producer(outs[1 + k], "Add")
        step_by = Proof(T, outer.root, {}, body=True).value(
            add.inputs[1] if add is not None and add.inputs[0] is ins[2 + k] else
            add.inputs[0] if add is not None and add.inputs[1] is ins[2 + k] else None)
        if start is None or step_by != (0, 0, 1):
            return "its body carries a value that is neither the step's state, a counter nor passed through"
        env[id(ins[2 + k])] = (start[0] + 1, start[1], start[2])
        counters.append(k)
        updates.append(add)
    inner = Proof(T, outer.root, env, body=True)
    if inner.value(gather.inputs[1]) != (1, 0, 0):
        return "its body reads the sequence at an index that is not the iteration"
    if not inner.holds(outs[0]):
        return "its condition is not proven to hold until the trip count ends the loop"
    allowed = {id(n) for n in [*step.nodes, *step.feeds, *copies, gather, *updates, *inner.used.values()]}
    extra = [n for n in body if id(n) not in allowed and n.op_type != "Constant"]
    if extra:
        return _masked(step) or f"its body computes more than the step ({extra[0].op_type})"
    used = [k for k in counters if loop.outputs[k] is not None and (loop.outputs[k].uses()
                                                                    or loop.outputs[k].is_graph_output())]
    if used:
        return "the counter's final value is read after the loop"
    roles: list = [None] * len(loop.outputs)
    for k in range(K):
        roles[k] = "h" if k == slots[0] else "c" if len(slots) > 1 and k == slots[1] else (
            ("pass", carried[k]) if k in passed else None)
    roles[K:] = ["Y"] * (len(loop.outputs) - K)
    direction, flip = "forward", False
    reverse = producer(X, "ReverseSequence")
    if reverse is not None and attr(reverse, "time_axis", 0) == 0 and _full(outer, reverse.inputs[1], want):
        outer.used[id(reverse)] = reverse
        X, direction, flip = reverse.inputs[0], "reverse", True
    context = list(outer.used.values())
    initial = [carried[k] for k in slots]
    return BodyStep(step, direction, X, initial, roles, flip, _ordered(loop.graph, context))


def _full(proof: Proof, lengths: ir.Value, T: Affine) -> bool:
    """ReverseSequence's lengths are T for every sequence: a constant of T's, or Expand(T, shape)."""
    a = constant_array(lengths)
    if a is not None:
        return T[:2] == (0, 0) and a.size > 0 and bool((a == T[2]).all())
    expand = producer(lengths, "Expand")
    if expand is None or proof.value(expand.inputs[0]) != T:
        return False
    proof.used[id(expand)] = expand
    todo = [expand.inputs[1]]
    while todo:  # the broadcast shape, computed from shapes: part of the check's context
        node = producer(todo.pop())
        if node is None or id(node) in proof.used or node.op_type not in SHAPE_OPS:
            continue
        proof.used[id(node)] = node
        if node.op_type != "Shape":
            todo.extend(v for v in node.inputs if v is not None)
    return True


def _ordered(graph: ir.Graph, nodes: list) -> list:
    ids = {id(n) for n in nodes}
    return [n for n in graph if id(n) in ids]


def _masked(step: Step) -> Optional[str]:
    """Keras masking: the step's state out mixed with the state in by a per-step boolean mask."""
    for out in (step.h_out, step.c_out):
        for node in users(out) if out is not None else ():
            if node.op_type == "Where" or node.op_type == "Mul" and producer(
                    next((v for v in node.inputs if v is not out), None), "Cast") is not None:
                return ("its body keeps the state where a per-step mask is false (Keras masking): ONNX's "
                        "sequence_lens holds only masks that are a prefix of each sequence, which the model does not "
                        "promise")
    return None
