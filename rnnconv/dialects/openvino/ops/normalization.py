"""Normalization, both ways: MVN (ONNX MeanVarianceNormalization, LayerNormalization), BatchNormalization /
BatchNormInference."""

from __future__ import annotations

import numpy as np

from rnnconv.dialects.openvino import shapes
from rnnconv.dialects.openvino.ops.table import attr, ints_attr, mapping, reverse
from rnnconv.dialects.openvino.registry import shape
from rnnconv.errors import Unsupported


@mapping("MeanVarianceNormalization", "MVN-opset6")
def mean_variance_normalization(ctx, node):
    """ONNX MeanVarianceNormalization (onnx__MeanVarianceNormalization: (X - E[X]) / sqrt(E[(X - E[X])^2] + 1e-9)
    over `axes`, default [0, 2, 3]) -> OpenVINO MVN-6 (normalize_variance, eps 1e-9 inside the square root)."""
    axes = ints_attr(node, "axes") or [0, 2, 3]
    return [ctx.g.op("MVN", ctx.inp(node, 0), ctx.i64(axes), normalize_variance=True, eps=1e-9,
                     eps_mode="inside_sqrt", version="opset6", name=node.name or None)]


@mapping("LayerNormalization", "MVN-opset6", "Multiply-opset1", "Add-opset1")
def layer_normalization(ctx, node):
    """ONNX LayerNormalization (onnx__LayerNormalization, opset 17: (X - mean) / sqrt(var + epsilon) * Scale + B
    over the axes from `axis` on; only the first output) -> OpenVINO MVN-6 (eps inside the square root), then
    Multiply-1 and Add-1."""
    x = ctx.inp(node, 0)
    if len(node.outputs) > 1 and any(o is not None and o.name for o in node.outputs[1:]):
        raise Unsupported(f"LayerNormalization node {node.name!r}: Mean / InvStdDev outputs have no OpenVINO "
                          "counterpart")
    if x.dims is None:
        raise Unsupported(f"LayerNormalization node {node.name!r}: an input of unknown rank")
    rank = len(x.dims)
    axis = int(attr(node, "axis", -1))
    axis = axis + rank if axis < 0 else axis
    y = ctx.g.op("MVN", x, ctx.i64(list(range(axis, rank))), normalize_variance=True,
                 eps=float(attr(node, "epsilon", 1e-5)), eps_mode="inside_sqrt", version="opset6")
    bias = ctx.inp(node, 2)
    y = ctx.g.op("Multiply", y, ctx.inp(node, 1), name=node.name if bias is None else None)
    return [y if bias is None else ctx.g.op("Add", y, bias, name=node.name or None)]


@reverse("MVN")
def _from_mvn(ctx):
    """OpenVINO MVN-6 (axes input; normalize_variance; eps inside_sqrt: (x - mean) / sqrt(var + eps), outside_sqrt:
    / (sqrt(var) + eps)) and MVN-1 (across_channels: axes 1.., else 2..; reduction_axes; eps inside) -> the formula
    in ONNX ReduceMean, Sub, Mul, Add, Sqrt, Div (onnx__ReduceMean; ONNX MeanVarianceNormalization fixes eps at
    1e-9)."""
    b, x = ctx.b, ctx.v(0)
    dims = ctx.dims(0)
    if ctx.layer.version in ("opset2", "opset1") or len(ctx.keys) < 2:
        if ctx.attr("reduction_axes"):
            axes = [int(v) for v in ctx.attr("reduction_axes").replace(" ", "").split(",") if v]
        else:
            if dims is None:
                raise ctx.unsupported("across_channels on an input of unknown rank")
            axes = list(range(1 if ctx.flag("across_channels") else 2, len(dims)))
        inside = True
    else:
        axes = [int(v) for v in ctx.need_const(1, "the axes").reshape(-1)]
        inside = ctx.attr("eps_mode", "inside_sqrt").lower() == "inside_sqrt"
    t = ctx.np_type(0)

    def mean(v):
        if ctx.opset >= 18:
            return b.op1("ReduceMean", v, b.i64(axes, "axes"), keepdims=1)
        return b.op1("ReduceMean", v, axes=axes, keepdims=1)

    centered = b.op1("Sub", x, mean(x))
    if not ctx.flag("normalize_variance"):
        return [b.op1("Identity", centered, hint=ctx.hint)]
    var = mean(b.op1("Mul", centered, centered))
    eps = b.const(np.array(float(ctx.attr("eps", "0")), t), "eps")
    denom = b.op1("Sqrt", b.op1("Add", var, eps)) if inside else b.op1("Add", b.op1("Sqrt", var), eps)
    return [b.op1("Div", centered, denom, hint=ctx.hint)]


@mapping("BatchNormalization", "BatchNormInference-opset5")
def batch_normalization(ctx, node):
    """ONNX BatchNormalization at inference (onnx__BatchNormalization: X, scale, B, mean, var; epsilon; one output)
    -> OpenVINO BatchNormInference-5 (data, gamma, beta, mean, variance; epsilon)."""
    if attr(node, "training_mode", 0) or sum(1 for o in node.outputs if o is not None and o.name) > 1:
        raise Unsupported(f"BatchNormalization node {node.name!r}: training mode has no OpenVINO counterpart")
    return [ctx.g.op("BatchNormInference", *[ctx.inp(node, i) for i in range(5)],
                     epsilon=float(attr(node, "epsilon", 1e-5)), version="opset5", name=node.name or None)]


@reverse("BatchNormInference")
def _from_batch_norm(ctx):
    """OpenVINO BatchNormInference-5 (data, gamma, beta, mean, variance; BatchNormInference-1 takes gamma, beta,
    data, mean, variance) -> ONNX BatchNormalization (onnx__BatchNormalization: X, scale, B,
    input_mean, input_var; epsilon): (x - mean) / sqrt(var + eps) * gamma + beta per channel (axis 1)."""
    order = [0, 1, 2, 3, 4] if ctx.layer.version != "opset1" else [2, 0, 1, 3, 4]
    return [ctx.b.op1("BatchNormalization", *[ctx.v(i) for i in order], epsilon=float(ctx.attr("epsilon", "1e-5")),
                      hint=ctx.hint)]



shape("MVN", "BatchNormInference")(shapes.like_input)
