"""Matrix products, softmax, reductions, CumSum, Einsum and scaled dot-product attention, both ways."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino import shapes
from rnnconv.dialects.openvino.ops.movement import flatten2d
from rnnconv.dialects.openvino.ops.table import (
    attr,
    ints_attr,
    mapping,
    np_type,
    reverse,
)
from rnnconv.dialects.openvino.registry import READ_ONLY, shape, without
from rnnconv.errors import Unsupported


@mapping("MatMul", "MatMul-opset1", reversible=True)
def matmul(ctx, node):
    """ONNX MatMul (onnx__MatMul, numpy matmul) -> OpenVINO MatMul-1 with transpose_a = transpose_b = false."""
    return [ctx.g.op("MatMul", ctx.inp(node, 0), ctx.inp(node, 1), transpose_a=False, transpose_b=False,
                     name=node.name or None)]


def _swap_last(ctx, i: int) -> ir.Value:
    dims = ctx.dims(i)
    if dims is None:
        raise ctx.unsupported("transpose_a/transpose_b on an input of unknown rank")
    if len(dims) < 2:
        return ctx.v(i)
    c = ctx.c(i)
    if c is not None:
        return ctx.b.const(np.swapaxes(c, -1, -2), "transposed")
    perm = list(range(len(dims)))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return ctx.b.transpose(ctx.v(i), perm)


@reverse("MatMul")
def _from_matmul(ctx):
    """OpenVINO MatMul-1 (transpose_a, transpose_b on the last two axes) -> ONNX MatMul (onnx__MatMul) after a
    Transpose of the flagged operands."""
    a = _swap_last(ctx, 0) if ctx.flag("transpose_a") else ctx.v(0)
    b = _swap_last(ctx, 1) if ctx.flag("transpose_b") else ctx.v(1)
    return [ctx.b.op1("MatMul", a, b, hint=ctx.hint)]


@mapping("Gemm", "MatMul-opset1", "Multiply-opset1", "Add-opset1")
def gemm(ctx, node):
    """ONNX Gemm (onnx__Gemm: alpha * A' B' + beta * C) -> OpenVINO MatMul-1 (transpose_a/b) then Multiply-1 and
    Add-1 when alpha, beta or C ask for them."""
    a, b, c = ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2)
    alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
    y = ctx.g.op("MatMul", a, b, transpose_a=bool(attr(node, "transA", 0)), transpose_b=bool(attr(node, "transB", 0)))
    np_t = np_type(a)
    if alpha != 1.0:
        y = ctx.g.op("Multiply", y, ctx.const(np.array(alpha, dtype=np_t)))
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = ctx.g.op("Multiply", c, ctx.const(np.array(beta, dtype=np_t)))
        y = ctx.g.op("Add", y, c)
    return [y]


# -- softmax family ----------------------------------------------------------------------------------------
def _softmax(ctx, node, ov_op, version):
    x = ctx.inp(node, 0)
    rank = len(x.dims) if x.dims is not None else None
    if ctx.opset >= 13:
        axis = int(attr(node, "axis", -1))
        return [ctx.g.op(ov_op, x, axis=axis, version=version, name=node.name or None)]
    axis = int(attr(node, "axis", 1))
    if rank is None:
        raise Unsupported(f"{node.op_type} node {node.name!r}: opset {ctx.opset} softmax needs the input rank")
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1:
        return [ctx.g.op(ov_op, x, axis=axis, version=version, name=node.name or None)]
    # Before opset 13 softmax runs over the input flattened to 2-D at `axis`.
    flat = flatten2d(ctx, x, axis)
    y = ctx.g.op(ov_op, flat, axis=1, version=version)
    shape = ctx.g.op("ShapeOf", x, output_type="i64", version="opset3")
    return [ctx.g.op("Reshape", y, shape, special_zero=False, name=node.name or None)]


@mapping("Softmax", "SoftMax-opset8", reversible=True)
def softmax(ctx, node):
    """ONNX Softmax (onnx__Softmax; before 13 over the 2-D flattening at `axis`) -> OpenVINO SoftMax-8."""
    return _softmax(ctx, node, "SoftMax", "opset8")


@mapping("LogSoftmax", "LogSoftmax-opset5", reversible=True)
def log_softmax(ctx, node):
    """ONNX LogSoftmax (onnx__LogSoftmax) -> OpenVINO LogSoftmax-5."""
    return _softmax(ctx, node, "LogSoftmax", "opset5")


_SOFTMAX_ONNX = {"SoftMax": "Softmax", "LogSoftmax": "LogSoftmax"}


@reverse(*_SOFTMAX_ONNX)
def _from_softmax(ctx):
    """OpenVINO SoftMax-1/8, LogSoftmax-5 (one axis) -> ONNX Softmax / LogSoftmax (onnx__Softmax,
    onnx__LogSoftmax: one axis from opset 13; before, the last axis only)."""
    onnx_op = _SOFTMAX_ONNX[ctx.layer.type]
    axis = int(ctx.attr("axis", "1"))
    if ctx.opset >= 13:
        return [ctx.b.op1(onnx_op, ctx.v(0), axis=axis, hint=ctx.hint)]
    dims = ctx.dims(0)
    if dims is None or (axis % len(dims)) != len(dims) - 1:
        raise ctx.unsupported(f"{onnx_op} over a non-last axis before opset 13 (ONNX flattens there)", opset=13)
    return [ctx.b.op1(onnx_op, ctx.v(0), axis=len(dims) - 1, hint=ctx.hint)]


# -- reductions --------------------------------------------------------------------------------------------
def _axes_from_input(onnx_op: str, opset: int) -> bool:
    return opset >= 18 or (onnx_op == "ReduceSum" and opset >= 13)


def reduce(ctx, node):
    """ONNX ReduceMean / ReduceSum / ReduceMax (onnx__ReduceMean; axes attribute before 18, ReduceSum's before 13,
    an input after; keepdims) -> OpenVINO ReduceMean-1 / ReduceSum-1 / ReduceMax-1 (axes input, keep_dims)."""
    x = ctx.inp(node, 0)
    keep = bool(attr(node, "keepdims", 1))
    if _axes_from_input(node.op_type, ctx.opset):
        axes_out = ctx.inp(node, 1)
        if axes_out is None or (axes_out.const is not None and axes_out.const.size == 0):
            if attr(node, "noop_with_empty_axes", 0):
                return [x]
            axes_out = None
    else:
        axes = ints_attr(node, "axes")
        axes_out = ctx.i64(axes) if axes else None
    if axes_out is None:
        if x.dims is None:
            raise Unsupported(f"{node.op_type} node {node.name!r}: reducing every axis needs the input rank")
        axes_out = ctx.i64(list(range(len(x.dims))))
    return [ctx.g.op(node.op_type, x, axes_out, keep_dims=keep, name=node.name or None)]


for _op in ("ReduceMean", "ReduceSum", "ReduceMax"):
    mapping(_op, f"{_op}-opset1", reversible=True)(reduce)


@reverse("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2")
def _from_reduce(ctx):
    """OpenVINO ReduceMean-1 / ReduceSum-1 / ReduceMax-1 / ReduceMin-1 / ReduceProd-1 / ReduceL1-4 / ReduceL2-4
    (axes input, keep_dims) -> ONNX ReduceMean ... (onnx__ReduceMean: axes attribute before 18, ReduceSum before
    13; keepdims)."""
    onnx_op = ctx.layer.type
    keep = int(ctx.flag("keep_dims"))
    axes = ctx.c(1)
    if axes is not None and axes.size == 0:
        return [ctx.b.op1("Identity", ctx.v(0), hint=ctx.hint)]
    if _axes_from_input(onnx_op, ctx.opset):
        return [ctx.b.op1(onnx_op, ctx.v(0), ctx.axes(1), keepdims=keep, hint=ctx.hint)]
    axes = ctx.need_const(1, "the axes")
    return [ctx.b.op1(onnx_op, ctx.v(0), axes=[int(a) for a in axes.reshape(-1)], keepdims=keep, hint=ctx.hint)]


# -- CumSum, Einsum, attention -----------------------------------------------------------------------------
@mapping("CumSum", "CumSum-opset3", reversible=True)
def cumsum(ctx, node):
    """ONNX CumSum (onnx__CumSum, opset 11: axis input, exclusive, reverse) -> OpenVINO CumSum-3 (the same)."""
    return [ctx.g.op("CumSum", ctx.inp(node, 0), ctx.inp(node, 1), exclusive=bool(attr(node, "exclusive", 0)),
                     reverse=bool(attr(node, "reverse", 0)), version="opset3", name=node.name or None)]


@reverse("CumSum")
def _from_cumsum(ctx):
    """OpenVINO CumSum-3 (axis input, 0 when absent; exclusive, reverse) -> ONNX CumSum (onnx__CumSum, opset 11)."""
    if ctx.opset < 11:
        raise ctx.unsupported("ONNX CumSum is new in opset 11", opset=11)
    axis = ctx.as_i64(1, "axis") if len(ctx.keys) > 1 else ctx.b.i64(0, "axis")
    return [ctx.b.op1("CumSum", ctx.v(0), axis, exclusive=int(ctx.flag("exclusive")),
                      reverse=int(ctx.flag("reverse")), hint=ctx.hint)]


@mapping("Einsum", "Einsum-opset7", reversible=True)
def einsum(ctx, node):
    """ONNX Einsum (onnx__Einsum, opset 12: equation) -> OpenVINO Einsum-7 (the same equation syntax)."""
    eq = attr(node, "equation")
    eq = eq.decode() if isinstance(eq, bytes) else eq
    return [ctx.g.op("Einsum", *[ctx.inp(node, i) for i in range(len(node.inputs))], equation=eq,
                     version="opset7", name=node.name or None)]


@reverse("Einsum")
def _from_einsum(ctx):
    """OpenVINO Einsum-7 (equation: lower-case subscripts, "...", "->") -> ONNX Einsum (onnx__Einsum, opset 12)."""
    if ctx.opset < 12:
        raise ctx.unsupported("ONNX Einsum is new in opset 12", opset=12)
    return [ctx.b.op1("Einsum", *[ctx.v(i) for i in range(len(ctx.keys))], equation=ctx.attr("equation"),
                      hint=ctx.hint)]


@reverse("ScaledDotProductAttention")
def _from_sdpa(ctx):
    """OpenVINO ScaledDotProductAttention-13 (query [N,...,L,E], key [N,...,S,E], value [N,...,S,Ev]; optional
    attention_mask (boolean: true takes part; else added) and scale (default 1/sqrt(E)); causal: -inf above the
    diagonal of [L, S], the mask ignored) -> the spec's own pseudo-code in ONNX MatMul, Transpose, Mul, Add, Where,
    Softmax over the last axis (onnx__MatMul, onnx__Softmax; ONNX Attention-23 takes another layout)."""
    b = ctx.b
    q_dims, k_dims = ctx.dims(0), ctx.dims(1)
    if k_dims is None or q_dims is None:
        raise ctx.unsupported("query or key of unknown rank")
    t = ctx.np_type(0)
    rank = len(k_dims)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    scores = b.op1("MatMul", ctx.v(0), b.transpose(ctx.v(1), perm))
    if len(ctx.keys) > 4:
        scale = ctx.v(4)
    elif q_dims[-1] >= 0:
        scale = b.const(np.array(1.0 / np.sqrt(q_dims[-1]), t), "scale")
    else:
        e = b.op1("Cast", b.op1("Gather", b.op1("Shape", ctx.v(0)), b.i64(-1, "last"), axis=0),
                  to=int(ir.DataType.from_numpy(t)))
        scale = b.op1("Div", b.const(np.array(1, t), "one"), b.op1("Sqrt", e))
    scores = b.op1("Mul", scores, scale)
    neg_inf = b.const(np.array(-np.inf, t), "neg_inf")
    if ctx.flag("causal"):
        if ctx.opset < 11:
            raise ctx.unsupported("a causal mask is built with ONNX Range (opset 11)", opset=11)
        rows = b.op1("Gather", b.op1("Shape", ctx.v(0)), b.i64(-2, "axis"), axis=0)
        cols = b.op1("Gather", b.op1("Shape", ctx.v(1)), b.i64(-2, "axis"), axis=0)
        r = b.op1("Range", b.i64(0, "zero"), rows, b.i64(1, "one"))
        c = b.op1("Range", b.i64(0, "zero"), cols, b.i64(1, "one"))
        above = b.op1("Greater", c, b.axes_op("Unsqueeze", r, [1]))  # [L, S]: column > row
        scores = b.op1("Where", above, neg_inf, scores)
    elif len(ctx.keys) > 3:
        if ctx.element_type(3) == "boolean":
            scores = b.op1("Where", ctx.v(3), scores, neg_inf)
        else:
            scores = b.op1("Add", scores, ctx.v(3))
    weights = b.op1("Softmax", scores, axis=-1)  # the last axis: the same before opset 13 (2-D flattening there)
    return [b.op1("MatMul", weights, ctx.v(2), hint=ctx.hint)]


# -- shape rules -----------------------------------------------------------------------------------------------
shape("SoftMax", "LogSoftmax", "CumSum")(shapes.like_input)
without("shape", "ReduceL1", "ReduceL2", "ScaledDotProductAttention", why=READ_ONLY)


@shape("MatMul")
def _matmul_shape(layer, inputs, d, c, et):
    """MatMul-1: transpose_a / transpose_b swap the last two axes; a 1-D side gains and loses an axis; the batch
    axes broadcast."""
    if d[0] is None or d[1] is None:
        return [(et, None)]
    x, y = list(d[0]), list(d[1])
    if shapes.flag(layer.attrs, "transpose_a") and len(x) > 1:
        x[-1], x[-2] = x[-2], x[-1]
    if shapes.flag(layer.attrs, "transpose_b") and len(y) > 1:
        y[-1], y[-2] = y[-2], y[-1]
    if len(x) == 1 and len(y) == 1:
        return [(et, [])]
    if len(x) == 1:
        return [(et, y[:-2] + y[-1:])]
    if len(y) == 1:
        return [(et, x[:-1])]
    batch = shapes.broadcast(x[:-2], y[:-2])
    return [(et, batch + [x[-2], y[-1]])]


@shape("ReduceMean", "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin")
def _reduce_shape(layer, inputs, d, c, et):
    if d[0] is None or c[1] is None:
        return [(et, None)]
    axes = {shapes.axis(int(v), len(d[0])) for v in c[1].reshape(-1)}
    keep = shapes.flag(layer.attrs, "keep_dims")
    return [(et, [1 if i in axes else x for i, x in enumerate(d[0]) if keep or i not in axes])]


@shape("Einsum")
def _einsum_shape(layer, inputs, d, c, et):
    """Einsum-7 with an explicit "->" (letters only; "..." gives a dynamic rank)."""
    eq = layer.attrs["equation"].replace(" ", "")
    if "->" not in eq or "." in eq or any(x is None for x in d):
        return [(et, None)]
    lhs, out = eq.split("->")
    size = {}
    for term, x in zip(lhs.split(","), d):
        for letter, v in zip(term, x):
            if v >= 0 or letter not in size:
                size[letter] = v
    return [(et, [size.get(letter, -1) for letter in out])]
