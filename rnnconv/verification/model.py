"""A model to verify: ONNX (an onnx_ir Model) or OpenVINO IR (rnnconv's IRGraph), opened from a path or memory."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino.validate import validate
from rnnconv.errors import BadInput


@dataclasses.dataclass
class Model:
    """A model to verify: ONNX (an onnx_ir Model) or OpenVINO IR (rnnconv's IRGraph), and where it lies on disk
    (the real runtimes read files)."""

    label: str
    format: str  # "onnx" or "ir"
    onnx: Optional[ir.Model] = None
    graph: Optional[ovir.IRGraph] = None
    path: Optional[Path] = None
    bin_path: Optional[Path] = None

    def output_names(self) -> list[str]:
        if self.format == "onnx":
            return [v.name for v in self.onnx.graph.outputs]
        return self.graph.output_names()

    def output_dtypes(self) -> dict[str, Optional[np.dtype]]:
        if self.format == "onnx":
            return {v.name: numpy_dtype(v.dtype) for v in self.onnx.graph.outputs}
        out = {}
        for name, res in zip(self.graph.output_names(), self.graph.results()):
            et = res.inputs[0].element_type if res.inputs else None
            try:
                out[name] = ovir.numpy_dtype(et) if et else None
            except BadInput:
                out[name] = None
        return out

    def describe(self) -> str:
        if self.format == "onnx":
            opset = self.onnx.opset_imports.get("", self.onnx.opset_imports.get("ai.onnx"))
            return f"{self.label} (ONNX, opset {opset})"
        return f"{self.label} (OpenVINO IR)"


def onnx_model(model: ir.Model, label: str = "<model>", path=None) -> Model:
    return Model(label, "onnx", onnx=model, path=None if path is None else Path(path))


def ir_model(graph: ovir.IRGraph, label: str = "<IR graph>", path=None, bin_path=None) -> Model:
    return Model(label, "ir", graph=graph, path=None if path is None else Path(path),
                 bin_path=None if bin_path is None else Path(bin_path))


def open_model(source) -> Model:
    """A path (.xml is OpenVINO IR, anything else ONNX), an onnx_ir Model, a ModelProto or an IRGraph."""
    if isinstance(source, Model):
        return source
    if isinstance(source, ovir.IRGraph):
        return ir_model(source)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.suffix.lower() == ".xml":
            if not path.is_file():
                raise BadInput(f"{path}: no such file")
            graph = ov_reader.read(path)
            validate(graph, str(path))  # as from-openvino reads IR: one reader, one strictness
            return ir_model(graph, str(path), path, ov_reader.bin_path_for(path))
        return onnx_model(load_input(path), str(path), path)
    return onnx_model(load_input(source), "<in-memory model>")


def load_input(source) -> ir.Model:
    """An input ONNX model, checked before anything else reads it: io.load's checks (file, imports, declared
    dims and types, external data), rnnconv's checks of every recurrent node (they name the node and what is
    wrong), then onnx's full check (declared types and shapes against what the nodes compute). An onnx_ir Model
    is taken as it is."""
    if isinstance(source, ir.Model):
        return source
    model = io.load(source)
    onnx_recurrent.find(model, io.source_name(source))
    io.check_input(model)
    return model


def numpy_dtype(dtype) -> Optional[np.dtype]:
    """An onnx_ir DataType as numpy's dtype (None when unknown or numpy has none)."""
    if dtype is None:
        return None
    try:
        return np.dtype(dtype.numpy())
    except Exception:
        return None
