"""Kernels of the IR interpreter (`ir_graph`) for network layers: convolutions, pooling, padding, resizing,
normalization, attention, STFT, scatter, cumulative sums, Einsum.

Each kernel restates its page of the OpenVINO operation specs (docs.openvino.ai, Operation Specifications) in
numpy, on purpose independently of rnnconv's IR -> ONNX mapping of the same layer: the verification holds one
against the other. Floating-point data arrive in the interpreter's precision.
"""

from __future__ import annotations

import itertools
import math
import numpy as np

from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino.registry import kernel
from rnnconv.errors import Unsupported


def _csv(layer, key, n=None, default=0) -> list[int]:
    text = layer.attrs.get(key, "")
    values = [int(v) for v in text.replace(" ", "").split(",") if v]
    return values if values or n is None else [default] * n


def _flag(layer, key, default=False) -> bool:
    v = layer.attrs.get(key)
    return default if v is None else v.strip().lower() in ("true", "1")


def _ints(x) -> list[int]:
    return [int(v) for v in np.asarray(x).reshape(-1)]


# -- convolutions -------------------------------------------------------------------------------------------
def _pads(layer, sizes, kernel_extent, strides, *, transposed=False, out_shape=None, out_pad=None):
    """pads_begin, pads_end per spatial axis after auto_pad (Convolution-1 / ConvolutionBackpropData-1 pages)."""
    n = len(sizes)
    mode = layer.attrs.get("auto_pad", "explicit").lower()
    begin, end = _csv(layer, "pads_begin", n), _csv(layer, "pads_end", n)
    out_pad = out_pad or [0] * n
    if transposed and out_shape is not None:
        begin, end = [], []
        for i in range(n):
            total = strides[i] * (sizes[i] - 1) + kernel_extent[i] - out_shape[i] + out_pad[i]
            if mode == "same_upper":
                end.append(total // 2)
                begin.append(total - total // 2)
            else:
                begin.append(total // 2)
                end.append(total - total // 2)
        return begin, end
    if mode == "valid" or (transposed and mode.startswith("same")):
        return [0] * n, [0] * n  # ConvolutionBackpropData without output_shape pads nothing then (OpenVINO 2026.4)
    if mode in ("same_upper", "same_lower"):
        begin, end = [], []
        for i in range(n):
            out = -(-sizes[i] // strides[i])
            total = max((out - 1) * strides[i] + kernel_extent[i] - sizes[i], 0)
            small, big = total // 2, total - total // 2
            begin.append(small if mode == "same_upper" else big)
            end.append(big if mode == "same_upper" else small)
    return begin, end


@kernel("Convolution", "GroupConvolution")
def _convolution(layer, a, fdt):
    """Convolution-1 (filters [C_out, C_in, k...]) and GroupConvolution-1 (filters [G, C_out/G, C_in/G, k...]):
    out[n, o, p] = sum over c, k of x_padded[n, c, p * stride + k * dilation] * w[o, c, k], zeros padded."""
    x, w = a
    if layer.type == "Convolution":
        w = w[None]
    g, o, cg = w.shape[:3]
    k = w.shape[3:]
    n = len(k)
    strides, dil = _csv(layer, "strides", n, 1), _csv(layer, "dilations", n, 1)
    extent = [(k[i] - 1) * dil[i] + 1 for i in range(n)]
    begin, end = _pads(layer, x.shape[2:], extent, strides)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(begin, end)))
    out_sizes = [(xp.shape[2 + i] - extent[i]) // strides[i] + 1 for i in range(n)]
    xg = xp.reshape(x.shape[0], g, cg, *xp.shape[2:])
    out = np.zeros((x.shape[0], g, o, *out_sizes), dtype=np.result_type(x, w))
    for pos in itertools.product(*[range(v) for v in k]):
        index = tuple(slice(pos[i] * dil[i], pos[i] * dil[i] + strides[i] * (out_sizes[i] - 1) + 1, strides[i])
                      for i in range(n))
        window = xg[(slice(None), slice(None), slice(None)) + index]  # [N, G, C/G, out...]
        out += np.einsum("ngc...,goc->ngo...", window, w[(slice(None),) * 3 + pos])
    return out.reshape(x.shape[0], g * o, *out_sizes).astype(x.dtype)


@kernel("ConvolutionBackpropData", "GroupConvolutionBackpropData")
def _convolution_backprop(layer, a, fdt):
    """ConvolutionBackpropData-1 (filters [C_in, C_out, k...]) and GroupConvolutionBackpropData-1 (filters [G,
    C_in/G, C_out/G, k...]): each input item scattered over the output through the filter at p * stride + k *
    dilation, then pads_begin / pads_end cut off and output_padding added at the end; an output_shape input fixes
    the spatial size and the pads follow from it."""
    x, w = a[0], a[1]
    if layer.type == "ConvolutionBackpropData":
        w = w[None]
    g, cg, o = w.shape[:3]
    k = w.shape[3:]
    n = len(k)
    sizes = x.shape[2:]
    strides, dil = _csv(layer, "strides", n, 1), _csv(layer, "dilations", n, 1)
    out_pad = _csv(layer, "output_padding", n)
    extent = [(k[i] - 1) * dil[i] + 1 for i in range(n)]
    out_shape = _ints(a[2]) if len(a) > 2 else None
    begin, end = _pads(layer, sizes, extent, strides, transposed=True, out_shape=out_shape, out_pad=out_pad)
    full = [strides[i] * (sizes[i] - 1) + extent[i] + out_pad[i] for i in range(n)]
    xg = x.reshape(x.shape[0], g, cg, *sizes)
    out = np.zeros((x.shape[0], g, o, *full), dtype=np.result_type(x, w))
    for pos in itertools.product(*[range(v) for v in k]):
        index = tuple(slice(pos[i] * dil[i], pos[i] * dil[i] + strides[i] * (sizes[i] - 1) + 1, strides[i])
                      for i in range(n))
        out[(slice(None),) * 3 + index] += np.einsum("ngc...,gco->ngo...", xg, w[(slice(None),) * 3 + pos])
    crop = tuple(slice(begin[i], full[i] - end[i]) for i in range(n))
    out = out[(slice(None),) * 3 + crop]
    return out.reshape(x.shape[0], g * o, *out.shape[3:]).astype(x.dtype)


# -- pooling ------------------------------------------------------------------------------------------------
def _pool_geometry(layer, x):
    kernel = _csv(layer, "kernel")
    n = len(kernel)
    strides, dil = _csv(layer, "strides", n, 1), _csv(layer, "dilations", n, 1)
    extent = [(kernel[i] - 1) * dil[i] + 1 for i in range(n)]
    begin, end = _pads(layer, x.shape[2:], extent, strides)
    rounding = layer.attrs.get("rounding_type", "floor").lower()
    outs = []
    for i in range(n):
        size = x.shape[2 + i]
        span = size + begin[i] + end[i] - extent[i]
        out = (-(-span // strides[i]) if rounding.startswith("ceil") else span // strides[i]) + 1
        if rounding == "ceil_torch" and (out - 1) * strides[i] >= size + begin[i]:
            out -= 1
        outs.append(out)
    return kernel, strides, dil, begin, outs


@kernel("MaxPool")
def _max_pool(layer, a, fdt):
    """MaxPool-1/8/14: the maximum over each window (pads never win); from 8 a second output, the flattened index
    of each maximum in the unpadded input counted from `axis`."""
    x = a[0]
    kernel, strides, dil, begin, outs = _pool_geometry(layer, x)
    n = len(kernel)
    best = np.full(x.shape[:2] + tuple(outs), -np.inf)
    where = np.zeros(best.shape, dtype=np.int64)
    flat = np.arange(math.prod(x.shape[2:]), dtype=np.int64).reshape(x.shape[2:])
    for pos in itertools.product(*[range(v) for v in kernel]):
        coords = [np.arange(outs[i]) * strides[i] + pos[i] * dil[i] - begin[i] for i in range(n)]
        valid = [(c >= 0) & (c < x.shape[2 + i]) for i, c in enumerate(coords)]
        clipped = [np.clip(c, 0, x.shape[2 + i] - 1) for i, c in enumerate(coords)]
        grid = np.ix_(*clipped)
        vals = x[(slice(None), slice(None)) + grid].astype(np.float64)
        mask = np.ones(outs, dtype=bool)
        for i, v in enumerate(valid):
            shape = [1] * n
            shape[i] = -1
            mask = mask & v.reshape(shape)
        vals = np.where(mask, vals, -np.inf)
        better = vals > best
        best = np.where(better, vals, best)
        where = np.where(better, flat[grid], where)
    out = [best.astype(x.dtype)]
    if len(layer.outputs) > 1:
        axis = int(layer.attrs.get("axis", "0")) % x.ndim
        spatial = math.prod(x.shape[2:])
        nc = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[0], x.shape[1])
        if axis == 0:
            where = where + (nc * spatial)[(...,) + (None,) * n]
        elif axis == 1:
            where = where + (np.arange(x.shape[1]) * spatial)[(None, slice(None)) + (None,) * n]
        out.append(where.astype(ovir.numpy_dtype(layer.attrs.get("index_element_type", "i64"))))
    return out


@kernel("AvgPool")
def _avg_pool(layer, a, fdt):
    """AvgPool-1/14: the mean over each window; exclude-pad: over the input items only, else the padded window
    (its part inside the padded input)."""
    x = a[0]
    kernel, strides, _, begin, outs = _pool_geometry(layer, x)
    n = len(kernel)
    end = _pads(layer, x.shape[2:], kernel, strides)[1]
    exclude = _flag(layer, "exclude-pad")
    total = np.zeros(x.shape[:2] + tuple(outs))
    count = np.zeros(outs)
    for pos in itertools.product(*[range(v) for v in kernel]):
        coords = [np.arange(outs[i]) * strides[i] + pos[i] - begin[i] for i in range(n)]
        inside = [(c >= 0) & (c < x.shape[2 + i]) for i, c in enumerate(coords)]
        padded = [(c >= -begin[i]) & (c < x.shape[2 + i] + end[i]) for i, c in enumerate(coords)]
        clipped = [np.clip(c, 0, x.shape[2 + i] - 1) for i, c in enumerate(coords)]
        vals = x[(slice(None), slice(None)) + np.ix_(*clipped)]
        m_in, m_pad = np.ones(outs, bool), np.ones(outs, bool)
        for i in range(n):
            shape = [1] * n
            shape[i] = -1
            m_in = m_in & inside[i].reshape(shape)
            m_pad = m_pad & padded[i].reshape(shape)
        total += np.where(m_in, vals, 0)
        count += m_in if exclude else m_pad
    return (total / np.maximum(count, 1)).astype(x.dtype)


# -- padding ------------------------------------------------------------------------------------------------
@kernel("Pad")
def _pad(layer, a, fdt):
    """Pad-1/12: pads_begin / pads_end per axis (negative ones crop, from 12), pad_mode constant (pad_value),
    edge, reflect (the edge not repeated), symmetric (repeated)."""
    x = a[0]
    begin, end = _ints(a[1]), _ints(a[2])
    mode = layer.attrs.get("pad_mode", "constant").lower()
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end)))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if mode == "constant":
        value = np.asarray(a[3]).reshape(-1)[0] if len(a) > 3 else 0
        return np.pad(x, widths, mode="constant", constant_values=value)
    if mode not in ("edge", "reflect", "symmetric"):
        raise Unsupported(f"IR layer {layer.name!r}: Pad mode {mode!r}")
    return np.pad(x, widths, mode=mode)


# -- resizing -----------------------------------------------------------------------------------------------
def _source_coords(mode: str, out_len: int, in_len: int, scale: float) -> np.ndarray:
    o = np.arange(out_len, dtype=np.float64)
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_len > 1 else np.zeros(out_len)
    if mode == "asymmetric":
        return o / scale
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    if mode == "align_corners":
        return np.zeros(out_len) if out_len == 1 else o * (in_len - 1) / (out_len - 1)
    raise Unsupported(f"Interpolate coordinate_transformation_mode {mode!r}")


def _nearest(coords: np.ndarray, mode: str, scale: float) -> np.ndarray:
    frac = coords - np.floor(coords)
    if mode == "round_prefer_floor":
        return np.where(frac == 0.5, np.floor(coords), np.round(coords))
    if mode == "round_prefer_ceil":
        return np.where(frac == 0.5, np.ceil(coords), np.round(coords))
    if mode == "floor":
        return np.floor(coords)
    if mode == "ceil":
        return np.ceil(coords)
    if mode == "simple":
        return np.ceil(coords) if scale < 1 else np.trunc(coords)
    raise Unsupported(f"Interpolate nearest_mode {mode!r}")


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """The 4 weights of Keys' cubic convolution (coefficient a) for offsets -1, 0, 1, 2 from floor(x)."""
    def w(d):
        d = np.abs(d)
        return np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                        np.where(d < 2, ((d - 5) * d + 8) * d * a - 4 * a, 0.0))
    return np.stack([w(t + 1), w(t), w(1 - t), w(2 - t)], axis=-1)


@kernel("Interpolate")
def _interpolate(layer, a, fdt):
    """Interpolate-4 (data, sizes, scales[, axes]) / -11 (data, scales_or_sizes[, axes]): per resized axis, each
    output index mapped to an input coordinate by coordinate_transformation_mode, then nearest (nearest_mode),
    linear_onnx (two neighbours, coordinates clamped to the input) or cubic (four, cube_coeff; indices clamped).
    The scale of an axis is the given one (scales) or output / input (sizes)."""
    x = a[0]
    mode = layer.attrs.get("mode", "nearest").lower()
    coord_mode = layer.attrs.get("coordinate_transformation_mode", "half_pixel").lower()
    by_sizes = layer.attrs.get("shape_calculation_mode", "sizes").lower() == "sizes"
    if _flag(layer, "antialias") or any(_csv(layer, "pads_begin") + _csv(layer, "pads_end")):
        raise Unsupported(f"IR layer {layer.name!r}: Interpolate with antialias or pads")
    if layer.version == "opset11":
        values, axes_at = np.asarray(a[1]).reshape(-1), 2
    else:
        values, axes_at = np.asarray(a[1 if by_sizes else 2]).reshape(-1), 3
    axes = [v % x.ndim for v in _ints(a[axes_at])] if len(a) > axes_at else list(range(x.ndim))
    out = x.astype(np.float64)
    for j, ax in enumerate(axes):
        in_len = x.shape[ax]
        if by_sizes:
            out_len = int(values[j])
            scale = out_len / in_len
        else:
            scale = float(values[j])
            out_len = int(math.floor(in_len * scale + 1e-5))
        coords = _source_coords(coord_mode, out_len, in_len, scale)
        moved = np.moveaxis(out, ax, -1)
        if mode == "nearest":
            idx = np.clip(_nearest(coords, layer.attrs.get("nearest_mode", "round_prefer_floor").lower(), scale),
                          0, in_len - 1).astype(np.int64)
            res = moved[..., idx]
        elif mode == "linear_onnx":
            c = np.clip(coords, 0, in_len - 1)
            i0 = np.floor(c).astype(np.int64)
            i1 = np.minimum(i0 + 1, in_len - 1)
            t = c - i0
            res = moved[..., i0] * (1 - t) + moved[..., i1] * t
        elif mode == "cubic":
            base = np.floor(coords).astype(np.int64)
            weights = _cubic_weights(coords - base, float(layer.attrs.get("cube_coeff", "-0.75")))
            res = 0
            for k in range(4):
                idx = np.clip(base + k - 1, 0, in_len - 1)
                res = res + moved[..., idx] * weights[:, k]
        else:
            raise Unsupported(f"IR layer {layer.name!r}: Interpolate mode {mode!r}")
        out = np.moveaxis(res, -1, ax)
    return out.astype(x.dtype)


# -- normalization ------------------------------------------------------------------------------------------
@kernel("MVN")
def _mvn(layer, a, fdt):
    """MVN-6 (axes input; eps inside_sqrt: / sqrt(var + eps), outside_sqrt: / (sqrt(var) + eps)) and MVN-1
    (across_channels: axes 1.., else 2..; reduction_axes; eps inside): x - mean, divided when
    normalize_variance."""
    x = a[0]
    if len(a) > 1:
        axes = tuple(v % x.ndim for v in _ints(a[1]))
        inside = layer.attrs.get("eps_mode", "inside_sqrt").lower() == "inside_sqrt"
    else:
        reduction = _csv(layer, "reduction_axes")
        axes = tuple(reduction) if reduction else tuple(range(1 if _flag(layer, "across_channels") else 2, x.ndim))
        inside = True
    centered = x - x.mean(axis=axes, keepdims=True)
    if not _flag(layer, "normalize_variance"):
        return centered
    var = (centered * centered).mean(axis=axes, keepdims=True)
    eps = float(layer.attrs.get("eps", "0"))
    return (centered / (np.sqrt(var + eps) if inside else np.sqrt(var) + eps)).astype(x.dtype)


@kernel("BatchNormInference")
def _batch_norm(layer, a, fdt):
    """BatchNormInference-5 (data, gamma, beta, mean, variance) / -1 (gamma, beta, data, mean, variance): per
    channel (axis 1) gamma (x - mean) / sqrt(variance + epsilon) + beta."""
    x, gamma, beta, mean, var = a if layer.version != "opset1" else (a[2], a[0], a[1], a[3], a[4])
    shape = [1, -1] + [1] * (x.ndim - 2)
    eps = float(layer.attrs.get("epsilon", "0"))
    mean, var, gamma, beta = (np.asarray(v).reshape(shape) for v in (mean, var, gamma, beta))
    return ((x - mean) / np.sqrt(var + eps) * gamma + beta).astype(x.dtype)


# -- attention, signal ---------------------------------------------------------------------------------------
@kernel("ScaledDotProductAttention")
def _sdpa(layer, a, fdt):
    """ScaledDotProductAttention-13, as the spec's pseudo-code: softmax(Q K^T * scale + bias) V, scale default
    1/sqrt(E); bias -inf above the diagonal when causal, else from a boolean (false: -inf) or additive mask."""
    q, k, v = a[:3]
    scale = np.asarray(a[4]).reshape(()) if len(a) > 4 else 1.0 / np.sqrt(q.shape[-1])
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if _flag(layer, "causal"):
        L, S = q.shape[-2], k.shape[-2]
        scores = scores + np.triu(np.full((L, S), -np.inf), k=1)
    elif len(a) > 3:
        mask = np.asarray(a[3])
        scores = scores + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    return np.matmul(e / e.sum(axis=-1, keepdims=True), v).astype(q.dtype)


@kernel("STFT")
def _stft(layer, a, fdt):
    """STFT-15: frames of frame_size samples every frame_step, times the window zero-padded to frame_size (centred,
    the odd zero on the right), real-to-complex DFT: [batch, frames, frame_size/2 + 1, 2] (frames and bins
    swapped with transpose_frames); a 1-D signal has no batch axis."""
    signal, window = np.asarray(a[0]), np.asarray(a[1]).reshape(-1)
    frame, step = int(np.asarray(a[2]).reshape(-1)[0]), int(np.asarray(a[3]).reshape(-1)[0])
    left = (frame - window.size) // 2
    w = np.zeros(frame, dtype=np.float64)
    w[left:left + window.size] = window
    x = signal.reshape(-1, signal.shape[-1]).astype(np.float64)
    n = (x.shape[-1] - frame) // step + 1
    frames = np.stack([x[:, i * step:i * step + frame] * w for i in range(n)], axis=1)
    spectrum = np.fft.rfft(frames, axis=-1)
    out = np.stack([spectrum.real, spectrum.imag], axis=-1)  # [batch, frames, bins, 2]
    if _flag(layer, "transpose_frames"):
        out = np.swapaxes(out, 1, 2)
    if signal.ndim == 1:
        out = out[0]
    return out.astype(signal.dtype)


# -- scatter, cumulative sums, Einsum, NonZero --------------------------------------------------------------
@kernel("ScatterNDUpdate")
def _scatter_nd_update(layer, a, fdt):
    """ScatterNDUpdate-3/15: a copy of data where each index tuple (the last axis of indices, negative from the
    end) takes its update slice, or combines with it by `reduction` (sum, sub, prod, min, max), in order."""
    data, indices, updates = np.array(a[0], copy=True), np.asarray(a[1]).astype(np.int64), np.asarray(a[2])
    k = indices.shape[-1]
    flat_idx = indices.reshape(-1, k)
    flat_upd = updates.reshape((flat_idx.shape[0],) + data.shape[k:])
    reduction = layer.attrs.get("reduction", "none").lower()
    combine = {"none": lambda old, new: new, "sum": np.add, "sub": np.subtract, "prod": np.multiply,
               "min": np.minimum, "max": np.maximum}[reduction]
    for idx, upd in zip(flat_idx, flat_upd):
        where = tuple(int(i) + (data.shape[d] if i < 0 else 0) for d, i in enumerate(idx))
        data[where] = combine(data[where], upd)
    return data


@kernel("CumSum")
def _cumsum(layer, a, fdt):
    """CumSum-3: running sums along `axis` (0 when absent); exclusive leaves the item itself out, reverse runs
    from the end."""
    x = a[0]
    axis = int(np.asarray(a[1]).reshape(-1)[0]) % x.ndim if len(a) > 1 else 0
    y = np.flip(x, axis) if _flag(layer, "reverse") else x
    out = np.cumsum(y, axis=axis, dtype=x.dtype)
    if _flag(layer, "exclusive"):
        out = out - y
    return np.flip(out, axis) if _flag(layer, "reverse") else out


@kernel("Einsum")
def _einsum(layer, a, fdt):
    """Einsum-7: numpy's einsum of the same equation (subscripts, "...", "->")."""
    return np.einsum(layer.attrs["equation"].replace(" ", ""), *a)


@kernel("NonZero")
def _non_zero(layer, a, fdt):
    """NonZero-3: [rank, count] indices of the nonzero items in row-major order, of output_type."""
    return np.array(np.nonzero(np.asarray(a[0])), dtype=ovir.numpy_dtype(layer.attrs.get("output_type", "i64"))
                    ).reshape(np.asarray(a[0]).ndim, -1)

