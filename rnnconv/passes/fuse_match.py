"""One recurrent step written out as primitive ops, recognized: a pattern per exporter form of each cell.

Every fact the fused node relies on is read from the matched nodes, never assumed: the weights (constants), the
bias, each gate's activation and which block of the weights it takes (by where its value flows, not by its
position in the Split), and that every value inside the step is read by the step alone. The forms, as PyTorch
2.14's two exporters write them (the cell equations are ONNX's, onnx/reference/ops/op_lstm.py, op_gru.py):

Case 1 (RNN): act(Add(hidden, xterm)), act Tanh or Relu; nn.RNNCell (Gemm + Gemm) and dynamo's unrolled nn.RNN
    (MatMul + Add, the input projection hoisted over the whole sequence and sliced per step; the first step's
    hidden term folded to a constant when no initial state is given).
Case 2 (LSTM): Split(Add(hidden, xterm)) into four gates, three Sigmoid and one Tanh; c' = f*c + i*g,
    h' = o*Tanh(c') (nn.LSTMCell).
Case 3 (GRU, linear_before_reset=1): r, z = Sigmoid(x_r + h_r), Sigmoid(x_z + h_z); n = Tanh(x_n + r*h_n);
    h' = (h - n)*z + n (nn.GRUCell).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import GATES, constant_array

ACTIVATIONS = ("Tanh", "Relu")  # an RNN step's activation, as ONNX's RNN names it


@dataclasses.dataclass
class Linear:
    """`input` times `W.T` plus `b`: a Gemm, a MatMul, or a MatMul then Add of constants."""

    input: ir.Value
    W: np.ndarray  # [out, in]
    b: Optional[np.ndarray]  # [out]
    nodes: list
    feeds: list = dataclasses.field(default_factory=list)  # Identity nodes the weights pass through


@dataclasses.dataclass
class TimeIndex:
    """A value that is one time step of `base` along axis 0: Gather(base, t) or Squeeze(Slice(base, t, t+1)),
    `base` possibly flipped first (Slice with step -1, as dynamo writes torch.flip)."""

    base: ir.Value  # before any flip
    t: int  # in `base`'s own order
    flipped: bool
    nodes: list  # Gather, or Slice + Squeeze (the flip is the chain's)
    flip: Optional[ir.Node] = None


@dataclasses.dataclass
class Step:
    """One matched step: the state it reads and writes, and its weights in ONNX's gate order."""

    op: str
    anchor: ir.Node
    nodes: list  # the step's own nodes (the input projection included when it is per step)
    h_in: Optional[ir.Value] = None  # None: a zero state (the exporter folded the hidden term to `h_const`)
    h_out: Optional[ir.Value] = None
    R: Optional[np.ndarray] = None  # [G*H, H] (None with h_const)
    Rb: Optional[np.ndarray] = None
    x: Optional[ir.Value] = None  # the step's input, projected by W here (cells)
    W: Optional[np.ndarray] = None
    Wb: Optional[np.ndarray] = None
    projected: Optional[TimeIndex] = None  # or: one step of an input projection made for the whole sequence
    c_in: Optional[ir.Value] = None
    c_out: Optional[ir.Value] = None
    activation: str = "Tanh"
    h_const: Optional[np.ndarray] = None  # the hidden term, folded (ONNX gate order along the last axis)
    time: Optional[TimeIndex] = None  # where `x` comes from, when it is one step of a sequence
    feeds: list = dataclasses.field(default_factory=list)  # nodes that only pass the weights on (Identity)
    linear_before_reset: int = 1  # GRU: PyTorch's and Keras' default (reset_after=True); Keras' reset_after=False: 0


# -- small readers ----------------------------------------------------------------------------------------------

def producer(v: Optional[ir.Value], *ops: str) -> Optional[ir.Node]:
    node = None if v is None else v.producer()
    if node is None or node.domain not in ("", "ai.onnx") or (ops and node.op_type not in ops):
        return None
    return node


def users(v: ir.Value) -> list:
    return [u.node for u in v.uses()]


def only_user(v: ir.Value, *ops: str) -> Optional[ir.Node]:
    """The one node reading `v` (once), when `v` is no graph output."""
    uses = list(v.uses())
    if len(uses) != 1 or v.is_graph_output():
        return None
    node = uses[0].node
    return node if (not ops or node.op_type in ops) and node.domain in ("", "ai.onnx") else None


def attr(node: ir.Node, name: str, default=None):
    a = node.attributes.get(name)
    return default if a is None else a.value


def ints(v: Optional[ir.Value]) -> Optional[list]:
    a = constant_array(v)
    return None if a is None or a.dtype.kind not in "iu" else [int(x) for x in a.reshape(-1)]


def axes_of(node: ir.Node) -> Optional[list]:
    """Squeeze's / Unsqueeze's axes, from the input (opset 13+) or the attribute."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return ints(node.inputs[1])
    a = attr(node, "axes")
    return None if a is None else list(a)


def other(node: ir.Node, v: ir.Value) -> Optional[ir.Value]:
    """The other input of a two-input node that reads `v`."""
    a, b = node.inputs[0], node.inputs[1] if len(node.inputs) > 1 else None
    return b if a is v else a if b is v else None


SHAPING = ("Identity", "Transpose", "Cast", "Split", "Squeeze", "Unsqueeze", "Slice")


def const(v: Optional[ir.Value], feeds: Optional[list] = None) -> Optional[np.ndarray]:
    """The constant `v` holds, through nodes that only reshape or retype a constant (the legacy exporter's shared
    weights through Identity, the dynamo exporter's transposed big weights, tf2onnx's float32 weights cast to
    float16 and split per gate or per bias); the nodes passed are added to `feeds`."""
    seen = []
    while v is not None and v.const_value is None and producer(v, *SHAPING) is not None:
        seen.append(v)
        v = v.producer().inputs[0]
    a = constant_array(v)
    for value in reversed(seen):  # innermost first
        a = None if a is None else _shaped(value, a)
    if a is not None and feeds is not None:
        feeds.extend(value.producer() for value in seen)
    return a


def _shaped(v: ir.Value, a: np.ndarray) -> Optional[np.ndarray]:
    """`v`, computed by its SHAPING producer from the constant `a` (that node's first input); None when a
    parameter is not constant."""
    node = v.producer()
    op, rank = node.op_type, a.ndim
    if op == "Identity":
        return a
    if op == "Transpose":
        perm = attr(node, "perm")
        return np.transpose(a, None if perm is None else list(perm))
    if op == "Cast":  # round to nearest even, as ONNX's Cast between floats
        return a.astype(ir.DataType(attr(node, "to")).numpy())
    axes = axes_of(node) if op != "Split" else None
    if op in ("Squeeze", "Unsqueeze"):
        if axes is None:
            return np.squeeze(a) if op == "Squeeze" and len(node.inputs) < 2 else None
        return np.squeeze(a, tuple(x % rank for x in axes)) if op == "Squeeze" else \
            np.expand_dims(a, tuple(x % (rank + len(axes)) for x in axes))
    if op == "Split":
        axis = attr(node, "axis", 0) % rank
        sizes = ints(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else attr(node, "split")
        n = len(node.outputs)
        sizes = list(sizes) if sizes is not None else [a.shape[axis] // n] * n if a.shape[axis] % n == 0 else None
        if sizes is None or sum(sizes) != a.shape[axis]:
            return None
        return np.split(a, np.cumsum(sizes)[:-1], axis=axis)[list(node.outputs).index(v)]
    if len(node.inputs) < 3 or any(i is None for i in node.inputs[1:3]):  # Slice-10+: starts, ends as inputs
        return None
    starts, ends = ints(node.inputs[1]), ints(node.inputs[2])
    axes, steps = (ints(node.inputs[k]) if len(node.inputs) > k and node.inputs[k] is not None else None
                   for k in (3, 4))
    if starts is None or ends is None or (len(node.inputs) > 3 and node.inputs[3] is not None and axes is None) \
            or (len(node.inputs) > 4 and node.inputs[4] is not None and steps is None):
        return None
    index = [slice(None)] * rank
    for k, axis in enumerate(axes if axes is not None else range(len(starts))):
        index[axis % rank] = slice(starts[k], ends[k], steps[k] if steps is not None else 1)
    return a[tuple(index)]


def _bias(v: ir.Value, out: int, feeds: list) -> Optional[np.ndarray]:
    a = const(v, feeds)
    if a is None or a.size != out or (a.ndim > 1 and a.shape[-1] != out):
        return None
    return a.reshape(-1)


def linear(v: Optional[ir.Value]) -> Optional[Linear]:
    """`v` as a product of a non-constant input by constant weights (plus a constant bias), or None."""
    gemm = producer(v, "Gemm")
    feeds: list = []
    if gemm is not None:
        if attr(gemm, "transA", 0) or len(gemm.inputs) < 2:
            return None
        B = const(gemm.inputs[1], feeds)
        if B is None or B.ndim != 2:
            return None
        W = (B if attr(gemm, "transB", 0) else B.T) * attr(gemm, "alpha", 1.0)
        b = None
        if len(gemm.inputs) > 2 and gemm.inputs[2] is not None:
            b = _bias(gemm.inputs[2], W.shape[0], feeds)
            if b is None:
                return None
            b = b * attr(gemm, "beta", 1.0)
        return Linear(gemm.inputs[0], W.astype(B.dtype), None if b is None else b.astype(B.dtype), [gemm], feeds)
    add = producer(v, "Add")
    if add is not None:
        for p, q in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
            inner = _matmul(p)
            if inner is not None and only_user(p) is add:
                b = _bias(q, inner.W.shape[0], inner.feeds)
                if b is not None:
                    inner.b, inner.nodes = b, [*inner.nodes, add]
                    return inner
        return None
    return _matmul(v)


def _matmul(v: Optional[ir.Value]) -> Optional[Linear]:
    mm = producer(v, "MatMul")
    feeds: list = []
    B = None if mm is None else const(mm.inputs[1], feeds)
    if B is None or B.ndim != 2:
        return None
    return Linear(mm.inputs[0], np.ascontiguousarray(B.T), None, [mm], feeds)


def time_index(v: Optional[ir.Value]) -> Optional[TimeIndex]:
    """`v` as one step of a sequence along axis 0 (see TimeIndex)."""
    gather = producer(v, "Gather")
    if gather is not None:
        idx = constant_array(gather.inputs[1])
        if attr(gather, "axis", 0) != 0 or idx is None or idx.ndim != 0 or idx.dtype.kind not in "iu":
            return None
        return _unflip(gather.inputs[0], int(idx), [gather])
    squeeze = producer(v, "Squeeze")
    sl = producer(squeeze.inputs[0], "Slice") if squeeze is not None else None
    if sl is None or axes_of(squeeze) != [0] or only_user(sl.outputs[0]) is not squeeze:
        return None
    starts, ends, axes, steps = (ints(sl.inputs[k]) if len(sl.inputs) > k and sl.inputs[k] is not None else None
                                 for k in (1, 2, 3, 4))
    if starts is None or ends is None or len(starts) != 1 or axes not in (None, [0]) or steps not in (None, [1]):
        return None
    if starts[0] < 0 or ends[0] != starts[0] + 1:
        return None
    return _unflip(sl.inputs[0], starts[0], [sl, squeeze])


def _unflip(base: ir.Value, t: int, nodes: list) -> TimeIndex:
    flip = producer(base, "Slice")
    if flip is not None and len(flip.inputs) == 5:
        starts, ends, axes, steps = (ints(flip.inputs[k]) for k in (1, 2, 3, 4))
        if steps == [-1] and axes == [0] and starts == [-1] and ends is not None and ends[0] <= -(2 ** 31):
            return TimeIndex(flip.inputs[0], t, True, nodes, flip)
    return TimeIndex(base, t, False, nodes)


def _inside(values, nodes) -> bool:
    """Every value is read only by `nodes` (and is no graph output)."""
    ids = {id(n) for n in nodes}
    return all(not v.is_graph_output() and all(id(u.node) in ids for u in v.uses()) for v in values)


def _split(v: ir.Value, n: int) -> Optional[ir.Node]:
    """The Split of `v` into `n` equal blocks along its last axis (for 2-D values)."""
    split = only_user(v, "Split")
    if split is None or len(split.outputs) != n or attr(split, "axis", 0) not in (1, -1):
        return None
    sizes = ints(split.inputs[1]) if len(split.inputs) > 1 and split.inputs[1] is not None else attr(split, "split")
    if sizes is not None and len(set(sizes)) != 1:
        return None
    return split


def reads_step(v: ir.Value) -> bool:
    """`v` is one step of a sequence: a TimeIndex, or a Gather along axis 0 at a computed index (a Loop body's
    Gather(sequence, counter))."""
    gather = producer(v, "Gather")
    return time_index(v) is not None or (gather is not None and attr(gather, "axis", 0) == 0
                                         and constant_array(gather.inputs[1]) is None)


def _hidden_and_x(add: ir.Node) -> Optional[tuple]:
    """(hidden, x) of Add(hidden, x): two Linears, x the one whose input is one time step of a sequence (when
    neither or both are, PyTorch's order: hidden first); or (constant hidden term, x Linear). Keras adds the bias
    after both products: Add(Add(x, hidden), bias) is x with that bias."""
    if len(add.inputs) != 2:
        return None
    for inner, b in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
        if producer(inner, "Add") is None or only_user(inner) is not add or linear(inner) is not None:
            continue
        feeds: list = []
        bias = const(b, feeds)
        pair = _hidden_and_x(inner.producer()) if bias is not None and bias.ndim == 1 else None
        if pair is not None and isinstance(pair[1], Linear) and bias.size == pair[1].W.shape[0]:
            h, x = pair
            x.b = bias.astype(x.W.dtype) if x.b is None else x.b + bias
            x.nodes, x.feeds = [*x.nodes, inner.producer()], [*x.feeds, *feeds]
            return h, x
    p, q = linear(add.inputs[0]), linear(add.inputs[1])
    if p is not None and q is not None:
        if reads_step(p.input) and not reads_step(q.input):
            p, q = q, p
        return p, q
    for c, x in ((add.inputs[0], q), (add.inputs[1], p)):
        folded = const(c)
        if folded is not None and x is not None and folded.ndim >= 1:
            return folded, x
    return None


def _blocks(a: Optional[np.ndarray], n: int, order: list, axis: int = 0) -> Optional[np.ndarray]:
    if a is None:
        return None
    parts = np.split(a, n, axis=axis)
    return np.concatenate([parts[k] for k in order], axis=axis)


def _hidden(h, n: int, order: list) -> dict:
    """The Step fields of the hidden term: its Linear, or the constant the exporter folded it to."""
    if isinstance(h, Linear):
        return {"h_in": h.input, "R": _blocks(h.W, n, order), "Rb": _blocks(h.b, n, order)}
    return {"h_in": None, "R": None, "Rb": None, "h_const": _blocks(h, n, order, axis=-1)}


# -- Case 1: RNN -------------------------------------------------------------------------------------------------

def rnn_step(act: ir.Node) -> Optional[Step]:
    add = producer(act.inputs[0], "Add")
    if act.op_type not in ACTIVATIONS or add is None or only_user(add.outputs[0]) is not act:
        return None
    for hv, xv in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
        x = linear(xv)
        projected = time_index(xv) if x is None else None
        if x is None and projected is None:
            continue
        h = linear(hv)
        if x is not None and h is not None and reads_step(h.input) and not reads_step(x.input):
            continue  # the other order says which is which
        if h is not None and h.W.shape[0] == h.W.shape[1] and _inside([hv], [add]):
            inner = [*(x.nodes if x is not None else ()), *h.nodes, add, act]
            if x is not None and not _inside([xv], [add]):
                continue
            feeds = [*h.feeds, *(x.feeds if x is not None else ())]
            return Step("RNN", act, inner, h.input, act.outputs[0], h.W, h.b, activation=act.op_type, feeds=feeds,
                        **_x_fields(x, projected))
        h_const = const(hv)
        if h_const is not None and (projected is not None or x is not None):
            inner = [*(x.nodes if x is not None else ()), add, act]
            return Step("RNN", act, inner, None, act.outputs[0], None, None, activation=act.op_type,
                        h_const=h_const, feeds=list(x.feeds) if x is not None else [], **_x_fields(x, projected))
    return None


def _x_fields(x: Optional[Linear], projected: Optional[TimeIndex]) -> dict:
    if x is not None:
        return {"x": x.input, "W": x.W, "Wb": x.b, "time": time_index(x.input)}
    return {"projected": projected}


# -- Case 2: LSTM ------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Miss:
    """A step-like match that is not the cell: the node it was found at, and what did not match."""

    op: str
    anchor: ir.Node
    why: str


def _square(lin: Linear, gates: int) -> bool:
    return lin.W.shape[0] == gates * lin.W.shape[1]


def _same_state(a: Optional[ir.Value], b: Optional[ir.Value]) -> bool:
    """Two constant-index Gathers of one tensor along one axis."""
    p, q = producer(a, "Gather"), producer(b, "Gather")
    return p is not None and q is not None and p.inputs[0] is q.inputs[0] and attr(p, "axis", 0) == attr(
        q, "axis", 0) and constant_array(p.inputs[1]) is not None and constant_array(q.inputs[1]) is not None


def lstm_step(split: ir.Node) -> "Step | Miss | None":
    gates = split.inputs[0]
    add = producer(gates, "Add")
    if add is None or _split(gates, 4) is not split:
        return None
    pair = _hidden_and_x(add)
    if pair is None:
        return None
    h, x = pair  # from here on, the products of an LSTM cell: what differs is reported
    acts = [only_user(o) for o in split.outputs]
    kinds = sorted(a.op_type if a is not None else "(several readers)" for a in acts)
    if kinds != ["Sigmoid", "Sigmoid", "Sigmoid", "Tanh"]:
        return Miss("LSTM", split, f"its four gates go to {', '.join(kinds)}, not Sigmoid, Sigmoid, Sigmoid, Tanh "
                                   "(LSTM's default activations)")
    g = next(k for k, a in enumerate(acts) if a.op_type == "Tanh")
    g_out = acts[g].outputs[0]
    update = "the cell state is not updated as c' = f*c + i*g"
    mul_ig = only_user(g_out, "Mul")
    if mul_ig is None:
        return Miss("LSTM", split, update)
    i = next((k for k, a in enumerate(acts) if a.op_type == "Sigmoid" and other(mul_ig, g_out) is a.outputs[0]),
             None)
    c_add = only_user(mul_ig.outputs[0], "Add")
    if i is None or c_add is None:
        return Miss("LSTM", split, update)
    mul_fc = producer(other(c_add, mul_ig.outputs[0]), "Mul")
    f = next((k for k, a in enumerate(acts) if k != i and a.op_type == "Sigmoid" and mul_fc is not None
              and a.outputs[0] in mul_fc.inputs), None)
    if f is None:
        return Miss("LSTM", split, update)
    c_in = other(mul_fc, acts[f].outputs[0])
    c_out = c_add.outputs[0]
    if isinstance(h, Linear) and ((not _square(h, 4) and _square(x, 4)) or (
            _same_state(x.input, c_in) and not _same_state(h.input, c_in))):
        h, x = x, h  # R is [4H, H]; a state held as one tensor (silero's LSTMCell) gives h where it gives c
    tanh_c = next((n for n in users(c_out) if n.op_type == "Tanh"), None)
    mul_oc = only_user(tanh_c.outputs[0], "Mul") if tanh_c is not None else None
    o = next((k for k in range(4) if k not in (i, f, g)), None)
    if mul_oc is None or other(mul_oc, tanh_c.outputs[0]) is not acts[o].outputs[0]:
        return Miss("LSTM", split, "its output is not h' = o*Tanh(c')")
    h_nodes = h.nodes if isinstance(h, Linear) else []
    nodes = [*x.nodes, *h_nodes, add, split, *acts, mul_ig, mul_fc, c_add, tanh_c, mul_oc]
    internal = [gates, *split.outputs, *(a.outputs[0] for a in acts), mul_ig.outputs[0], mul_fc.outputs[0],
                tanh_c.outputs[0], *(n.outputs[0] for n in [*x.nodes, *h_nodes])]
    if not _inside(internal, nodes):
        return Miss("LSTM", split, "a value inside the step is read outside it")
    at = {"i": i, "o": o, "f": f, "c": g}  # where each gate lies in the Split
    order = [at[k] for k in GATES["LSTM"]]
    return Step("LSTM", mul_oc, nodes, h_out=mul_oc.outputs[0], x=x.input, W=_blocks(x.W, 4, order),
                Wb=_blocks(x.b, 4, order), c_in=c_in, c_out=c_out, time=time_index(x.input),
                feeds=[*x.feeds, *(h.feeds if isinstance(h, Linear) else ())], **_hidden(h, 4, order))


# -- Case 3: GRU -------------------------------------------------------------------------------------------------

def gru_step(sub: ir.Node) -> Optional[Step]:
    h_prev, n = sub.inputs[0], sub.inputs[1]
    tanh = producer(n, "Tanh")
    mul_z = only_user(sub.outputs[0], "Mul")
    if tanh is None or mul_z is None:
        return None
    z_val = other(mul_z, sub.outputs[0])
    out_add = only_user(mul_z.outputs[0], "Add")
    if out_add is None or other(out_add, mul_z.outputs[0]) is not n or len(list(n.uses())) != 2:
        return None
    n_add = producer(tanh.inputs[0], "Add")
    if n_add is None:
        return None
    # n = Tanh(x_n + r * h_n): the Mul is the hidden side
    mul_r = next((producer(v, "Mul") for v in n_add.inputs if producer(v, "Mul") is not None), None)
    if mul_r is None:
        return None
    x_n = other(n_add, mul_r.outputs[0])
    z, r = producer(z_val, "Sigmoid"), None
    r_val = next((v for v in mul_r.inputs if producer(v, "Sigmoid") is not None), None)
    r = producer(r_val, "Sigmoid")
    h_n = other(mul_r, r_val) if r is not None else None
    if z is None or r is None or h_n is None:
        return None
    sh, sx = producer(h_n, "Split"), producer(x_n, "Split")
    if sh is None or sx is None or sh is sx:
        return None
    gate_of = {}
    for name, act in (("z", z), ("r", r)):
        add = producer(act.inputs[0], "Add")
        if add is None or len(add.inputs) != 2:
            return None
        pos = {}
        for v in add.inputs:
            for split, side in ((sh, "h"), (sx, "x")):
                if v in split.outputs:
                    pos[side] = list(split.outputs).index(v)
        if set(pos) != {"h", "x"}:
            return None
        gate_of[name] = pos
    gate_of["h"] = {"h": list(sh.outputs).index(h_n), "x": list(sx.outputs).index(x_n)}
    for side in ("h", "x"):
        if sorted(g[side] for g in gate_of.values()) != [0, 1, 2]:
            return None
    h, x = linear(sh.inputs[0]), linear(sx.inputs[0])
    if h is None:  # the exporter folded the first step's hidden term (h_prev a constant)
        h = const(sh.inputs[0]) if const(h_prev) is not None else None
    if h is None or x is None or (isinstance(h, Linear) and h.input is not h_prev and not _same_constant(
            h.input, h_prev)) \
            or _split(sh.inputs[0], 3) is not sh or _split(sx.inputs[0], 3) is not sx:
        return None
    h_nodes = h.nodes if isinstance(h, Linear) else []
    adds = [producer(a.inputs[0], "Add") for a in (z, r)]
    nodes = [*x.nodes, sx, *h_nodes, sh, *adds, z, r, mul_r, n_add, tanh, sub, mul_z, out_add]
    internal = [*sx.outputs, *sh.outputs, sx.inputs[0], *(a.outputs[0] for a in adds), z.outputs[0],
                r.outputs[0], mul_r.outputs[0], n_add.outputs[0], sub.outputs[0], mul_z.outputs[0],
                *(nd.outputs[0] for nd in [*x.nodes, *h_nodes])] + ([sh.inputs[0]] if h_nodes else [])
    if not _inside(internal, nodes) or not _inside([n], nodes):
        return None
    order_h = [gate_of[k]["h"] for k in GATES["GRU"]]
    order_x = [gate_of[k]["x"] for k in GATES["GRU"]]
    hidden = _hidden(h, 3, order_h)
    if hidden["h_in"] is None:
        hidden["h_in"] = h_prev  # a constant: the state the folded term was computed from
    return Step("GRU", out_add, nodes, h_out=out_add.outputs[0], x=x.input, W=_blocks(x.W, 3, order_x),
                Wb=_blocks(x.b, 3, order_x), time=time_index(x.input),
                feeds=[*x.feeds, *(h.feeds if isinstance(h, Linear) else ())], **hidden)


def _same_constant(a: ir.Value, b: ir.Value) -> bool:
    """Two constants holding the same array (the legacy exporter writes the zero state once per use)."""
    x, y = const(a), const(b)
    return x is not None and y is not None and x.shape == y.shape and np.array_equal(x, y)


def find_steps(graph: ir.Graph, misses: Optional[list] = None) -> list[Step]:
    """Every step of every form in `graph` (its own nodes, not its subgraphs'), in graph order; step-like matches
    that are not the cell go to `misses` (Miss) when given."""
    steps = []
    for node in graph:
        if node.domain not in ("", "ai.onnx"):
            continue
        step = None
        if node.op_type in ACTIVATIONS:
            step = rnn_step(node)
        elif node.op_type == "Split" and len(node.outputs) == 4:
            step = lstm_step(node)
        elif node.op_type == "Sub":
            step = gru_step(node)
        if isinstance(step, Miss):
            if misses is not None:
                misses.append(step)
        elif step is not None:
            steps.append(step)
    return steps


@dataclasses.dataclass
class Fusion:
    """A chain of steps and the recurrent node (with glue) that replaces it; `replaced` pairs each value read
    outside the matched nodes with its new value."""

    op: str
    name: str
    matched: list  # the nodes replaced, in graph order
    nodes: list  # the new nodes
    replaced: list  # (old value, new value)
    inputs: list  # the non-constant values the matched nodes read
    new_initializers: list
    what: list
    steps: int
    where: str = ""
    context: list = dataclasses.field(default_factory=list)  # nodes the check runs before both (a Loop's trip count)


def in_order(graph: ir.Graph, nodes: list) -> list:
    ids = {id(n) for n in nodes}
    return [n for n in graph if id(n) in ids]
