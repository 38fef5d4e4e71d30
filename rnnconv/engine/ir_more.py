"""Kernels of the IR interpreter (`ir_graph`) for the layers OpenVINO's importers write beyond the network layers
of `ir_nn`: HardSigmoid, StridedSlice, RDFT, Identity, TopK, GatherElements, GatherND, DepthToSpace /
SpaceToDepth, ReduceL1 / ReduceL2, IsNaN / IsInf / IsFinite, ConvertLike, bitwise operations,
ScatterElementsUpdate.

Each kernel restates its page of the OpenVINO operation specs (docs.openvino.ai, Operation Specifications) in
numpy, independently of rnnconv's IR -> ONNX mapping of the same layer (the verification holds one against the
other). They register into the layer type's entry of the dialect's registry (`registry.kernel`).
"""

from __future__ import annotations

import numpy as np

from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino.registry import kernel
from rnnconv.engine.ir_nn import _flag, _ints
from rnnconv.errors import Unsupported


# -- activations with inputs ----------------------------------------------------------------------------------
@kernel("HardSigmoid")
def _hard_sigmoid(layer, a, fdt):
    """HardSigmoid-1: max(0, min(1, alpha x + beta)); alpha and beta are scalar inputs."""
    x, alpha, beta = a[0], np.asarray(a[1]).reshape(-1)[0], np.asarray(a[2]).reshape(-1)[0]
    return np.clip(alpha * x + beta, 0, 1).astype(x.dtype)


# -- indexing and transforms --------------------------------------------------------------------------------------
@kernel("StridedSlice")
def _strided_slice(layer, a, fdt):
    """StridedSlice-1: per leading axis i, data[begin[i]:end[i]:stride[i]] (begin_mask / end_mask 1: that bound
    ignored, shrink_axis_mask 1: the item at begin, the axis removed); new_axis_mask and ellipsis_mask unsupported
    here."""
    data, begin, end = a[0], _ints(a[1]), _ints(a[2])
    n = len(begin)
    stride = _ints(a[3]) if len(a) > 3 else [1] * n

    def bits(key):
        return ([int(v) for v in layer.attrs.get(key, "").replace(" ", "").split(",") if v] + [0] * n)[:n]

    if any(bits("new_axis_mask")) or any(bits("ellipsis_mask")):
        raise Unsupported(f"IR layer {layer.name!r}: StridedSlice with new_axis_mask or ellipsis_mask")
    bm, em, sm = bits("begin_mask"), bits("end_mask"), bits("shrink_axis_mask")
    index = []
    for i in range(n):
        if sm[i]:
            index.append(begin[i])
        else:
            index.append(slice(None if bm[i] else begin[i], None if em[i] else end[i], stride[i]))
    return np.asarray(data[tuple(index)])


@kernel("RDFT")
def _rdft(layer, a, fdt):
    """RDFT-9: the real DFT over `axes` (signal_size: each trimmed or zero-padded to it, -1 keeps it), the last
    axis halved (n / 2 + 1); real and imaginary parts stacked as a new last axis."""
    data, axes = a[0], [v % a[0].ndim for v in _ints(a[1])]
    sizes = _ints(a[2]) if len(a) > 2 else [-1] * len(axes)
    sizes = [data.shape[ax] if s == -1 else s for s, ax in zip(sizes, axes)]
    out = np.fft.rfftn(data.astype(np.float64), s=sizes, axes=axes)
    return np.stack([out.real, out.imag], axis=-1).astype(data.dtype)


@kernel("Identity")
def _identity(layer, a, fdt):
    """Identity-16: a copy of its input."""
    return np.array(a[0])


@kernel("TopK")
def _topk(layer, a, fdt):
    """TopK-1/3/11: the k largest (mode max) or smallest (min) along `axis`, sorted by value, equal values in index
    order; indices of index_element_type (i32 by default)."""
    x, k = a[0], int(np.asarray(a[1]).reshape(-1)[0])
    axis = int(layer.attrs["axis"]) % x.ndim
    if layer.attrs.get("sort", "none").lower() != "value":
        raise Unsupported(f"IR layer {layer.name!r}: TopK sorted otherwise than by value")
    key = -x if layer.attrs.get("mode", "max").lower() == "max" else x
    order = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(k), axis=axis)
    index_type = ovir.numpy_dtype(layer.attrs.get("index_element_type", "i32"))
    return [np.take_along_axis(x, order, axis=axis), order.astype(index_type)]


@kernel("GatherElements")
def _gather_elements(layer, a, fdt):
    """GatherElements-6: out[..., i, ...] = data[..., indices[..., i, ...], ...] along `axis`, negative indices
    from the end."""
    data, idx = a[0], np.asarray(a[1]).astype(np.int64)
    axis = int(layer.attrs["axis"]) % data.ndim
    return np.take_along_axis(data, np.where(idx < 0, idx + data.shape[axis], idx), axis=axis)


@kernel("GatherND")
def _gather_nd(layer, a, fdt):
    """GatherND-5/8: per batch (the first batch_dims axes, shared by data and indices), each index tuple (the last
    axis of indices) picks a slice of data; -8 keeps the batch axes, -5 flattens them into one."""
    data, idx = a[0], np.asarray(a[1]).astype(np.int64)
    b = int(layer.attrs.get("batch_dims", "0"))
    batch = data.shape[:b]
    out = []
    for pos in np.ndindex(*batch):
        d, i = data[pos], idx[pos]
        depth = i.shape[-1]
        flat = i.reshape(-1, depth)
        picked = [d[tuple(np.where(t < 0, t + np.array(d.shape[:depth]), t))] for t in flat]
        out.append(np.array(picked).reshape(*i.shape[:-1], *d.shape[depth:]))
    result = np.array(out).reshape(*batch, *out[0].shape) if out else np.zeros(0, data.dtype)
    if layer.version == "opset5" and b:
        result = result.reshape(-1, *result.shape[b:])
    return result.astype(data.dtype)


@kernel("DepthToSpace", "SpaceToDepth")
def _depth_space(layer, a, fdt):
    """DepthToSpace-1 / SpaceToDepth-1 on [N, C, H, W] with block_size bs: blocks_first takes the block offsets
    as the outer part of the channel index, depth_first as the inner."""
    x, bs = a[0], int(layer.attrs.get("block_size", "1"))
    blocks_first = layer.attrs.get("mode", "blocks_first").lower() == "blocks_first"
    n, c, h, w = x.shape
    if layer.type == "DepthToSpace":
        y = x.reshape(n, bs, bs, c // bs ** 2, h, w) if blocks_first else x.reshape(n, c // bs ** 2, bs, bs, h, w)
        y = y.transpose(0, 3, 4, 1, 5, 2) if blocks_first else y.transpose(0, 1, 4, 2, 5, 3)
        return y.reshape(n, c // bs ** 2, h * bs, w * bs)
    y = x.reshape(n, c, h // bs, bs, w // bs, bs)
    y = y.transpose(0, 3, 5, 1, 2, 4) if blocks_first else y.transpose(0, 1, 3, 5, 2, 4)
    return y.reshape(n, c * bs * bs, h // bs, w // bs)


@kernel("ReduceL1", "ReduceL2")
def _reduce_norm(layer, a, fdt):
    """ReduceL1-4 (sum of |x|) / ReduceL2-4 (square root of the sum of squares) over the axes input."""
    x = a[0]
    axes = tuple(v + x.ndim if v < 0 else v for v in _ints(a[1]))
    keep = _flag(layer, "keep_dims")
    out = (np.sum(np.abs(x), axis=axes, keepdims=keep) if layer.type == "ReduceL1"
           else np.sqrt(np.sum(np.square(x), axis=axes, keepdims=keep)))
    return np.asarray(out).astype(x.dtype)


@kernel("IsNaN", "IsInf", "IsFinite")
def _is(layer, a, fdt):
    """IsNaN-10, IsInf-10 (detect_negative / detect_positive, default true), IsFinite-10."""
    x = a[0]
    if layer.type == "IsNaN":
        return np.isnan(x)
    if layer.type == "IsFinite":
        return np.isfinite(x)
    neg, pos = _flag(layer, "detect_negative", True), _flag(layer, "detect_positive", True)
    return (np.isneginf(x) & neg) | (np.isposinf(x) & pos)


@kernel("ConvertLike")
def _convert_like(layer, a, fdt):
    """ConvertLike-1: data converted to the element type of `like` (float to integer truncates)."""
    return a[0].astype(a[1].dtype)


@kernel("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")
def _bitwise(layer, a, fdt):
    """BitwiseAnd-13 / BitwiseOr-13 / BitwiseXor-13 (numpy broadcasting) / BitwiseNot-13, bit by bit (booleans:
    logically)."""
    f = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor,
         "BitwiseNot": np.invert}[layer.type]
    return f(*a)


@kernel("ScatterElementsUpdate")
def _scatter_elements_update(layer, a, fdt):
    """ScatterElementsUpdate-3/12: a copy of data where, along `axis`, the item each index names takes its update,
    or combines with it by `reduction` (sum, prod, min, max; mean averages), in order; use_init_val false starts
    each updated item from the reduction's neutral value. Negative indices count from the end."""
    data, idx, upd = np.array(a[0]), np.asarray(a[1]).astype(np.int64), np.asarray(a[2])
    axis = int(np.asarray(a[3]).reshape(-1)[0]) % data.ndim
    reduction = layer.attrs.get("reduction", "none").lower()
    if reduction == "mean" or not _flag(layer, "use_init_val", True):
        raise Unsupported(f"IR layer {layer.name!r}: ScatterElementsUpdate with mean or use_init_val false")
    combine = {"none": lambda old, new: new, "sum": np.add, "prod": np.multiply, "min": np.minimum,
               "max": np.maximum}[reduction]
    for pos in np.ndindex(*idx.shape):
        target = list(pos)
        target[axis] = int(idx[pos]) % data.shape[axis]
        data[tuple(target)] = combine(data[tuple(target)], upd[pos])
    return data
