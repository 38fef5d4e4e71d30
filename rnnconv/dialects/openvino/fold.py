"""Constant folding for the IR -> ONNX translation: the values of layers whose inputs are all constants, for the
operations that compute shapes, indices and fills in real IR (what `ir_facts` needs to see through a graph).

Its own small table, not the verifier's IR interpreter (`rnnconv.engine.ir_graph`): the translation must not lean
on the engine that later checks it. Semantics: the OpenVINO operation specs (docs.openvino.ai, Operation
Specifications) of each op named here; anything else is not folded (the layer stays an operation).
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from rnnconv.dialects.openvino import graph as ovir

FOLD_LIMIT = 1 << 24  # elements: constant results larger than this stay operations


def _ints(x) -> list[int]:
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _axes(x, rank: int) -> tuple[int, ...]:
    return tuple(v + rank if v < 0 else v for v in _ints(x))


def _flag(layer, key: str, default: bool = False) -> bool:
    return str(layer.attrs.get(key, str(default))).lower() in ("true", "1")


def _reshape(layer, x, target):
    """Reshape-1: with special_zero a 0 copies the input dim at that position; one -1 is inferred."""
    shape = _ints(target)
    if _flag(layer, "special_zero"):
        shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
    return x.reshape(shape)


def _unsqueeze(layer, x, axes):
    out = x
    for ax in sorted(_axes(axes, x.ndim + len(_ints(axes)))):
        out = np.expand_dims(out, ax)
    return out


def _gather(layer, data, idx, axis):
    """Gather-8, batch_dims 0: negative indices count from the end."""
    if int(layer.attrs.get("batch_dims", "0")) != 0:
        raise ValueError("batch_dims")
    ax = _axes(axis, data.ndim)[0]
    idx = np.asarray(idx).astype(np.int64)
    return np.take(data, np.where(idx < 0, idx + data.shape[ax], idx), axis=ax)


def _slice(layer, data, start, stop, step, axes=None):
    """Slice-8: per axis, clamped like Python slicing; all axes in order when `axes` is absent."""
    index = [slice(None)] * data.ndim
    starts = _ints(start)
    for s, e, st, ax in zip(starts, _ints(stop), _ints(step), _ints(axes) if axes is not None else range(len(starts))):
        index[ax + data.ndim if ax < 0 else ax] = slice(s, e, st)
    return data[tuple(index)]


def _broadcast(layer, data, target, *_):
    """Broadcast-3: numpy mode to exactly the target shape; bidirectional as numpy broadcasting."""
    shape = tuple(_ints(target))
    if layer.attrs.get("mode", "numpy") == "bidirectional":
        shape = np.broadcast_shapes(data.shape, shape)
    return np.broadcast_to(data, shape).copy()


def _divide(layer, x, y):
    """Divide-1: integers floor when m_pythondiv (the default), else truncate."""
    if x.dtype.kind in "iu":
        return np.floor_divide(x, y) if _flag(layer, "m_pythondiv", True) else np.trunc(x / y).astype(x.dtype)
    return np.divide(x, y)


def _reduce(f):
    return lambda layer, x, axes: f(x, axis=_axes(axes, x.ndim), keepdims=_flag(layer, "keep_dims"))


FOLDERS: dict[str, Callable] = {
    "ShapeOf": lambda layer, x: np.array(x.shape, ovir.numpy_dtype(layer.attrs.get("output_type", "i64"))),
    "Reshape": _reshape,
    "Squeeze": lambda layer, x, axes=None: np.squeeze(x) if axes is None else np.squeeze(x, _axes(axes, x.ndim)),
    "Unsqueeze": _unsqueeze,
    "Transpose": lambda layer, x, order: np.transpose(x, _ints(order) or None),
    "Concat": lambda layer, *xs: np.concatenate(xs, axis=int(layer.attrs["axis"])),
    "Gather": _gather,
    "Slice": _slice,
    "Broadcast": _broadcast,
    "Range": lambda layer, start, stop, step: np.arange(np.asarray(start).item(), np.asarray(stop).item(),
                                                        np.asarray(step).item()).astype(
        ovir.numpy_dtype(layer.attrs.get("output_type", "i64"))),
    "Add": lambda layer, x, y: x + y,
    "Subtract": lambda layer, x, y: x - y,
    "Multiply": lambda layer, x, y: x * y,
    "Divide": _divide,
    "Maximum": lambda layer, x, y: np.maximum(x, y),
    "Minimum": lambda layer, x, y: np.minimum(x, y),
    "Negative": lambda layer, x: -x,
    "Equal": lambda layer, x, y: np.equal(x, y),
    "Select": lambda layer, c, x, y: np.where(c.astype(bool), x, y),
    "ReduceProd": _reduce(np.prod),
    "ReduceSum": _reduce(np.sum),
    "ReduceMin": _reduce(np.min),
    "ReduceMax": _reduce(np.max),
}


def fold(layer: ovir.IRLayer, args: list[np.ndarray]) -> Optional[list[np.ndarray]]:
    """The outputs of `layer` from its constant inputs, in its ports' element types; None when this table has no
    folder for it, the folder fails, or a result is too large to keep as a constant."""
    try:
        if layer.type == "Convert":
            results = [np.asarray(args[0]).astype(ovir.numpy_dtype(layer.attrs["destination_type"]))]
        elif layer.type in FOLDERS:
            results = [np.asarray(FOLDERS[layer.type](layer, *[np.asarray(a) for a in args]))]
        else:
            return None
    except Exception:  # a layer whose constants do not fit its op: left to run
        return None
    if len(results) != len(layer.outputs) or any(r.size > FOLD_LIMIT for r in results):
        return None
    out = []
    for port, r in zip(layer.outputs, results):
        want = ovir.ELEMENT_TYPES.get(port.element_type)
        out.append(r.astype(want[1]) if want is not None and r.dtype != want[1] else r)
    return out
