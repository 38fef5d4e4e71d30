"""onnxruntime as a second opinion: in this process, or in one child process for big models.

Weights are fed as inputs (no copy into protobuf, so models past 2 GB run). The child (`ort_worker`) maps
external weights itself: the checking process then holds none of them while onnxruntime runs.
"""

from __future__ import annotations

import functools
import pickle
import subprocess
import sys
from typing import Mapping, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.io.mapping import release_external
from rnnconv.io.reading import weights_as_inputs

BFLOAT16 = int(ir.DataType.BFLOAT16)


class Crashed(Exception):
    """onnxruntime's own process ended without an answer (a crash in native code)."""


def _options():
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return options


class Session:
    """An onnxruntime session fed the model's weights as inputs at every run (`weights_inside`: held in the
    session instead, for bfloat16 weights, which onnxruntime's Python API cannot take as inputs)."""

    def __init__(self, model: ir.Model, *, weights_inside: bool = False):
        import onnxruntime as ort

        if weights_inside:
            proto, self.weights = ir.serde.serialize_model(model), {}
        else:
            proto, self.weights = weights_as_inputs(model)
        # onnxruntime lags onnx's IR version; the graph features rnnconv's models use exist in its newest one.
        proto.ir_version = min(proto.ir_version, max_ir_version())
        self.session = ort.InferenceSession(proto.SerializeToString(), _options(),
                                            providers=["CPUExecutionProvider"])

    def inputs(self):
        return [i for i in self.session.get_inputs() if i.name not in self.weights]

    def output_names(self) -> list[str]:
        return [o.name for o in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {**self.weights, **feeds}
        if not any(np.asarray(v).dtype.name == "bfloat16" for v in feeds.values()):
            return dict(zip(self.output_names(), self.session.run(None, feeds)))
        import onnxruntime as ort

        # onnxruntime's Python API takes bfloat16 only as OrtValues made from the bit pattern.
        values = {k: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.asarray(v).view(np.uint16), BFLOAT16)
                  if np.asarray(v).dtype.name == "bfloat16" else ort.OrtValue.ortvalue_from_numpy(np.asarray(v))
                  for k, v in feeds.items()}
        return dict(zip(self.output_names(), (v.numpy() for v in self.session.run_with_ort_values(None, values))))


def run(model: ir.Model, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's outputs by name; onnxruntime's refusal or failure is raised as its own exception."""
    try:
        return Session(model).run(feeds)
    finally:
        release_external(model)


@functools.lru_cache(maxsize=1)
def max_ir_version() -> int:
    """The newest IR version this onnxruntime loads."""
    import onnxruntime as ort

    for ir_version in range(schemas.latest_ir_version(), 3, -1):
        try:
            ort.InferenceSession(_identity(13, ir_version).SerializeToString(), providers=["CPUExecutionProvider"])
            return ir_version
        except Exception:
            continue
    return 3


def _identity(opset: int, ir_version: int):
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1]))
    y = ir.Value(name="y", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1]))
    graph = ir.Graph([x], [y], nodes=[ir.Node("", "Identity", [x], outputs=[y])], opset_imports={"": opset})
    return ir.serde.serialize_model(ir.Model(graph, ir_version=ir_version))


@functools.lru_cache(maxsize=1)
def newest_common_opset() -> int:
    """The newest default-domain opset that both the installed onnx and onnxruntime accept."""
    import onnxruntime as ort

    for opset in range(schemas.latest_opset(), 6, -1):
        proto = _identity(opset, min(schemas.min_ir_version(opset), max_ir_version()))
        try:
            ort.InferenceSession(proto.SerializeToString(), _options(), providers=["CPUExecutionProvider"])
            return opset
        except Exception:
            continue
    return 7


def run_isolated(models: list[ir.Model], feeds: Mapping[str, np.ndarray]) -> list[tuple[Optional[dict], str]]:
    """Run each model in one child process (`ort_worker`): per model, (outputs, "") or (None, why onnxruntime
    refused or failed); Crashed if the process died. External weights are named by file and offset, not sent."""
    job: dict = {"models": [], "feeds": {k: np.asarray(v) for k, v in feeds.items()}}
    for model in models:
        proto, weights = weights_as_inputs(model)
        proto.ir_version = min(proto.ir_version, max_ir_version())
        specs = {}
        for name, array in weights.items():
            t = model.graph.initializers[name].const_value
            native = np.dtype(array.dtype).kind in "fiub" and np.dtype(array.dtype).isnative
            if isinstance(t, ir.ExternalTensor) and native and array.flags.c_contiguous:
                specs[name] = (t.path, t.offset or 0, np.dtype(array.dtype).str, tuple(array.shape))
            else:
                specs[name] = np.asarray(array, order="C")  # a scalar stays rank 0
        job["models"].append((proto.SerializeToString(), specs))
    proc = subprocess.run([sys.executable, "-m", "rnnconv.engine.ort_worker"], input=pickle.dumps(job),
                          capture_output=True)
    if proc.returncode != 0:
        tail = (proc.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise Crashed(f"onnxruntime's process failed ({tail[:300]})")
    return pickle.loads(proc.stdout)
