"""Resizing, both ways: ONNX Resize <-> OpenVINO Interpolate-4 / -11.

The two name the same algorithms alike: mode nearest / linear (OpenVINO linear_onnx) / cubic (cube_coeff =
cubic_coeff_a), coordinate_transformation_mode half_pixel / pytorch_half_pixel / asymmetric / tf_half_pixel_for_nn /
align_corners, nearest_mode round_prefer_floor / round_prefer_ceil / floor / ceil; output sizes given, or scales.
OpenVINO's own `linear` (a triangle filter), the pillow modes, antialias, pads and nearest_mode `simple` have no
ONNX counterpart and are refused.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino.ops.table import attr, mapping, reverse
from rnnconv.dialects.openvino.registry import shape
from rnnconv.errors import Unsupported

_MODES = {"nearest": "nearest", "linear_onnx": "linear", "cubic": "cubic"}
_COORDINATES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _text(node, name, default):
    v = attr(node, name, default)
    return v.decode() if isinstance(v, bytes) else v


@mapping("Resize", "Interpolate-opset11")
def resize(ctx, node):
    """ONNX Resize (onnx__Resize, opset 11: X, roi, scales, sizes; constant scales or sizes over every axis, no
    roi, exclude_outside 0, no antialias / axes / keep_aspect_ratio_policy) -> OpenVINO Interpolate-11 (scales or
    sizes over the axes whose size changes)."""
    x = ctx.inp(node, 0)
    mode = _text(node, "mode", "nearest")
    coords = _text(node, "coordinate_transformation_mode", "half_pixel")
    if (mode not in ("nearest", "linear", "cubic") or coords not in _COORDINATES or attr(node, "exclude_outside", 0)
            or attr(node, "antialias", 0) or attr(node, "axes") is not None
            or _text(node, "keep_aspect_ratio_policy", "stretch") != "stretch"):
        raise Unsupported(f"Resize node {node.name!r}: mode {mode!r} / coordinate_transformation_mode {coords!r} / "
                          "exclude_outside / antialias / axes have no OpenVINO Interpolate-11 counterpart")
    scales = ctx.const_input(node, 2) if len(node.inputs) > 2 else None
    sizes = ctx.const_input(node, 3) if len(node.inputs) > 3 else None
    if (scales is None or scales.size == 0) and sizes is None:
        raise Unsupported(f"Resize node {node.name!r}: scales or sizes computed at run time")
    attrs = {"mode": {"nearest": "nearest", "linear": "linear_onnx", "cubic": "cubic"}[mode],
             "coordinate_transformation_mode": coords, "nearest_mode": _text(node, "nearest_mode",
                                                                              "round_prefer_floor"),
             "antialias": False, "cube_coeff": float(attr(node, "cubic_coeff_a", -0.75))}
    if sizes is not None:
        values, attrs["shape_calculation_mode"] = sizes.astype(np.int64), "sizes"
    else:
        values, attrs["shape_calculation_mode"] = scales.astype(np.float32), "scales"
    rank = values.size
    attrs["pads_begin"] = attrs["pads_end"] = [0] * rank
    return [ctx.g.op("Interpolate", x, ctx.const(values), ctx.i64(list(range(rank))), version="opset11",
                     name=node.name or None, **attrs)]


@reverse("Interpolate")
def _from_interpolate(ctx):
    """OpenVINO Interpolate-11 (data, scales_or_sizes, axes) / Interpolate-4 (data, sizes, scales, axes) ->
    ONNX Resize (onnx__Resize: scales / sizes over every axis before opset 18, `axes` from 18)."""
    if ctx.layer.version not in ("opset4", "opset11"):
        raise ctx.unsupported("Interpolate-1 (rnnconv maps Interpolate-4 and -11)")
    if ctx.opset < 11:
        raise ctx.unsupported("ONNX Resize with these modes is new in opset 11", opset=11)
    mode = ctx.attr("mode", "nearest").lower()
    coords = ctx.attr("coordinate_transformation_mode", "half_pixel").lower()
    nearest = ctx.attr("nearest_mode", "round_prefer_floor").lower()
    if mode not in _MODES or coords not in _COORDINATES or (mode == "nearest" and nearest not in _NEAREST):
        raise ctx.unsupported(f"mode {mode!r}, coordinate_transformation_mode {coords!r}, nearest_mode {nearest!r}")
    pads = [int(v) for v in (ctx.attr("pads_begin", "") + "," + ctx.attr("pads_end", "")).replace(" ", "")
            .split(",") if v]
    if ctx.flag("antialias") or any(pads):
        raise ctx.unsupported("antialias or pads")
    by_sizes = ctx.attr("shape_calculation_mode", "sizes").lower() == "sizes"
    if ctx.layer.version == "opset11":
        values_at, axes_at = 1, 2
    else:
        values_at, axes_at = (1 if by_sizes else 2), 3
    dims = ctx.dims(0)
    if dims is None:
        raise ctx.unsupported("data of unknown rank")
    rank = len(dims)
    axes = ([int(a) % rank for a in ctx.need_const(axes_at, "the axes").reshape(-1)] if len(ctx.keys) > axes_at
            else list(range(rank)))
    b = ctx.b
    attrs = {"mode": _MODES[mode], "coordinate_transformation_mode": coords}
    if mode == "nearest":
        attrs["nearest_mode"] = nearest
    if mode == "cubic":
        attrs["cubic_coeff_a"] = float(ctx.attr("cube_coeff", "-0.75"))
    values = ctx.c(values_at)
    if ctx.opset >= 18:
        attrs["axes"] = axes
        given = ctx.as_i64(values_at, "sizes") if by_sizes else b.op1(
            "Cast", ctx.v(values_at), to=int(ir.DataType.FLOAT))
        if values is not None and not by_sizes:
            given = b.const(values.astype(np.float32).reshape(-1), "scales")
    elif values is None:
        raise ctx.unsupported("sizes or scales computed at run time before opset 18 (ONNX Resize takes them for "
                              "every axis there)", opset=18)
    elif not by_sizes:
        full = np.ones(rank, np.float32)
        full[axes] = values.reshape(-1)
        given = b.const(full, "scales")
    elif all(d >= 0 for d in dims):
        full = np.array(dims, np.int64)
        full[axes] = values.reshape(-1)
        given = b.i64(full, "sizes")
    else:
        shape = b.op1("Shape", ctx.v(0))
        given = b.op1("ScatterElements", shape, b.i64(axes, "axes"), b.i64(values.reshape(-1), "sizes"), axis=0)
    empty = None if ctx.opset >= 13 else b.const(np.zeros(0, np.float32), "empty")
    inputs = [ctx.v(0), empty, empty if by_sizes else given] + ([given] if by_sizes else [])
    return [b.op1("Resize", *inputs, hint=ctx.hint, **attrs)]


@shape("Interpolate")
def _interpolate_shape(layer, inputs, d, c, et):
    """Interpolate-11 (data, scales_or_sizes, axes): the sizes, or floor(dim * scale + 1e-5), on the axes."""
    if d[0] is None:
        return [(et, None)]
    out = list(d[0])
    axes = [int(v) for v in c[2].reshape(-1)] if len(inputs) > 2 and c[2] is not None else list(range(len(out)))
    values = c[1]
    for j, ax in enumerate(axes):
        if values is None:
            out[ax] = -1
        elif layer.attrs.get("shape_calculation_mode") == "sizes":
            out[ax] = int(values.reshape(-1)[j])
        elif out[ax] >= 0:
            out[ax] = int(np.floor(out[ax] * float(values.reshape(-1)[j]) + 1e-5))
    return [(et, out)]
