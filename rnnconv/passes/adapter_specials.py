"""Specific adapters: each the `special` of a line of the adapter table (`adapters.STEPS`), for a step down the
generic kinds cannot express alone, or a step to None (the node replaced by older ops)."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects.onnx_recurrent import constant_array
from rnnconv.errors import Unsupported
from rnnconv.passes.adapter_kinds import Step, rank_of, static_shape
from rnnconv.passes.adapter_plan import NodePlan, NotApplicable

INT64_MAX = np.iinfo(np.int64).max


def reshape_14_13(plan: NodePlan, opset: int, step: Step) -> None:
    """`allowzero` removed: exact at 0, and at 1 with a constant shape without 0; at 1 with a run-time shape, a
    warning (a 0 in the shape then keeps the dimension: the same unless the data is empty)."""
    if plan.drop("allowzero"):
        shape = constant_array(plan.input(1))
        if shape is not None and (shape == 0).any():
            raise Unsupported("allowzero=1 with a 0 in its constant shape (an empty output) has no Reshape-13 form")
        if shape is None:
            plan.warn("allowzero=1 dropped (Reshape-13 reads a 0 in the shape as 'keep that dimension'): exact as "
                      "long as no tensor it reshapes is empty")
    step.generic(plan)


def constant_12_11(plan: NodePlan, opset: int, step: Step) -> None:
    """value_int(s) / value_float(s) / value_string(s) become the value tensor."""
    for name in ("value_int", "value_ints", "value_float", "value_floats", "value_string", "value_strings"):
        if name in plan.attrs:
            array = constant_array(plan.node.outputs[0])
            plan.drop(name)
            plan.set("value", ir.tensor(array))
    step.generic(plan)


def constant_types(plan: NodePlan, opset: int, step: Step) -> None:
    """a value the older Constant cannot hold (e.g. int64 below 9) becomes an initializer."""
    try:
        step.generic(plan)
        return
    except NotApplicable:
        if plan.scope.in_function:
            raise Unsupported(f"a function's Constant-{step.newer} value of this type has no Constant-{step.older} "
                              f"form, and functions hold no initializers")
    out = plan.node.outputs[0]
    value = plan.constant(constant_array(out), out.name or "constant")
    if out.is_graph_output():  # a graph output keeps its name on an Identity
        identity = plan.make("Identity", [value], like=out)
        plan.replace([identity], list(identity.outputs))
    else:
        plan.replace([], [value])
    plan.what.append(f"its {out.dtype.name.lower()} value becomes an initializer (Constant-{step.older} cannot "
                     f"hold it)")


def _non_negative_indices(plan: NodePlan, index: int, axis: int, newer: int) -> None:
    """Negative indices exist from version `newer`: constant ones are normalised with the static dimension, run-time
    ones are converted with a warning."""
    indices = constant_array(plan.input(index))
    if indices is None:
        plan.warn(f"indices computed at run time are assumed never negative (negative indices exist from "
                  f"{plan.op}-{newer})")
        return
    if not (indices < 0).any():
        return
    shape = plan.input(0).shape if plan.input(0) is not None else None
    rank = None if shape is None else len(shape)
    size = None if rank is None else shape[axis + rank if axis < 0 else axis]
    if not isinstance(size, int):
        raise Unsupported(f"negative constant indices into a dimension of unknown size; they exist only from "
                          f"{plan.op}-{newer}")
    plan.set_input(index, plan.constant(np.where(indices < 0, indices + size, indices).astype(indices.dtype),
                                        "indices"))


def gather_11_1(plan: NodePlan, opset: int, step: Step) -> None:
    """negative constant indices normalised; run-time ones assumed non-negative (warning)."""
    _non_negative_indices(plan, 1, plan.attr("axis", 0), step.newer)
    step.generic(plan)


def scatter_elements_below_11(plan: NodePlan, opset: int) -> None:
    """Scatter-9 (the same op before it was renamed); negative indices as Gather's."""
    if schemas.schema_since_version("Scatter", plan.opset) is None:
        raise Unsupported("Scatter, its older name, exists only from opset 9")
    _non_negative_indices(plan, 1, plan.attr("axis", 0), 11)
    node = plan.make("Scatter", plan.inputs, {k: a.value for k, a in plan.attrs.items()}, like=plan.node.outputs[0])
    plan.replace([node], list(node.outputs))


def gather_elements_below_11(plan: NodePlan, opset: int) -> None:
    """constant indices into data of static shape: a Gather of the flattened data at the flat indices."""
    data, indices = plan.input(0), constant_array(plan.input(1))
    shape = static_shape(data)
    if indices is None or shape is None:
        raise Unsupported("below opset 11 it needs constant indices and data of static shape (it is a Gather of "
                          "the flattened data then)")
    axis = plan.attr("axis", 0) % len(shape)
    coords = list(np.indices(indices.shape))
    coords[axis] = np.where(indices < 0, indices + shape[axis], indices)
    flat = np.ravel_multi_index(tuple(coords), shape).astype(np.int64)
    reshape = plan.make("Reshape", [data, plan.constant(np.array([-1], np.int64), "flat_shape")], like=data)
    gather = plan.make("Gather", [reshape.outputs[0], plan.constant(flat, "flat_indices")], {"axis": 0},
                       like=plan.node.outputs[0])
    plan.replace([reshape, gather], list(gather.outputs))


def scatter_elements_18_16(plan: NodePlan, opset: int, step: Step) -> None:
    """reduction "max" / "min" refused (they exist from version 18)."""
    if plan.attr("reduction", "none") in ("max", "min"):
        raise Unsupported(f"reduction={plan.attr('reduction')!r} exists only from ScatterElements-18")
    step.generic(plan)


def pad_18_13(plan: NodePlan, opset: int, step: Step) -> None:
    """constant axes: pads spread over every axis (0 elsewhere)."""
    if plan.input(3) is not None:
        axes, pads, rank = constant_array(plan.input(3)), plan.constant_input(1), rank_of(plan.input(0))
        if axes is None or pads is None or rank is None:
            raise Unsupported("Pad-13 has no axes input: it needs constant axes and pads and a known rank")
        full = np.zeros(2 * rank, np.int64)
        for j, a in enumerate(int(a) % rank for a in axes.ravel()):
            full[a], full[a + rank] = pads[j], pads[j + len(axes)]
        plan.set_input(1, plan.constant(full, "pads"))
        plan.set_input(3, None)
    step.generic(plan)


def pad_19_18(plan: NodePlan, opset: int, step: Step) -> None:
    """mode "wrap" refused (it exists from version 19)."""
    if plan.attr("mode", "constant") == "wrap":
        raise Unsupported("mode 'wrap' exists only from Pad-19")
    step.generic(plan)


def pow_12_7(plan: NodePlan, opset: int, step: Step) -> None:
    """an exponent of another type than the base: a constant one re-typed (when exact), a run-time one Cast
    (warning)."""
    x, y = plan.input(0), plan.input(1)
    if x is not None and y is not None and x.dtype is not None and y.dtype is not None and x.dtype != y.dtype:
        exponent = constant_array(y)
        if exponent is not None:
            cast = exponent.astype(x.dtype.numpy())
            if not np.array_equal(cast.astype(exponent.dtype), exponent):
                raise Unsupported(f"its exponent does not survive a cast to {x.dtype.name.lower()} (Pow-7 needs "
                                  f"one type)")
            plan.set_input(1, plan.constant(cast, y.name or "exponent"))
        else:
            node = plan.make("Cast", [y], {"to": x.dtype.value}, dtype=x.dtype)
            plan.before.append(node)
            plan.set_input(1, node.outputs[0])
            plan.warn(f"run-time exponent cast from {y.dtype.name.lower()} to {x.dtype.name.lower()} (Pow-7 needs "
                      f"one type): exact for integer exponents below 2**24")
    step.generic(plan)


def split_18_13(plan: NodePlan, opset: int, step: Step) -> None:
    """num_outputs: an even split needs nothing, an uneven one (static dimension) gets explicit sizes."""
    n = plan.drop("num_outputs")
    if n is not None and plan.input(1) is None:
        shape = plan.input(0).shape if plan.input(0) is not None else None
        axis = plan.attr("axis", 0)
        size = None if shape is None else shape[axis % len(shape)]
        if not isinstance(size, int):
            raise Unsupported("num_outputs over a dimension of unknown size (Split-13 splits evenly or by sizes)")
        if size % n:
            chunk = math.ceil(size / n)
            sizes = [chunk] * (n - 1) + [size - chunk * (n - 1)]
            plan.set_input(1, plan.constant(np.array(sizes, np.int64), "split"))
    step.generic(plan)


def reduce_noop(plan: NodePlan, opset: int, step: Step) -> None:
    """constant `axes` input back to the attribute; `noop_with_empty_axes` removed (at 1 without axes: an
    Identity)."""
    if plan.attr("noop_with_empty_axes", 0):
        axes = plan.constant_input(1, "axes are an attribute below")
        if plan.input(1) is None or (axes is not None and axes.size == 0):
            identity = plan.make("Identity", [plan.input(0)], like=plan.node.outputs[0])
            plan.replace([identity], list(identity.outputs))
            return
        plan.drop("noop_with_empty_axes")
    step.generic(plan)


def shape_15_13(plan: NodePlan, opset: int, step: Step) -> None:
    """start / end: Shape then Slice."""
    start, end = plan.drop("start") or 0, plan.drop("end")
    if start or end is not None:
        shape = plan.make("Shape", [plan.input(0)], dtype=ir.DataType.INT64)
        bounds = [plan.constant(np.array([v], np.int64), n)
                  for v, n in ((start, "start"), (INT64_MAX if end is None else end, "end"), (0, "axes"))]
        sliced = plan.make("Slice", [shape.outputs[0], *bounds], like=plan.node.outputs[0])
        plan.replace([shape, sliced], list(sliced.outputs))
        return
    step.generic(plan)


def softmax_13_11(plan: NodePlan, opset: int, step: Step) -> None:
    """one axis (13) against a 2-D coercion at axis (11): the same for the last axis, another axis is moved last
    by Transposes around the node."""
    axis = plan.attr("axis", -1)
    rank = rank_of(plan.input(0))
    if axis != -1 and rank is None:
        raise Unsupported(f"axis={axis} of an input of unknown rank: {plan.op}-11 normalises over the last axes")
    if axis in (-1, (rank or 0) - 1):
        plan.set("axis", -1)
        step.generic(plan)
        return
    axis %= rank
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    before = plan.make("Transpose", [plan.input(0)], {"perm": perm}, like=plan.input(0))
    node = plan.make(plan.op, before.outputs, {"axis": -1}, like=plan.node.outputs[0])
    after = plan.make("Transpose", node.outputs, {"perm": perm}, like=plan.node.outputs[0])
    plan.replace([before, node, after], list(after.outputs))


def resize_19_18(plan: NodePlan, opset: int, step: Step) -> None:
    """coordinate_transformation_mode "half_pixel_symmetric" refused (it exists from version 19)."""
    if plan.attr("coordinate_transformation_mode") == "half_pixel_symmetric":
        raise Unsupported("coordinate_transformation_mode 'half_pixel_symmetric' exists only from Resize-19")
    step.generic(plan)


def if_11_1(plan: NodePlan, opset: int, step: Step) -> None:
    """branches whose outputs differ in shape refused (If-1 needs one shape)."""
    def shapes(graph):
        return [None if o.shape is None else [d if isinstance(d, int) else None for d in o.shape]
                for o in graph.outputs]

    for i, (a, b) in enumerate(zip(shapes(plan.attr("then_branch")), shapes(plan.attr("else_branch")))):
        if a is not None and b is not None and (len(a) != len(b) or any(
                x is not None and y is not None and x != y for x, y in zip(a, b))):
            raise Unsupported(f"its branches give output {i} the shapes {a} and {b}; If-1 needs one shape (branches "
                              f"of different shapes exist from If-11)")
    step.generic(plan)


def quantize_13_10(plan: NodePlan, opset: int, step: Step) -> None:
    """per-tensor only: a scalar (or one-value) scale and zero point; per-axis refused (`axis` exists from version
    13)."""
    plan.drop("axis")  # read only for a 1-D scale
    for index, name in ((1, "scale"), (2, "zero point")):
        value = plan.input(index)
        if value is None:
            continue
        shape = None if value.shape is None else list(value.shape)
        if shape == []:
            continue
        size = None if shape is None or not all(isinstance(d, int) for d in shape) else int(np.prod(shape))
        if size is None:
            raise Unsupported(f"its {name} has an unknown shape; {step.op}-{step.older} takes a scalar {name} only "
                              f"(per-axis quantization exists from {step.op}-{step.newer})")
        if size != 1:
            raise Unsupported(f"per-axis quantization ({name} of shape {shape}) exists only from "
                              f"{step.op}-{step.newer}; {step.op}-{step.older} takes one scale and zero point per "
                              f"tensor (keep opset {step.newer} or higher)")
        array = constant_array(value)
        if array is not None:
            plan.set_input(index, plan.constant(array.reshape(()), value.name or name.replace(" ", "_")))
        else:
            reshape = plan.make("Reshape", [value, plan.constant(np.zeros([0], np.int64), "scalar_shape")],
                                like=value)
            plan.before.append(reshape)
            plan.set_input(index, reshape.outputs[0])
    step.generic(plan)
