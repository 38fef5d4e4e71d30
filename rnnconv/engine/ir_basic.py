"""Kernels of the IR interpreter (`ir_graph`) for the elementwise, data-movement, matrix and reduction layers.

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


# -- elementwise -------------------------------------------------------------------------------------------
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_UNARY = {
    "Relu": lambda x: np.maximum(x, 0),
    "Sigmoid": _sigmoid,
    "Tanh": np.tanh, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt, "Negative": np.negative, "Abs": np.abs,
    "Floor": np.floor, "Ceiling": np.ceil, "Sign": np.sign, "Sin": np.sin, "Cos": np.cos, "Tan": np.tan,
    "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh,
    "Acosh": np.arccosh, "Atanh": np.arctanh,
    "SoftSign": lambda x: x / (1 + np.abs(x)),  # SoftSign-9
    "Mish": lambda x: x * np.tanh(np.logaddexp(0, x)),  # Mish-4: x tanh(softplus(x))
    "HSwish": lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6,  # HSwish-4
    "HSigmoid": lambda x: np.minimum(np.maximum(x + 3, 0), 6) / 6,  # HSigmoid-5
}
for _t, _f in _UNARY.items():
    kernel(_t)((lambda f: lambda layer, a, fdt: f(a[0]).astype(a[0].dtype))(_f))


@kernel("Add", "Subtract", "Multiply", "Maximum", "Minimum", "Power", "SquaredDifference")
def _binary(layer, a, fdt):
    """Add-1, Subtract-1, Multiply-1, Maximum-1, Minimum-1, Power-1, SquaredDifference-1: auto_broadcast numpy."""
    f = {"Add": np.add, "Subtract": np.subtract, "Multiply": np.multiply, "Maximum": np.maximum,
         "Minimum": np.minimum, "Power": np.power,
         "SquaredDifference": lambda x, y: (x - y) * (x - y)}[layer.type]
    return np.asarray(f(a[0], a[1])).astype(a[0].dtype)


@kernel("Mod", "FloorMod")
def _mod(layer, a, fdt):
    """Mod-1: the remainder of truncated division (the dividend's sign); FloorMod-1: of floored division (the
    divisor's sign)."""
    f = np.fmod if layer.type == "Mod" else np.mod
    return np.asarray(f(a[0], a[1])).astype(a[0].dtype)


@kernel("Round")
def _round(layer, a, fdt):
    """Round-5: half_to_even, or half_away_from_zero; integers unchanged."""
    x = a[0]
    if x.dtype.kind in "iub":
        return x
    if layer.attrs.get("mode", "half_to_even").lower() == "half_to_even":
        return np.round(x)
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(x.dtype)


@kernel("Gelu")
def _gelu(layer, a, fdt):
    """Gelu-2 (erf) / Gelu-7 (approximation_mode erf: x/2 (1 + erf(x / sqrt 2)); tanh: x/2 (1 + tanh(sqrt(2/pi)
    (x + 0.044715 x^3))))."""
    import math

    x = a[0]
    if layer.version != "opset2" and layer.attrs.get("approximation_mode", "erf").lower() == "tanh":
        return (0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))).astype(x.dtype)
    return (0.5 * x * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))).astype(x.dtype)


@kernel("Swish")
def _swish(layer, a, fdt):
    """Swish-4: x * sigmoid(beta x), beta 1 when absent."""
    beta = np.asarray(a[1]).reshape(()) if len(a) > 1 else 1.0
    return (a[0] * _sigmoid(beta * a[0])).astype(a[0].dtype)


@kernel("Elu")
def _elu(layer, a, fdt):
    """Elu-1: x if x > 0 else alpha (e^x - 1)."""
    x = a[0]
    return np.where(x > 0, x, float(layer.attrs.get("alpha", "1")) * np.expm1(np.minimum(x, 0))).astype(x.dtype)


@kernel("Selu")
def _selu(layer, a, fdt):
    """Selu-1: lambda (x if x > 0 else alpha (e^x - 1)); alpha and lambda are inputs."""
    x, alpha, lam = a[0], np.asarray(a[1]).reshape(-1)[0], np.asarray(a[2]).reshape(-1)[0]
    return (lam * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))).astype(x.dtype)


@kernel("Divide")
def _divide(layer, a, fdt):
    """Divide-1: integer division floors when m_pythondiv (default true), else truncates."""
    x, y = a
    if x.dtype.kind in "iu":
        return (np.floor_divide(x, y) if _flag(layer, "m_pythondiv", True) else np.trunc(x / y)).astype(x.dtype)
    return np.divide(x, y).astype(x.dtype)


@kernel("Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
        "LogicalXor")
def _compare(layer, a, fdt):
    f = {"Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less, "LessEqual": np.less_equal,
         "Greater": np.greater, "GreaterEqual": np.greater_equal, "LogicalAnd": np.logical_and,
         "LogicalOr": np.logical_or, "LogicalXor": np.logical_xor}[layer.type]
    return f(a[0], a[1])


@kernel("LogicalNot")
def _logical_not(layer, a, fdt):
    return np.logical_not(a[0])


@kernel("Select")
def _select(layer, a, fdt):
    """Select-1: numpy broadcast of cond, then, else."""
    return np.where(a[0].astype(bool), a[1], a[2])


@kernel("Clamp")
def _clamp(layer, a, fdt):
    return np.clip(a[0], float(layer.attrs["min"]), float(layer.attrs["max"])).astype(a[0].dtype)


@kernel("Erf")
def _erf(layer, a, fdt):
    import math

    return np.vectorize(math.erf, otypes=[a[0].dtype])(a[0])


@kernel("PRelu")  # the spec and ov.save_model spell it PReLU (the reader canonicalizes; registry.find)
def _prelu(layer, a, fdt):
    """PReLU-1: x where x >= 0, else slope * x; a 1-D slope as long as data's axis 1 applies per channel, any
    other slope broadcasts numpy-style."""
    x, slope = a
    if slope.ndim == 1 and x.ndim > 2 and slope.shape[0] == x.shape[1]:
        slope = slope.reshape([-1] + [1] * (x.ndim - 2))
    return np.where(x >= 0, x, x * slope).astype(x.dtype)


@kernel("Tile")
def _tile(layer, a, fdt):
    """Tile-1: repeats per axis, aligned from the last axis like numpy.tile."""
    return np.tile(a[0], _ints(a[1]))


@kernel("Range")
def _range(layer, a, fdt):
    """Range-4: ceil((stop - start) / step) elements of output_type."""
    dt = ovir.numpy_dtype(layer.attrs.get("output_type", "f32"))
    start, stop, step = (np.asarray(v).reshape(-1)[0] for v in a)
    out = np.arange(start, stop, step)
    return out.astype(fdt if ovir.is_float(dt) else dt)


@kernel("SoftPlus")
def _softplus(layer, a, fdt):
    """SoftPlus-4: log(1 + e^x), computed without overflow."""
    return np.logaddexp(0, a[0]).astype(a[0].dtype)


@kernel("ReverseSequence")
def _reverse_sequence(layer, a, fdt):
    """ReverseSequence-1: per batch entry b, reverse the first seq_lengths[b] items along seq_axis."""
    x, lens = a
    bax, sax = int(layer.attrs.get("batch_axis", "0")), int(layer.attrs.get("seq_axis", "1"))
    bax, sax = bax % x.ndim, sax % x.ndim
    out = x.copy()
    for b, n in enumerate(np.asarray(lens).reshape(-1).astype(np.int64)):
        src = [slice(None)] * x.ndim
        src[bax] = b
        src[sax] = slice(0, int(n))
        dst = list(src)
        dst[sax] = slice(int(n) - 1, None, -1) if n > 0 else slice(0, 0)
        out[tuple(src)] = x[tuple(dst)]
    return out


@kernel("Convert")
def _convert(layer, a, fdt):
    """Convert-1: floating destinations compute in the interpreter's precision."""
    dst = ovir.numpy_dtype(layer.attrs["destination_type"])
    x = a[0]
    if ovir.is_float(dst):
        if fdt == np.float64:
            return x.astype(np.float64)
        return x.astype(dst).astype(fdt) if dst.itemsize < 4 else x.astype(fdt)
    if ovir.is_float(x.dtype) and dst.kind in "iu":
        return np.trunc(x).astype(dst)
    return x.astype(dst)


# -- shapes and data movement ------------------------------------------------------------------------------
@kernel("ShapeOf")
def _shape_of(layer, a, fdt):
    return np.array(a[0].shape, dtype=ovir.numpy_dtype(layer.attrs.get("output_type", "i64")))


@kernel("Transpose")
def _transpose(layer, a, fdt):
    """Transpose-1: an empty order reverses the axes."""
    order = _ints(a[1])
    return np.transpose(a[0], order or None)


@kernel("Reshape")
def _reshape(layer, a, fdt):
    """Reshape-1: with special_zero a 0 copies the input dim at that position; one -1 is inferred."""
    target = _ints(a[1])
    if _flag(layer, "special_zero"):
        target = [a[0].shape[i] if v == 0 else v for i, v in enumerate(target)]
    return a[0].reshape(target)


@kernel("Squeeze")
def _squeeze(layer, a, fdt):
    """Squeeze-1: without axes every size-1 dim goes; a listed axis whose size is not 1 is an error."""
    if len(a) < 2:
        return np.squeeze(a[0])
    axes = tuple(v + a[0].ndim if v < 0 else v for v in _ints(a[1]))
    return np.squeeze(a[0], axis=axes) if axes else a[0]


@kernel("Unsqueeze")
def _unsqueeze(layer, a, fdt):
    rank = a[0].ndim + len(_ints(a[1]))
    axes = sorted(v + rank if v < 0 else v for v in _ints(a[1]))
    out = a[0]
    for ax in axes:
        out = np.expand_dims(out, ax)
    return out


@kernel("Concat")
def _concat(layer, a, fdt):
    return np.concatenate(a, axis=int(layer.attrs["axis"]))


@kernel("Split")
def _split(layer, a, fdt):
    return np.split(a[0], int(layer.attrs["num_splits"]), axis=int(_ints(a[1])[0]))


@kernel("VariadicSplit")
def _variadic_split(layer, a, fdt):
    """VariadicSplit-1: one length may be -1 (the rest)."""
    ax = int(_ints(a[1])[0])
    ax = ax + a[0].ndim if ax < 0 else ax
    lengths = _ints(a[2])
    if -1 in lengths:
        lengths[lengths.index(-1)] = a[0].shape[ax] - sum(v for v in lengths if v != -1)
    return np.split(a[0], np.cumsum(lengths)[:-1], axis=ax)


@kernel("Slice")
def _slice(layer, a, fdt):
    """Slice-8: start/stop/step per axis (all axes in order when absent), clamped like Python slicing."""
    data = a[0]
    starts, stops, steps = _ints(a[1]), _ints(a[2]), _ints(a[3])
    axes = _ints(a[4]) if len(a) > 4 else list(range(len(starts)))
    index = [slice(None)] * data.ndim
    for s, e, st, ax in zip(starts, stops, steps, axes):
        index[ax + data.ndim if ax < 0 else ax] = slice(s, e, st)
    return data[tuple(index)]


@kernel("Gather")
def _gather(layer, a, fdt):
    """Gather-8 with batch_dims 0: negative indices count from the end."""
    if int(layer.attrs.get("batch_dims", "0")) != 0:
        raise Unsupported(f"IR layer {layer.name!r}: Gather with batch_dims != 0")
    ax = int(_ints(a[2])[0])
    ax = ax + a[0].ndim if ax < 0 else ax
    idx = a[1].astype(np.int64)
    idx = np.where(idx < 0, idx + a[0].shape[ax], idx)
    return np.take(a[0], idx, axis=ax)


@kernel("Broadcast")
def _broadcast(layer, a, fdt):
    """Broadcast-3: numpy mode to exactly the target shape; bidirectional mode as numpy broadcasting."""
    target = _ints(a[1])
    if layer.attrs.get("mode", "numpy") == "bidirectional":
        target = np.broadcast_shapes(a[0].shape, tuple(target))
    return np.broadcast_to(a[0], tuple(target)).copy()


@kernel("MatMul")
def _matmul(layer, a, fdt):
    x, y = a
    if _flag(layer, "transpose_a") and x.ndim > 1:
        x = np.swapaxes(x, -1, -2)
    if _flag(layer, "transpose_b") and y.ndim > 1:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


@kernel("SoftMax")
def _softmax(layer, a, fdt):
    x = a[0]
    ax = int(layer.attrs.get("axis", "1"))
    e = np.exp(x - x.max(axis=ax, keepdims=True))
    return e / e.sum(axis=ax, keepdims=True)


@kernel("LogSoftmax")
def _log_softmax(layer, a, fdt):
    x = a[0]
    ax = int(layer.attrs.get("axis", "1"))
    m = x - x.max(axis=ax, keepdims=True)
    return m - np.log(np.exp(m).sum(axis=ax, keepdims=True))


@kernel("ReduceMean", "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin")
def _reduce(layer, a, fdt):
    f = {"ReduceMean": np.mean, "ReduceProd": np.prod, "ReduceSum": np.sum, "ReduceMax": np.max,
         "ReduceMin": np.min}[layer.type]
    axes = tuple(v + a[0].ndim if v < 0 else v for v in _ints(a[1]))
    return np.asarray(f(a[0], axis=axes, keepdims=_flag(layer, "keep_dims"))).astype(a[0].dtype)
