"""ONE table mapping ONNX operators to OpenVINO IR operations (and, for issue 6, the way back).

Each entry names the ONNX op, the IR operation(s) it becomes and a function that emits them; `reverse_index()`
gives the same table keyed by IR type. Each mapping's docstring cites both spec pages: ONNX Operators.md
(onnx.ai/onnx/operators/onnx__<Op>.html) and the OpenVINO operation spec (docs.openvino.ai, Operation
Specifications, <Op>-<version>). GRU/LSTM/RNN are not here: see rnnconv.dialects.openvino.convert.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino.ir import IRGraph, Out, element_type_of
from rnnconv.errors import BadInput, Unsupported


class Context:
    """What a mapping function sees: the IR graph being built and the ONNX value -> IR port map."""

    def __init__(self, graph: IRGraph, opset: int):
        self.g = graph
        self.opset = opset
        self.values: dict[str, Out] = {}

    def inp(self, node: ir.Node, i: int) -> Optional[Out]:
        """The IR port of ONNX input i (None when absent or empty)."""
        if i >= len(node.inputs) or node.inputs[i] is None or node.inputs[i].name == "":
            return None
        v = node.inputs[i]
        if v.name not in self.values:
            raise BadInput(f"{node.op_type} node {node.name!r}: input {v.name!r} is produced by no earlier node")
        return self.values[v.name]

    def const_input(self, node: ir.Node, i: int) -> Optional[np.ndarray]:
        out = self.inp(node, i)
        return None if out is None else out.const

    def const(self, array, dtype=None) -> Out:
        return self.g.const(np.asarray(array, dtype=dtype))

    def i64(self, values) -> Out:
        return self.g.const(np.asarray(values, dtype=np.int64))


def attr(node: ir.Node, name: str, default=None):
    a = node.attributes.get(name)
    return default if a is None else a.value


def _ints_attr(node, name, default=None):
    v = attr(node, name, default)
    return None if v is None else [int(x) for x in v]


@dataclasses.dataclass(frozen=True)
class OpMapping:
    onnx: str
    openvino: tuple[str, ...]  # IR types emitted, "Type-version"
    to_openvino: Callable[[Context, ir.Node], list[Out]]
    # IR type -> ONNX op for 1:1 mappings whose attributes need no rewriting (issue 6 reads this).
    reversible: bool = False


TABLE: dict[str, OpMapping] = {}


def mapping(onnx_op: str, *openvino: str, reversible: bool = False):
    def register(fn):
        TABLE[onnx_op] = OpMapping(onnx_op, openvino, fn, reversible)
        return fn

    return register


def reverse_index() -> dict[str, list[OpMapping]]:
    """IR type (without version) -> the table entries that emit it; the first is the 1:1 one when reversible."""
    out: dict[str, list[OpMapping]] = {}
    for m in TABLE.values():
        for t in m.openvino:
            out.setdefault(t.split("-")[0], []).append(m)
    for v in out.values():
        v.sort(key=lambda m: not m.reversible)
    return out


# -- elementwise -------------------------------------------------------------------------------------------
def _elementwise(onnx_op: str, ov_op: str, arity: int):
    def fn(ctx: Context, node: ir.Node) -> list[Out]:
        args = [ctx.inp(node, i) for i in range(arity)]
        attrs = {}
        if ov_op == "Divide" and args[0].element_type[0] in "iu":
            attrs["m_pythondiv"] = False  # ONNX integer Div truncates toward zero
        return [ctx.g.op(ov_op, *args, name=node.name or None, **attrs)]

    fn.__doc__ = (f"ONNX {onnx_op} (onnx.ai/onnx/operators/onnx__{onnx_op}.html) -> OpenVINO {ov_op}-1 "
                  f"(docs.openvino.ai, {ov_op}-1); numpy broadcasting on both sides.")
    mapping(onnx_op, f"{ov_op}-opset1", reversible=True)(fn)


for _onnx, _ov in {"Add": "Add", "Sub": "Subtract", "Mul": "Multiply", "Div": "Divide", "Pow": "Power",
                   "Equal": "Equal", "Less": "Less", "Greater": "Greater", "LessOrEqual": "LessEqual",
                   "GreaterOrEqual": "GreaterEqual", "And": "LogicalAnd", "Or": "LogicalOr"}.items():
    _elementwise(_onnx, _ov, 2)
for _onnx, _ov in {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log",
                   "Sqrt": "Sqrt", "Neg": "Negative", "Abs": "Abs", "Erf": "Erf", "Not": "LogicalNot",
                   "Floor": "Floor", "Ceil": "Ceiling"}.items():
    _elementwise(_onnx, _ov, 1)


@mapping("LeakyRelu", "PRelu-opset1")
def leaky_relu(ctx, node):
    """ONNX LeakyRelu (onnx__LeakyRelu, alpha default 0.01) -> OpenVINO PRelu-1 with a scalar slope."""
    x = ctx.inp(node, 0)
    slope = ctx.const(np.array(float(attr(node, "alpha", 0.01)), dtype=_np(x)))
    return [ctx.g.op("PRelu", x, slope, name=node.name or None)]


@mapping("HardSigmoid", "Multiply-opset1", "Add-opset1", "Clamp-opset1")
def hard_sigmoid(ctx, node):
    """ONNX HardSigmoid (onnx__HardSigmoid: max(0, min(1, alpha*x + beta)), alpha 0.2, beta 0.5) -> OpenVINO
    Multiply-1, Add-1, Clamp-1 (OpenVINO HardSigmoid-1 takes alpha/beta as inputs; this form is plain)."""
    x = ctx.inp(node, 0)
    t = _np(x)
    y = ctx.g.op("Add", ctx.g.op("Multiply", x, ctx.const(np.array(float(attr(node, "alpha", 0.2)), t))),
                 ctx.const(np.array(float(attr(node, "beta", 0.5)), t)))
    return [ctx.g.op("Clamp", y, min=0.0, max=1.0, name=node.name or None)]


@mapping("Softplus", "SoftPlus-opset4", reversible=True)
def softplus(ctx, node):
    """ONNX Softplus (onnx__Softplus: ln(exp(x) + 1)) -> OpenVINO SoftPlus-4."""
    return [ctx.g.op("SoftPlus", ctx.inp(node, 0), version="opset4", name=node.name or None)]


@mapping("Tile", "Tile-opset1", reversible=True)
def tile(ctx, node):
    """ONNX Tile (onnx__Tile, repeats per axis) -> OpenVINO Tile-1 (same inputs)."""
    return [ctx.g.op("Tile", ctx.inp(node, 0), ctx.inp(node, 1), name=node.name or None)]


@mapping("Range", "Range-opset4", reversible=True)
def range_(ctx, node):
    """ONNX Range (onnx__Range: start, limit, delta scalars) -> OpenVINO Range-4 (start, stop, step,
    output_type), the same ceil((limit - start) / delta) elements."""
    start = ctx.inp(node, 0)
    return [ctx.g.op("Range", start, ctx.inp(node, 1), ctx.inp(node, 2), output_type=start.element_type,
                     version="opset4", name=node.name or None)]


@mapping("Where", "Select-opset1", reversible=True)
def where(ctx, node):
    """ONNX Where (onnx__Where) -> OpenVINO Select-1 (auto_broadcast numpy)."""
    return [ctx.g.op("Select", ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2), name=node.name or None)]


@mapping("Max", "Maximum-opset1")
@mapping("Min", "Minimum-opset1")
def min_max(ctx, node):
    """ONNX Max / Min (variadic, onnx__Max) -> chained OpenVINO Maximum-1 / Minimum-1."""
    ov = "Maximum" if node.op_type == "Max" else "Minimum"
    args = [ctx.inp(node, i) for i in range(len(node.inputs))]
    out = args[0]
    for a in args[1:]:
        out = ctx.g.op(ov, out, a)
    return [out]


@mapping("Clip", "Clamp-opset1")
def clip(ctx, node):
    """ONNX Clip (onnx__Clip; min/max attributes before opset 11, inputs after) -> OpenVINO Clamp-1 (constant
    bounds only: Clamp's bounds are attributes)."""
    x = ctx.inp(node, 0)
    if ctx.opset < 11:
        lo, hi = attr(node, "min", -np.inf), attr(node, "max", np.inf)
    else:
        lo_v, hi_v = ctx.const_input(node, 1), ctx.const_input(node, 2)
        if (ctx.inp(node, 1) is not None and lo_v is None) or (ctx.inp(node, 2) is not None and hi_v is None):
            raise Unsupported(f"Clip node {node.name!r}: bounds computed at run time; OpenVINO Clamp-1 takes "
                              "constant bounds (make min/max initializers)")
        lo = float(lo_v) if lo_v is not None else -np.finfo(np.float32).max
        hi = float(hi_v) if hi_v is not None else np.finfo(np.float32).max
    lo = max(float(lo), -float(np.finfo(np.float32).max))
    hi = min(float(hi), float(np.finfo(np.float32).max))
    return [ctx.g.op("Clamp", x, min=lo, max=hi, name=node.name or None)]


@mapping("Identity", reversible=True)
@mapping("Dropout")
def identity(ctx, node):
    """ONNX Identity / Dropout at inference (onnx__Identity, onnx__Dropout) -> no OpenVINO operation: the value
    is aliased (its port gains the output's name, as OpenVINO's own import does). Dropout's mask is refused."""
    if node.op_type == "Dropout" and len(node.outputs) > 1 and node.outputs[1].name:
        raise Unsupported(f"Dropout node {node.name!r}: the mask output has no OpenVINO counterpart")
    if node.op_type == "Dropout" and ctx.opset >= 12 and ctx.inp(node, 2) is not None:
        mode = ctx.const_input(node, 2)
        if mode is None or bool(mode):
            raise Unsupported(f"Dropout node {node.name!r}: training_mode true or computed; only inference is "
                              "supported")
    return [ctx.inp(node, 0)]


@mapping("Cast", "Convert-opset1", reversible=True)
def cast(ctx, node):
    """ONNX Cast (onnx__Cast, `to`) -> OpenVINO Convert-1 (destination_type)."""
    to = ir.DataType(attr(node, "to"))
    try:
        et = element_type_of(to.numpy())
    except Exception:
        raise Unsupported(f"Cast node {node.name!r}: no OpenVINO element type for {to.name}") from None
    return [ctx.g.op("Convert", ctx.inp(node, 0), destination_type=et, name=node.name or None)]


@mapping("MatMul", "MatMul-opset1", reversible=True)
def matmul(ctx, node):
    """ONNX MatMul (onnx__MatMul, numpy matmul) -> OpenVINO MatMul-1 with transpose_a = transpose_b = false."""
    return [ctx.g.op("MatMul", ctx.inp(node, 0), ctx.inp(node, 1), transpose_a=False, transpose_b=False,
                     name=node.name or None)]


@mapping("Gemm", "MatMul-opset1", "Multiply-opset1", "Add-opset1")
def gemm(ctx, node):
    """ONNX Gemm (onnx__Gemm: alpha * A' B' + beta * C) -> OpenVINO MatMul-1 (transpose_a/b) then Multiply-1 and
    Add-1 when alpha, beta or C ask for them."""
    a, b, c = ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2)
    alpha, beta = float(attr(node, "alpha", 1.0)), float(attr(node, "beta", 1.0))
    y = ctx.g.op("MatMul", a, b, transpose_a=bool(attr(node, "transA", 0)), transpose_b=bool(attr(node, "transB", 0)))
    np_t = _np(a)
    if alpha != 1.0:
        y = ctx.g.op("Multiply", y, ctx.const(np.array(alpha, dtype=np_t)))
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = ctx.g.op("Multiply", c, ctx.const(np.array(beta, dtype=np_t)))
        y = ctx.g.op("Add", y, c)
    return [y]


def _np(out: Out):
    from rnnconv.dialects.openvino.ir import numpy_dtype

    return numpy_dtype(out.element_type)


# -- softmax family ----------------------------------------------------------------------------------------
def _flatten2d(ctx: Context, x: Out, axis: int) -> Out:
    """[d0..d(axis-1), d(axis)..] -> [prod(:axis), prod(axis:)] (ONNX Flatten semantics) with Reshape-1."""
    dims = x.dims
    if dims is None:
        raise Unsupported("Flatten/Softmax on a tensor of unknown rank")
    rank = len(dims)
    axis = axis + rank if axis < 0 else axis
    head, tail = dims[:axis], dims[axis:]
    if all(d >= 0 for d in head):
        target = ctx.i64([int(np.prod(head, dtype=np.int64)), -1])
    elif all(d >= 0 for d in tail):
        target = ctx.i64([-1, int(np.prod(tail, dtype=np.int64))])
    else:
        shape = ctx.g.op("ShapeOf", x, output_type="i64", version="opset3")
        lead = ctx.g.op("Slice", shape, ctx.i64([0]), ctx.i64([axis]), ctx.i64([1]), version="opset8")
        prod = ctx.g.op("ReduceProd", lead, ctx.i64([0]), keep_dims=True)
        target = ctx.g.op("Concat", prod, ctx.i64([-1]), axis=0)
    return ctx.g.op("Reshape", x, target, special_zero=False)


def _softmax(ctx, node, ov_op, version):
    x = ctx.inp(node, 0)
    rank = len(x.dims) if x.dims is not None else None
    if ctx.opset >= 13:
        axis = int(attr(node, "axis", -1))
        return [ctx.g.op(ov_op, x, axis=axis, version=version, name=node.name or None)]
    axis = int(attr(node, "axis", 1))
    if rank is None:
        raise Unsupported(f"{node.op_type} node {node.name!r}: opset {ctx.opset} softmax needs the input rank")
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1:
        return [ctx.g.op(ov_op, x, axis=axis, version=version, name=node.name or None)]
    # Before opset 13 softmax runs over the input flattened to 2-D at `axis`.
    flat = _flatten2d(ctx, x, axis)
    y = ctx.g.op(ov_op, flat, axis=1, version=version)
    shape = ctx.g.op("ShapeOf", x, output_type="i64", version="opset3")
    return [ctx.g.op("Reshape", y, shape, special_zero=False, name=node.name or None)]


@mapping("Softmax", "SoftMax-opset8", reversible=True)
def softmax(ctx, node):
    """ONNX Softmax (onnx__Softmax; before 13 over the 2-D flattening at `axis`) -> OpenVINO SoftMax-8."""
    return _softmax(ctx, node, "SoftMax", "opset8")


@mapping("LogSoftmax", "LogSoftmax-opset5", reversible=True)
def log_softmax(ctx, node):
    """ONNX LogSoftmax (onnx__LogSoftmax) -> OpenVINO LogSoftmax-5."""
    return _softmax(ctx, node, "LogSoftmax", "opset5")


@mapping("Flatten", "Reshape-opset1")
def flatten(ctx, node):
    """ONNX Flatten (onnx__Flatten, axis default 1) -> OpenVINO Reshape-1 to [prod(:axis), prod(axis:)]."""
    return [_flatten2d(ctx, ctx.inp(node, 0), int(attr(node, "axis", 1)))]


def _reduce(ctx, node, ov_op):
    x = ctx.inp(node, 0)
    keep = bool(attr(node, "keepdims", 1))
    axes_from_input = ctx.opset >= 18 or (node.op_type == "ReduceSum" and ctx.opset >= 13)
    if axes_from_input:
        axes_out = ctx.inp(node, 1)
        if axes_out is None or (axes_out.const is not None and axes_out.const.size == 0):
            if attr(node, "noop_with_empty_axes", 0):
                return [x]
            axes_out = None
    else:
        axes = _ints_attr(node, "axes")
        axes_out = ctx.i64(axes) if axes else None
    if axes_out is None:
        if x.dims is None:
            raise Unsupported(f"{node.op_type} node {node.name!r}: reducing every axis needs the input rank")
        axes_out = ctx.i64(list(range(len(x.dims))))
    return [ctx.g.op(ov_op, x, axes_out, keep_dims=keep, name=node.name or None)]


@mapping("ReduceMean", "ReduceMean-opset1", reversible=True)
def reduce_mean(ctx, node):
    """ONNX ReduceMean (onnx__ReduceMean; axes attribute before 18, input from 18) -> OpenVINO ReduceMean-1."""
    return _reduce(ctx, node, "ReduceMean")


@mapping("ReduceSum", "ReduceSum-opset1", reversible=True)
def reduce_sum(ctx, node):
    """ONNX ReduceSum (onnx__ReduceSum; axes input from 13) -> OpenVINO ReduceSum-1."""
    return _reduce(ctx, node, "ReduceSum")


@mapping("ReduceMax", "ReduceMax-opset1", reversible=True)
def reduce_max(ctx, node):
    """ONNX ReduceMax (onnx__ReduceMax) -> OpenVINO ReduceMax-1."""
    return _reduce(ctx, node, "ReduceMax")


# -- shapes and data movement ------------------------------------------------------------------------------
@mapping("Transpose", "Transpose-opset1", reversible=True)
def transpose(ctx, node):
    """ONNX Transpose (onnx__Transpose; no perm reverses) -> OpenVINO Transpose-1 (empty order reverses)."""
    perm = _ints_attr(node, "perm")
    x = ctx.inp(node, 0)
    if perm is None:
        perm = list(range(len(x.dims) - 1, -1, -1)) if x.dims is not None else []
    return [ctx.g.op("Transpose", x, ctx.i64(perm), name=node.name or None)]


@mapping("Reshape", "Reshape-opset1", reversible=True)
def reshape(ctx, node):
    """ONNX Reshape (onnx__Reshape; 0 copies a dim unless allowzero) -> OpenVINO Reshape-1 (special_zero)."""
    if ctx.opset < 5:
        shape = ctx.i64(_ints_attr(node, "shape"))
    else:
        shape = ctx.inp(node, 1)
    return [ctx.g.op("Reshape", ctx.inp(node, 0), shape, special_zero=not attr(node, "allowzero", 0),
                     name=node.name or None)]


def _axes(ctx, node, since_input: int) -> Optional[Out]:
    if ctx.opset >= since_input:
        return ctx.inp(node, 1)
    axes = _ints_attr(node, "axes")
    return None if axes is None else ctx.i64(axes)


@mapping("Squeeze", "Squeeze-opset1", reversible=True)
def squeeze(ctx, node):
    """ONNX Squeeze (onnx__Squeeze; axes input from 13) -> OpenVINO Squeeze-1."""
    axes = _axes(ctx, node, 13)
    x = ctx.inp(node, 0)
    return [ctx.g.op("Squeeze", *([x, axes] if axes is not None else [x]), name=node.name or None)]


@mapping("Unsqueeze", "Unsqueeze-opset1", reversible=True)
def unsqueeze(ctx, node):
    """ONNX Unsqueeze (onnx__Unsqueeze; axes input from 13) -> OpenVINO Unsqueeze-1."""
    return [ctx.g.op("Unsqueeze", ctx.inp(node, 0), _axes(ctx, node, 13), name=node.name or None)]


@mapping("Concat", "Concat-opset1", reversible=True)
def concat(ctx, node):
    """ONNX Concat (onnx__Concat) -> OpenVINO Concat-1 (same axis, negative allowed)."""
    args = [ctx.inp(node, i) for i in range(len(node.inputs))]
    return [ctx.g.op("Concat", *[a for a in args if a is not None], axis=int(attr(node, "axis")),
                     name=node.name or None)]


@mapping("Split", "Split-opset1", "VariadicSplit-opset1")
def split(ctx, node):
    """ONNX Split (onnx__Split; `split` attribute before 13, input from 13, num_outputs from 18) ->
    OpenVINO Split-1 (equal parts) or VariadicSplit-1 (given lengths)."""
    x = ctx.inp(node, 0)
    axis = int(attr(node, "axis", 0))
    n = len(node.outputs)
    if ctx.opset >= 13:
        sizes = ctx.inp(node, 1)
    else:
        s = _ints_attr(node, "split")
        sizes = None if s is None else ctx.i64(s)
    if sizes is None and x.dims is not None:
        ax = axis + len(x.dims) if axis < 0 else axis
        total = x.dims[ax]
        if total >= 0:
            # opset 18 num_outputs: equal chunks of ceil(total / n), the last smaller. A known size is always
            # written as VariadicSplit: OpenVINO 2026.4's CPU plugin aborts ("free(): invalid pointer") compiling
            # Sequence -> Transpose -> Split -> Squeeze -> Concat, and not with VariadicSplit (measured).
            chunk = -(-total // n)
            sizes = ctx.i64([chunk] * (n - 1) + [total - chunk * (n - 1)])
    if sizes is None:
        return ctx.g.add("Split", [x, ctx.i64(axis)], {"num_splits": n}, name=node.name or None)
    return ctx.g.add("VariadicSplit", [x, ctx.i64(axis), sizes], name=node.name or None)


@mapping("Slice", "Slice-opset8", reversible=True)
def slice_(ctx, node):
    """ONNX Slice (onnx__Slice; attributes before 10, inputs starts/ends/axes/steps from 10) -> OpenVINO
    Slice-8 (start, stop, step, axes), both clamping like Python slicing."""
    x = ctx.inp(node, 0)
    if ctx.opset < 10:
        starts, ends = ctx.i64(_ints_attr(node, "starts")), ctx.i64(_ints_attr(node, "ends"))
        axes_l = _ints_attr(node, "axes")
        axes = ctx.i64(axes_l) if axes_l is not None else None
        steps = None
    else:
        starts, ends, axes, steps = ctx.inp(node, 1), ctx.inp(node, 2), ctx.inp(node, 3), ctx.inp(node, 4)
    if steps is None:
        if starts.const is not None:
            steps = ctx.i64(np.ones(starts.const.size, dtype=np.int64))
        else:
            steps = ctx.g.op("Broadcast", ctx.i64(1), ctx.g.op("ShapeOf", starts, output_type="i64",
                                                                version="opset3"), mode="numpy", version="opset3")
    args = [x, starts, ends, steps] + ([axes] if axes is not None else [])
    return [ctx.g.op("Slice", *args, version="opset8", name=node.name or None)]


@mapping("Gather", "Gather-opset8", reversible=True)
def gather(ctx, node):
    """ONNX Gather (onnx__Gather; embedding lookups) -> OpenVINO Gather-8 (batch_dims 0, negative indices)."""
    return [ctx.g.op("Gather", ctx.inp(node, 0), ctx.inp(node, 1), ctx.i64(int(attr(node, "axis", 0))),
                     batch_dims=0, version="opset8", name=node.name or None)]


@mapping("Shape", "ShapeOf-opset3", "Slice-opset8")
def shape(ctx, node):
    """ONNX Shape (onnx__Shape; start/end from 15) -> OpenVINO ShapeOf-3 (i64), then Slice-8 for start/end."""
    out = ctx.g.op("ShapeOf", ctx.inp(node, 0), output_type="i64", version="opset3", name=node.name or None)
    start, end = attr(node, "start"), attr(node, "end")
    if start is None and end is None:
        return [out]
    end = np.iinfo(np.int64).max if end is None else int(end)
    return [ctx.g.op("Slice", out, ctx.i64([int(start or 0)]), ctx.i64([end]), ctx.i64([1]), version="opset8")]


def _constant_value(node: ir.Node) -> np.ndarray:
    for name, a in node.attributes.items():
        v = a.value
        if name in ("value", "sparse_value"):
            if name == "sparse_value":
                break
            return v.numpy()
        if name == "value_float":
            return np.array(v, dtype=np.float32)
        if name == "value_floats":
            return np.array(list(v), dtype=np.float32)
        if name == "value_int":
            return np.array(v, dtype=np.int64)
        if name == "value_ints":
            return np.array(list(v), dtype=np.int64)
    raise Unsupported(f"Constant node {node.name!r}: only numeric value/value_float(s)/value_int(s) are supported")


@mapping("Constant", "Const-opset1", reversible=True)
def constant(ctx, node):
    """ONNX Constant (onnx__Constant) -> OpenVINO Const-1 (data in the .bin)."""
    return [ctx.g.const(_constant_value(node), name=node.name or None)]


@mapping("ConstantOfShape", "Broadcast-opset3")
def constant_of_shape(ctx, node):
    """ONNX ConstantOfShape (onnx__ConstantOfShape; value default float 0) -> OpenVINO Broadcast-3 (numpy mode)
    of a scalar Const to the given shape."""
    value = attr(node, "value")
    scalar = value.numpy().reshape(()) if value is not None else np.array(0, dtype=np.float32)
    return [ctx.g.op("Broadcast", ctx.g.const(scalar), ctx.inp(node, 0), mode="numpy", version="opset3",
                     name=node.name or None)]


@mapping("Expand", "Broadcast-opset3")
def expand(ctx, node):
    """ONNX Expand (onnx__Expand, two-way broadcasting) -> OpenVINO Broadcast-3 mode=bidirectional."""
    return [ctx.g.op("Broadcast", ctx.inp(node, 0), ctx.inp(node, 1), mode="bidirectional", version="opset3",
                     name=node.name or None)]


RECURRENT = ("GRU", "LSTM", "RNN")


def unsupported_ops(model: ir.Model) -> list[str]:
    """Every op type of the main graph that neither the table nor the recurrent mapping handles."""
    bad = set()
    for node in model.graph:
        if node.domain not in ("", "ai.onnx"):
            bad.add(f"{node.domain}.{node.op_type}")
        elif node.op_type not in TABLE and node.op_type not in RECURRENT:
            bad.add(node.op_type)
    return sorted(bad)
