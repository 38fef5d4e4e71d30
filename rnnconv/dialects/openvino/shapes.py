"""Output port element types and dims of the IR operations rnnconv emits (-1: dynamic; None: dynamic rank).

Each rule follows the "Shape inference" / output description of the op's page in the OpenVINO operation specs
(docs.openvino.ai, Operation Specifications). Values are known only for Const inputs; anything else gives -1.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.errors import BadInput

Dims = Optional[list[int]]

UNARY = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Negative", "Abs", "Erf", "SoftMax", "Softmax",
         "LogSoftmax", "Clamp", "Elu", "HSigmoid", "SoftPlus", "Floor", "Ceiling", "Sign", "Sin", "Cos",
         "ReverseSequence", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Mish",
         "SoftSign", "HSwish", "Round", "Gelu", "Swish", "Selu", "MVN", "CumSum", "ScatterNDUpdate",
         "BatchNormInference"}
BINARY = {"Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Power", "SquaredDifference", "Mod",
          "FloorMod"}
COMPARE = {"Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
           "LogicalXor"}
REDUCE = {"ReduceMean", "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"}


def broadcast(a: Dims, b: Dims) -> Dims:
    """numpy broadcasting of two partial shapes."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x == -1 or y == -1:
            out.append(max(x, y) if min(x, y) == -1 and max(x, y) > 1 else -1)
        elif x == y:
            out.append(x)
        else:
            raise BadInput(f"shapes {a} and {b} do not broadcast")
    return out


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _flag(attrs: dict, key: str, default=False) -> bool:
    v = attrs.get(key)
    return default if v is None else str(v).lower() in ("true", "1")


def _csv(text) -> list[int]:
    return [int(v) for v in str(text or "").replace(" ", "").split(",") if v]


def _window(a: dict, x: Dims, kernel: list[int], *, transposed: bool = False, rounding: str = "floor") -> Dims:
    """Output dims of a convolution / pooling / transposed convolution (the Convolution-1, MaxPool-8, AvgPool-1
    and ConvolutionBackpropData-1 pages): [N, ?, spatial...] with channel left to the caller."""
    if x is None:
        return None
    n = len(kernel)
    strides, dil = _csv(a.get("strides")) or [1] * n, _csv(a.get("dilations")) or [1] * n
    pb, pe = _csv(a.get("pads_begin")) or [0] * n, _csv(a.get("pads_end")) or [0] * n
    auto = str(a.get("auto_pad", "explicit")).lower()
    if auto == "valid" or (transposed and auto.startswith("same")):
        pb, pe = [0] * n, [0] * n  # ConvolutionBackpropData pads nothing for same_* without output_shape
    out_pad = _csv(a.get("output_padding")) or [0] * n
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


def _einsum_dims(equation: str, dims: list[Dims]) -> Dims:
    """Output dims of an Einsum-7 equation with an explicit "->" (letters only; "..." gives a dynamic rank)."""
    eq = equation.replace(" ", "")
    if "->" not in eq or "." in eq or any(x is None for x in dims):
        return None
    lhs, out = eq.split("->")
    size = {}
    for term, x in zip(lhs.split(","), dims):
        for letter, v in zip(term, x):
            if v >= 0 or letter not in size:
                size[letter] = v
    return [size.get(letter, -1) for letter in out]


def infer(layer, inputs) -> list[tuple[str, Dims]]:
    t, a = layer.type, layer.attrs
    d = [x.dims for x in inputs]
    c = [x.const for x in inputs]
    et0 = inputs[0].element_type if inputs else "f32"

    if t in UNARY:
        return [(et0, d[0])]
    if t == "Convert":
        return [(a["destination_type"], d[0])]
    if t in BINARY:
        return [(et0, broadcast(d[0], d[1]))]
    if t in COMPARE:
        return [("boolean", broadcast(d[0], d[1]))]
    if t == "LogicalNot":
        return [("boolean", d[0])]
    if t == "Select":
        return [(inputs[1].element_type, broadcast(d[0], broadcast(d[1], d[2])))]
    if t == "PRelu":
        return [(et0, d[0])]
    if t == "Tile":
        if d[0] is None or c[1] is None:
            return [(et0, None if d[0] is None else [-1] * max(len(d[0]), d[1][0] if d[1] else 0))]
        reps = [int(v) for v in c[1].reshape(-1)]
        n = max(len(d[0]), len(reps))
        x = [1] * (n - len(d[0])) + list(d[0])
        reps = [1] * (n - len(reps)) + reps
        return [(et0, [a * r if a >= 0 else -1 for a, r in zip(x, reps)])]
    if t == "Range":
        if all(v is not None for v in c[:3]):
            start, stop, step = (float(v.reshape(-1)[0]) for v in c[:3])
            return [(a.get("output_type", et0), [max(0, int(np.ceil((stop - start) / step)))])]
        return [(a.get("output_type", et0), [-1])]
    if t == "ShapeOf":
        return [(a.get("output_type", "i64"), None if d[0] is None else [len(d[0])])]
    if t == "Transpose":
        if d[0] is None:
            return [(et0, None)]
        if c[1] is None:
            return [(et0, [-1] * len(d[0]))]
        order = [int(o) for o in c[1].reshape(-1)] or list(range(len(d[0]) - 1, -1, -1))
        return [(et0, [d[0][o] for o in order])]
    if t == "Reshape":
        if c[1] is None:
            n = d[1][0] if d[1] else -1
            return [(et0, None if n < 0 else [-1] * n)]
        target = [int(v) for v in c[1].reshape(-1)]
        special_zero = _flag(a, "special_zero")
        out = [(d[0][i] if d[0] is not None and i < len(d[0]) else -1) if (v == 0 and special_zero) else v
               for i, v in enumerate(target)]
        if -1 in out and d[0] is not None and all(x >= 0 for x in d[0]) and out.count(-1) == 1:
            known = int(np.prod([x for x in out if x != -1], dtype=np.int64))
            total = int(np.prod(d[0], dtype=np.int64))
            out[out.index(-1)] = total // known if known else 0
        return [(et0, out)]
    if t in ("Squeeze", "Unsqueeze"):
        if d[0] is None:
            return [(et0, None)]
        if len(inputs) < 2:
            return [(et0, [x for x in d[0] if x != 1])]
        if c[1] is None:
            return [(et0, None)]
        axes = [int(v) for v in c[1].reshape(-1)]
        if t == "Squeeze":
            axes = {_axis(x, len(d[0])) for x in axes}
            return [(et0, [x for i, x in enumerate(d[0]) if i not in axes])]
        rank = len(d[0]) + len(axes)
        axes = sorted(_axis(x, rank) for x in axes)
        out, it = [], iter(d[0])
        for i in range(rank):
            out.append(1 if i in axes else next(it))
        return [(et0, out)]
    if t == "Concat":
        if any(x is None for x in d):
            return [(et0, None)]
        ax = _axis(int(a["axis"]), len(d[0]))
        out = list(d[0])
        for x in d[1:]:
            for i, v in enumerate(x):
                if i != ax and out[i] == -1:
                    out[i] = v
        out[ax] = -1 if any(x[ax] < 0 for x in d) else sum(x[ax] for x in d)
        return [(et0, out)]
    if t == "Split":
        n = int(a["num_splits"])
        if d[0] is None or c[1] is None:
            return [(et0, d[0])] * n
        ax = _axis(int(c[1].reshape(-1)[0]), len(d[0]))
        out = list(d[0])
        out[ax] = out[ax] // n if out[ax] >= 0 else -1
        return [(et0, out)] * n
    if t == "VariadicSplit":
        lengths = [int(v) for v in c[2].reshape(-1)]
        ax = _axis(int(c[1].reshape(-1)[0]), len(d[0]))
        outs = []
        for n in lengths:
            out = list(d[0])
            if n == -1:
                rest = sum(x for x in lengths if x != -1)
                out[ax] = d[0][ax] - rest if d[0][ax] >= 0 else -1
            else:
                out[ax] = n
            outs.append((et0, out))
        return outs
    if t == "Slice":
        if d[0] is None:
            return [(et0, None)]
        out = list(d[0])
        if len(inputs) > 4 and c[4] is None:
            return [(et0, [-1] * len(out))]
        axes = [int(v) for v in c[4].reshape(-1)] if len(inputs) > 4 else list(range(len(c[1].reshape(-1)) if
                                                                                    c[1] is not None else 0))
        for j, ax in enumerate(axes):
            ax = _axis(ax, len(out))
            if out[ax] >= 0 and all(x is not None for x in c[1:4]):
                start, stop, step = (int(c[k].reshape(-1)[j]) for k in (1, 2, 3))
                out[ax] = len(range(*slice(start, stop, step).indices(out[ax])))
            else:
                out[ax] = -1
        if len(inputs) <= 4 and c[1] is None:
            out = [-1] * len(out)
        return [(et0, out)]
    if t == "Gather":
        if d[0] is None or d[1] is None or c[2] is None:
            return [(et0, None)]
        ax = _axis(int(c[2].reshape(-1)[0]), len(d[0]))
        return [(et0, d[0][:ax] + d[1] + d[0][ax + 1:])]
    if t == "Broadcast":
        mode = a.get("mode", "numpy")
        if c[1] is None:
            n = d[1][0] if d[1] else -1
            if n < 0:
                return [(et0, None)]
            if mode == "bidirectional" and d[0] is not None:
                return [(et0, [-1] * max(n, len(d[0])))]
            return [(et0, [-1] * n)]
        target = [int(v) for v in c[1].reshape(-1)]
        if mode == "bidirectional":
            return [(et0, broadcast(d[0], target))]
        return [(et0, target)]
    if t == "MatMul":
        if d[0] is None or d[1] is None:
            return [(et0, None)]
        x, y = list(d[0]), list(d[1])
        if _flag(a, "transpose_a") and len(x) > 1:
            x[-1], x[-2] = x[-2], x[-1]
        if _flag(a, "transpose_b") and len(y) > 1:
            y[-1], y[-2] = y[-2], y[-1]
        if len(x) == 1 and len(y) == 1:
            return [(et0, [])]
        if len(x) == 1:
            return [(et0, y[:-2] + y[-1:])]
        if len(y) == 1:
            return [(et0, x[:-1])]
        batch = broadcast(x[:-2], y[:-2])
        return [(et0, batch + [x[-2], y[-1]])]
    if t in REDUCE:
        if d[0] is None or c[1] is None:
            return [(et0, None)]
        axes = {_axis(int(v), len(d[0])) for v in c[1].reshape(-1)}
        keep = _flag(a, "keep_dims")
        return [(et0, [1 if i in axes else x for i, x in enumerate(d[0]) if keep or i not in axes])]
    if t in ("Convolution", "GroupConvolution", "ConvolutionBackpropData", "GroupConvolutionBackpropData"):
        w = d[1]
        grouped = t.startswith("Group")
        kernel = w[3:] if grouped else w[2:]
        out = _window(a, d[0], kernel, transposed=t.endswith("BackpropData"))
        if out is not None:
            if t == "Convolution":
                out[1] = w[0]
            elif t == "GroupConvolution":
                out[1] = w[0] * w[1]
            elif t == "ConvolutionBackpropData":
                out[1] = w[1]
            else:
                out[1] = w[0] * w[2]
        return [(et0, out)]
    if t in ("MaxPool", "AvgPool"):
        out = _window(a, d[0], _csv(a["kernel"]), rounding=str(a.get("rounding_type", "floor")).lower())
        if out is not None:
            out[1] = d[0][1]
        outs = [(et0, out)]
        if t == "MaxPool" and layer.version != "opset1":
            outs.append((a.get("index_element_type", "i64"), out))
        return outs
    if t == "Pad":
        if d[0] is None or c[1] is None or c[2] is None:
            return [(et0, None if d[0] is None else [-1] * len(d[0]))]
        return [(et0, [x + int(p) + int(q) if x >= 0 else -1 for x, p, q in zip(d[0], c[1].reshape(-1),
                                                                                 c[2].reshape(-1))])]
    if t == "NonZero":
        return [(a.get("output_type", "i64"), [len(d[0]) if d[0] is not None else -1, -1])]
    if t == "Einsum":
        return [(et0, _einsum_dims(a["equation"], d))]
    if t == "Interpolate":
        if d[0] is None:
            return [(et0, None)]
        out = list(d[0])
        axes = [int(v) for v in c[2].reshape(-1)] if len(inputs) > 2 and c[2] is not None else list(range(len(out)))
        values = c[1]
        for j, ax in enumerate(axes):
            if values is None:
                out[ax] = -1
            elif a.get("shape_calculation_mode") == "sizes":
                out[ax] = int(values.reshape(-1)[j])
            elif out[ax] >= 0:
                out[ax] = int(np.floor(out[ax] * float(values.reshape(-1)[j]) + 1e-5))
        return [(et0, out)]
    if t == "STFT":
        if d[0] is None or c[2] is None or c[3] is None:
            return [(et0, None if d[0] is None else [-1] * (len(d[0]) + 2))]
        frame, step = int(c[2].reshape(-1)[0]), int(c[3].reshape(-1)[0])
        length = d[0][-1]
        frames = (length - frame) // step + 1 if length >= 0 else -1
        tail = [frame // 2 + 1, frames] if _flag(a, "transpose_frames") else [frames, frame // 2 + 1]
        return [(et0, d[0][:-1] + tail + [2])]
    if t == "RDFT":  # one output: the transformed axes resized (signal_size), the last one halved, then [2]
        if d[0] is None or c[1] is None:
            return [(et0, None if d[0] is None else [-1] * (len(d[0]) + 1))]
        axes = [int(v) % len(d[0]) for v in c[1].reshape(-1)]
        sizes = [int(v) for v in c[2].reshape(-1)] if len(inputs) > 2 and c[2] is not None else [-1] * len(axes)
        out = list(d[0])
        for ax, size in zip(axes, sizes):
            out[ax] = size if size != -1 else out[ax]
        out[axes[-1]] = out[axes[-1]] // 2 + 1 if out[axes[-1]] >= 0 else -1
        return [(et0, out + [2])]
    if t in ("LSTMSequence", "GRUSequence", "RNNSequence"):
        x, w = d[0], d[4 if t == "LSTMSequence" else 3]
        n, tt = (x[0], x[1]) if x else (-1, -1)
        nd = w[0] if w else -1
        h = int(a["hidden_size"])
        outs = [(et0, [n, nd, tt, h]), (et0, [n, nd, h])]
        if t == "LSTMSequence":
            outs.append((et0, [n, nd, h]))
        return outs
    raise BadInput(f"no shape rule for IR operation {t}")
