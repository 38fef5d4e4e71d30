"""Constant nodes' tensors stored as external data, read at load from the model's folder and held inline."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx_ir as ir

from rnnconv.errors import BadInput, first_line


def inline_constant_data(model: ir.Model, base_dir: Path | None = None) -> None:
    """Tensors in node attributes (Constant values) read from external data are read now, from the model's
    folder, and held in memory: every later reader (engine, runtimes, writer) then sees their bytes, never a
    file name that a working directory could resolve to another file."""
    containers = [model.graph, *_subgraphs(model.graph)]
    for f in model.functions.values():
        containers += [f, *_subgraphs(f)]
    for nodes in containers:
        for node in nodes:
            for name, attr in list(node.attributes.items()):
                if attr.is_ref():
                    continue
                if attr.type == ir.AttributeType.TENSOR and isinstance(attr.value, ir.ExternalTensor):
                    node.attributes[name] = ir.AttrTensor(name, _read_external(attr.value, base_dir))
                elif attr.type == ir.AttributeType.TENSORS and any(isinstance(t, ir.ExternalTensor)
                                                                   for t in attr.value):
                    node.attributes[name] = ir.AttrTensors(name, [_read_external(t, base_dir) for t in attr.value])


def _subgraphs(nodes):
    """Every graph in the attributes of `nodes` (a graph or a function), at any depth."""
    for node in nodes:
        for attr in node.attributes.values():
            if attr.is_ref():
                continue
            if attr.type == ir.AttributeType.GRAPH:
                yield attr.value
                yield from _subgraphs(attr.value)
            elif attr.type == ir.AttributeType.GRAPHS:
                for g in attr.value:
                    yield g
                    yield from _subgraphs(g)


def _read_external(t, base_dir: Path | None) -> ir.Tensor:
    if not isinstance(t, ir.ExternalTensor):
        return t
    if base_dir is not None:
        t.base_dir = str(base_dir)
    try:
        return ir.Tensor(np.array(t.numpy(), copy=True), name=t.name, dtype=t.dtype, doc_string=t.doc_string)
    except Exception as err:
        raise BadInput(f"tensor {t.name!r}: cannot read its external data {os.fspath(t.location)!r} "
                       f"({first_line(err)})") from err
