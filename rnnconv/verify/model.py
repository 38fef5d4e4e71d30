"""A model to verify: ONNX (an onnx_ir Model) or OpenVINO IR (rnnconv's IRGraph), opened from a path or memory."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv.errors import BadInput


@dataclasses.dataclass
class Model:
    """A model to verify: ONNX (an onnx_ir Model) or OpenVINO IR (rnnconv's IRGraph), and where it came from."""

    label: str
    format: str  # "onnx" or "ir"
    onnx: Optional[ir.Model] = None
    graph: Optional[object] = None  # rnnconv.dialects.openvino.ir.IRGraph
    path: Optional[Path] = None

    def output_names(self) -> list[str]:
        if self.format == "onnx":
            return [v.name for v in self.onnx.graph.outputs]
        return self.graph.output_names()

    def output_dtypes(self) -> dict[str, Optional[np.dtype]]:
        if self.format == "onnx":
            return {v.name: _np_dtype(v.dtype) for v in self.onnx.graph.outputs}
        from rnnconv.dialects.openvino import ir as ovir

        out = {}
        for name, res in zip(self.graph.output_names(), self.graph.results()):
            et = res.inputs[0].element_type if res.inputs else None
            try:
                out[name] = ovir.numpy_dtype(et) if et else None
            except Exception:
                out[name] = None
        return out

    def describe(self) -> str:
        if self.format == "onnx":
            opset = self.onnx.opset_imports.get("", self.onnx.opset_imports.get("ai.onnx"))
            return f"{self.label} (ONNX, opset {opset})"
        return f"{self.label} (OpenVINO IR)"


def open_model(source) -> Model:
    """A path (.xml is OpenVINO IR, anything else ONNX), an onnx_ir Model, a ModelProto or an IRGraph."""
    from rnnconv.dialects.openvino import ir as ovir

    if isinstance(source, Model):
        return source
    if isinstance(source, ovir.IRGraph):
        return Model("<IR graph>", "ir", graph=source)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.suffix.lower() == ".xml":
            if not path.is_file():
                raise BadInput(f"{path}: no such file")
            return Model(str(path), "ir", graph=ovir.read(path), path=path)
        return Model(str(path), "onnx", onnx=io.load(path), path=path)
    return Model("<in-memory model>", "onnx", onnx=io.load(source))


def _np_dtype(dtype) -> Optional[np.dtype]:
    if dtype is None:
        return None
    try:
        return np.dtype(dtype.numpy())
    except Exception:
        return None
