"""Convolutions and pooling, both ways: Conv / Convolution and GroupConvolution, ConvTranspose /
ConvolutionBackpropData and GroupConvolutionBackpropData, MaxPool, AveragePool / AvgPool.

Shared facts: OpenVINO pads are pads_begin / pads_end per spatial axis (ONNX: one `pads` list, all begins then all
ends); auto_pad explicit / notset, valid, same_upper, same_lower (ONNX NOTSET, VALID, SAME_UPPER, SAME_LOWER); a
group convolution's filters carry the group as a leading axis (ONNX: folded into the output channels, `group`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino.ops.table import attr, ints_attr, mapping, reverse
from rnnconv.dialects.openvino.registry import shape
from rnnconv.dialects.openvino.shapes import csv
from rnnconv.errors import Unsupported

_AUTO_PAD = {"explicit": "NOTSET", "notset": "NOTSET", "valid": "VALID", "same_upper": "SAME_UPPER",
             "same_lower": "SAME_LOWER"}
_AUTO_PAD_OV = {"NOTSET": "explicit", "VALID": "valid", "SAME_UPPER": "same_upper", "SAME_LOWER": "same_lower"}


def _ints(text: Optional[str]) -> list[int]:
    return [int(v) for v in str(text).replace(" ", "").split(",") if v] if text else []


def _spatial(ctx, n: int) -> dict:
    """strides, dilations, pads (ONNX order) and auto_pad of an OpenVINO convolution or pooling layer."""
    auto = _AUTO_PAD.get(ctx.attr("auto_pad", "explicit").lower())
    if auto is None:
        raise ctx.unsupported(f"auto_pad={ctx.attr('auto_pad')!r}")
    out = {"strides": _ints(ctx.attr("strides")) or [1] * n, "dilations": _ints(ctx.attr("dilations")) or [1] * n}
    if auto == "NOTSET":
        begin, end = _ints(ctx.attr("pads_begin")) or [0] * n, _ints(ctx.attr("pads_end")) or [0] * n
        out["pads"] = begin + end
    else:
        out["auto_pad"] = auto
    return out


def _ov_spatial(node, n: int) -> dict:
    """strides, dilations, pads_begin / pads_end and auto_pad of an ONNX Conv / ConvTranspose / pooling node."""
    pads = ints_attr(node, "pads") or [0] * (2 * n)
    return {"strides": ints_attr(node, "strides") or [1] * n, "dilations": ints_attr(node, "dilations") or [1] * n,
            "pads_begin": pads[:n], "pads_end": pads[n:],
            "auto_pad": _AUTO_PAD_OV[attr(node, "auto_pad", "NOTSET")]}


def _grouped_filters(ctx, i: int, shape: list[int]):
    """Filters [G, A, B, k...] (constant or not) as ONNX's [G*A, B, k...]."""
    c = ctx.c(i)
    if c is not None:
        return ctx.b.const(np.asarray(c).reshape(shape), "filters")
    return ctx.b.op1("Reshape", ctx.v(i), ctx.b.i64(shape, "shape"))


def _float_data(ctx) -> None:
    if ctx.np_type(0).kind != "f":
        raise ctx.unsupported(f"a convolution of {ctx.element_type(0)} data (ONNX Conv and ConvTranspose take "
                              "floating-point data; ConvInteger takes 8-bit data with zero points)")


_EIGHT_BIT = {"u8": np.uint8, "i8": np.int8}


def _converted_eight_bit(ctx, key):
    """The key of the u8 / i8 tensor that `key` is a Convert of, else None."""
    layer, keys = ctx.producer_of(key)
    return keys[0] if layer.type == "Convert" and ctx.key_type(keys[0]) in _EIGHT_BIT else None


def _eight_bit_data(ctx, i: int):
    """Input i as ConvInteger takes it: (8-bit value, zero point: an 8-bit constant, an 8-bit value or None), when
    it is Convert(u8 / i8 x) to i32, minus (Subtract) or plus (Add) one constant, or minus a Convert of a one-value
    tensor of x's type (a zero point computed at run time, DynamicQuantizeLinear's), as OpenVINO's import of
    ConvInteger writes it; else None."""
    layer, keys = ctx.producer(i)
    if layer.type in ("Add", "Subtract") and len(keys) == 2:
        x = _converted_eight_bit(ctx, keys[0])
        if x is None:
            return None
        dtype = _EIGHT_BIT[ctx.key_type(x)]
        c = ctx.key_const(keys[1])
        if c is not None:
            if c.size == 0 or not np.all(c == c.reshape(-1)[0]):
                return None
            zero_point = int(c.reshape(-1)[0]) * (1 if layer.type == "Subtract" else -1)
            if not np.iinfo(dtype).min <= zero_point <= np.iinfo(dtype).max:
                return None
            return ctx.key_value(x), np.array(zero_point, dtype)
        z = _converted_eight_bit(ctx, keys[1])
        dims = ctx.key_dims(keys[1])
        if layer.type != "Subtract" or z is None or ctx.key_type(z) != ctx.key_type(x) or dims is None or \
                int(np.prod(dims)) != 1:
            return None
        return ctx.key_value(x), ctx.key_value(z)
    x = _converted_eight_bit(ctx, ctx.keys[i])
    return None if x is None else (ctx.key_value(x), None)


def _eight_bit_filters(w: np.ndarray):
    """Constant integer filters as (8-bit array, scalar zero point or None) with (q - zero point) == w; None when
    their range spans more than 256 values."""
    lo, hi = int(w.min(initial=0)), int(w.max(initial=0))
    for dtype in (np.int8, np.uint8):
        info = np.iinfo(dtype)
        low, high = max(info.min - lo, info.min), min(info.max - hi, info.max)  # zero points keeping q in range
        if low <= high:
            z = min(max(0, low), high)
            return (w.astype(np.int64) + z).astype(dtype), (np.array(z, dtype) if z else None)
    return None


def _conv_integer(ctx, filters: np.ndarray, group: int, attrs: dict):
    """An integer Convolution as OpenVINO's import of ONNX ConvInteger writes it -> ONNX ConvInteger
    (onnx__ConvInteger: uint8 / int8 data and filters, scalar zero points; int32 output)."""
    data = _eight_bit_data(ctx, 0)
    q = _eight_bit_filters(filters) if filters is not None else None
    if data is None or q is None or ctx.element_type(0) != "i32":
        raise ctx.unsupported(f"a convolution of {ctx.element_type(0)} data that is not Convert of u8 / i8 data "
                              "minus one zero point with constant filters of 8-bit range (what ONNX ConvInteger "
                              "takes); ONNX Conv takes floating-point data only")
    (x, x_zero), (w, w_zero) = data, q
    b = ctx.b
    if isinstance(x_zero, np.ndarray):
        x_zero = b.const(x_zero, "x_zero_point") if x_zero else None
    elif x_zero is not None and x_zero.shape is not None and len(x_zero.shape) != 0:
        x_zero = b.op1("Reshape", x_zero, b.i64(np.zeros([0], np.int64), "scalar"))
    if x_zero is None and w_zero is not None:
        x_zero = b.const(np.array(0, x.dtype.numpy()), "x_zero_point")
    inputs = [x, b.const(w, "filters"), x_zero, b.const(w_zero, "w_zero_point") if w_zero is not None else None]
    while inputs[-1] is None:
        inputs.pop()
    return [b.op1("ConvInteger", *inputs, hint=ctx.hint, **({"group": group} if group > 1 else {}), **attrs)]


def _static_filter_dims(ctx, i: int) -> list[int]:
    dims = ctx.dims(i)
    if dims is None or any(d < 0 for d in dims):
        raise ctx.unsupported("filters of unknown shape")
    return dims


# -- Conv ----------------------------------------------------------------------------------------------------
@mapping("Conv", "Convolution-opset1", "GroupConvolution-opset1", "Add-opset1", "Reshape-opset1")
def conv(ctx, node):
    """ONNX Conv (onnx__Conv: group, pads, auto_pad, optional bias B) -> OpenVINO Convolution-1 (group 1) or
    GroupConvolution-1 (filters reshaped to [G, M/G, C/G, k...]), then Add-1 of B as [1, M, 1, ...]."""
    x, w, bias = ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2)
    if w.dims is None or any(d < 0 for d in w.dims):
        raise Unsupported(f"Conv node {node.name!r}: filters of unknown shape")
    n = len(w.dims) - 2
    attrs = _ov_spatial(node, n)
    group = int(attr(node, "group", 1))
    if group == 1:
        y = ctx.g.op("Convolution", x, w, name=None if bias is not None else node.name or None, **attrs)
    else:
        shape = [group, w.dims[0] // group, *w.dims[1:]]
        filters = (ctx.const(w.const.reshape(shape)) if w.const is not None
                   else ctx.g.op("Reshape", w, ctx.i64(shape), special_zero=False))
        y = ctx.g.op("GroupConvolution", x, filters, name=None if bias is not None else node.name or None, **attrs)
    if bias is None:
        return [y]
    b = (ctx.const(bias.const.reshape([1, -1] + [1] * n)) if bias.const is not None
         else ctx.g.op("Reshape", bias, ctx.i64([1, -1] + [1] * n), special_zero=False))
    return [ctx.g.op("Add", y, b, name=node.name or None)]


@reverse("Convolution", "GroupConvolution")
def _from_convolution(ctx):
    """OpenVINO Convolution-1 (filters [C_out, C_in, k...]) / GroupConvolution-1 (filters [G, C_out/G, C_in/G,
    k...]; strides, dilations, pads_begin, pads_end, auto_pad) -> ONNX Conv (onnx__Conv: W [M, C/group, k...],
    group, pads [begins, ends], auto_pad)."""
    dims = _static_filter_dims(ctx, 1)
    grouped = ctx.layer.type == "GroupConvolution"
    n = len(dims) - (3 if grouped else 2)
    attrs = _spatial(ctx, n)
    attrs["kernel_shape"] = dims[-n:]
    if ctx.np_type(0).kind in "iu":
        w = ctx.c(1)
        return _conv_integer(ctx, None if w is None else np.asarray(w).reshape(
            [dims[0] * dims[1], *dims[2:]] if grouped else dims), dims[0] if grouped else 1, attrs)
    _float_data(ctx)
    if not grouped:
        return [ctx.b.op1("Conv", ctx.v(0), ctx.v(1), hint=ctx.hint, **attrs)]
    g = dims[0]
    w = _grouped_filters(ctx, 1, [g * dims[1], *dims[2:]])
    return [ctx.b.op1("Conv", ctx.v(0), w, group=g, hint=ctx.hint, **attrs)]


# -- ConvTranspose -------------------------------------------------------------------------------------------
@mapping("ConvTranspose", "ConvolutionBackpropData-opset1", "GroupConvolutionBackpropData-opset1", "Add-opset1",
         "Reshape-opset1")
def conv_transpose(ctx, node):
    """ONNX ConvTranspose (onnx__ConvTranspose: W [C, M/group, k...], pads, output_padding, group, optional bias;
    without output_shape) -> OpenVINO ConvolutionBackpropData-1 or GroupConvolutionBackpropData-1 (filters
    [G, C/G, M/G, k...]), then Add-1 of B as [1, M, 1, ...]."""
    x, w, bias = ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2)
    if attr(node, "output_shape") is not None or attr(node, "auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"ConvTranspose node {node.name!r}: output_shape or auto_pad SAME_* (OpenVINO's "
                          "ConvolutionBackpropData pads nothing for same_*: give pads instead)")
    if w.dims is None or any(d < 0 for d in w.dims):
        raise Unsupported(f"ConvTranspose node {node.name!r}: filters of unknown shape")
    n = len(w.dims) - 2
    attrs = _ov_spatial(node, n)
    attrs["output_padding"] = ints_attr(node, "output_padding") or [0] * n
    group = int(attr(node, "group", 1))
    name = None if bias is not None else node.name or None
    if group == 1:
        y = ctx.g.op("ConvolutionBackpropData", x, w, name=name, **attrs)
    else:
        shape = [group, w.dims[0] // group, *w.dims[1:]]
        filters = (ctx.const(w.const.reshape(shape)) if w.const is not None
                   else ctx.g.op("Reshape", w, ctx.i64(shape), special_zero=False))
        y = ctx.g.op("GroupConvolutionBackpropData", x, filters, name=name, **attrs)
    if bias is None:
        return [y]
    b = (ctx.const(bias.const.reshape([1, -1] + [1] * n)) if bias.const is not None
         else ctx.g.op("Reshape", bias, ctx.i64([1, -1] + [1] * n), special_zero=False))
    return [ctx.g.op("Add", y, b, name=node.name or None)]


@reverse("ConvolutionBackpropData", "GroupConvolutionBackpropData")
def _from_convolution_backprop(ctx):
    """OpenVINO ConvolutionBackpropData-1 (filters [C_in, C_out, k...]) / GroupConvolutionBackpropData-1 (filters
    [G, C_in/G, C_out/G, k...]; strides, dilations, pads_begin, pads_end, auto_pad, output_padding, optional
    output_shape input) -> ONNX ConvTranspose (onnx__ConvTranspose: W [C, M/group, k...], group, pads,
    output_padding). With output_shape OpenVINO derives the pads itself (the odd one at the end unless
    same_upper), which ONNX's output_shape distributes the other way: the pads are computed here instead, from
    static input dims. Without it, auto_pad same_upper / same_lower / valid pad nothing."""
    _float_data(ctx)
    dims = _static_filter_dims(ctx, 1)
    grouped = ctx.layer.type == "GroupConvolutionBackpropData"
    n = len(dims) - (3 if grouped else 2)
    attrs = _spatial(ctx, n)
    attrs["kernel_shape"] = dims[-n:]
    output_padding = _ints(ctx.attr("output_padding")) or [0] * n
    if any(output_padding):
        attrs["output_padding"] = output_padding
    if len(ctx.keys) <= 2 and "auto_pad" in attrs:
        # Without output_shape, OpenVINO (2026.4, measured) pads nothing for same_upper / same_lower / valid, and
        # ignores pads_begin / pads_end then.
        attrs.pop("auto_pad")
        attrs["pads"] = [0] * (2 * n)
    if len(ctx.keys) > 2:
        out_shape = [int(v) for v in ctx.need_const(2, "output_shape").reshape(-1)]
        x_dims = ctx.dims(0)
        if x_dims is None or any(d < 0 for d in x_dims[2:]):
            raise ctx.unsupported("output_shape with dynamic spatial input dims (the pads depend on them)")
        k = attrs["kernel_shape"]
        begin, end = [], []
        for i in range(n):
            total = (attrs["strides"][i] * (x_dims[2 + i] - 1) + (k[i] - 1) * attrs["dilations"][i] + 1
                     - out_shape[i] + output_padding[i])
            if attrs.get("auto_pad") == "SAME_UPPER":
                end.append(total // 2)
                begin.append(total - total // 2)
            else:
                begin.append(total // 2)
                end.append(total - total // 2)
        attrs.pop("auto_pad", None)
        attrs["pads"] = begin + end
    if not grouped:
        return [ctx.b.op1("ConvTranspose", ctx.v(0), ctx.v(1), hint=ctx.hint, **attrs)]
    g = dims[0]
    w = _grouped_filters(ctx, 1, [g * dims[1], *dims[2:]])
    return [ctx.b.op1("ConvTranspose", ctx.v(0), w, group=g, hint=ctx.hint, **attrs)]


# -- pooling ------------------------------------------------------------------------------------------------
def _last_window_inside(ctx, kernel, strides, dilations, pads_begin, pads_end) -> bool:
    """Whether OpenVINO's rounding_type=ceil gives ONNX's ceil_mode shape: ONNX (as PyTorch, and OpenVINO's
    ceil_torch) drops a last window that would start in the end padding; OpenVINO's ceil keeps it."""
    x_dims = ctx.dims(0)
    for i, k in enumerate(kernel):
        dk = (k - 1) * dilations[i] + 1
        size = x_dims[2 + i] if x_dims is not None and len(x_dims) > 2 + i else -1
        if size < 0:
            if not (pads_end[i] == 0 and dk >= strides[i]):
                return False
            continue
        out = -(-(size + pads_begin[i] + pads_end[i] - dk) // strides[i]) + 1
        if (out - 1) * strides[i] >= size + pads_begin[i]:
            return False
    return True


def _pool_attrs(ctx) -> dict:
    kernel = _ints(ctx.attr("kernel"))
    n = len(kernel)
    attrs = _spatial(ctx, n)
    attrs["kernel_shape"] = kernel
    rounding = ctx.attr("rounding_type", "floor").lower()
    if rounding in ("ceil", "ceil_torch"):
        if ctx.opset < 10:
            raise ctx.unsupported("ceil rounding needs ONNX ceil_mode (opset 10)", opset=10)
        pads = attrs.get("pads", [0] * 2 * n)
        if rounding == "ceil" and ("auto_pad" in attrs or not _last_window_inside(
                ctx, kernel, attrs["strides"], attrs["dilations"], pads[:n], pads[n:])):
            raise ctx.unsupported("rounding_type=ceil where a last window starts in the end padding (OpenVINO "
                                  "keeps it; ONNX's ceil_mode drops it, as ceil_torch does)")
        attrs["ceil_mode"] = 1
    elif rounding != "floor":
        raise ctx.unsupported(f"rounding_type={rounding!r}")
    return attrs


@mapping("MaxPool", "MaxPool-opset8", "MaxPool-opset14")
def max_pool(ctx, node):
    """ONNX MaxPool (onnx__MaxPool: kernel_shape, strides, pads, dilations, ceil_mode; the Indices output only
    with storage_order 0) -> OpenVINO MaxPool-8 (floor), or MaxPool-14 with rounding_type ceil_torch for
    ceil_mode (the last window never starts in the end padding, as ONNX's); indices over the whole tensor, axis 0,
    i64."""
    if attr(node, "storage_order", 0):
        raise Unsupported(f"MaxPool node {node.name!r}: storage_order=1 (column-major indices)")
    kernel = ints_attr(node, "kernel_shape")
    n = len(kernel)
    attrs = _ov_spatial(node, n)
    ceil = bool(attr(node, "ceil_mode", 0))
    out = ctx.g.add("MaxPool", [ctx.inp(node, 0)],
                    {**attrs, "kernel": kernel, "rounding_type": "ceil_torch" if ceil else "floor",
                     "index_element_type": "i64", "axis": 0},
                    version="opset14" if ceil else "opset8", name=node.name or None)
    return out[: len(node.outputs)]


@reverse("MaxPool")
def _from_max_pool(ctx):
    """OpenVINO MaxPool-1/8/14 (kernel, strides, dilations from 8, pads, rounding_type floor / ceil / ceil_torch,
    auto_pad; from 8 a second output of indices counted from `axis`) -> ONNX MaxPool (onnx__MaxPool: dilations
    and ceil_mode from opset 10, Indices int64 over the whole tensor: axis 0 only)."""
    attrs = _pool_attrs(ctx)
    if any(d != 1 for d in attrs["dilations"]) and ctx.opset < 10:
        raise ctx.unsupported("dilations need ONNX MaxPool-10", opset=10)
    if all(d == 1 for d in attrs["dilations"]):
        attrs.pop("dilations")
    n_out = 2 if len(ctx.layer.outputs) > 1 and ctx.used(1) else 1
    if n_out > 1 and int(ctx.attr("axis", "0")) != 0:
        raise ctx.unsupported("indices counted from an axis other than 0 (ONNX counts over the whole tensor)")
    outs = ctx.b.op("MaxPool", [ctx.v(0)], attrs, n_out=n_out, hint=ctx.hint)
    if n_out > 1 and ctx.attr("index_element_type", "i64") == "i32":
        outs[1] = ctx.b.op1("Cast", outs[1], to=int(ir.DataType.INT32))
    return outs


@mapping("AveragePool", "AvgPool-opset1")
def average_pool(ctx, node):
    """ONNX AveragePool (onnx__AveragePool: count_include_pad, ceil_mode) -> OpenVINO AvgPool-1 (exclude-pad)."""
    kernel = ints_attr(node, "kernel_shape")
    n = len(kernel)
    attrs = _ov_spatial(node, n)
    if attr(node, "ceil_mode", 0):
        raise Unsupported(f"AveragePool node {node.name!r}: ceil_mode (OpenVINO AvgPool-1's ceil keeps windows "
                          "that start in the end padding)")
    if any(d != 1 for d in attrs.pop("dilations")):
        raise Unsupported(f"AveragePool node {node.name!r}: dilations (OpenVINO AvgPool has none)")
    return [ctx.g.op("AvgPool", ctx.inp(node, 0), kernel=kernel, rounding_type="floor",
                     **{"exclude-pad": not attr(node, "count_include_pad", 0)}, name=node.name or None, **attrs)]


@reverse("AvgPool")
def _from_avg_pool(ctx):
    """OpenVINO AvgPool-1/14 (kernel, strides, pads, exclude-pad, rounding_type, auto_pad) -> ONNX AveragePool
    (onnx__AveragePool: count_include_pad = not exclude-pad, ceil_mode from opset 10)."""
    attrs = _pool_attrs(ctx)
    attrs.pop("dilations")
    attrs["count_include_pad"] = 0 if ctx.flag("exclude-pad") else 1
    return [ctx.b.op1("AveragePool", ctx.v(0), hint=ctx.hint, **attrs)]


# -- shape rules -----------------------------------------------------------------------------------------------
def _window(a: dict, x, kernel: list[int], *, transposed: bool = False, rounding: str = "floor"):
    """Output dims of a convolution / pooling / transposed convolution (the Convolution-1, MaxPool-8, AvgPool-1
    and ConvolutionBackpropData-1 pages): [N, ?, spatial...] with channel left to the caller."""
    if x is None:
        return None
    n = len(kernel)
    strides, dil = csv(a.get("strides")) or [1] * n, csv(a.get("dilations")) or [1] * n
    pb, pe = csv(a.get("pads_begin")) or [0] * n, csv(a.get("pads_end")) or [0] * n
    auto = str(a.get("auto_pad", "explicit")).lower()
    if auto == "valid" or (transposed and auto.startswith("same")):
        pb, pe = [0] * n, [0] * n  # ConvolutionBackpropData pads nothing for same_* without output_shape
    out_pad = csv(a.get("output_padding")) or [0] * n
    dims = [x[0], -1]
    for i in range(n):
        size, dk = x[2 + i], (kernel[i] - 1) * dil[i] + 1
        if size < 0:
            dims.append(-1)
        elif transposed:
            dims.append(strides[i] * (size - 1) + dk - pb[i] - pe[i] + out_pad[i])
        elif auto.startswith("same"):
            dims.append(-(-size // strides[i]))
        else:
            span = size + pb[i] + pe[i] - dk
            out = (-(-span // strides[i]) if rounding.startswith("ceil") else span // strides[i]) + 1
            if rounding == "ceil_torch" and (out - 1) * strides[i] >= size + pb[i]:
                out -= 1
            dims.append(out)
    return dims


@shape("Convolution", "GroupConvolution", "ConvolutionBackpropData", "GroupConvolutionBackpropData")
def _convolution_shape(layer, inputs, d, c, et):
    t, w = layer.type, d[1]
    kernel = w[3:] if t.startswith("Group") else w[2:]
    out = _window(layer.attrs, d[0], kernel, transposed=t.endswith("BackpropData"))
    if out is not None:
        if t == "Convolution":
            out[1] = w[0]
        elif t == "GroupConvolution":
            out[1] = w[0] * w[1]
        elif t == "ConvolutionBackpropData":
            out[1] = w[1]
        else:
            out[1] = w[0] * w[2]
    return [(et, out)]


@shape("MaxPool", "AvgPool")
def _pool_shape(layer, inputs, d, c, et):
    """MaxPool-8 also outputs the indices (index_element_type); MaxPool-1 and AvgPool-1 do not."""
    a = layer.attrs
    out = _window(a, d[0], csv(a["kernel"]), rounding=str(a.get("rounding_type", "floor")).lower())
    if out is not None:
        out[1] = d[0][1]
    outs = [(et, out)]
    if layer.type == "MaxPool" and layer.version != "opset1":
        outs.append((a.get("index_element_type", "i64"), out))
    return outs
