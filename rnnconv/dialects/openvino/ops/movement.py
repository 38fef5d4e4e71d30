"""Data movement, both ways: Transpose, Reshape / Flatten, Squeeze / Unsqueeze, Concat, Split, Slice, Gather, Tile,
Pad, ReverseSequence, Identity."""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.dialects.openvino import shapes
from rnnconv.dialects.openvino.graph import Out
from rnnconv.dialects.openvino.ops.table import (
    Context,
    attr,
    ints_attr,
    mapping,
    np_type,
    reverse,
)
from rnnconv.dialects.openvino.registry import READ_ONLY, shape, without
from rnnconv.errors import Unsupported


@mapping("Transpose", "Transpose-opset1", reversible=True)
def transpose(ctx, node):
    """ONNX Transpose (onnx__Transpose; no perm reverses) -> OpenVINO Transpose-1 (empty order reverses)."""
    perm = ints_attr(node, "perm")
    x = ctx.inp(node, 0)
    if perm is None:
        perm = list(range(len(x.dims) - 1, -1, -1)) if x.dims is not None else []
    return [ctx.g.op("Transpose", x, ctx.i64(perm), name=node.name or None)]


@reverse("Transpose")
def _from_transpose(ctx):
    """OpenVINO Transpose-1 (order input; empty reverses) -> ONNX Transpose (onnx__Transpose, perm attribute)."""
    order = ctx.need_const(1, "the order")
    dims = ctx.dims(0)
    perm = [int(p) for p in order.reshape(-1)]
    if not perm:
        if dims is None:
            raise ctx.unsupported("an empty order on an input of unknown rank")
        perm = list(range(len(dims) - 1, -1, -1))
    return [ctx.b.transpose(ctx.v(0), perm, hint=ctx.hint)]


@mapping("Reshape", "Reshape-opset1", reversible=True)
def reshape(ctx, node):
    """ONNX Reshape (onnx__Reshape; 0 copies a dim unless allowzero) -> OpenVINO Reshape-1 (special_zero)."""
    if ctx.opset < 5:
        shape = ctx.i64(ints_attr(node, "shape"))
    else:
        shape = ctx.inp(node, 1)
    return [ctx.g.op("Reshape", ctx.inp(node, 0), shape, special_zero=not attr(node, "allowzero", 0),
                     name=node.name or None)]


@reverse("Reshape")
def _from_reshape(ctx):
    """OpenVINO Reshape-1 (special_zero: 0 copies the input dim) -> ONNX Reshape (onnx__Reshape: 0 copies unless
    allowzero=1, opset 14)."""
    special_zero = ctx.flag("special_zero")
    target = ctx.c(1)
    shape = ctx.as_i64(1, "shape")  # ONNX Reshape takes int64 only
    if special_zero or (target is not None and not np.any(target == 0)):
        return [ctx.b.op1("Reshape", ctx.v(0), shape, hint=ctx.hint)]
    if ctx.opset < 14:
        raise ctx.unsupported("special_zero=false with a target that may hold 0 needs ONNX Reshape allowzero "
                              "(opset 14)", opset=14)
    return [ctx.b.op1("Reshape", ctx.v(0), shape, allowzero=1, hint=ctx.hint)]


def flatten2d(ctx: Context, x: Out, axis: int) -> Out:
    """[d0..d(axis-1), d(axis)..] -> [prod(:axis), prod(axis:)] (ONNX Flatten semantics) with Reshape-1."""
    dims = x.dims
    if dims is None:
        raise Unsupported("Flatten/Softmax on a tensor of unknown rank")
    rank = len(dims)
    axis = axis + rank if axis < 0 else axis
    head, tail = dims[:axis], dims[axis:]
    if all(d >= 0 for d in head):
        target = ctx.i64([int(np.prod(head, dtype=np.int64)), -1])
    elif all(d >= 0 for d in tail):
        target = ctx.i64([-1, int(np.prod(tail, dtype=np.int64))])
    else:
        shape = ctx.g.op("ShapeOf", x, output_type="i64", version="opset3")
        lead = ctx.g.op("Slice", shape, ctx.i64([0]), ctx.i64([axis]), ctx.i64([1]), version="opset8")
        prod = ctx.g.op("ReduceProd", lead, ctx.i64([0]), keep_dims=True)
        target = ctx.g.op("Concat", prod, ctx.i64([-1]), axis=0)
    return ctx.g.op("Reshape", x, target, special_zero=False)


@mapping("Flatten", "Reshape-opset1")
def flatten(ctx, node):
    """ONNX Flatten (onnx__Flatten, axis default 1) -> OpenVINO Reshape-1 to [prod(:axis), prod(axis:)]."""
    return [flatten2d(ctx, ctx.inp(node, 0), int(attr(node, "axis", 1)))]


def _axes(ctx, node, since_input: int) -> Optional[Out]:
    if ctx.opset >= since_input:
        return ctx.inp(node, 1)
    axes = ints_attr(node, "axes")
    return None if axes is None else ctx.i64(axes)


@mapping("Squeeze", "Squeeze-opset1", reversible=True)
def squeeze(ctx, node):
    """ONNX Squeeze (onnx__Squeeze; axes input from 13) -> OpenVINO Squeeze-1."""
    axes = _axes(ctx, node, 13)
    x = ctx.inp(node, 0)
    return [ctx.g.op("Squeeze", *([x, axes] if axes is not None else [x]), name=node.name or None)]


@mapping("Unsqueeze", "Unsqueeze-opset1", reversible=True)
def unsqueeze(ctx, node):
    """ONNX Unsqueeze (onnx__Unsqueeze; axes input from 13) -> OpenVINO Unsqueeze-1."""
    return [ctx.g.op("Unsqueeze", ctx.inp(node, 0), _axes(ctx, node, 13), name=node.name or None)]


@reverse("Squeeze", "Unsqueeze")
def _from_squeeze(ctx):
    """OpenVINO Squeeze-1 (optional axes) / Unsqueeze-1 -> ONNX Squeeze / Unsqueeze (onnx__Squeeze,
    onnx__Unsqueeze: axes input from 13, attribute before)."""
    onnx_op = ctx.layer.type
    if len(ctx.keys) < 2:
        return [ctx.b.op1(onnx_op, ctx.v(0), hint=ctx.hint)]
    if ctx.opset >= 13:
        return [ctx.b.op1(onnx_op, ctx.v(0), ctx.axes(1), hint=ctx.hint)]
    axes = ctx.need_const(1, "the axes")
    return [ctx.b.op1(onnx_op, ctx.v(0), axes=[int(a) for a in axes.reshape(-1)], hint=ctx.hint)]


@mapping("Concat", "Concat-opset1", reversible=True)
def concat(ctx, node):
    """ONNX Concat (onnx__Concat) -> OpenVINO Concat-1 (same axis, negative allowed)."""
    args = [ctx.inp(node, i) for i in range(len(node.inputs))]
    return [ctx.g.op("Concat", *[a for a in args if a is not None], axis=int(attr(node, "axis")),
                     name=node.name or None)]


@reverse("Concat")
def _from_concat(ctx):
    """OpenVINO Concat-1 (axis, negative allowed) -> ONNX Concat (onnx__Concat)."""
    return [ctx.b.op1("Concat", *[ctx.v(i) for i in range(len(ctx.keys))], axis=int(ctx.attr("axis")),
                      hint=ctx.hint)]


@mapping("Split", "Split-opset1", "VariadicSplit-opset1")
def split(ctx, node):
    """ONNX Split (onnx__Split; `split` attribute before 13, input from 13, num_outputs from 18) ->
    OpenVINO Split-1 (equal parts) or VariadicSplit-1 (given lengths)."""
    x = ctx.inp(node, 0)
    axis = int(attr(node, "axis", 0))
    n = len(node.outputs)
    if ctx.opset >= 13:
        sizes = ctx.inp(node, 1)
    else:
        s = ints_attr(node, "split")
        sizes = None if s is None else ctx.i64(s)
    if sizes is None and x.dims is not None:
        ax = axis + len(x.dims) if axis < 0 else axis
        total = x.dims[ax]
        if total >= 0:
            # opset 18 num_outputs: equal chunks of ceil(total / n), the last smaller. A known size is always
            # written as VariadicSplit: OpenVINO 2026.4's CPU plugin aborts ("free(): invalid pointer") compiling
            # Sequence -> Transpose -> Split -> Squeeze -> Concat, and not with VariadicSplit (measured).
            chunk = -(-total // n)
            sizes = ctx.i64([chunk] * (n - 1) + [total - chunk * (n - 1)])
    if sizes is None:
        return ctx.g.add("Split", [x, ctx.i64(axis)], {"num_splits": n}, name=node.name or None)
    return ctx.g.add("VariadicSplit", [x, ctx.i64(axis), sizes], name=node.name or None)


@reverse("Split")
def _from_split(ctx):
    """OpenVINO Split-1 (num_splits equal parts along a constant axis) -> ONNX Split (onnx__Split; equal parts
    without `split`, num_outputs from 18)."""
    axis = int(ctx.need_const(1, "the axis").reshape(-1)[0])
    n = int(ctx.attr("num_splits"))
    attrs = {"axis": axis}
    if ctx.opset >= 18:
        attrs["num_outputs"] = n
    return ctx.b.op("Split", [ctx.v(0)], attrs, n_out=n, hint=ctx.hint)


@reverse("VariadicSplit")
def _from_variadic_split(ctx):
    """OpenVINO VariadicSplit-1 (axis, lengths; one may be -1) -> ONNX Split (onnx__Split) with `split` (an
    input from 13)."""
    axis = int(ctx.need_const(1, "the axis").reshape(-1)[0])
    lengths = [int(v) for v in ctx.need_const(2, "the split lengths").reshape(-1)]
    if -1 in lengths:
        dims = ctx.dims(0)
        total = None if dims is None else dims[axis]
        if total is None or total < 0:
            raise ctx.unsupported("a -1 split length on a dynamic axis")
        lengths[lengths.index(-1)] = total - sum(v for v in lengths if v != -1)
    if ctx.opset >= 13:
        return ctx.b.op("Split", [ctx.v(0), ctx.b.i64(lengths, "split")], {"axis": axis}, n_out=len(lengths),
                        hint=ctx.hint)
    return ctx.b.op("Split", [ctx.v(0)], {"axis": axis, "split": lengths}, n_out=len(lengths), hint=ctx.hint)


@mapping("Slice", "Slice-opset8", reversible=True)
def slice_(ctx, node):
    """ONNX Slice (onnx__Slice; attributes before 10, inputs starts/ends/axes/steps from 10) -> OpenVINO
    Slice-8 (start, stop, step, axes), both clamping like Python slicing."""
    x = ctx.inp(node, 0)
    if ctx.opset < 10:
        starts, ends = ctx.i64(ints_attr(node, "starts")), ctx.i64(ints_attr(node, "ends"))
        axes_l = ints_attr(node, "axes")
        axes = ctx.i64(axes_l) if axes_l is not None else None
        steps = None
    else:
        starts, ends, axes, steps = ctx.inp(node, 1), ctx.inp(node, 2), ctx.inp(node, 3), ctx.inp(node, 4)
    if steps is None:
        if starts.const is not None:
            steps = ctx.i64(np.ones(starts.const.size, dtype=np.int64))
        else:
            steps = ctx.g.op("Broadcast", ctx.i64(1), ctx.g.op("ShapeOf", starts, output_type="i64",
                                                                version="opset3"), mode="numpy", version="opset3")
    args = [x, starts, ends, steps] + ([axes] if axes is not None else [])
    return [ctx.g.op("Slice", *args, version="opset8", name=node.name or None)]


@reverse("Slice")
def _from_slice(ctx):
    """OpenVINO Slice-8 (start, stop, step[, axes]) -> ONNX Slice (onnx__Slice, opset 10: starts, ends, axes,
    steps); both clamp like Python slicing."""
    if ctx.opset < 10:
        raise ctx.unsupported("ONNX Slice takes starts/ends as inputs from opset 10", opset=10)
    args = [ctx.v(0), ctx.as_i64(1), ctx.as_i64(2)]
    args += [ctx.as_i64(4) if len(ctx.keys) > 4 else None, ctx.as_i64(3)]
    return [ctx.b.op1("Slice", *args, hint=ctx.hint)]


@mapping("Gather", "Gather-opset8", reversible=True)
def gather(ctx, node):
    """ONNX Gather (onnx__Gather; embedding lookups) -> OpenVINO Gather-8 (batch_dims 0, negative indices)."""
    return [ctx.g.op("Gather", ctx.inp(node, 0), ctx.inp(node, 1), ctx.i64(int(attr(node, "axis", 0))),
                     batch_dims=0, version="opset8", name=node.name or None)]


@reverse("Gather")
def _from_gather(ctx):
    """OpenVINO Gather-1/7/8 (constant axis input, batch_dims 0) -> ONNX Gather (onnx__Gather, axis attribute)."""
    if int(ctx.attr("batch_dims", "0")) != 0:
        raise ctx.unsupported("batch_dims != 0 (ONNX Gather has none)")
    axis = int(ctx.need_const(2, "the axis").reshape(-1)[0])
    return [ctx.b.op1("Gather", ctx.v(0), ctx.v(1), axis=axis, hint=ctx.hint)]


@mapping("Tile", "Tile-opset1", reversible=True)
def tile(ctx, node):
    """ONNX Tile (onnx__Tile, repeats per axis) -> OpenVINO Tile-1 (same inputs)."""
    return [ctx.g.op("Tile", ctx.inp(node, 0), ctx.inp(node, 1), name=node.name or None)]


@reverse("Tile")
def _from_tile(ctx):
    """OpenVINO Tile-1 (integer repeats of any length: a shorter one is promoted with leading 1s, a longer one
    gives data leading axes of size 1) -> ONNX Tile (onnx__Tile: int64 repeats, one per input axis), after an
    Unsqueeze of the data or with the repeats padded where the lengths differ."""
    x_dims, r_dims = ctx.dims(0), ctx.dims(1)
    if x_dims is None or r_dims is None or len(r_dims) != 1 or r_dims[0] < 0:
        raise ctx.unsupported("repeats of unknown length, or data of unknown rank")
    rank, n = len(x_dims), r_dims[0]
    x = ctx.v(0) if n <= rank else ctx.b.axes_op("Unsqueeze", ctx.v(0), range(n - rank))
    ones, c = np.ones(max(rank - n, 0), dtype=np.int64), ctx.c(1)
    if c is not None:
        repeats = ctx.b.i64(np.concatenate([ones, c.reshape(-1).astype(np.int64)]), "repeats")
    else:
        repeats = ctx.v_i64(1)
        if n < rank:
            repeats = ctx.b.op1("Concat", ctx.b.i64(ones, "repeats"), repeats, axis=0)
    return [ctx.b.op1("Tile", x, repeats, hint=ctx.hint)]



# -- Pad ----------------------------------------------------------------------------------------------------
@mapping("Pad", "Pad-opset12")
def pad(ctx, node):
    """ONNX Pad (onnx__Pad: pads [begins, ends] as an attribute before 11, an input from 11; mode constant / edge
    / reflect; constant_value) -> OpenVINO Pad-12 (pads_begin, pads_end, pad_value; negative pads crop in both)."""
    x = ctx.inp(node, 0)
    mode = attr(node, "mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("constant", "edge", "reflect"):
        raise Unsupported(f"Pad node {node.name!r}: mode {mode!r} has no OpenVINO Pad mode")
    if ctx.opset < 11:
        pads = ints_attr(node, "pads")
        value = ctx.const(np.array(attr(node, "value", 0.0), dtype=np_type(x)))
    else:
        c = ctx.const_input(node, 1)
        if c is None or (len(node.inputs) > 3 and ctx.inp(node, 3) is not None):
            raise Unsupported(f"Pad node {node.name!r}: pads computed at run time, or axes; rnnconv maps constant "
                              "pads over every axis")
        pads = [int(v) for v in c.reshape(-1)]
        value = ctx.inp(node, 2)
        if value is None:
            value = ctx.const(np.array(0, dtype=np_type(x)))
    n = len(pads) // 2
    return [ctx.g.op("Pad", x, ctx.i64(pads[:n]), ctx.i64(pads[n:]), value, pad_mode=mode, version="opset12",
                     name=node.name or None)]


@reverse("Pad")
def _from_pad(ctx):
    """OpenVINO Pad-1/12 (pads_begin, pads_end inputs, negative from 12 to crop; pad_value; pad_mode constant /
    edge / reflect / symmetric) -> ONNX Pad (onnx__Pad: pads [begins, ends] an input from 11, an attribute
    before; modes constant / edge / reflect). Symmetric (the edge repeated) has no ONNX mode: each padded axis
    becomes a Concat of reversed Slices (onnx__Slice, onnx__Concat) of the data, for constant pads."""
    mode = ctx.attr("pad_mode", "constant").lower()
    b = ctx.b
    if mode == "symmetric":
        return [_symmetric_pad(ctx)]
    if mode not in ("constant", "edge", "reflect"):
        raise ctx.unsupported(f"pad_mode={mode!r}")
    begin, end = ctx.c(1), ctx.c(2)
    x = ctx.v(0)
    if begin is not None and end is not None and min(begin.min(initial=0), end.min(initial=0)) < 0:
        # Negative pads crop: a Slice first, then padding only (the pads every ONNX runtime takes).
        if ctx.opset < 10:
            raise ctx.unsupported("negative pads are written as an ONNX Slice with inputs (opset 10)", opset=10)
        big = np.iinfo(np.int64).max
        begin, end = begin.reshape(-1).astype(np.int64), end.reshape(-1).astype(np.int64)
        axes = [a for a in range(begin.size) if begin[a] < 0 or end[a] < 0]
        x = b.op1("Slice", x, b.i64([max(-int(begin[a]), 0) for a in axes], "starts"),
                  b.i64([-int(end[a]) if end[a] < 0 else big for a in axes], "ends"), b.i64(axes, "axes"))
        begin, end = np.maximum(begin, 0), np.maximum(end, 0)
    if ctx.opset < 11:
        if begin is None or end is None:
            raise ctx.unsupported("pads computed at run time need ONNX Pad-11 (pads as an input)", opset=11)
        value = 0.0
        if mode == "constant" and len(ctx.keys) > 3:
            value = float(np.asarray(ctx.need_const(3, "the pad value")).reshape(-1)[0])
        return [b.op1("Pad", x, mode=mode, pads=[int(v) for v in np.concatenate([begin.reshape(-1),
                                                                                  end.reshape(-1)])],
                      value=value, hint=ctx.hint)]
    if begin is not None and end is not None:
        pads = b.i64(np.concatenate([begin.reshape(-1), end.reshape(-1)]).astype(np.int64), "pads")
    else:
        pads = b.op1("Concat", ctx.v_i64(1), ctx.v_i64(2), axis=0)
    args = [x, pads]
    if mode == "constant" and len(ctx.keys) > 3:
        args.append(ctx.v(3) if ctx.dims(3) == [] else b.op1("Reshape", ctx.v(3), b.i64([], "scalar")))
    return [b.op1("Pad", *args, mode=mode, hint=ctx.hint)]


def _symmetric_pad(ctx):
    begin = [int(v) for v in ctx.need_const(1, "pads_begin").reshape(-1)]
    end = [int(v) for v in ctx.need_const(2, "pads_end").reshape(-1)]
    if ctx.opset < 10:
        raise ctx.unsupported("symmetric padding is written with ONNX Slice steps (opset 10)", opset=10)
    if min(begin + end) < 0:
        raise ctx.unsupported("symmetric padding with negative pads")
    b, x = ctx.b, ctx.v(0)
    low = np.iinfo(np.int64).min
    for axis, (p0, p1) in enumerate(zip(begin, end)):
        parts = []
        if p0:  # x[p0-1::-1] along axis: the first p0 items, mirrored
            parts.append(b.op1("Slice", x, b.i64([p0 - 1], "starts"), b.i64([low], "ends"), b.i64([axis], "axes"),
                               b.i64([-1], "steps")))
        parts.append(x)
        if p1:  # x[-1:-p1-1:-1]: the last p1 items, mirrored
            parts.append(b.op1("Slice", x, b.i64([-1], "starts"), b.i64([-p1 - 1], "ends"), b.i64([axis], "axes"),
                               b.i64([-1], "steps")))
        if len(parts) > 1:
            x = b.op1("Concat", *parts, axis=axis)
    return b.op1("Identity", x, hint=ctx.hint)


@mapping("ReverseSequence", "ReverseSequence-opset1", reversible=True)
def reverse_sequence(ctx, node):
    """ONNX ReverseSequence (onnx__ReverseSequence, opset 10: batch_axis, time_axis, int64 sequence_lens) ->
    OpenVINO ReverseSequence-1 (batch_axis, seq_axis)."""
    return [ctx.g.op("ReverseSequence", ctx.inp(node, 0), ctx.inp(node, 1), batch_axis=int(attr(node, "batch_axis", 1)),
                     seq_axis=int(attr(node, "time_axis", 0)), name=node.name or None)]


@reverse("ReverseSequence")
def _from_reverse_sequence(ctx):
    """OpenVINO ReverseSequence-1 (the first seq_lengths[b] items of each batch entry b reversed along seq_axis;
    batch_axis, seq_axis, negative from the end) -> ONNX ReverseSequence (onnx__ReverseSequence, opset 10:
    batch_axis and time_axis 0 or 1 of a tensor of rank >= 2, int64 lengths), through a Transpose when the axes
    lie elsewhere."""
    if ctx.opset < 10:
        raise ctx.unsupported("ONNX ReverseSequence is new in opset 10", opset=10)
    dims = ctx.dims(0)
    if dims is None:
        raise ctx.unsupported("data of unknown rank")
    rank = len(dims)
    b_axis, t_axis = int(ctx.attr("batch_axis", "0")) % rank, int(ctx.attr("seq_axis", "1")) % rank
    b = ctx.b
    lens = ctx.as_i64(1, "sequence_lens")
    if {b_axis, t_axis} == {0, 1}:
        return [b.op1("ReverseSequence", ctx.v(0), lens, batch_axis=b_axis, time_axis=t_axis, hint=ctx.hint)]
    perm = [t_axis, b_axis] + [a for a in range(rank) if a not in (t_axis, b_axis)]
    y = b.op1("ReverseSequence", b.transpose(ctx.v(0), perm), lens, batch_axis=1, time_axis=0)
    return [b.transpose(y, list(np.argsort(perm)), hint=ctx.hint)]


@reverse("Identity")
def _from_identity(ctx):
    """OpenVINO Identity-16 (a copy of its input) -> ONNX Identity (onnx__Identity)."""
    return [ctx.b.op1("Identity", ctx.v(0), hint=ctx.hint)]


# -- shape rules -----------------------------------------------------------------------------------------------
shape("ReverseSequence")(shapes.like_input)
without("shape", "Identity", why=READ_ONLY)


@shape("Tile")
def _tile_shape(layer, inputs, d, c, et):
    if d[0] is None or c[1] is None:
        return [(et, None if d[0] is None else [-1] * max(len(d[0]), d[1][0] if d[1] else 0))]
    reps = [int(v) for v in c[1].reshape(-1)]
    n = max(len(d[0]), len(reps))
    x = [1] * (n - len(d[0])) + list(d[0])
    reps = [1] * (n - len(reps)) + reps
    return [(et, [a * r if a >= 0 else -1 for a, r in zip(x, reps)])]


@shape("Transpose")
def _transpose_shape(layer, inputs, d, c, et):
    if d[0] is None:
        return [(et, None)]
    if c[1] is None:
        return [(et, [-1] * len(d[0]))]
    order = [int(o) for o in c[1].reshape(-1)] or list(range(len(d[0]) - 1, -1, -1))
    return [(et, [d[0][o] for o in order])]


@shape("Reshape")
def _reshape_shape(layer, inputs, d, c, et):
    if c[1] is None:
        n = d[1][0] if d[1] else -1
        return [(et, None if n < 0 else [-1] * n)]
    target = [int(v) for v in c[1].reshape(-1)]
    special_zero = shapes.flag(layer.attrs, "special_zero")
    out = [(d[0][i] if d[0] is not None and i < len(d[0]) else -1) if (v == 0 and special_zero) else v
           for i, v in enumerate(target)]
    if -1 in out and d[0] is not None and all(x >= 0 for x in d[0]) and out.count(-1) == 1:
        known = int(np.prod([x for x in out if x != -1], dtype=np.int64))
        total = int(np.prod(d[0], dtype=np.int64))
        out[out.index(-1)] = total // known if known else 0
    return [(et, out)]


@shape("Squeeze", "Unsqueeze")
def _squeeze_shape(layer, inputs, d, c, et):
    if d[0] is None:
        return [(et, None)]
    if len(inputs) < 2:
        return [(et, [x for x in d[0] if x != 1])]
    if c[1] is None:
        return [(et, None)]
    axes = [int(v) for v in c[1].reshape(-1)]
    if layer.type == "Squeeze":
        axes = {shapes.axis(x, len(d[0])) for x in axes}
        return [(et, [x for i, x in enumerate(d[0]) if i not in axes])]
    rank = len(d[0]) + len(axes)
    axes = sorted(shapes.axis(x, rank) for x in axes)
    out, it = [], iter(d[0])
    for i in range(rank):
        out.append(1 if i in axes else next(it))
    return [(et, out)]


@shape("Concat")
def _concat_shape(layer, inputs, d, c, et):
    if any(x is None for x in d):
        return [(et, None)]
    ax = shapes.axis(int(layer.attrs["axis"]), len(d[0]))
    out = list(d[0])
    for x in d[1:]:
        for i, v in enumerate(x):
            if i != ax and out[i] == -1:
                out[i] = v
    out[ax] = -1 if any(x[ax] < 0 for x in d) else sum(x[ax] for x in d)
    return [(et, out)]


@shape("Split")
def _split_shape(layer, inputs, d, c, et):
    n = int(layer.attrs["num_splits"])
    if d[0] is None or c[1] is None:
        return [(et, d[0])] * n
    ax = shapes.axis(int(c[1].reshape(-1)[0]), len(d[0]))
    out = list(d[0])
    out[ax] = out[ax] // n if out[ax] >= 0 else -1
    return [(et, out)] * n


@shape("VariadicSplit")
def _variadic_split_shape(layer, inputs, d, c, et):
    lengths = [int(v) for v in c[2].reshape(-1)]
    ax = shapes.axis(int(c[1].reshape(-1)[0]), len(d[0]))
    outs = []
    for n in lengths:
        out = list(d[0])
        if n == -1:
            rest = sum(x for x in lengths if x != -1)
            out[ax] = d[0][ax] - rest if d[0][ax] >= 0 else -1
        else:
            out[ax] = n
        outs.append((et, out))
    return outs


@shape("Slice")
def _slice_shape(layer, inputs, d, c, et):
    if d[0] is None:
        return [(et, None)]
    out = list(d[0])
    if len(inputs) > 4 and c[4] is None:
        return [(et, [-1] * len(out))]
    axes = [int(v) for v in c[4].reshape(-1)] if len(inputs) > 4 else list(range(len(c[1].reshape(-1)) if
                                                                                c[1] is not None else 0))
    for j, ax in enumerate(axes):
        ax = shapes.axis(ax, len(out))
        if out[ax] >= 0 and all(x is not None for x in c[1:4]):
            start, stop, step = (int(c[k].reshape(-1)[j]) for k in (1, 2, 3))
            out[ax] = len(range(*slice(start, stop, step).indices(out[ax])))
        else:
            out[ax] = -1
    if len(inputs) <= 4 and c[1] is None:
        out = [-1] * len(out)
    return [(et, out)]


@shape("Gather")
def _gather_shape(layer, inputs, d, c, et):
    if d[0] is None or d[1] is None or c[2] is None:
        return [(et, None)]
    ax = shapes.axis(int(c[2].reshape(-1)[0]), len(d[0]))
    return [(et, d[0][:ax] + d[1] + d[0][ax + 1:])]


@shape("Pad")
def _pad_shape(layer, inputs, d, c, et):
    if d[0] is None or c[1] is None or c[2] is None:
        return [(et, None if d[0] is None else [-1] * len(d[0]))]
    return [(et, [x + int(p) + int(q) if x >= 0 else -1 for x, p, q in zip(d[0], c[1].reshape(-1),
                                                                            c[2].reshape(-1))])]
