"""Shapes and generated tensors, both ways: Shape / ShapeOf, Constant, ConstantOfShape and Expand / Broadcast,
Range."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino import registry, shapes
from rnnconv.dialects.openvino.graph import numpy_dtype
from rnnconv.dialects.openvino.ops.table import attr, mapping, reverse
from rnnconv.errors import Unsupported


@mapping("Shape", "ShapeOf-opset3", "Slice-opset8")
def shape(ctx, node):
    """ONNX Shape (onnx__Shape; start/end from 15) -> OpenVINO ShapeOf-3 (i64), then Slice-8 for start/end."""
    out = ctx.g.op("ShapeOf", ctx.inp(node, 0), output_type="i64", version="opset3", name=node.name or None)
    start, end = attr(node, "start"), attr(node, "end")
    if start is None and end is None:
        return [out]
    end = np.iinfo(np.int64).max if end is None else int(end)
    return [ctx.g.op("Slice", out, ctx.i64([int(start or 0)]), ctx.i64([end]), ctx.i64([1]), version="opset8")]


@reverse("ShapeOf")
def _from_shape_of(ctx):
    """OpenVINO ShapeOf-1/3 (output_type i64 or i32) -> ONNX Shape (onnx__Shape, int64) and a Cast for i32."""
    out = ctx.b.op1("Shape", ctx.v(0), hint=ctx.hint)
    if ctx.attr("output_type", "i64") == "i32":
        out = ctx.b.op1("Cast", out, to=int(ir.DataType.INT32))
    return [out]


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
    """ONNX Constant (onnx__Constant) -> OpenVINO Const-1 (data in the .bin). The way back is structural: a Const
    becomes an initializer where an ONNX node reads it."""
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


@reverse("Broadcast")
def _from_broadcast(ctx):
    """OpenVINO Broadcast-1/3 (mode numpy: exactly the target shape; bidirectional) -> ONNX Expand (onnx__Expand:
    bidirectional broadcasting, which gives the target shape whenever numpy mode is valid)."""
    mode = ctx.attr("mode", "numpy").lower()
    if mode not in ("numpy", "bidirectional"):
        raise ctx.unsupported(f"mode={mode!r} (only numpy and bidirectional map to ONNX Expand)")
    return [ctx.b.op1("Expand", ctx.v(0), ctx.as_i64(1), hint=ctx.hint)]


@mapping("Range", "Range-opset4", reversible=True)
def range_(ctx, node):
    """ONNX Range (onnx__Range: start, limit, delta scalars) -> OpenVINO Range-4 (start, stop, step,
    output_type), the same ceil((limit - start) / delta) elements."""
    start = ctx.inp(node, 0)
    return [ctx.g.op("Range", start, ctx.inp(node, 1), ctx.inp(node, 2), output_type=start.element_type,
                     version="opset4", name=node.name or None)]


_RANGE_TYPES = {np.dtype(t) for t in (np.float32, np.float64, np.int16, np.int32, np.int64)}


@reverse("Range")
def _from_range(ctx):
    """OpenVINO Range-4 (start, stop, step scalars of any numeric types, cast to output_type, integers toward
    zero) or Range-1 (one type) -> ONNX Range (onnx__Range: start, limit, delta and output of one type T in
    float, double, int16, int32, int64), with a Cast of each input whose type is not the output's."""
    if ctx.opset < 11:
        raise ctx.unsupported("ONNX Range is new in opset 11", opset=11)
    types = [ctx.np_type(i) for i in range(3)]
    out_t = numpy_dtype(ctx.attr("output_type")) if ctx.attr("output_type") else types[0]
    if out_t not in _RANGE_TYPES:
        raise ctx.unsupported(f"output type {out_t} (ONNX Range makes float, double, int16, int32, int64)")
    to = int(ir.DataType.from_numpy(out_t))
    args = [ctx.v(i) if t == out_t else ctx.b.op1("Cast", ctx.v(i), to=to) for i, t in enumerate(types)]
    return [ctx.b.op1("Range", *args, hint=ctx.hint)]


# -- shape rules (`registry.shape`: this module's `shape` is ONNX Shape's mapping) --------------------------------
@registry.shape("ShapeOf")
def _shape_of_shape(layer, inputs, d, c, et):
    return [(layer.attrs.get("output_type", "i64"), None if d[0] is None else [len(d[0])])]


@registry.shape("Range")
def _range_shape(layer, inputs, d, c, et):
    """Range-4: ceil((stop - start) / step) items of output_type."""
    if all(v is not None for v in c[:3]):
        start, stop, step = (float(v.reshape(-1)[0]) for v in c[:3])
        return [(layer.attrs.get("output_type", et), [max(0, int(np.ceil((stop - start) / step)))])]
    return [(layer.attrs.get("output_type", et), [-1])]


@registry.shape("Broadcast")
def _broadcast_shape(layer, inputs, d, c, et):
    """Broadcast-3: numpy mode gives the target shape, bidirectional the two broadcast."""
    mode = layer.attrs.get("mode", "numpy")
    if c[1] is None:
        n = d[1][0] if d[1] else -1
        if n < 0:
            return [(et, None)]
        if mode == "bidirectional" and d[0] is not None:
            return [(et, [-1] * max(n, len(d[0])))]
        return [(et, [-1] * n)]
    target = [int(v) for v in c[1].reshape(-1)]
    if mode == "bidirectional":
        return [(et, shapes.broadcast(d[0], target))]
    return [(et, target)]
