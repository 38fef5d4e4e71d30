"""Sizes of dynamic input dims that the model itself fixes: the feature size a MatMul, Gemm, Conv or recurrent
node's weights read, the channels of a normalization's scale, a size a broadcast against a constant or a Concat
demands. Drawn at any other size, such a model does not run at all.

ONNX: each dynamic input axis gets a symbol, onnx's shape inference carries the symbols through the graph, and the
nodes that hold a symbol against a weight's size fix it (symbols held against each other are one size). OpenVINO
IR: the axis of a weight-reading layer's data input is traced back to its Parameter through layers that keep axes.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import constant_array
from rnnconv.dialects.openvino.gates import SEQUENCES
from rnnconv.io import reading

# How a size an Equal tests reads in its `why`: a branch's size (x.squeeze(-1) when the dim is 1), which the model
# may also take at other sizes, so input drawing tries without it too (checks._size_attempts).
COMPARED = "compares it with"
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "PRelu", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less",
              "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "Mod"}
_RECURRENT = {"GRU", "LSTM", "RNN", "DynamicQuantizeLSTM"}
ROUNDS = 3  # inference again with the sizes found: a size fixed late (after a Conv) can fix the next


class _Sizes:
    """Union-find over symbols; a class's size with the reason it was fixed."""

    def __init__(self):
        self.parent: dict[str, str] = {}
        self.size: dict[str, tuple[int, str]] = {}

    def find(self, s: str) -> str:
        while self.parent.get(s, s) != s:
            s = self.parent[s]
        return s

    def hold(self, a, b, why: str) -> None:
        """a and b must be equal: a symbol against a size fixes it, two symbols become one."""
        if isinstance(a, str) and isinstance(b, str):
            ra, rb = self.find(a), self.find(b)
            if ra != rb:
                self.parent[rb] = ra
                if rb in self.size:
                    self.size.setdefault(ra, self.size[rb])
        elif isinstance(a, str) and isinstance(b, (int, np.integer)) and b > 0:
            self.size.setdefault(self.find(a), (int(b), why))
        elif isinstance(b, str) and isinstance(a, (int, np.integer)) and a > 0:
            self.size.setdefault(self.find(b), (int(a), why))

    def of(self, s: str) -> Optional[tuple[int, str]]:
        return self.size.get(self.find(s))


def onnx_sizes(model: ir.Model, axes: list[tuple[str, int, Optional[str]]]) -> dict[tuple[str, int], tuple]:
    """(input, axis) -> (size, why) for the dynamic `axes` ((input, axis, symbol name or None)) the model fixes."""
    symbols = {(name, axis): sym or f"rnnconv_{name}_{axis}" for name, axis, sym in axes}
    ours = set(symbols.values())
    found: dict[tuple[str, int], tuple] = {}
    for _ in range(ROUNDS):
        open_symbols = {k: s for k, s in symbols.items() if k not in found}
        if not open_symbols:
            break
        shapes = reading.inferred_shapes(model, {**open_symbols, **{k: v[0] for k, v in found.items()}})
        sizes = _Sizes()
        for node in model.graph:
            _onnx_rule(node, lambda v: _shape(v, shapes, ours), sizes)
        _split_states(model, lambda v: _shape(v, shapes, ours), sizes)
        new = {k: sizes.of(s) for k, s in open_symbols.items() if sizes.of(s) is not None}
        if not new:
            break
        found.update(new)
    return found


def _shape(v: Optional[ir.Value], shapes: dict, ours: set) -> Optional[list]:
    """A value's dims: ints, our symbols (str), None for what is unknown."""
    if v is None:
        return None
    if v.const_value is not None:
        return list(v.const_value.shape)
    dims = shapes.get(v.name)
    if dims is None:
        return None
    return [d if isinstance(d, int) or d in ours else None for d in dims]


def _attr(node: ir.Node, name: str, default):
    a = node.attributes.get(name)
    return default if a is None else a.value


def _onnx_rule(node: ir.Node, shape: Callable, sizes: _Sizes) -> None:
    op, label = node.op_type, f"{node.op_type} {node.name!r}" if node.name else node.op_type
    ins = [shape(v) for v in node.inputs]

    def hold(i: int, axis: int, j: int, axis_j: int, what: str, scale: int = 1) -> None:
        a, b = (ins[i] if i < len(ins) else None), (ins[j] if j < len(ins) else None)
        if not a or not b or not -len(a) <= axis < len(a) or not -len(b) <= axis_j < len(b):
            return
        other = b[axis_j] * scale if isinstance(b[axis_j], int) else b[axis_j] if scale == 1 else None
        sizes.hold(a[axis], other, f"{what} of {label}")

    if op == "MatMul" and len(ins) == 2:
        b = ins[1]
        hold(0, -1, 1, -2 if b and len(b) > 1 else 0, "the inner size")
    elif op == "Gemm" and len(ins) >= 2:
        hold(0, 0 if _attr(node, "transA", 0) else 1, 1, 1 if _attr(node, "transB", 0) else 0, "the inner size")
    elif op == "Conv":
        hold(0, 1, 1, 1, "the input channels", scale=_attr(node, "group", 1))
    elif op == "ConvTranspose":
        hold(0, 1, 1, 0, "the input channels")
    elif op in _RECURRENT and len(ins) >= 3:
        # W [num_directions, gates*H, input_size], R [.., H]; DynamicQuantizeLSTM's are [num_directions, .., 4*H]
        k = 1 if op == "DynamicQuantizeLSTM" else 2
        hold(0, 2, 1, k, "input_size")
        d_axis = 1 if _attr(node, "layout", 0) else 0  # initial_h: [D, N, H], layout 1 [N, D, H]
        n_axis = 1 - d_axis  # X: [T, N, I], layout 1 [N, T, I]: the batch axis is the states'
        for state in (5, 6) if op in ("LSTM", "DynamicQuantizeLSTM") else (5,):  # initial_h (and initial_c)
            hold(state, d_axis, 2, 0, "num_directions")
            hold(state, 2, 2, k, "hidden_size")
            hold(0, n_axis, state, 1 - d_axis, "the batch size")
        hold(0, n_axis, 4, 0, "the batch size")  # sequence_lens [N]
    elif op in ("BatchNormalization", "InstanceNormalization") and len(ins) >= 2:
        hold(0, 1, 1, 0, "the channels")
    elif op == "LayerNormalization" and len(ins) >= 2 and ins[1]:
        for k in range(1, len(ins[1]) + 1):
            hold(0, -k, 1, -k, "the normalized size")
    elif op == "Concat" and ins and all(ins):
        axis = _attr(node, "axis", 0)
        rank = len(ins[0])
        for j in range(1, len(ins)):
            for k in range(rank if len(ins[j]) == rank else 0):
                if k != axis % rank:
                    sizes.hold(ins[0][k], ins[j][k], f"the sizes beside the axis of {label}")
    if op == "Equal" and len(node.inputs) == 2:  # a dim tested against a constant: the size the model expects
        for j in (0, 1):
            size, dim = constant_array(node.inputs[1 - j]), _dim_of(node.inputs[j], shape)
            if dim is not None and size is not None and size.size == 1 and size.dtype.kind in "iu":
                sizes.hold(dim, int(size.reshape(-1)[0]), f"the size {label} {COMPARED}")
    if op in _BROADCAST and len(ins) >= 2:
        for j in range(len(ins)):
            for m in range(len(ins)):
                a, b = ins[j], ins[m]
                if j == m or not a or not b or constant_array(node.inputs[m]) is None:
                    continue
                for k in range(1, min(len(a), len(b)) + 1):
                    if isinstance(b[-k], int) and b[-k] > 1:  # against a constant's size: no broadcast from 1
                        sizes.hold(a[-k], b[-k], f"a broadcast against a constant in {label}")


def _split_states(model: ir.Model, shape: Callable, sizes: _Sizes) -> None:
    """A state input split per layer (`[layers * directions, batch, hidden]` through Slice, Split or Gather into
    each recurrent node's initial_h / initial_c, as torch exports a stacked nn.LSTM called with (h0, c0)): its first
    axis is the sum of the pieces, the largest end any piece reads."""
    need: dict[str, tuple[int, str]] = {}
    for node in model.graph:
        if node.op_type not in _RECURRENT or len(node.inputs) < 6 or node.inputs[1] is None:
            continue
        w = shape(node.inputs[1])
        directions = w[0] if w and isinstance(w[0], int) else None
        d_axis = 1 if _attr(node, "layout", 0) else 0
        for state in node.inputs[5:7]:
            found = _pieces(state, d_axis, directions)
            if found is None:
                continue
            source, total, label = found
            dims = shape(source)
            sym = dims[d_axis] if dims and d_axis < len(dims) else None
            if isinstance(sym, str) and total > need.get(sym, (0, ""))[0]:
                need[sym] = (total, f"the pieces {label} cuts for the states of {node.op_type} {node.name!r}")
    for sym, (total, why) in need.items():
        sizes.hold(sym, total, why)


def _pieces(value: Optional[ir.Value], axis: int, directions: Optional[int]) -> Optional[tuple]:
    """(the value cut, how long its `axis` must be, the cutting node's label) when `value` is one piece cut from
    another along `axis` by a constant Slice, Split or Gather (through Identity, Cast, an Unsqueeze of a Gather)."""
    node = value.producer() if value is not None else None
    while node is not None and node.op_type in ("Identity", "Cast"):
        node = node.inputs[0].producer()
    if node is None:
        return None
    label = f"{node.op_type} {node.name!r}" if node.name else node.op_type
    if node.op_type == "Unsqueeze":  # a scalar index Gathered, then its axis put back
        axes = constant_array(node.inputs[1]) if len(node.inputs) > 1 else _attr(node, "axes", None)
        inner = node.inputs[0].producer()
        if axes is None or list(np.ravel(axes)) != [axis] or inner is None or inner.op_type != "Gather":
            return None
        node, label = inner, f"Gather {inner.name!r}" if inner.name else "Gather"
    if node.op_type == "Gather" and _attr(node, "axis", 0) == axis:
        index = constant_array(node.inputs[1])
        if index is None or index.size == 0 or index.min() < 0:
            return None
        return node.inputs[0], int(index.max()) + 1, label
    if node.op_type == "Split" and _attr(node, "axis", 0) == axis:
        split = constant_array(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        split = split if split is not None else _attr(node, "split", None)
        if split is not None:
            return node.inputs[0], int(np.sum(split)), label
        return (node.inputs[0], len(node.outputs) * directions, label) if directions else None
    if node.op_type == "Slice":
        if len(node.inputs) >= 3:
            starts, ends = constant_array(node.inputs[1]), constant_array(node.inputs[2])
            axes = constant_array(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] is not None else None
            steps = constant_array(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else None
        else:  # Slice-1: attributes
            starts, ends, axes, steps = _attr(node, "starts", None), _attr(node, "ends", None), \
                _attr(node, "axes", None), None
        if starts is None or ends is None:
            return None
        axes = list(np.ravel(axes)) if axes is not None else list(range(len(np.ravel(starts))))
        if axis not in axes:
            return None
        k = axes.index(axis)
        start, end = int(np.ravel(starts)[k]), int(np.ravel(ends)[k])
        step = int(np.ravel(steps)[k]) if steps is not None else 1
        if step == 1 and 0 <= start < end < 1 << 30:
            return node.inputs[0], end, label
    return None


# IR layers that keep their data input's axes (what `back` traces through); binary ones when the other input is a
# constant.
IR_SAME_AXES = {"Convert", "Relu", "Sigmoid", "Tanh", "Clamp", "Elu", "Gelu", "Swish", "HSwish", "HSigmoid", "Mish",
                "Exp", "Abs", "Negative", "Sqrt", "SoftPlus", "PRelu", "Add", "Subtract", "Multiply", "Divide",
                "Power", "Maximum", "Minimum", "Erf", "Floor", "Ceiling", "LogSoftmax", "SoftMax", "Softmax"}
# IR operations whose inputs broadcast against each other (numpy rules): equal sizes where neither is 1.
IR_BROADCAST = {"Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Power", "SquaredDifference",
                "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr",
                "Select"}


def ir_sizes(graph, back: Callable, const: Callable) -> dict[tuple[str, int], tuple]:
    """(parameter, axis) -> (size, why) for Parameter axes that a weight-reading layer fixes. `back(layer_id, port,
    axis)` traces an input axis to (parameter, axis); `const(layer, port_index)` is a constant input or None."""
    found: dict[tuple[str, int], tuple] = {}

    def hold(layer, port_index: int, axis: int, size, what: str) -> None:
        dims = layer.inputs[port_index].dims if port_index < len(layer.inputs) else None
        if not dims or size is None or int(size) <= 0 or not -len(dims) <= axis < len(dims):
            return
        src = back(layer.id, layer.inputs[port_index].id, axis % len(dims))
        if src and src[0] is not None:
            found.setdefault(src, (int(size), f"{what} of {layer.type} {layer.name!r}"))

    for layer in graph.layers:
        t = layer.type
        if t == "MatMul" and len(layer.inputs) == 2:
            for data, w in ((0, 1), (1, 0)):
                weight = const(layer, w)
                if weight is None or const(layer, data) is not None or np.ndim(weight) < 1:
                    continue
                shape = np.shape(weight)
                ta, tb = (layer.attrs.get(k, "false") in ("true", "1") for k in ("transpose_a", "transpose_b"))
                if data == 0:
                    k = (-1 if tb else -2) if len(shape) > 1 else 0
                    hold(layer, 0, -2 if ta else -1, shape[k], "the inner size")
                else:
                    k = (-2 if ta else -1) if len(shape) > 1 else 0
                    hold(layer, 1, -1 if tb else -2, shape[k], "the inner size")
        elif t in ("Convolution", "GroupConvolution", "ConvolutionBackpropData"):
            weight = const(layer, 1)
            if weight is not None and np.ndim(weight) >= 3:
                shape = np.shape(weight)
                size = {"Convolution": shape[1], "GroupConvolution": shape[0] * shape[2],
                        "ConvolutionBackpropData": shape[0]}[t]
                hold(layer, 0, 1, size, "the input channels")
        elif t in IR_BROADCAST and len(layer.inputs) >= 2:  # against a constant's size: no broadcast from 1
            for data in range(len(layer.inputs)):
                for other in range(len(layer.inputs)):
                    weight = const(layer, other) if other != data else None
                    dims = layer.inputs[data].dims
                    if weight is None or not dims or const(layer, data) is not None:
                        continue
                    for k in range(1, min(len(dims), np.ndim(weight)) + 1):
                        if np.shape(weight)[-k] > 1:
                            hold(layer, data, -k, np.shape(weight)[-k], "a broadcast against a constant")
        elif t in SEQUENCES:
            w_port = 4 if SEQUENCES[t] == "LSTM" else 3  # W [num_directions, gates*H, input_size], then R, B
            weight, recurrence = const(layer, w_port), const(layer, w_port + 1)
            if weight is not None and np.ndim(weight) == 3:
                hold(layer, 0, 2, np.shape(weight)[2], "input_size")
            if recurrence is not None and np.ndim(recurrence) == 3:
                for port in (1, 2) if SEQUENCES[t] == "LSTM" else (1,):  # H_t, C_t: [batch, num_directions, H]
                    hold(layer, port, 1, np.shape(recurrence)[0], "num_directions")
                    hold(layer, port, 2, np.shape(recurrence)[2], "hidden_size")
                    cut = _ir_pieces(graph, layer, port, 1, np.shape(recurrence)[0], const)
                    if cut is not None:  # a state input split per layer: the sum of the pieces
                        cutter, axis, total = cut
                        src = back(cutter.id, cutter.inputs[0].id, axis)
                        if src and src[0] is not None and total > found.get(src, (0,))[0]:
                            found[src] = (total, f"the pieces {cutter.type} {cutter.name!r} cuts for the states "
                                                 f"of {t} {layer.name!r}")
            # X [batch, T, I] against a state or seq_lengths whose batch is static
            for port in (1, 2, 3) if SEQUENCES[t] == "LSTM" else (1, 2):
                dims = layer.inputs[port].dims if port < len(layer.inputs) else None
                if dims and isinstance(dims[0], int) and dims[0] > 0:
                    hold(layer, 0, 0, dims[0], "the batch size")
    return found


def _ir_pieces(graph, layer, port_index: int, axis: int, directions: int, const: Callable) -> Optional[tuple]:
    """(the cutting layer, the axis it cuts, how long that axis must be) when input `port_index` of `layer` is one
    piece of a Split, VariadicSplit or constant Gather along `axis` (through Transpose and Convert), as OpenVINO's
    PyTorch frontend splits a stacked LSTM's state input per layer."""
    producers, by_id = graph.producers(), graph.by_id()
    src = producers.get((layer.id, layer.inputs[port_index].id))
    for _ in range(6):
        if src is None:
            return None
        node = by_id[src[0]]
        if node.type == "Transpose":
            perm = const(node, 1)
            if perm is None:
                return None
            axis = int(np.asarray(perm).reshape(-1)[axis])
        elif node.type != "Convert":
            break
        src = producers.get((node.id, node.inputs[0].id))
    else:
        return None
    if node.type in ("Split", "VariadicSplit", "Gather") and len(node.inputs) >= 2:
        cut_axis = const(node, 2 if node.type == "Gather" else 1)
        dims = node.inputs[0].dims
        if cut_axis is None or not dims or int(np.asarray(cut_axis).reshape(-1)[0]) % len(dims) != axis:
            return None
        if node.type == "Split":
            return node, axis, int(node.attrs.get("num_splits", "0")) * int(directions)
        pieces = const(node, 2 if node.type == "VariadicSplit" else 1)
        if pieces is None or np.size(pieces) == 0 or np.min(pieces) < 0:
            return None
        total = int(np.sum(pieces)) if node.type == "VariadicSplit" else int(np.max(pieces)) + 1
        return node, axis, total
    return None


def _dim_of(value: Optional[ir.Value], shape: Callable):
    """The dim `value` holds when it is one entry of a Shape (Gather of Shape, Shape with start:end, through
    Squeeze/Cast), as shape() gives it; else None."""
    for _ in range(4):
        node = value.producer() if value is not None else None
        if node is None or node.op_type not in ("Squeeze", "Cast", "Identity", "Reshape"):
            break
        value = node.inputs[0]
    node = value.producer() if value is not None else None
    if node is None:
        return None
    if node.op_type == "Gather" and len(node.inputs) == 2:
        index, src = constant_array(node.inputs[1]), node.inputs[0].producer()
        if index is None or index.size != 1 or src is None or src.op_type != "Shape" or src.attributes:
            return None
        dims = shape(src.inputs[0])
        k = int(index.reshape(-1)[0])
        return dims[k] if dims and -len(dims) <= k < len(dims) else None
    if node.op_type == "Shape" and "start" in node.attributes:
        dims = shape(node.inputs[0])
        start = node.attributes["start"].value
        end = node.attributes["end"].value if "end" in node.attributes else None
        if dims and end is not None and len(range(len(dims))[start:end]) == 1:
            return dims[range(len(dims))[start:end][0]]
    return None


# Ops with a window over their input's spatial axes: at sizes below the window onnxruntime pools or convolves
# what the window overhangs and runs on, OpenVINO refuses the model; such sizes are no test of a conversion.
_WINDOWED = {"Conv", "ConvInteger", "MaxPool", "AveragePool", "LpPool"}


def empty_window(model: ir.Model, shapes: dict[str, tuple]) -> Optional[str]:
    """The first Conv or pooling node whose window (kernel, dilations, explicit pads) is larger than its input
    when the graph inputs have `shapes` (input name -> shape), by onnx's shape inference; or None."""
    sizes = {(name, axis): int(n) for name, shape in shapes.items() for axis, n in enumerate(shape)}
    inferred = None
    for node in model.graph:
        if node.op_type not in _WINDOWED or not node.inputs or node.inputs[0] is None:
            continue
        if _attr(node, "auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET", "VALID", b"VALID"):
            continue  # SAME_*: the output keeps the input's size
        kernel = _attr(node, "kernel_shape", None)
        if kernel is None and len(node.inputs) > 1 and node.inputs[1] is not None:
            w = node.inputs[1].shape
            kernel = [d for d in w][2:] if w is not None and all(isinstance(d, int) for d in w) else None
        if not kernel:
            continue
        inferred = inferred if inferred is not None else reading.inferred_shapes(model, sizes)
        x = inferred.get(node.inputs[0].name)
        if not x or len(x) != len(kernel) + 2:
            continue
        n = len(kernel)
        pads = list(_attr(node, "pads", [0] * 2 * n))
        dilations = list(_attr(node, "dilations", [1] * n))
        for i, (size, k) in enumerate(zip(x[2:], kernel)):
            window = (k - 1) * dilations[i] + 1
            if isinstance(size, int) and size + pads[i] + pads[i + n] < window:
                return (f"the window of {node.op_type} {node.name!r} ({window}) is larger than its input's "
                        f"axis {i + 2} ({size})")
    return None
