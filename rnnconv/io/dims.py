"""Dims declared -1: onnxruntime, OpenVINO and exporters (paddle2onnx) read and write -1 as a dynamic dim, which
ONNX spells as an unset one. A model is read with every -1 unset, so that no pass, check or translation takes it
for a size. The graph inputs that declared -1 are written with -1 again (what a caller feeds is unchanged);
outputs and value_info are written unset: onnx's full check refuses a declared -1 where inference finds a size
(GRU's num_directions of 1 in an output declared [-1, -1, 5]), and it promises a consumer nothing an unset dim
does not.
"""

from __future__ import annotations

import contextlib

import onnx_ir as ir

MINUS_ONE = "rnnconv.minus_one"  # model.meta: {("input", name): axes declared -1}


def unset_minus_one(model: ir.Model) -> None:
    """Every -1 dim of every value becomes unset; the graph inputs' are remembered in model.meta[MINUS_ONE]."""
    declared: dict[tuple[str, str], list[int]] = {}
    for v in model.graph.inputs:
        axes = _minus_one_axes(v)
        if axes:
            declared[("input", v.name)] = axes
    for graph in [*model.graphs(), *(f.graph for f in model.functions.values())]:
        for v in [*graph.inputs, *graph.outputs, *(o for node in graph for o in node.outputs)]:
            if _minus_one_axes(v):
                v.shape = _with_dims(v.shape, [ir.SymbolicDim(None) if isinstance(d, int) and d < 0 else d
                                               for d in v.shape])
    if declared:
        model.meta[MINUS_ONE] = declared


def _minus_one_axes(v: ir.Value) -> list[int]:
    if v is None or v.shape is None:
        return []
    return [axis for axis, d in enumerate(v.shape) if isinstance(d, int) and d < 0]


def _with_dims(shape: ir.Shape, dims: list) -> ir.Shape:
    return ir.Shape(dims, denotations=[shape.get_denotation(i) for i in range(len(dims))])


@contextlib.contextmanager
def declared_minus_one(model: ir.Model):
    """While writing: the graph inputs' axes that were declared -1, and are still unset, hold -1 again."""
    declared = model.meta.get(MINUS_ONE) or {}
    restore = []
    for v in model.graph.inputs:
        axes = declared.get(("input", v.name))
        if not axes or v.shape is None or any(axis >= len(v.shape) for axis in axes):
            continue
        dims = list(v.shape)
        unset = [axis for axis in axes if isinstance(dims[axis], ir.SymbolicDim) and dims[axis].value is None]
        if unset:
            restore.append((v, v.shape))
            v.shape = _with_dims(v.shape, [-1 if axis in unset else d for axis, d in enumerate(dims)])
    try:
        yield
    finally:
        for v, shape in restore:
            v.shape = shape
