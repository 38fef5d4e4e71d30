"""Element-wise ops, both ways: arithmetic, comparison, logic, activations, Clip / Clamp, Where / Select,
Cast / Convert, Identity."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino.graph import element_type_of, numpy_dtype
from rnnconv.dialects.openvino.ops.table import attr, mapping, np_type, reverse
from rnnconv.errors import Unsupported

# ONNX op -> OpenVINO operation (opset1), read in both directions.
BINARY = {"Add": "Add", "Sub": "Subtract", "Mul": "Multiply", "Pow": "Power", "Equal": "Equal", "Less": "Less",
          "Greater": "Greater", "LessOrEqual": "LessEqual", "GreaterOrEqual": "GreaterEqual", "And": "LogicalAnd",
          "Or": "LogicalOr"}
UNARY = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt",
         "Neg": "Negative", "Abs": "Abs", "Erf": "Erf", "Not": "LogicalNot", "Floor": "Floor", "Ceil": "Ceiling"}
# OpenVINO operation -> (ONNX op, inputs) for `_from_elementwise`.
_TO_ONNX = {**{ov: (onnx, 2) for onnx, ov in BINARY.items()}, **{ov: (onnx, 1) for onnx, ov in UNARY.items()}}


def _elementwise(onnx_op: str, ov_op: str, arity: int):
    def fn(ctx, node):
        return [ctx.g.op(ov_op, *[ctx.inp(node, i) for i in range(arity)], name=node.name or None)]

    fn.__doc__ = (f"ONNX {onnx_op} (onnx.ai/onnx/operators/onnx__{onnx_op}.html) -> OpenVINO {ov_op}-1 "
                  f"(docs.openvino.ai, {ov_op}-1); numpy broadcasting on both sides.")
    mapping(onnx_op, f"{ov_op}-opset1", reversible=True)(fn)


for _onnx, _ov in BINARY.items():
    _elementwise(_onnx, _ov, 2)
for _onnx, _ov in UNARY.items():
    _elementwise(_onnx, _ov, 1)


@reverse(*BINARY.values(), *UNARY.values())
def _from_elementwise(ctx):
    """OpenVINO Add-1, Subtract-1, ..., Relu-1, Tanh-1, ... (auto_broadcast numpy) -> ONNX Add, Sub, ..., Relu,
    Tanh, ... (onnx__Add: numpy broadcasting; the same element-wise functions)."""
    onnx_op, arity = _TO_ONNX[ctx.layer.type]
    if arity == 2:
        ctx.broadcast_numpy()
    return [ctx.b.op1(onnx_op, *[ctx.v(i) for i in range(arity)], hint=ctx.hint)]


@mapping("Div", "Divide-opset1", reversible=True)
def div(ctx, node):
    """ONNX Div (onnx__Div; integers truncate toward zero) -> OpenVINO Divide-1 (integers floor unless
    m_pythondiv=false, which is written for integer inputs)."""
    a, b = ctx.inp(node, 0), ctx.inp(node, 1)
    attrs = {"m_pythondiv": False} if a.element_type[0] in "iu" else {}
    return [ctx.g.op("Divide", a, b, name=node.name or None, **attrs)]


@reverse("Divide")
def _from_divide(ctx):
    """OpenVINO Divide-1 -> ONNX Div (onnx__Div). Integer Divide floors when m_pythondiv (its default); ONNX
    integer Div truncates, so only m_pythondiv=false maps for integers."""
    ctx.broadcast_numpy()
    if ctx.element_type(0)[:1] in "iu" and ctx.flag("m_pythondiv", True):
        raise ctx.unsupported("integer division that floors (m_pythondiv=true); ONNX Div truncates")
    return [ctx.b.op1("Div", ctx.v(0), ctx.v(1), hint=ctx.hint)]


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


_TO_ONNX.update({"Maximum": ("Max", 2), "Minimum": ("Min", 2)})
reverse("Maximum", "Minimum")(_from_elementwise)


@mapping("LeakyRelu", "PRelu-opset1")
def leaky_relu(ctx, node):
    """ONNX LeakyRelu (onnx__LeakyRelu, alpha default 0.01) -> OpenVINO PRelu-1 with a scalar slope."""
    x = ctx.inp(node, 0)
    slope = ctx.const(np.array(float(attr(node, "alpha", 0.01)), dtype=np_type(x)))
    return [ctx.g.op("PRelu", x, slope, name=node.name or None)]


@reverse("PRelu", "PReLU")  # rnnconv writes PRelu; ov.save_model writes the spec's PReLU
def _from_prelu(ctx):
    """OpenVINO PReLU-1 (a 1-D slope as long as data's axis 1 applies per channel; any other slope broadcasts
    numpy-style) -> ONNX LeakyRelu (onnx__LeakyRelu, float alpha) for one constant slope value, else ONNX PRelu
    (onnx__PRelu: slope broadcast from the last axis), a per-channel slope given the shape [C, 1, ..., 1]."""
    x_dims, slope_dims = ctx.dims(0), ctx.dims(1)
    slope = ctx.c(1)
    integer = ctx.np_type(0).kind in "iu"
    if (slope is not None and slope.size == 1 and not integer
            and (slope.ndim == 0 or (x_dims is not None and slope.ndim <= len(x_dims)))):
        alpha = float(slope.reshape(-1)[0])
        if float(np.float32(alpha)) == alpha:  # ONNX attributes hold float32
            return [ctx.b.op1("LeakyRelu", ctx.v(0), alpha=alpha, hint=ctx.hint)]
    if integer and ctx.opset < 16:
        raise ctx.unsupported("integer PRelu needs ONNX PRelu-16", opset=16)
    if slope_dims is None:
        raise ctx.unsupported("a slope of unknown rank")
    per_channel = False
    if len(slope_dims) == 1 and slope_dims[0] != 1:
        if x_dims is None:
            raise ctx.unsupported("a 1-D slope on data of unknown rank (per channel or numpy broadcasting?)")
        if len(x_dims) > 2:
            if x_dims[1] < 0 or slope_dims[0] < 0:
                raise ctx.unsupported("a 1-D slope and a dynamic axis 1 (per channel or numpy broadcasting?)")
            per_channel = x_dims[1] == slope_dims[0]
    slope_v = ctx.v(1)
    if per_channel:
        axes = list(range(1, len(x_dims) - 1))
        slope_v = (ctx.b.const(slope.reshape([-1] + [1] * len(axes)), "slope") if slope is not None
                   else ctx.b.axes_op("Unsqueeze", slope_v, axes))
    return [ctx.b.op1("PRelu", ctx.v(0), slope_v, hint=ctx.hint)]


@mapping("HardSigmoid", "Multiply-opset1", "Add-opset1", "Clamp-opset1")
def hard_sigmoid(ctx, node):
    """ONNX HardSigmoid (onnx__HardSigmoid: max(0, min(1, alpha*x + beta)), alpha 0.2, beta 0.5) -> OpenVINO
    Multiply-1, Add-1, Clamp-1 (OpenVINO HardSigmoid-1 takes alpha/beta as inputs; this form is plain)."""
    x = ctx.inp(node, 0)
    t = np_type(x)
    y = ctx.g.op("Add", ctx.g.op("Multiply", x, ctx.const(np.array(float(attr(node, "alpha", 0.2)), t))),
                 ctx.const(np.array(float(attr(node, "beta", 0.5)), t)))
    return [ctx.g.op("Clamp", y, min=0.0, max=1.0, name=node.name or None)]


@mapping("Softplus", "SoftPlus-opset4", reversible=True)
def softplus(ctx, node):
    """ONNX Softplus (onnx__Softplus: ln(exp(x) + 1)) -> OpenVINO SoftPlus-4."""
    return [ctx.g.op("SoftPlus", ctx.inp(node, 0), version="opset4", name=node.name or None)]


@reverse("SoftPlus")
def _from_softplus(ctx):
    """OpenVINO SoftPlus-4 (ln(exp(x) + 1), x itself past the threshold where the two agree) -> ONNX Softplus
    (onnx__Softplus)."""
    return [ctx.b.op1("Softplus", ctx.v(0), hint=ctx.hint)]


@mapping("Where", "Select-opset1", reversible=True)
def where(ctx, node):
    """ONNX Where (onnx__Where) -> OpenVINO Select-1 (auto_broadcast numpy)."""
    return [ctx.g.op("Select", ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2), name=node.name or None)]


@reverse("Select")
def _from_select(ctx):
    """OpenVINO Select-1 (numpy broadcast) -> ONNX Where (onnx__Where)."""
    ctx.broadcast_numpy()
    return [ctx.b.op1("Where", ctx.v(0), ctx.v(1), ctx.v(2), hint=ctx.hint)]


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


@reverse("Clamp")
def _from_clamp(ctx):
    """OpenVINO Clamp-1 (min/max attributes) -> ONNX Clip (onnx__Clip: attributes before 11, inputs after)."""
    lo, hi = float(ctx.attr("min")), float(ctx.attr("max"))
    if ctx.opset < 11:
        return [ctx.b.op1("Clip", ctx.v(0), min=lo, max=hi, hint=ctx.hint)]
    dt = ctx.np_type(0)
    if dt.kind in "iu":
        lo, hi = np.ceil(lo), np.floor(hi)
    return [ctx.b.op1("Clip", ctx.v(0), ctx.b.const(np.array(lo, dtype=dt), "min"),
                      ctx.b.const(np.array(hi, dtype=dt), "max"), hint=ctx.hint)]


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


@reverse("Convert")
def _from_convert(ctx):
    """OpenVINO Convert-1 (destination_type) -> ONNX Cast (onnx__Cast, `to`); float to integer truncates in both
    (rnnconv's IR interpreter and onnxruntime), and the verification runs both."""
    dst = numpy_dtype(ctx.attr("destination_type"))
    return [ctx.b.op1("Cast", ctx.v(0), to=int(ir.DataType.from_numpy(dst)), hint=ctx.hint)]
