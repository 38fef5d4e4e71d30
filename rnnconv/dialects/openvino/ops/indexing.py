"""Indexing, both ways: ScatterND / ScatterNDUpdate, NonZero; and the layers OpenVINO's ONNX import and PyTorch
frontend write, IR -> ONNX: StridedSlice, TopK, GatherElements, GatherND, DepthToSpace, SpaceToDepth,
ScatterElementsUpdate (OpenVINO operation specs, docs.openvino.ai; ONNX Operators.md)."""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino.graph import numpy_dtype
from rnnconv.dialects.openvino import shapes
from rnnconv.dialects.openvino.ops.table import attr, mapping, reverse
from rnnconv.dialects.openvino.registry import READ_ONLY, shape, without


# -- scatter / nonzero --------------------------------------------------------------------------------------
_SCATTER_REDUCTION = {"none": ("none", 11), "sum": ("add", 16), "prod": ("mul", 16), "max": ("max", 18),
                      "min": ("min", 18)}


@mapping("ScatterND", "ScatterNDUpdate-opset15", reversible=True)
def scatter_nd(ctx, node):
    """ONNX ScatterND (onnx__ScatterND: reduction none, add / mul from 16, max / min from 18) -> OpenVINO
    ScatterNDUpdate-15 (reduction none / sum / prod / max / min)."""
    back = {v[0]: k for k, v in _SCATTER_REDUCTION.items()}
    reduction = attr(node, "reduction", "none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    return [ctx.g.op("ScatterNDUpdate", ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2),
                     reduction=back[reduction], version="opset15", name=node.name or None)]


@reverse("ScatterNDUpdate")
def _from_scatter_nd_update(ctx):
    """OpenVINO ScatterNDUpdate-3 / -15 (reduction none / sum / sub / prod / min / max) -> ONNX ScatterND
    (onnx__ScatterND, opset 11: int64 indices; reduction add / mul from 16, max / min from 18); sub adds the
    negated updates."""
    reduction = ctx.attr("reduction", "none").lower()
    updates = ctx.v(2)
    if reduction == "sub":
        reduction, updates = "sum", ctx.b.op1("Neg", updates)
    if reduction not in _SCATTER_REDUCTION:
        raise ctx.unsupported(f"reduction={reduction!r}")
    onnx_reduction, since = _SCATTER_REDUCTION[reduction]
    if ctx.opset < since:
        raise ctx.unsupported(f"ScatterND with reduction {onnx_reduction!r} needs opset {since}", opset=since)
    attrs = {"reduction": onnx_reduction} if onnx_reduction != "none" else {}
    return [ctx.b.op1("ScatterND", ctx.v(0), ctx.as_i64(1, "indices"), updates, hint=ctx.hint, **attrs)]


@mapping("NonZero", "NonZero-opset3", reversible=True)
def non_zero(ctx, node):
    """ONNX NonZero (onnx__NonZero: int64 [rank, count], row-major) -> OpenVINO NonZero-3 output_type i64."""
    return [ctx.g.op("NonZero", ctx.inp(node, 0), output_type="i64", version="opset3", name=node.name or None)]


@reverse("NonZero")
def _from_non_zero(ctx):
    """OpenVINO NonZero-3 ([rank, count] indices of the nonzero items in row-major order; output_type i64 / i32)
    -> ONNX NonZero (onnx__NonZero, opset 9: int64), and a Cast for i32."""
    if ctx.opset < 9:
        raise ctx.unsupported("ONNX NonZero is new in opset 9", opset=9)
    out = ctx.b.op1("NonZero", ctx.v(0), hint=ctx.hint)
    if ctx.attr("output_type", "i64") == "i32":
        out = ctx.b.op1("Cast", out, to=int(ir.DataType.INT32))
    return [out]


_INT64_MAX, _INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def _bits(text: Optional[str], n: int) -> list[int]:
    values = [int(v) for v in str(text or "").replace(" ", "").split(",") if v]
    return (values + [0] * n)[:n]


@reverse("StridedSlice")
def _from_strided_slice(ctx):
    """OpenVINO StridedSlice-1 (begin, end[, stride] per leading axis; begin_mask / end_mask 1: that bound ignored,
    shrink_axis_mask 1: the axis taken at begin and removed) -> ONNX Slice (onnx__Slice, opset 10: starts, ends,
    axes, steps) then Squeeze of the shrunk axes. new_axis_mask and ellipsis_mask are refused."""
    if ctx.opset < 10:
        raise ctx.unsupported("ONNX Slice takes starts/ends as inputs from opset 10", opset=10)
    dims = ctx.dims(1)
    if dims is None or len(dims) != 1 or dims[0] < 0:
        raise ctx.unsupported("begin of unknown length")
    n = dims[0]
    mask = {k: _bits(ctx.attr(k), n) for k in ("begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask",
                                               "ellipsis_mask")}
    if any(mask["new_axis_mask"]) or any(mask["ellipsis_mask"]):
        raise ctx.unsupported("new_axis_mask or ellipsis_mask (rnnconv maps begin, end and shrink masks)")
    stride = np.ones(n, np.int64) if len(ctx.keys) < 4 else ctx.need_const(3, "stride").astype(np.int64)
    shrink = [i for i in range(n) if mask["shrink_axis_mask"][i]]
    start_fill = np.where(stride > 0, 0, _INT64_MAX)
    end_fill = np.where(stride > 0, _INT64_MAX, _INT64_MIN)
    b = ctx.b

    def bound(i: int, ignored: list[int], fill: np.ndarray) -> ir.Value:
        c = ctx.c(i)
        if c is not None:
            return b.i64(np.where(ignored, fill, c.astype(np.int64)), "bound")
        return b.op1("Where", b.const(np.array(ignored, bool), "mask"), b.i64(fill, "fill"), ctx.v_i64(i))

    begin, end = ctx.c(1), None
    if shrink:
        if begin is None:
            raise ctx.unsupported("shrink_axis_mask with begin computed at run time")
        taken = begin.astype(np.int64)
        stride = np.where(mask["shrink_axis_mask"], 1, stride)
        ends = ctx.c(2)
        if ends is None:
            raise ctx.unsupported("shrink_axis_mask with end computed at run time")
        ends = np.where(mask["end_mask"], end_fill, ends.astype(np.int64))
        ends = np.where(mask["shrink_axis_mask"], np.where(taken == -1, _INT64_MAX, taken + 1), ends)
        ignored = np.array(mask["begin_mask"], bool) & ~np.array(mask["shrink_axis_mask"], bool)
        starts = np.where(ignored, start_fill, taken)
        begin, end = b.i64(starts, "starts"), b.i64(ends, "ends")
    else:
        begin, end = bound(1, mask["begin_mask"], start_fill), bound(2, mask["end_mask"], end_fill)
    y = b.op1("Slice", ctx.v(0), begin, end, b.i64(list(range(n)), "axes"), b.i64(stride, "steps"),
              hint=ctx.hint if not shrink else ctx.hint + "_slice")
    return [b.axes_op("Squeeze", y, shrink, hint=ctx.hint) if shrink else y]


@reverse("TopK")
def _from_topk(ctx):
    """OpenVINO TopK-1/3/11 (k scalar input; axis, mode max / min, sort value, index_element_type) -> ONNX TopK
    (onnx__TopK, opset 11: K as a 1-D input, largest, sorted 1). sort by index or none is refused (ONNX sorts by
    value or leaves the order unspecified); equal values come in index order in both (TopK-11 stable, ONNX's
    rule)."""
    if ctx.opset < 11:
        raise ctx.unsupported("ONNX TopK takes largest / sorted from opset 11", opset=11)
    sort = ctx.attr("sort", "none").lower()
    if sort != "value":
        raise ctx.unsupported(f"sort={sort!r} (ONNX TopK sorts by value)")
    b = ctx.b
    k = b.op1("Reshape", ctx.as_i64(1, "k"), b.i64([1], "shape"))
    values, indices = b.op("TopK", [ctx.v(0), k], {"axis": int(ctx.attr("axis")), "sorted": 1,
                                                   "largest": int(ctx.attr("mode", "max").lower() == "max")},
                           n_out=2, hint=ctx.hint)
    index_type = ctx.layer.outputs[1].element_type if len(ctx.layer.outputs) > 1 else "i32"
    if index_type != "i64" and ctx.used(1):
        indices = b.op1("Cast", indices, to=int(ir.DataType.from_numpy(numpy_dtype(index_type))))
    return [values, indices]


@reverse("GatherElements")
def _from_gather_elements(ctx):
    """OpenVINO GatherElements-6 (axis) -> ONNX GatherElements (onnx__GatherElements, opset 11)."""
    if ctx.opset < 11:
        raise ctx.unsupported("ONNX GatherElements is new in opset 11", opset=11)
    return [ctx.b.op1("GatherElements", ctx.v(0), ctx.v_i64(1), axis=int(ctx.attr("axis")), hint=ctx.hint)]


@reverse("GatherND")
def _from_gather_nd(ctx):
    """OpenVINO GatherND-8 (batch_dims kept as leading axes) / GatherND-5 with batch_dims 0 -> ONNX GatherND
    (onnx__GatherND, opset 12: batch_dims; the same output shape)."""
    batch_dims = int(ctx.attr("batch_dims", "0"))
    if ctx.layer.version == "opset5" and batch_dims:
        raise ctx.unsupported("GatherND-5 with batch_dims (its batch axes come out flattened into one)")
    if ctx.opset < 12 and batch_dims:
        raise ctx.unsupported("ONNX GatherND takes batch_dims from opset 12", opset=12)
    if ctx.opset < 11:
        raise ctx.unsupported("ONNX GatherND is new in opset 11", opset=11)
    attrs = {"batch_dims": batch_dims} if batch_dims else {}
    return [ctx.b.op1("GatherND", ctx.v(0), ctx.v_i64(1), hint=ctx.hint, **attrs)]


@reverse("DepthToSpace", "SpaceToDepth")
def _from_depth_space(ctx):
    """OpenVINO DepthToSpace-1 / SpaceToDepth-1 (block_size; mode blocks_first / depth_first) -> ONNX DepthToSpace
    (onnx__DepthToSpace: mode DCR / CRD) / SpaceToDepth (blocks first only); 4-D data."""
    mode = ctx.attr("mode", "blocks_first").lower()
    dims = ctx.dims(0)
    if dims is None or len(dims) != 4:
        raise ctx.unsupported("data that is not 4-D (ONNX takes [N, C, H, W])")
    block = int(ctx.attr("block_size", "1"))
    if ctx.layer.type == "SpaceToDepth":
        if mode != "blocks_first":
            raise ctx.unsupported("mode depth_first (ONNX SpaceToDepth moves blocks first)")
        return [ctx.b.op1("SpaceToDepth", ctx.v(0), blocksize=block, hint=ctx.hint)]
    return [ctx.b.op1("DepthToSpace", ctx.v(0), blocksize=block, mode="DCR" if mode == "blocks_first" else "CRD",
                      hint=ctx.hint)]



@reverse("ScatterElementsUpdate")
def _from_scatter_elements_update(ctx):
    """OpenVINO ScatterElementsUpdate-3 / -12 (axis input; reduction none / sum / prod / min / max with use_init_val
    true) -> ONNX ScatterElements (onnx__ScatterElements, opset 11: axis attribute; reduction add / mul from 16,
    max / min from 18)."""
    reduction = ctx.attr("reduction", "none").lower()
    if reduction not in _SCATTER_REDUCTION or not ctx.flag("use_init_val", True):
        raise ctx.unsupported(f"reduction={reduction!r}, use_init_val={ctx.attr('use_init_val', 'true')} (ONNX "
                              "ScatterElements combines with the data's own values by add, mul, max or min)")
    onnx_reduction, since = _SCATTER_REDUCTION[reduction]
    since = max(since, 11)
    if ctx.opset < since:
        raise ctx.unsupported(f"ScatterElements with reduction {onnx_reduction!r} needs opset {since}", opset=since)
    axis = int(ctx.need_const(3, "the axis").reshape(-1)[0])
    attrs = {"reduction": onnx_reduction} if onnx_reduction != "none" else {}
    return [ctx.b.op1("ScatterElements", ctx.v(0), ctx.v_i64(1), ctx.v(2), axis=axis, hint=ctx.hint, **attrs)]


# -- shape rules -----------------------------------------------------------------------------------------------
shape("ScatterNDUpdate")(shapes.like_input)
without("shape", "StridedSlice", "TopK", "GatherElements", "GatherND", "DepthToSpace", "SpaceToDepth",
        "ScatterElementsUpdate", why=READ_ONLY)


@shape("NonZero")
def _non_zero_shape(layer, inputs, d, c, et):
    return [(layer.attrs.get("output_type", "i64"), [len(d[0]) if d[0] is not None else -1, -1])]
