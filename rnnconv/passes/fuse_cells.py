"""The fuse pass: recurrences written out as primitive ops come back as ONNX RNN / GRU / LSTM nodes.

Steps (passes/fuse_match.py) are chained by their state: a step whose hidden (and cell) state in is another's
state out follows it. A chain becomes one recurrent node of one direction, plus the glue that gives every value
read outside the chain its value from the node's Y (or Y_c), so the model's interface never changes:

Case 1: the steps project their input themselves (cells applied in a Python loop): X is the sequence they index
    (Gather(x, t) for t = 0..T-1, or its reverse), else the steps' inputs stacked.
Case 2: the steps read one step each of an input projection made for the whole sequence (dynamo's nn.RNN): X is
    what the projection reads, the direction is read from the order of the steps' time indices (a flip reverses).
Case 3: a chain whose steps do not share weights, whose state leaks out between steps (an LSTM's cell state), or
    whose time indices are not the sequence in order is left alone and reported (near-misses, with the reason).
A Concat of every step's output in time order becomes Y itself. Each fused chain is a `Fusion`: the conversion
pipeline checks the matched nodes against the new ones, then the whole model.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import GATES, MODERN_SINCE, OPS, constant_array, default_opset, node_label
from rnnconv.passes.base import PassResult, RewritePass
from rnnconv.passes.edit import Names
from rnnconv.passes.fuse_bidi import merge
from rnnconv.passes.fuse_keras import find_steps
from rnnconv.passes.fuse_loop import loop_step
from rnnconv.passes.fuse_match import Fusion, Step, attr, axes_of, const, in_order, linear, only_user, producer
from rnnconv.passes.fuse_scan import body_step, build

MIN_OPSET = MODERN_SINCE  # the versions the fused nodes are written at, or later


@dataclasses.dataclass
class NearMiss:
    op: str
    steps: int
    where: str
    why: str

    def __str__(self) -> str:
        if self.op in ("Scan", "Loop"):
            return f"{self.op} {self.where} not fused: {self.why}"
        return f"{self.steps} {self.op} step(s) at {self.where} not fused: {self.why}"


def chains(steps: list[Step]) -> tuple[list[list[Step]], list[NearMiss]]:
    """The steps linked by their state, first step first; links that are ambiguous (a state read by two steps)
    are cut."""
    by_out = {id(s.h_out): s for s in steps}
    nexts: dict[int, list] = {}
    for s in steps:
        p = by_out.get(id(s.h_in)) if s.h_in is not None else None
        if p is not None and p.op == s.op:
            nexts.setdefault(id(p), []).append(s)
    follows = {id(n[0]): p for p in steps for n in [nexts.get(id(p), [])] if len(n) == 1}
    out, misses = [], []
    for s in steps:
        if id(s) in follows:
            continue
        chain = [s]
        while len(nexts.get(id(chain[-1]), [])) == 1:
            chain.append(nexts[id(chain[-1])][0])
        out.append(chain)
    return out, misses


def _same(a: Optional[np.ndarray], b: Optional[np.ndarray]) -> bool:
    return (a is None) == (b is None) and (a is None or (a.shape == b.shape and np.array_equal(a, b)))


def _where(chain: list[Step]) -> str:
    a, b = node_label(chain[0].anchor), node_label(chain[-1].anchor)
    return a if a == b else f"{a}..{b}"


class Planner:
    """Turns chains into Fusions (or NearMisses) without changing the graph."""

    def __init__(self, model: ir.Model, graph: Optional[ir.Graph] = None, names: Optional[Names] = None):
        self.model, self.graph = model, graph if graph is not None else model.graph
        self.opset = default_opset(model)
        self.names = names or Names(model.graph)

    def plan(self, chain: list[Step]) -> "Fusion | NearMiss | None":
        op, T = chain[0].op, len(chain)
        miss = lambda why: NearMiss(op, T, _where(chain), why)  # noqa: E731
        if T == 1 and op == "RNN" and chain[0].time is None and chain[0].projected is None:
            return None  # act(W x + R h) alone, not reading a sequence: a layer, not a recurrence
        if self.opset < MIN_OPSET:
            return miss(f"the model is at opset {self.opset}; fuse writes {op}-{MIN_OPSET} or later (upgrade it "
                        "first)")
        why = _weights_differ(chain)
        if why:
            return miss(why)
        for k, (a, b) in enumerate(zip(chain, chain[1:])):
            if op == "LSTM" and b.c_in is not a.c_out:
                return miss(f"step {k + 1} reads a cell state that is not step {k}'s")
            if b.h_const is not None:
                return miss(f"step {k + 1}'s hidden term is a constant")
        layout = self._sequence(chain)
        if isinstance(layout, str):
            return miss(layout)
        X, direction, extra = layout
        ref = next((s for s in chain if s.R is not None), None)
        W, Wb = (extra.W, extra.b) if chain[0].projected is not None else (chain[0].W, chain[0].Wb)
        G = len(GATES[op])
        H = (ref.R.shape[1] if ref is not None else chain[0].h_const.shape[-1] // G)
        R, Rb = (ref.R, ref.Rb) if ref is not None else (np.zeros((G * H, H), W.dtype), None)
        first = chain[0]
        states = [None if _zero(v) else v for v in (first.h_in, first.c_in)]
        if first.h_const is not None:
            # The exporter folded the first step's h @ R.T + Rb: proven against R and Rb, h being the constant
            # state the step reads (GRU) or zero.
            C, h0 = first.h_const, const(first.h_in)
            if ref is None:  # one step: R is never applied to a nonzero state, so it is zero, Rb is C itself
                rows = C.reshape(-1, C.shape[-1])
                if h0 is not None and h0.any():
                    return miss("one step from a constant nonzero state: its recurrent weights are not in the model")
                if not (rows == rows[:1]).all():
                    return miss("the first step's hidden term is a constant that differs between batch rows")
                Rb = rows[0] if rows.any() else None
            else:
                expected = (h0 @ R.T if h0 is not None else 0) + (Rb if Rb is not None else 0)
                if not np.allclose(C, np.broadcast_to(expected, C.shape), rtol=1e-5, atol=1e-6):
                    return miss("the first step's hidden term is a constant that is not its state times R plus Rb")
        return self._build(chain, X, direction, W, Wb, R, Rb, extra, states)

    # -- the sequence the steps read ---------------------------------------------------------------------------

    def _sequence(self, chain: list[Step]):
        """(X, direction, projection Linear or None), or why the steps do not read a sequence in order."""
        T = len(chain)
        if chain[0].projected is not None:
            idx = [s.projected for s in chain]
            if any(i is None for i in idx) or len({(id(i.base), i.flipped) for i in idx}) != 1:
                return "the steps do not read one input projection"
            lin = linear(idx[0].base)
            if lin is None:
                return "the sequence the steps read is not a projection of an input by constant weights"
            shape = lin.input.shape
            Tx = shape[0] if shape is not None and len(shape) == 3 and isinstance(shape[0], int) else None
            if Tx != T:
                return f"the input projection's sequence has {Tx or 'an unknown number of'} steps, the chain {T}"
            times = [Tx - 1 - i.t if i.flipped else i.t for i in idx]
            if times == list(range(T)):
                return lin.input, "forward", lin
            if times == list(range(T - 1, -1, -1)):
                return lin.input, "reverse", lin
            return f"the steps read times {times[:8]} of the sequence, not one after another"
        if any(s.projected is not None or s.x is None for s in chain):
            return "the steps read their inputs in different forms"
        idx = [s.time for s in chain]
        if all(i is not None and not i.flipped for i in idx) and len({id(i.base) for i in idx}) == 1:
            base = idx[0].base
            shape = base.shape
            Tx = shape[0] if shape is not None and len(shape) == 3 and isinstance(shape[0], int) else None
            times = [i.t for i in idx]
            if times == list(range(T)) and Tx is not None and Tx >= T:
                return base, "forward", None
            if Tx == T and times == list(range(T - 1, -1, -1)):
                return base, "reverse", None
        return None, "forward", None  # the steps' inputs, stacked

    # -- the new node and its glue -----------------------------------------------------------------------------

    def _node(self, op_type, inputs, hint, n_out=1, **attrs) -> tuple[ir.Node, list]:
        outs = [ir.Value(name=self.names(hint if n_out == 1 else f"{hint}_{k}")) for k in range(n_out)]
        attributes = [ir.AttrInt64s(k, v) if isinstance(v, list) and all(isinstance(x, int) for x in v)
                      else ir.AttrStrings(k, v) if isinstance(v, list) else ir.AttrInt64(k, v) if isinstance(v, int)
                      else ir.AttrString(k, v) for k, v in attrs.items()]
        node = ir.Node("", op_type, inputs=inputs, outputs=outs, name=self.names(f"{hint}_node"),
                       attributes=attributes)
        return node, outs

    def _const(self, array: np.ndarray, hint: str, inits: list) -> ir.Value:
        v = ir.Value(name=self.names(hint), type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                     shape=ir.Shape(array.shape), const_value=ir.tensor(array))
        inits.append(v)
        return v

    def _axes(self, op_type, v, axes, hint, nodes, inits) -> ir.Value:
        """Squeeze / Unsqueeze at the model's opset (axes an input from 13)."""
        if self.opset >= 13:
            node, (out,) = self._node(op_type, [v, self._const(np.array(axes, np.int64), f"{hint}_axes", inits)],
                                      hint)
        else:
            node, (out,) = self._node(op_type, [v], hint, axes=list(axes))
        nodes.append(node)
        return out

    def _slice0(self, v, start, end, hint, nodes, inits) -> ir.Value:
        if self.opset >= 10:
            ins = [v] + [self._const(np.array([x], np.int64), f"{hint}_{k}", inits)
                         for k, x in (("starts", start), ("ends", end), ("axes", 0))]
            node, (out,) = self._node("Slice", ins, hint)
        else:
            node, (out,) = self._node("Slice", [v], hint, starts=[start], ends=[end], axes=[0])
        nodes.append(node)
        return out

    def _build(self, chain, X, direction, W, Wb, R, Rb, lin, states) -> "Fusion | NearMiss":
        op, T, first, last = chain[0].op, len(chain), chain[0], chain[-1]
        G, H = len(GATES[op]), R.shape[1]
        stem = self.names(f"{op.lower()}_fused")
        nodes, inits = [], []
        matched = self._matched(chain, lin, X is None)
        have = {id(n) for n in matched}
        if X is not None and lin is None and not all(id(n) in have for s in chain for n in s.time.nodes):
            # a step's input is also read elsewhere (Keras' first step, peeled off its loop, read by both
            # directions): the node reads the steps' inputs as they are
            X, direction = None, "forward"
            matched = self._matched(chain, lin, True)
        if X is None:  # Case 1 without a sequence to read: the steps' own inputs, stacked
            X = self._stack([s.x for s in chain], f"{stem}_X", nodes, inits)
        elif X.shape is not None and isinstance(X.shape[0], int) and X.shape[0] > T:
            X = self._slice0(X, 0, T, f"{stem}_X", nodes, inits)
        ins = self._inputs(X, W, Wb, R, Rb, G, H, stem, inits)
        rank = _rank(first, chain)
        states = states[:2 if op == "LSTM" else 1]
        ins.append(None)  # sequence_lens
        for k, s in enumerate(states):
            if s is None:
                ins.append(None)
            else:
                ins.append(s if rank == 3 else self._axes("Unsqueeze", s, [0], f"{stem}_initial_{'hc'[k]}",
                                                          nodes, inits))
        while ins[-1] is None:
            ins.pop()
        attrs = self._attributes(first, direction, H)
        time = (lambda k: k) if direction == "forward" else (lambda k: T - 1 - k)
        concats = list(self._concats(chain, time, rank, matched))
        for concat, inner in concats:
            matched.extend([concat, *inner])
        c_needed = op == "LSTM" and _read_outside(last.c_out, matched)
        node, outs = self._node(op, ins, stem, n_out=3 if c_needed else 2, **attrs)
        nodes.append(node)
        read = [k for k, s in enumerate(chain) if _read_outside(s.h_out, matched)]
        Ys = (self._axes("Squeeze", outs[0], [1], f"{stem}_Y", nodes, inits)
              if concats or any(k != T - 1 for k in read) else None)
        replaced = [(concat.outputs[0], Ys) for concat, _ in concats]
        for k in read:
            if k == T - 1:  # the last step's state: Y_h (either direction)
                new = outs[1] if rank == 3 else self._axes("Squeeze", outs[1], [0], f"{stem}_h", nodes, inits)
            elif rank == 3:
                new = self._slice0(Ys, time(k), time(k) + 1, f"{stem}_h{k}", nodes, inits)
            else:
                idx = self._const(np.array(time(k), np.int64), f"{stem}_t{k}", inits)
                g, (new,) = self._node("Gather", [Ys, idx], f"{stem}_h{k}", axis=0)
                nodes.append(g)
            replaced.append((chain[k].h_out, new))
        if c_needed:
            c = outs[2] if rank == 3 else self._axes("Squeeze", outs[2], [0], f"{stem}_c", nodes, inits)
            replaced.append((last.c_out, c))
        matched = in_order(self.graph, matched)
        leak = _leak(matched, {id(old) for old, _ in replaced})
        if leak is not None:
            which = "cell state" if any(leak is s.c_out for s in chain) else "value"
            return NearMiss(op, T, _where(chain), f"the {which} {leak.name!r} is read outside the recurrence between "
                                                  f"steps (a recurrent node gives only the last one)")
        inputs = _reads(matched)
        what = [f"{T} unrolled {op} step(s) -> one {op} node ({direction}, hidden {H})"]
        return Fusion(op, node.name, matched, nodes, replaced, inputs, inits, what, T, _where(chain))

    def _inputs(self, X, W, Wb, R, Rb, G, H, stem, inits) -> list:
        """X, W, R and B (when there is a bias) of the new node."""
        dtype = W.dtype
        ins = [X, self._const(W[None].astype(dtype), f"{stem}_W", inits),
               self._const(R[None].astype(dtype), f"{stem}_R", inits)]
        if Wb is not None or Rb is not None:
            zero = np.zeros(G * H, dtype)
            B = np.concatenate([zero if Wb is None else Wb, zero if Rb is None else Rb]).astype(dtype)
            ins.append(self._const(B[None], f"{stem}_B", inits))
        else:
            ins.append(None)
        return ins

    @staticmethod
    def _attributes(step: Step, direction: str, H: int) -> dict:
        attrs = {"hidden_size": H, "direction": direction}
        if step.op == "RNN" and step.activation != "Tanh":
            attrs["activations"] = [step.activation]
        if step.op == "GRU" and step.linear_before_reset:
            attrs["linear_before_reset"] = 1
        return attrs

    def _stack(self, xs, hint, nodes, inits) -> ir.Value:
        ups = [self._axes("Unsqueeze", x, [0], f"{hint}_{k}", nodes, inits) for k, x in enumerate(xs)]
        node, (out,) = self._node("Concat", ups, hint, axis=0)
        nodes.append(node)
        return out

    def _matched(self, chain, lin, keep_inputs: bool) -> list:
        """The steps' nodes, and the nodes that only feed them (time indexing, a flip, the input projection)."""
        nodes = [n for s in chain for n in s.nodes]
        extra = []
        if not keep_inputs:
            extra += [n for s in chain for n in (s.time.nodes if s.time is not None else ())]
        extra += [n for s in chain for n in (s.projected.nodes if s.projected is not None else ())]
        extra += [n for s in chain for n in s.feeds]
        extra += [v.producer() for n in [*nodes, *extra] for v in n.inputs
                  if v is not None and producer(v, "Constant") is not None]  # the step's constants
        flips = {id(s.projected.flip): s.projected.flip for s in chain if s.projected and s.projected.flip}
        extra += list(flips.values()) + (list(reversed(lin.nodes)) if lin is not None else [])
        have = {id(n) for n in nodes}
        grew = True
        while grew:  # until no more node feeds the matched ones alone
            grew = False
            for n in extra:
                if id(n) not in have and all(not o.is_graph_output() and all(id(u.node) in have for u in o.uses())
                                             for o in n.outputs):
                    nodes.append(n)
                    have.add(id(n))
                    grew = True
        return nodes

    def _concats(self, chain, time, rank, matched):
        """Concats along axis 0 of every step's output in time order (unsqueezed first when 2-D): they are Y."""
        T = len(chain)
        by_time = {id(s.h_out): time(k) for k, s in enumerate(chain)}
        seen = set()
        if T == 1 and rank == 2:  # one step: unsqueezed, it is Y
            for u in list(chain[0].h_out.uses()):
                if u.node.op_type == "Unsqueeze" and axes_of(u.node) == [0]:
                    yield u.node, []
                    return
        for s in chain:
            for u in list(s.h_out.uses()):
                n = u.node if rank == 3 else only_user(u.node.outputs[0], "Concat") if (
                    u.node.op_type == "Unsqueeze" and axes_of(u.node) == [0]) else None
                if n is None or n.op_type != "Concat" or id(n) in seen or attr(n, "axis") != 0:
                    continue
                seen.add(id(n))
                inner = [] if rank == 3 else [producer(v, "Unsqueeze") for v in n.inputs]
                values = list(n.inputs) if rank == 3 else [None if p is None else p.inputs[0] for p in inner]
                if len(values) == T and [by_time.get(id(v)) for v in values] == list(range(T)) and all(
                        rank == 3 or (axes_of(p) == [0] and only_user(p.outputs[0]) is n) for p in inner):
                    yield n, inner
                    return  # one Concat becomes Y; any other reads the steps through the glue


def _weights_differ(chain: list[Step]) -> Optional[str]:
    ref = next((s for s in chain if s.R is not None), chain[0])
    for k, s in enumerate(chain):
        for name in ("W", "Wb", "R", "Rb"):
            if s.R is None and name in ("R", "Rb"):
                continue
            if not _same(getattr(s, name), getattr(ref, name)):
                return f"step {k}'s {name} differs from step {chain.index(ref)}'s (a recurrence shares its weights)"
        if s.activation != ref.activation:
            return f"step {k}'s activation is {s.activation}, step {chain.index(ref)}'s {ref.activation}"
    return None


def _zero(v: Optional[ir.Value]) -> bool:
    """A constant state of zeros: the recurrent node's default, left out."""
    a = const(v) if v is not None else None
    return a is not None and not a.any()


def _rank(first: Step, chain: list[Step]) -> int:
    shape = first.h_out.shape
    if shape is not None:
        return len(shape)
    return 3 if first.projected is not None else 2


def _read_outside(v: ir.Value, matched: list) -> bool:
    ids = {id(n) for n in matched}
    return v.is_graph_output() or any(id(u.node) not in ids for u in v.uses())


def _leak(matched: list, replaced: set) -> Optional[ir.Value]:
    """A value the matched nodes compute, read outside them, that the new node does not give."""
    ids = {id(n) for n in matched}
    for n in matched:
        for o in n.outputs:
            if id(o) not in replaced and (o.is_graph_output() or any(id(u.node) not in ids for u in o.uses())):
                return o
    return None


def _reads(nodes: list) -> list:
    made = {id(o) for n in nodes for o in n.outputs}
    out, seen = [], set()
    for n in nodes:
        for v in n.inputs:
            if v is not None and id(v) not in made and id(v) not in seen and constant_array(v) is None:
                seen.add(id(v))
                out.append(v)
    return out


def survey(model: ir.Model, bidirectional: bool = False) -> tuple[list[Fusion], list[NearMiss]]:
    """What `fuse` would do to the model: the fusions and the near-misses of its main graph and of the branches of
    its Ifs (a cell written once per branch, as silero-vad's LSTMCell per sample rate), nothing changed;
    `bidirectional`: a forward and a reverse fusion over the same sequence as one fusion (passes/fuse_bidi.py)."""
    names = Names(model.graph)
    fusions, misses = [], []
    for graph in _graphs(model.graph):
        found, missed = _survey(Planner(model, graph, names), bidirectional)
        fusions += found
        misses += missed
    return fusions, misses


def _graphs(graph: ir.Graph):
    yield graph
    for node in graph:
        if node.op_type == "If" and node.domain in ("", "ai.onnx"):
            for name in ("then_branch", "else_branch"):
                branch = attr(node, name)
                if branch is not None:
                    yield from _graphs(branch)


def _survey(planner: Planner, bidirectional: bool) -> tuple[list[Fusion], list[NearMiss]]:
    partial: list = []
    found, misses = chains(find_steps(planner.graph, partial))
    groups: dict = {}
    for m in partial:  # one line per kind of mismatch, not per step
        groups.setdefault((m.op, m.why), []).append(m.anchor)
    for (op, why), anchors in groups.items():
        a, b = node_label(anchors[0]), node_label(anchors[-1])
        misses.append(NearMiss(op, len(anchors), a if a == b else f"{a}..{b}", why))
    fusions = []
    for node in planner.graph:
        if node.op_type in ("Scan", "Loop") and node.domain in ("", "ai.onnx"):
            got = (body_step if node.op_type == "Scan" else loop_step)(node, planner.opset)
            if isinstance(got, str):
                misses.append(NearMiss(node.op_type, 1, node_label(node), got))
            elif got is not None:
                fusions.append(build(planner, node, got))
    for chain in found:
        result = planner.plan(chain)
        if result is None:
            continue
        if isinstance(result, NearMiss):
            misses.append(result)
        elif _overlaps(result, fusions):
            misses.append(NearMiss(result.op, result.steps, _where(chain), "its nodes overlap another chain's"))
        else:
            fusions.append(result)
    return (merge(planner, fusions) if bidirectional else fusions), misses


def candidates(model: ir.Model) -> list[str]:
    """One line per recurrence `fuse` would fuse, and per near-miss, for `inspect` and `check`."""
    fusions, misses = survey(model)
    def what(f: Fusion) -> str:
        body = next((n.op_type for n in f.matched if n.op_type in ("Scan", "Loop")), None)
        return f"a {body} of one {f.op} step" if body else f"{f.steps} unrolled {f.op} step(s)"

    return ([f"{what(f)} at {f.where}; try rnnconv fuse" for f in fusions]
            + [f"{m} (fuse leaves it alone)" for m in misses])


def _overlaps(f: Fusion, fusions: list[Fusion]) -> bool:
    ids = {id(n) for n in f.matched}
    return any(id(n) in ids for g in fusions for n in g.matched)


class FusePass(RewritePass):
    """Every chain of unrolled steps of the model's main graph as one recurrent node (see the module's cases)."""

    def __init__(self, observe=None, bidirectional: bool = False):
        super().__init__(observe)
        self.near_misses: list[NearMiss] = []
        self.bidirectional = bidirectional

    def plan(self, model: ir.Model) -> list[Fusion]:
        fusions, self.near_misses = survey(model, bidirectional=self.bidirectional)
        return fusions

    def call(self, model: ir.Model) -> PassResult:
        fusions = self.plan(model)
        for f in fusions:
            self.observe(f)
        for f in fusions:
            apply(f.matched[0].graph, f)
        changes = [f"not fused: {m}" for m in self.near_misses]
        if fusions:
            counts = {}
            for f in fusions:
                counts[f.op] = counts.get(f.op, 0) + 1
            bodies = Counter(n.op_type for f in fusions for n in f.matched if n.op_type in ("Scan", "Loop"))
            steps = sum(f.steps for f in fusions if not any(n.op_type in bodies for n in f.matched))
            kinds = ", ".join(f"{n} {op}" for op, n in counts.items())
            parts = ([f"{steps} unrolled step(s)"] if steps else []) + [f"{n} {op} node(s)" for op, n in
                                                                           bodies.items()]
            changes.insert(0, f"fused {len(fusions)} recurrence(s) ({kinds}) from {' and '.join(parts)}")
        # A node computing in float16 (Keras' mixed precision) is held to float16's tolerance up to the outputs,
        # float32 though they may be: it rounds differently from the ops it replaces.
        fp16 = any(i is not None and i.dtype == ir.DataType.FLOAT16 for f in fusions for n in f.nodes
                   if n.op_type in OPS for i in n.inputs[1:2])
        return PassResult(model, bool(fusions), fusions, changes, fp16)


def apply(graph: ir.Graph, f: Fusion) -> None:
    """The new nodes in, the matched ones out; every value read outside keeps its name."""
    for v in f.new_initializers:
        graph.register_initializer(v)
    weights = {id(v): v for n in f.matched for v in [*n.inputs, *_captured(n)]
               if v is not None and v.is_initializer()}
    constants = {id(v.producer()): v.producer() for n in f.matched for v in n.inputs
                 if v is not None and producer(v, "Constant") is not None and v.producer() not in f.matched}
    feeding = [v.producer() for n in [*f.context, *f.matched] for v in n.inputs
               if v is not None and v.producer() is not None and v.producer().graph is graph]
    olds = [old for old, _ in f.replaced]
    for old, new in f.replaced:
        name = old.name
        old.name = None
        new.type = new.type or old.type
        new.shape = new.shape or old.shape
        new.name = name
    ir.convenience.replace_all_uses_with(olds, [new for _, new in f.replaced], replace_graph_outputs=True)
    graph.insert_before(f.matched[0], f.nodes)
    graph.remove(f.matched, safe=True)
    for node in f.matched:  # a removed Loop's body still reads what it captured: it reads it no more
        for a in node.attributes.values():
            if a.type == ir.AttributeType.GRAPH:
                for inner in ir.traversal.RecursiveGraphIterator(a.value):
                    for k in range(len(inner.inputs)):
                        inner.replace_input_with(k, None)
    graph.remove([c for c in constants.values() if not any(o.uses() or o.is_graph_output() for o in c.outputs)],
                 safe=True)
    for v in _prune(graph, [*f.context, *feeding]):
        if v.is_initializer():
            weights[id(v)] = v
    graph.sort()
    for v in weights.values():  # the weights the steps read, when nothing else reads them (in any graph)
        if not v.uses() and not v.is_graph_input() and not v.is_graph_output() and v.graph is not None:
            del v.graph.initializers[v.name]


def _captured(node: ir.Node) -> list:
    """The values of enclosing graphs a node's subgraphs read."""
    bodies = [a.value for a in node.attributes.values() if a.type == ir.AttributeType.GRAPH]
    inner = {id(v) for g in bodies for v in [*g.inputs, *g.initializers.values()]}
    inner |= {id(o) for g in bodies for n in ir.traversal.RecursiveGraphIterator(g) for o in n.outputs}
    return [v for g in bodies for n in ir.traversal.RecursiveGraphIterator(g) for v in n.inputs
            if v is not None and id(v) not in inner]


def _prune(graph: ir.Graph, nodes: list) -> list:
    """The nodes that fed the matched ones and are read no more (a Loop's trip count, its reversed input), and
    the nodes that fed only them."""
    todo, read = list(nodes), []
    while todo:
        node = todo.pop()
        if node.graph is not graph or any(o.uses() or o.is_graph_output() for o in node.outputs):
            continue
        todo.extend(v.producer() for v in node.inputs if v is not None and v.producer() is not None)
        read.extend(v for v in node.inputs if v is not None)
        graph.remove(node, safe=True)
    return read
