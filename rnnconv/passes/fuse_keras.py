"""One recurrent step as Keras 3 writes it (through tf2onnx), recognized; and `find_steps`, every form of every
exporter (passes/fuse_match.py holds PyTorch's and the readers they share).

Keras' LSTMCell and SimpleRNNCell are PyTorch's equations with the bias added after both products, which
fuse_match reads. Its GRUCell (keras/src/layers/rnn/gru.py) differs in form:

Case 1 (reset_after=True, Keras' default; ONNX linear_before_reset=1): x_z, x_r, x_h = Split(x W + b_x);
    h_z, h_r, h_h = blocks of h R + b_h (Slices or a Split); z = Sigmoid(x_z + h_z), r = Sigmoid(x_r + h_r),
    hh = Tanh(x_h + r * h_h); h' = z * h + (1 - z) * hh.
Case 2 (reset_after=False; linear_before_reset=0): h_z, h_r = blocks of h R_zr; hh = Tanh(x_h + (r * h) R_h).
Each gate's role is read from where its value flows (z is what mixes h and hh), each block from its columns.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv.passes import fuse_match
from rnnconv.passes.fuse_match import Linear, Step, _inside, attr, const, ints, linear, only_user, other, producer
from rnnconv.passes.fuse_match import time_index, users


def find_steps(graph: ir.Graph, misses: Optional[list] = None) -> list[Step]:
    """Every step of every form in `graph` (its own nodes, not its subgraphs'), in graph order; step-like matches
    that are not the cell go to `misses` when given."""
    steps = fuse_match.find_steps(graph, misses)
    taken = {id(n) for s in steps for n in s.nodes}
    for node in graph:
        if node.op_type == "Sub" and node.domain in ("", "ai.onnx") and id(node) not in taken:
            step = gru_step(node)
            if step is not None:
                steps.append(step)
    order = {id(n): k for k, n in enumerate(graph)}
    return sorted(steps, key=lambda s: order[id(s.anchor)])


def gru_step(sub: ir.Node) -> Optional[Step]:
    """Cases 1 and 2, found at Sub(1, z)."""
    one, z = const(sub.inputs[0]), producer(sub.inputs[1], "Sigmoid")
    if one is None or one.size != 1 or float(one.reshape(-1)[0]) != 1.0 or z is None:
        return None
    z_val = z.outputs[0]
    mul_hh = only_user(sub.outputs[0], "Mul")
    hh = producer(other(mul_hh, sub.outputs[0]), "Tanh") if mul_hh is not None else None
    out_add = only_user(mul_hh.outputs[0], "Add") if mul_hh is not None else None
    mul_zh = producer(other(out_add, mul_hh.outputs[0]), "Mul") if out_add is not None else None
    if hh is None or mul_zh is None or z_val not in mul_zh.inputs:
        return None
    h_prev = other(mul_zh, z_val)
    n_add = producer(hh.inputs[0], "Add")
    z_parts = _gate(z, h_prev)
    if n_add is None or z_parts is None:
        return None
    found = None
    for x_h, rec in ((n_add.inputs[0], n_add.inputs[1]), (n_add.inputs[1], n_add.inputs[0])):
        found = _candidate(x_h, rec, h_prev)
        if found is not None:
            break
    if found is None:
        return None
    x_piece, r, rec_nodes, h_piece, lin_hh, lbr = found
    r_parts = _gate(r, h_prev)
    if r_parts is None:
        return None
    (xz, hz, z_add), (xr, hr, r_add) = z_parts, r_parts
    x_src = {id(p.source) for p in (xz, xr, x_piece)}
    h_src = {id(p.source) for p in (hz, hr) + ((h_piece,) if h_piece is not None else ())}
    if len(x_src) != 1 or len(h_src) != 1:
        return None
    lin_x, lin_h = xz.lin, hz.lin
    H = h_prev.shape[-1] if h_prev.shape is not None and isinstance(h_prev.shape[-1], int) else xz.width
    if any(p.width != H for p in (xz, xr, x_piece, hz, hr) + ((h_piece,) if h_piece else ())):
        return None
    W = np.concatenate([p.rows(lin_x.W) for p in (xz, xr, x_piece)])
    Wb = None if lin_x.b is None else np.concatenate([p.rows(lin_x.b) for p in (xz, xr, x_piece)])
    if lbr:
        R = np.concatenate([p.rows(lin_h.W) for p in (hz, hr, h_piece)])
        Rb = None if lin_h.b is None else np.concatenate([p.rows(lin_h.b) for p in (hz, hr, h_piece)])
    else:
        R = np.concatenate([hz.rows(lin_h.W), hr.rows(lin_h.W), lin_hh.W])
        parts = [hz.rows(lin_h.b) if lin_h.b is not None else None, hr.rows(lin_h.b) if lin_h.b is not None
                 else None, lin_hh.b]
        Rb = None if all(b is None for b in parts) else np.concatenate(
            [np.zeros(H, W.dtype) if b is None else b for b in parts])
    if R.shape != (3 * H, H) or W.shape[0] != 3 * H:
        return None
    pieces = {id(n): n for p in (xz, xr, x_piece, hz, hr, h_piece) if p is not None for n in p.nodes}
    nodes = [*lin_x.nodes, *lin_h.nodes, *pieces.values(), z_add, z, r_add, r, *rec_nodes, n_add, hh, sub,
             mul_hh, mul_zh, out_add]
    nodes = list({id(n): n for n in nodes}.values())
    internal = [o for n in nodes if n is not out_add for o in n.outputs]
    if not _inside(internal, nodes):
        return None
    return Step("GRU", out_add, nodes, h_in=h_prev, h_out=out_add.outputs[0], R=R, Rb=Rb, x=lin_x.input, W=W,
                Wb=Wb, time=time_index(lin_x.input), feeds=[*lin_x.feeds, *lin_h.feeds,
                                                             *(lin_hh.feeds if lin_hh is not None else ())],
                linear_before_reset=lbr)


class _Piece:
    """Columns [start, end) of a Linear's output, taken by a Split or a Slice along the last axis."""

    def __init__(self, source: ir.Value, lin: Linear, start: int, end: int, nodes: list):
        self.source, self.lin, self.start, self.end, self.nodes = source, lin, start, end, nodes

    @property
    def width(self) -> int:
        return self.end - self.start

    def rows(self, a: np.ndarray) -> np.ndarray:
        return a[self.start:self.end]


def _piece(v: Optional[ir.Value]) -> Optional[_Piece]:
    node = producer(v, "Split", "Slice")
    lin = linear(node.inputs[0]) if node is not None else None
    if lin is None:
        return None
    total, rank = lin.W.shape[0], len(v.shape) if v.shape is not None else 2
    if node.op_type == "Split":
        n = len(node.outputs)
        sizes = ints(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else attr(node, "split")
        sizes = list(sizes) if sizes is not None else [total // n] * n if total % n == 0 else None
        if attr(node, "axis", 0) % rank != rank - 1 or sizes is None or sum(sizes) != total:
            return None
        k = list(node.outputs).index(v)
        return _Piece(node.inputs[0], lin, sum(sizes[:k]), sum(sizes[:k + 1]), [node])
    starts, ends = (ints(node.inputs[k]) if len(node.inputs) > k and node.inputs[k] is not None else None
                    for k in (1, 2))
    axes = ints(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] is not None else None
    steps = ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else None
    if starts is None or ends is None:
        return None
    axes = [a % rank for a in axes] if axes is not None else list(range(len(starts)))
    steps = steps or [1] * len(axes)
    cols = None
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st != 1:
            return None
        if a == rank - 1:
            cols = (max(0, s + total if s < 0 else s), min(total, e + total if e < 0 else e))
        elif s != 0 or e < 2 ** 31 - 1:
            return None  # another axis sliced: not a block of columns
    if cols is None or cols[0] >= cols[1]:
        return None
    return _Piece(node.inputs[0], lin, cols[0], cols[1], [node])


def _gate(act: ir.Node, h_prev: ir.Value):
    """(x piece, h piece, Add) of act(Add(x piece, h piece)), the h piece the one computed from `h_prev`."""
    add = producer(act.inputs[0], "Add")
    if add is None or len(add.inputs) != 2:
        return None
    a, b = _piece(add.inputs[0]), _piece(add.inputs[1])
    if a is None or b is None:
        return None
    if a.lin.input is h_prev and b.lin.input is not h_prev:
        a, b = b, a
    return (a, b, add) if b.lin.input is h_prev and a.lin.input is not h_prev else None


def _candidate(x_h: ir.Value, rec: ir.Value, h_prev: ir.Value):
    """(x piece, r, the recurrent term's nodes, h piece, h Linear, linear_before_reset) of hh's Add."""
    x_piece = _piece(x_h)
    if x_piece is None or x_piece.lin.input is h_prev:
        return None
    mul = producer(rec, "Mul")
    if mul is not None:  # Case 1: r * h_h
        for r_val, h_val in ((mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])):
            r, h_piece = producer(r_val, "Sigmoid"), _piece(h_val)
            if r is not None and h_piece is not None and h_piece.lin.input is h_prev:
                return x_piece, r, [mul], h_piece, None, 1
        return None
    lin_hh = linear(rec)  # Case 2: (r * h) R_h
    mul = producer(lin_hh.input, "Mul") if lin_hh is not None else None
    if mul is None or h_prev not in mul.inputs:
        return None
    r = producer(other(mul, h_prev), "Sigmoid")
    if r is None or len(users(mul.outputs[0])) != 1:
        return None
    return x_piece, r, [mul, *lin_hh.nodes], None, lin_hh, 0
