"""Element-wise ops, both ways: arithmetic, comparison, logic, trigonometry, activations (Gelu, Swish, HSwish,
Elu, Selu, Mish...), Round, Mod, Clip / Clamp, Where / Select, Cast / Convert, Identity."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino import shapes
from rnnconv.dialects.openvino.graph import element_type_of, numpy_dtype
from rnnconv.dialects.openvino.ops.table import attr, mapping, np_type, reverse
from rnnconv.dialects.openvino.registry import READ_ONLY, shape, without
from rnnconv.errors import Unsupported

# ONNX op -> OpenVINO operation (opset1), read in both directions.
BINARY = {"Add": "Add", "Sub": "Subtract", "Mul": "Multiply", "Pow": "Power", "Equal": "Equal", "Less": "Less",
          "Greater": "Greater", "LessOrEqual": "LessEqual", "GreaterOrEqual": "GreaterEqual", "And": "LogicalAnd",
          "Or": "LogicalOr", "Xor": "LogicalXor"}
UNARY = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt",
         "Neg": "Negative", "Abs": "Abs", "Erf": "Erf", "Not": "LogicalNot", "Floor": "Floor", "Ceil": "Ceiling",
         "Sin": "Sin", "Cos": "Cos", "Tan": "Tan", "Asin": "Asin", "Acos": "Acos", "Atan": "Atan", "Sinh": "Sinh",
         "Cosh": "Cosh", "Asinh": "Asinh", "Acosh": "Acosh", "Atanh": "Atanh", "Sign": "Sign", "Mish": "Mish",
         "Softsign": "SoftSign", "HardSwish": "HSwish"}
# The OpenVINO version of each operation above when not 1; the ONNX opset each ONNX op is new in, past opset 7.
_OV_VERSION = {"Mish": "opset4", "SoftSign": "opset9", "HSwish": "opset4", "Asinh": "opset4", "Acosh": "opset4",
               "Atanh": "opset4"}
_SINCE = {"Erf": 9, "Sinh": 9, "Cosh": 9, "Asinh": 9, "Acosh": 9, "Atanh": 9, "Sign": 9, "HardSwish": 14, "Mish": 18}
# OpenVINO operation -> (ONNX op, inputs) for `_from_elementwise`.
_TO_ONNX = {**{ov: (onnx, 2) for onnx, ov in BINARY.items()}, **{ov: (onnx, 1) for onnx, ov in UNARY.items()}}


def _elementwise(onnx_op: str, ov_op: str, arity: int):
    version = _OV_VERSION.get(ov_op, "opset1")

    def fn(ctx, node):
        return [ctx.g.op(ov_op, *[ctx.inp(node, i) for i in range(arity)], version=version, name=node.name or None)]

    fn.__doc__ = (f"ONNX {onnx_op} (onnx.ai/onnx/operators/onnx__{onnx_op}.html) -> OpenVINO {ov_op}-"
                  f"{version[5:]} (docs.openvino.ai, {ov_op}-{version[5:]}); numpy broadcasting on both sides.")
    mapping(onnx_op, f"{ov_op}-{version}", reversible=True)(fn)


for _onnx, _ov in BINARY.items():
    _elementwise(_onnx, _ov, 2)
for _onnx, _ov in UNARY.items():
    _elementwise(_onnx, _ov, 1)


@reverse(*BINARY.values(), *UNARY.values())
def _from_elementwise(ctx):
    """OpenVINO Add-1, Subtract-1, ..., Relu-1, Tanh-1, Sin-1, ..., HSwish-4, Mish-4, SoftSign-9 (auto_broadcast
    numpy) -> ONNX Add, Sub, ..., Relu, Tanh, Sin, ..., HardSwish, Mish, Softsign (onnx__Add: numpy broadcasting;
    the same element-wise functions: HardSwish's x * max(0, min(1, x/6 + 1/2)) is HSwish's x * min(max(x + 3, 0),
    6) / 6)."""
    onnx_op, arity = _TO_ONNX[ctx.layer.type]
    since = _SINCE.get(onnx_op, 0)
    if ctx.opset < since:
        raise ctx.unsupported(f"ONNX {onnx_op} is new in opset {since}", opset=since)
    if arity == 2:
        ctx.broadcast_numpy()
    return [ctx.b.op1(onnx_op, *[ctx.v(i) for i in range(arity)], hint=ctx.hint)]


@reverse("NotEqual")
def _from_not_equal(ctx):
    """OpenVINO NotEqual-1 (numpy broadcast) -> ONNX Not(Equal) (onnx__Equal, onnx__Not: ONNX has no NotEqual)."""
    ctx.broadcast_numpy()
    return [ctx.b.op1("Not", ctx.b.op1("Equal", ctx.v(0), ctx.v(1)), hint=ctx.hint)]


@reverse("SquaredDifference")
def _from_squared_difference(ctx):
    """OpenVINO SquaredDifference-1 ((a - b)^2, numpy broadcast) -> ONNX Sub then Mul (onnx__Sub, onnx__Mul)."""
    ctx.broadcast_numpy()
    d = ctx.b.op1("Sub", ctx.v(0), ctx.v(1))
    return [ctx.b.op1("Mul", d, d, hint=ctx.hint)]


@mapping("Mod", "Mod-opset1", "FloorMod-opset1", reversible=True)
def mod(ctx, node):
    """ONNX Mod (onnx__Mod: fmod=1 takes the dividend's sign, as C fmod; fmod=0, integers only, the divisor's)
    -> OpenVINO Mod-1 (the dividend's sign) / FloorMod-1 (the divisor's)."""
    ov_op = "Mod" if attr(node, "fmod", 0) else "FloorMod"
    return [ctx.g.op(ov_op, ctx.inp(node, 0), ctx.inp(node, 1), name=node.name or None)]


@reverse("Mod", "FloorMod")
def _from_mod(ctx):
    """OpenVINO Mod-1 (truncated: the result takes the dividend's sign) -> ONNX Mod fmod=1; FloorMod-1 (floored:
    the divisor's sign) -> ONNX Mod fmod=0 for integers (onnx__Mod; opset 10), for floats x - Floor(x / y) * y
    (ONNX Mod takes floats only with fmod=1)."""
    if ctx.opset < 10:
        raise ctx.unsupported("ONNX Mod is new in opset 10", opset=10)
    ctx.broadcast_numpy()
    if ctx.layer.type == "Mod":
        return [ctx.b.op1("Mod", ctx.v(0), ctx.v(1), fmod=1, hint=ctx.hint)]
    if ctx.np_type(0).kind in "iu":
        return [ctx.b.op1("Mod", ctx.v(0), ctx.v(1), fmod=0, hint=ctx.hint)]
    b = ctx.b
    q = b.op1("Floor", b.op1("Div", ctx.v(0), ctx.v(1)))
    return [b.op1("Sub", ctx.v(0), b.op1("Mul", q, ctx.v(1)), hint=ctx.hint)]


@mapping("Round", "Round-opset5", reversible=True)
def round_(ctx, node):
    """ONNX Round (onnx__Round, opset 11: halves to even) -> OpenVINO Round-5 mode=half_to_even."""
    return [ctx.g.op("Round", ctx.inp(node, 0), mode="half_to_even", version="opset5", name=node.name or None)]


@reverse("Round")
def _from_round(ctx):
    """OpenVINO Round-5 (mode half_to_even / half_away_from_zero) -> ONNX Round (onnx__Round, opset 11: halves to
    even), or Sign(x) * Floor(|x| + 0.5) (onnx__Sign, onnx__Floor) for half_away_from_zero, exact in floating
    point for |x| < 2^52; integers are returned as they are."""
    if ctx.np_type(0).kind in "iub":
        return [ctx.b.op1("Identity", ctx.v(0), hint=ctx.hint)]
    mode = ctx.attr("mode", "half_to_even").lower()
    if mode == "half_to_even":
        if ctx.opset < 11:
            raise ctx.unsupported("ONNX Round is new in opset 11", opset=11)
        return [ctx.b.op1("Round", ctx.v(0), hint=ctx.hint)]
    if mode != "half_away_from_zero":
        raise ctx.unsupported(f"mode={mode!r}")
    if ctx.opset < 9:
        raise ctx.unsupported("ONNX Sign is new in opset 9", opset=9)
    b, x = ctx.b, ctx.v(0)
    half = b.const(np.array(0.5, ctx.np_type(0)), "half")
    return [b.op1("Mul", b.op1("Sign", x), b.op1("Floor", b.op1("Add", b.op1("Abs", x), half)), hint=ctx.hint)]


@mapping("Gelu", "Gelu-opset7", reversible=True)
def gelu(ctx, node):
    """ONNX Gelu (onnx__Gelu, opset 20; approximate none / tanh) -> OpenVINO Gelu-7 (approximation_mode ERF /
    TANH): the same two functions."""
    mode = "TANH" if attr(node, "approximate", "none") == "tanh" else "ERF"
    return [ctx.g.op("Gelu", ctx.inp(node, 0), approximation_mode=mode, version="opset7", name=node.name or None)]


@reverse("Gelu")
def _from_gelu(ctx):
    """OpenVINO Gelu-7 (approximation_mode erf: x/2 (1 + erf(x / sqrt 2)); tanh: x/2 (1 + tanh(sqrt(2/pi) (x +
    0.044715 x^3)))) and Gelu-2 (erf) -> ONNX Gelu (onnx__Gelu, opset 20, approximate none / tanh), or the same
    formula in ONNX Erf / Tanh, Mul, Add before opset 20."""
    mode = ctx.attr("approximation_mode", "erf").lower() if ctx.layer.version != "opset2" else "erf"
    if mode not in ("erf", "tanh"):
        raise ctx.unsupported(f"approximation_mode={mode!r}")
    if ctx.opset >= 20:
        return [ctx.b.op1("Gelu", ctx.v(0), approximate="none" if mode == "erf" else "tanh", hint=ctx.hint)]
    if mode == "erf" and ctx.opset < 9:
        raise ctx.unsupported("ONNX Erf is new in opset 9", opset=9)
    b, x, t = ctx.b, ctx.v(0), ctx.np_type(0)

    def c(v, hint):
        return b.const(np.array(v, t), hint)

    if mode == "erf":
        inner = b.op1("Erf", b.op1("Mul", x, c(1 / np.sqrt(2.0), "inv_sqrt2")))
    else:
        cube = b.op1("Mul", b.op1("Mul", x, x), x)
        arg = b.op1("Add", x, b.op1("Mul", cube, c(0.044715, "gelu_c")))
        inner = b.op1("Tanh", b.op1("Mul", arg, c(np.sqrt(2 / np.pi), "sqrt_2_over_pi")))
    half_x = b.op1("Mul", x, c(0.5, "half"))
    return [b.op1("Mul", half_x, b.op1("Add", inner, c(1.0, "one")), hint=ctx.hint)]


@reverse("Swish")
def _from_swish(ctx):
    """OpenVINO Swish-4 (x * sigmoid(beta * x), beta an optional scalar input, default 1) -> ONNX Mul and Sigmoid
    (onnx__Sigmoid, onnx__Mul; ONNX Swish arrives only in opset 24)."""
    b, x = ctx.b, ctx.v(0)
    z = x if len(ctx.keys) < 2 else b.op1("Mul", x, ctx.v(1))
    return [b.op1("Mul", x, b.op1("Sigmoid", z), hint=ctx.hint)]


@reverse("HSigmoid")
def _from_hsigmoid(ctx):
    """OpenVINO HSigmoid-5 (min(max(x + 3, 0), 6) / 6) -> ONNX HardSigmoid alpha=1/6, beta=1/2 (onnx__HardSigmoid:
    max(0, min(1, alpha x + beta)); the same function, rounded once more or less)."""
    return [ctx.b.op1("HardSigmoid", ctx.v(0), alpha=1 / 6, beta=0.5, hint=ctx.hint)]


@mapping("Elu", "Elu-opset1", reversible=True)
def elu(ctx, node):
    """ONNX Elu (onnx__Elu, alpha default 1) -> OpenVINO Elu-1 (alpha attribute)."""
    return [ctx.g.op("Elu", ctx.inp(node, 0), alpha=float(attr(node, "alpha", 1.0)), name=node.name or None)]


@reverse("Elu")
def _from_elu(ctx):
    """OpenVINO Elu-1 (x if x > 0 else alpha (e^x - 1)) -> ONNX Elu (onnx__Elu, float alpha)."""
    return [ctx.b.op1("Elu", ctx.v(0), alpha=float(ctx.attr("alpha", "1")), hint=ctx.hint)]


@mapping("Selu", "Selu-opset1", reversible=True)
def selu(ctx, node):
    """ONNX Selu (onnx__Selu: alpha, gamma attributes) -> OpenVINO Selu-1 (alpha and lambda as inputs)."""
    x = ctx.inp(node, 0)
    t = np_type(x)
    alpha = ctx.const(np.array([attr(node, "alpha", 1.67326319217681884765625)], t))
    lam = ctx.const(np.array([attr(node, "gamma", 1.05070102214813232421875)], t))
    return [ctx.g.op("Selu", x, alpha, lam, name=node.name or None)]


@reverse("Selu")
def _from_selu(ctx):
    """OpenVINO Selu-1 (lambda (x if x > 0 else alpha (e^x - 1)); alpha, lambda one-element inputs) -> ONNX Selu
    (onnx__Selu, alpha and gamma attributes: constants only)."""
    alpha = float(ctx.need_const(1, "alpha").reshape(-1)[0])
    lam = float(ctx.need_const(2, "lambda").reshape(-1)[0])
    return [ctx.b.op1("Selu", ctx.v(0), alpha=alpha, gamma=lam, hint=ctx.hint)]


@mapping("Div", "Divide-opset1", reversible=True)
def div(ctx, node):
    """ONNX Div (onnx__Div; integers truncate toward zero) -> OpenVINO Divide-1 (integers floor unless
    m_pythondiv=false, which is written for integer inputs)."""
    a, b = ctx.inp(node, 0), ctx.inp(node, 1)
    attrs = {"m_pythondiv": False} if a.element_type[0] in "iu" else {}
    return [ctx.g.op("Divide", a, b, name=node.name or None, **attrs)]


@reverse("Divide")
def _from_divide(ctx):
    """OpenVINO Divide-1 -> ONNX Div (onnx__Div). Integer Divide floors when m_pythondiv (its default), where ONNX
    integer Div truncates: the quotient is then Div - 1 where the remainder is nonzero and the operands' signs
    differ (onnx__Mul, onnx__Sub, onnx__Xor). This follows the spec (and OpenVINO's constant folding); OpenVINO
    2026.4's CPU plugin truncates instead (measured), so the two differ on negative operands only."""
    ctx.broadcast_numpy()
    b = ctx.b
    q = b.op1("Div", ctx.v(0), ctx.v(1), hint=ctx.hint)
    if ctx.element_type(0)[:1] not in "iu" or not ctx.flag("m_pythondiv", True):
        return [q]
    a, d = ctx.v(0), ctx.v(1)
    t = ctx.np_type(0)
    zero = b.const(np.array(0, t), "zero")
    inexact = b.op1("Not", b.op1("Equal", b.op1("Sub", a, b.op1("Mul", q, d)), zero))
    signs = b.op1("Xor", b.op1("Less", a, zero), b.op1("Less", d, zero))
    adjust = b.op1("Cast", b.op1("And", inexact, signs), to=int(ir.DataType.from_numpy(t)))
    return [b.op1("Sub", q, adjust, hint=ctx.hint)]


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


@reverse("PRelu")  # ov.save_model writes the spec's PReLU (graph.canonical_type)
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


@reverse("HardSigmoid")
def _from_hard_sigmoid(ctx):
    """OpenVINO HardSigmoid-1 (max(0, min(1, alpha x + beta)); alpha, beta scalar inputs) -> ONNX HardSigmoid
    (onnx__HardSigmoid, float attributes) when they are constant; else Mul, Add and Clip (onnx__Clip, from opset 11
    with its bounds as inputs)."""
    alpha, beta = ctx.c(1), ctx.c(2)
    if alpha is not None and beta is not None and alpha.size == 1 and beta.size == 1:
        return [ctx.b.op1("HardSigmoid", ctx.v(0), alpha=float(alpha.reshape(-1)[0]), beta=float(beta.reshape(-1)[0]),
                          hint=ctx.hint)]
    if ctx.opset < 11:
        raise ctx.unsupported("alpha or beta computed at run time (ONNX HardSigmoid takes them as attributes; Clip "
                              "takes bounds as inputs from opset 11)", opset=11)
    b, t = ctx.b, ctx.np_type(0)
    y = b.op1("Add", b.op1("Mul", ctx.v(0), ctx.v(1)), ctx.v(2))
    return [b.op1("Clip", y, b.const(np.array(0, t), "zero"), b.const(np.array(1, t), "one"), hint=ctx.hint)]


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


@reverse("IsNaN", "IsInf", "IsFinite")
def _from_is(ctx):
    """OpenVINO IsNaN-10 / IsInf-10 (detect_negative, detect_positive) / IsFinite-10 -> ONNX IsNaN / IsInf
    (onnx__IsInf, opset 10: detect_negative, detect_positive) / Not(Or(IsNaN, IsInf))."""
    if ctx.opset < 10:
        raise ctx.unsupported("ONNX IsNaN (float) and IsInf are new in opset 10 (IsNaN 9)", opset=10)
    b, x = ctx.b, ctx.v(0)
    if ctx.layer.type == "IsNaN":
        return [b.op1("IsNaN", x, hint=ctx.hint)]
    if ctx.layer.type == "IsInf":
        return [b.op1("IsInf", x, detect_negative=int(ctx.flag("detect_negative", True)),
                      detect_positive=int(ctx.flag("detect_positive", True)), hint=ctx.hint)]
    return [b.op1("Not", b.op1("Or", b.op1("IsNaN", x), b.op1("IsInf", x)), hint=ctx.hint)]


@reverse("ConvertLike")
def _from_convert_like(ctx):
    """OpenVINO ConvertLike-1 (data converted to the element type of `like`) -> ONNX Cast (onnx__Cast) to that
    type, known from the IR's port."""
    to = ir.DataType.from_numpy(ctx.np_type(1))
    return [ctx.b.op1("Cast", ctx.v(0), to=int(to), hint=ctx.hint)]


_BITWISE = {"BitwiseAnd": ("BitwiseAnd", "And"), "BitwiseOr": ("BitwiseOr", "Or"), "BitwiseXor": ("BitwiseXor", "Xor"),
            "BitwiseNot": ("BitwiseNot", "Not")}


@reverse(*_BITWISE)
def _from_bitwise(ctx):
    """OpenVINO BitwiseAnd-13 / BitwiseOr-13 / BitwiseXor-13 / BitwiseNot-13 (integers, or booleans: the logical
    op; numpy broadcasting) -> ONNX BitwiseAnd ... (onnx__BitwiseAnd, opset 18, integers) or And / Or / Xor / Not
    (onnx__And) for booleans."""
    integer, logical = _BITWISE[ctx.layer.type]
    inputs = [ctx.v(i) for i in range(len(ctx.keys))]
    if ctx.element_type(0) == "boolean":
        return [ctx.b.op1(logical, *inputs, hint=ctx.hint)]
    if ctx.opset < 18:
        raise ctx.unsupported("ONNX's bitwise operators are new in opset 18", opset=18)
    ctx.broadcast_numpy()
    return [ctx.b.op1(integer, *inputs, hint=ctx.hint)]


# -- shape rules -----------------------------------------------------------------------------------------------
shape("Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Negative", "Abs", "Erf", "Clamp", "Elu", "HSigmoid",
      "SoftPlus", "Floor", "Ceiling", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
      "Acosh", "Atanh", "Mish", "SoftSign", "HSwish", "Round", "Gelu", "Swish", "Selu", "PRelu")(shapes.like_input)
shape("Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Power", "SquaredDifference", "Mod",
      "FloorMod")(shapes.like_broadcast)


@shape("Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalXor")
def _compare_shape(layer, inputs, d, c, et):
    return [("boolean", shapes.broadcast(d[0], d[1]))]


@shape("LogicalNot")
def _not_shape(layer, inputs, d, c, et):
    return [("boolean", d[0])]


@shape("Select")
def _select_shape(layer, inputs, d, c, et):
    """Select-1: then's element type, cond / then / else broadcast numpy-style."""
    return [(inputs[1].element_type, shapes.broadcast(d[0], shapes.broadcast(d[1], d[2])))]


@shape("Convert")
def _convert_shape(layer, inputs, d, c, et):
    return [(layer.attrs["destination_type"], d[0])]


without("shape", "IsNaN", "IsInf", "IsFinite", "ConvertLike", "HardSigmoid", *_BITWISE, why=READ_ONLY)
