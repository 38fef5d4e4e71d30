"""An interpreter of OpenVINO IR, with OpenVINO's semantics (not ONNX's): the operations rnnconv emits and those
real models' IR holds (network layers in `ir_nn`), If / Loop / TensorIterator included.

Each kernel follows its page in the OpenVINO operation specs (docs.openvino.ai, Operation Specifications);
the Sequence ops split OpenVINO's tensors (fico gate order, folded bias, batch-major [N,D,T,H] Y, GRU
linear_before_reset 4H bias) back into gate names and call the shared recurrence core.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping, Union

import numpy as np

from rnnconv.dialects.openvino import (
    gates as ov_gates,  # activations only: see _SPEC_ORDER
)
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.engine import ir_more, ir_nn  # noqa: F401  (ir_more registers its kernels)
from rnnconv.engine.recurrence import run_direction
from rnnconv.errors import BadInput, Unsupported

PRECISIONS = {"float64": np.float64, "float32": np.float32}

# One registry: ir_nn's kernels (convolutions, pooling, resizing, normalization...) and the ones here.
KERNELS: dict[str, Callable] = ir_nn.KERNELS
kernel = ir_nn.kernel


def run_ir(graph: Union[ovir.IRGraph, str, os.PathLike], feeds: Mapping[str, np.ndarray],
           precision: str = "float64", *, keep: bool = False) -> dict[str, np.ndarray]:
    """Run an IR graph (or an .xml path); returns each Result's value under its tensor name.

    Floating-point tensors are computed in `precision`. `keep=True` returns every named tensor too.
    """
    if not isinstance(graph, ovir.IRGraph):
        graph = ov_reader.read(Path(graph))
    fdt = np.dtype(PRECISIONS[precision])
    return _execute(graph, feeds, fdt, keep)[0]


def _float(x, fdt):
    x = np.asarray(x)
    return x.astype(fdt, copy=False) if ovir.is_float(x.dtype) else x


def _execute(graph: ovir.IRGraph, feeds, fdt, keep=False, *, inner: dict | None = None):
    """(values by tensor name, values by (layer id, port id)); `inner` feeds a body's Parameters by layer id."""
    producers = graph.producers()
    result_names = dict(zip((r.id for r in graph.results()), graph.output_names()))
    computed: dict[tuple[int, int], np.ndarray] = {}
    outputs: dict[str, np.ndarray] = {}
    for layer in graph.topological():
        args = []
        for p in layer.inputs:
            src = producers.get((layer.id, p.id))
            if src is None:
                raise BadInput(f"IR layer {layer.name!r} input port {p.id} is not connected")
            if src not in computed:
                raise BadInput(f"IR edge into layer {layer.name!r} port {p.id} comes from output port {src[1]} of "
                               f"layer {src[0]}, which it does not have")
            arg = computed[src]
            if isinstance(arg, ovir.Pieces) and layer.type not in _TAKES_PIECES:
                arg = computed[src] = np.asarray(arg)  # joined once, for the kernels that compute on arrays
            args.append(arg)
        if layer.type == "Parameter":
            if inner is not None and layer.id in inner:
                value = inner[layer.id]
            else:
                name = layer.outputs[0].names[0] if layer.outputs[0].names else layer.name
                if name not in feeds:
                    raise BadInput(f"no value fed for IR Parameter {name!r}")
                value = np.asarray(feeds[name])
                want = ovir.numpy_dtype(layer.attrs.get("element_type", layer.outputs[0].element_type))
                value = value.astype(want) if not ovir.is_float(want) else value
            results = [_float(value, fdt)]
        elif layer.type == "Const" and isinstance(layer.value, ovir.Pieces):
            # Lazy: a Sequence op reads its weights gate by gate where they lie (memory-mapped, for big models).
            results = [layer.value.astype(fdt) if ovir.is_float(layer.value.dtype) else layer.value]
        elif layer.type == "Const":
            results = [_float(layer.value, fdt)]
        elif layer.type == "Result":
            outputs[result_names[layer.id]] = args[0]
            computed[(layer.id, -1)] = args[0]
            continue
        else:
            fn = KERNELS.get(layer.type) or _BY_LOWER.get(layer.type.lower())
            if fn is None:
                raise Unsupported(f"IR layer {layer.name!r}: the interpreter has no kernel for {layer.type}")
            results = fn(layer, args, fdt)
            if not isinstance(results, (list, tuple)):
                results = [results]
        for port, value in zip(layer.outputs, results):
            computed[(layer.id, port.id)] = value
            if keep:
                for n in port.names:
                    outputs.setdefault(n, value)
    return outputs, computed


def _flag(layer, key, default=False):
    v = layer.attrs.get(key)
    return default if v is None else v.lower() in ("true", "1")


def _ints(x):
    return [int(v) for v in np.asarray(x).reshape(-1)]


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
    KERNELS[_t] = (lambda f: lambda layer, a, fdt: f(a[0]).astype(a[0].dtype))(_f)


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


@kernel("PRelu")  # the spec and ov.save_model spell it PReLU (the reader canonicalizes; _BY_LOWER)
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


# -- recurrent ---------------------------------------------------------------------------------------------
# Gate order and bias layout restated from the OpenVINO spec pages on purpose, not imported from the writer's
# dialect table: a wrong table must make the writer and this interpreter disagree, or verification proves nothing.
_SPEC_ORDER = {"LSTM": ("f", "i", "c", "o"), "GRU": ("z", "r", "h"), "RNN": ("i",)}


_TAKES_PIECES = frozenset({"LSTMSequence", "GRUSequence", "RNNSequence"})


def _gate_blocks(value, d: int, n: int) -> tuple[list, list]:
    """Direction d of a stacked weight [D, n*H, K] as n gate blocks [H, K], and the memory-mapped views read.

    Pieces laid out one piece per gate (to-openvino's reordered weights) give the pieces themselves: a big
    model's weights are never joined into a new array."""
    if isinstance(value, ovir.Pieces):
        one = value[d:d + 1]
        if isinstance(one, ovir.Pieces) and len(one.parts) == n and all(p.size * n == one.size for p in one.parts):
            shape = (one.shape[1] // n, *one.shape[2:])
            return [p.reshape(shape).astype(one.dtype, copy=False) for p in one.parts], one.parts
        value = np.asarray(value)
    return np.split(np.asarray(value[d]), n), []


def _split_spec(kind, W, R, B, lbr):
    """W, R: gate blocks in spec order; B [G*H] (GRU lbr: [4H] = Wbz+Rbz, Wbr+Rbr, Wbh, Rbh) -> gate dicts W,
    R, Wb, Rb."""
    order = _SPEC_ORDER[kind]
    Wd = dict(zip(order, W))
    Rd = dict(zip(order, R))
    if kind == "GRU" and lbr:
        bz, br, wbh, rbh = np.split(B, 4)
        return Wd, Rd, {"z": bz, "r": br, "h": wbh}, {"h": rbh}
    return Wd, Rd, dict(zip(order, np.split(B, len(order)))), {}


@kernel("LSTMSequence", "GRUSequence", "RNNSequence")
def _sequence(layer, a, fdt):
    """LSTMSequence-5, GRUSequence-5, RNNSequence-5 (OpenVINO spec pages of the same names).

    Inputs X [N,T,I], H0 [N,D,H] (, C0 [N,D,H]), sequence_lengths [N], W [D,G*H,I], R [D,G*H,H], B [D,G*H]
    (GRU linear_before_reset: [D,4H]); outputs Y [N,D,T,H], Ho [N,D,H] (, Co [N,D,H]).
    """
    kind = layer.type[: -len("Sequence")]
    if kind == "LSTM":
        X, H0, C0, lens, W, R, B = a
    else:
        X, H0, lens, W, R, B = a
        C0 = None
    lbr = _flag(layer, "linear_before_reset")
    direction = layer.attrs.get("direction", "forward")
    acts = ov_gates.activations_from_attrs(kind, layer.attrs)
    clip = float(layer.attrs.get("clip", "0") or 0)
    N = X.shape[0]
    lens = np.asarray(lens).astype(np.int64)
    if lens.size == 1 and N != 1:
        lens = np.broadcast_to(lens, (N,))
    Xt = np.transpose(X, (1, 0, 2))
    ys, hs, cs = [], [], []
    reverse_flags = [direction == "reverse"] if direction != "bidirectional" else [False, True]
    n = len(_SPEC_ORDER[kind])
    B = np.asarray(B)
    for d, reverse in enumerate(reverse_flags):
        (Wg, w_read), (Rg, r_read) = _gate_blocks(W, d, n), _gate_blocks(R, d, n)
        Wd, Rd, Wb, Rb = _split_spec(kind, Wg, Rg, B[d], lbr)
        Y, Yh, Yc = run_direction(
            kind, Xt, Wd, Rd, Wb, Rb, {}, acts, clip=clip if clip > 0 else None, linear_before_reset=lbr,
            input_forget=False, sequence_lens=lens, initial_h=H0[:, d], initial_c=None if C0 is None else C0[:, d],
            reverse=reverse, dtype=fdt)
        for weights, read in ((W, w_read), (R, r_read)):  # resident one direction at a time
            for part in read:
                weights.release(part)
        ys.append(np.transpose(Y, (1, 0, 2)))  # [N,T,H]
        hs.append(Yh)
        cs.append(Yc)
    out = [np.stack(ys, axis=1).astype(fdt), np.stack(hs, axis=1).astype(fdt)]
    if kind == "LSTM":
        out.append(np.stack(cs, axis=1).astype(fdt))
    return out


@kernel("LSTMCell", "GRUCell", "RNNCell")
def _cell(layer, a, fdt):
    """LSTMCell-1/4, GRUCell-3, RNNCell-0 (OpenVINO spec pages of the same names): one step.

    Inputs X [N,I], H [N,H] (, C [N,H]), W [G*H,I], R [G*H,H], B [G*H] (GRU linear_before_reset: [4H]); outputs
    Ho [N,H] (, Co [N,H]).
    """
    kind = layer.type[: -len("Cell")]
    n_state = 2 if kind == "LSTM" else 1
    X, states, (W, R, B) = a[0], a[1:1 + n_state], a[1 + n_state:4 + n_state]
    lbr = _flag(layer, "linear_before_reset")
    n = len(_SPEC_ORDER[kind])
    Wd, Rd, Wb, Rb = _split_spec(kind, np.split(np.asarray(W), n), np.split(np.asarray(R), n), np.asarray(B), lbr)
    clip = float(layer.attrs.get("clip", "0") or 0)
    acts = ov_gates.activations_from_attrs(kind, layer.attrs)
    _, Yh, Yc = run_direction(kind, X[None], Wd, Rd, Wb, Rb, {}, acts, clip=clip if clip > 0 else None,
                              linear_before_reset=lbr, sequence_lens=None, initial_h=states[0],
                              initial_c=states[1] if kind == "LSTM" else None, dtype=fdt)
    return [Yh.astype(fdt)] + ([Yc.astype(fdt)] if kind == "LSTM" else [])


@kernel("TensorIterator", "Loop")
def _loop(layer, args, fdt):
    """TensorIterator-1 and Loop-5: inputs with `axis` are sliced per iteration (part_size items; stride -1 walks
    from the end), inputs with a back edge start from the outer value and then take the body Result the edge
    names, the others are fed as they are; outputs with `axis` are concatenated over the iterations (in reverse
    for stride -1), the others give the last iteration's value. TensorIterator runs once per slice; Loop while
    the iteration is below trip_count (negative: no bound) and the condition holds (the execution_condition
    input, then the body's execution_condition output), its current_iteration Parameter fed the iteration."""
    body = layer.body
    inputs = [pm for kind, pm in layer.port_map if kind == "input"]
    outs = [pm for kind, pm in layer.port_map if kind == "output" and not pm.get("purpose")]
    special = {pm.get("purpose"): int(pm["internal_layer_id"]) for kind, pm in layer.port_map if pm.get("purpose")}
    back = {int(be["to-layer"]): int(be["from-layer"]) for be in layer.back_edges}
    port_index = {p.id: i for i, p in enumerate(layer.inputs)}

    def outer(pm):
        return args[port_index[int(pm["external_port_id"])]]

    sliced = [(int(pm["internal_layer_id"]), outer(pm), pm) for pm in inputs if "axis" in pm]
    state = {int(pm["internal_layer_id"]): outer(pm) for pm in inputs if "axis" not in pm and not pm.get("purpose")}
    n_slices = None
    for _, value, pm in sliced:
        n = value.shape[int(pm["axis"]) % value.ndim] // abs(int(pm.get("part_size", "1")))
        n_slices = n if n_slices is None else min(n_slices, n)
    if layer.type == "Loop":
        trip = int(np.asarray(args[0]).reshape(-1)[0])
        limit = trip if trip >= 0 else n_slices
        go = bool(np.asarray(args[1]).reshape(-1)[0])
    else:
        if n_slices is None:
            raise Unsupported(f"IR layer {layer.name!r}: TensorIterator without a sliced input")
        limit, go = n_slices, True
    collected: dict[int, list] = {int(pm["internal_layer_id"]): [] for pm in outs}
    it = 0
    while go and (limit is None or it < limit):
        feed = dict(state)
        for lid, value, pm in sliced:
            ax = int(pm["axis"]) % value.ndim
            size = int(pm.get("part_size", "1"))
            i = it if int(pm.get("stride", "1")) > 0 else n_slices - 1 - it
            index = [slice(None)] * value.ndim
            index[ax] = slice(i * size, (i + 1) * size)
            feed[lid] = value[tuple(index)]
        if "current_iteration" in special:
            param = next(p for p in body.layers if p.id == special["current_iteration"])
            port = param.outputs[0]
            feed[param.id] = np.array(it, ovir.numpy_dtype(port.element_type)).reshape(port.dims or ())
        computed = _execute(body, {}, fdt, inner=feed)[1]
        results = {res.id: computed[(res.id, -1)] for res in body.results()}
        for lid in collected:
            collected[lid].append(results[lid])
        for to_layer, from_layer in back.items():
            state[to_layer] = results[from_layer]
        if "execution_condition" in special:
            go = bool(np.asarray(results[special["execution_condition"]]).reshape(-1)[0])
        it += 1
    values = []
    for pm in outs:
        parts = collected[int(pm["internal_layer_id"])]
        if "axis" in pm:
            if int(pm.get("stride", "1")) < 0:
                parts = parts[::-1]
            values.append(np.concatenate(parts, axis=int(pm["axis"])))
        else:
            values.append(parts[-1])
    by_port = {int(pm["external_port_id"]): v for pm, v in zip(outs, values)}
    return [by_port[p.id] for p in layer.outputs]


@kernel("If")
def _if(layer, args, fdt):
    """If-8: the branch the condition selects (then_body when true), its Parameters fed the inputs its port_map
    names, each output the branch Result its port_map names."""
    branch = "then" if bool(np.asarray(args[0]).reshape(-1)[0]) else "else"
    body, port_map = layer.branches[branch]
    index = {p.id: i for i, p in enumerate(layer.inputs)}
    feed = {int(pm["internal_layer_id"]): args[index[int(pm["external_port_id"])]] for kind, pm in port_map
            if kind == "input"}
    computed = _execute(body, {}, fdt, inner=feed)[1]
    results = {int(pm["external_port_id"]): computed[(int(pm["internal_layer_id"]), -1)] for kind, pm in port_map
               if kind == "output"}
    return [results[p.id] for p in layer.outputs]


_BY_LOWER = {t.lower(): fn for t, fn in KERNELS.items()}  # IR written in other letter cases (ReLU, PReLU...)
