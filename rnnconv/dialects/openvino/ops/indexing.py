"""Indexing layers OpenVINO's ONNX import and PyTorch frontend write, IR -> ONNX: TopK, GatherElements, GatherND,
DepthToSpace, SpaceToDepth, ScatterElementsUpdate (OpenVINO operation specs, docs.openvino.ai; ONNX Operators.md)."""

from __future__ import annotations

import onnx_ir as ir

from rnnconv.dialects.openvino.graph import numpy_dtype
from rnnconv.dialects.openvino.ops.movement import _SCATTER_REDUCTION
from rnnconv.dialects.openvino.ops.table import reverse


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
