"""Running a model in an engine: rnnconv (spec-exact numpy, float64), onnxruntime, or OpenVINO (CPU, f32).

onnxruntime and openvino are imported only when a run needs them, so importing rnnconv stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

import ml_dtypes
import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv.errors import BadInput, UsageError
from rnnconv.verify.model import Model
from rnnconv.verify.specs import _ir_specs


ENGINES = ("rnnconv", "onnxruntime", "openvino")


class CannotRun(Exception):
    """An engine cannot run a model; the message says why (one line)."""


def can_read(engine: str, model: Model) -> Optional[str]:
    """Why `engine` cannot even read the model's format (None when it can)."""
    if engine == "onnxruntime" and model.format != "onnx":
        return "onnxruntime reads ONNX only"
    return None


def run(engine: str, model: Model, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run `model` in `engine`; every failure is CannotRun with the engine's reason."""
    why = can_read(engine, model)
    if why:
        raise CannotRun(why)
    try:
        if engine == "rnnconv":
            return _run_rnnconv(model, feeds)
        if engine == "onnxruntime":
            return _run_onnxruntime(model, feeds)
        if engine == "openvino":
            return _run_openvino(model, feeds)
    except (CannotRun, BadInput):
        raise  # BadInput: the model or the inputs are malformed (exit 4), whichever engine noticed
    except ImportError as err:
        raise CannotRun(f"{engine} is not installed ({err})") from err
    except Exception as err:  # the engine's own error, kept to one line
        raise CannotRun(_one_line(err)) from err
    raise UsageError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)} or all")


def _one_line(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip() and not ln.strip().startswith("Exception from")]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def _run_rnnconv(model: Model, feeds) -> dict[str, np.ndarray]:
    if model.format == "onnx":
        from rnnconv.engine.graph import run_onnx

        graph = model.onnx.graph
        wanted = {v.name for v in graph.inputs}
        return run_onnx(model.onnx, {k: v for k, v in feeds.items() if k in wanted}, precision="float64")
    from rnnconv.engine.ir_graph import run_ir

    wanted = {s.name for s in _ir_specs(model.graph).values()}
    return run_ir(model.graph, {k: v for k, v in feeds.items() if k in wanted}, "float64")


_ORT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
              "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def _run_onnxruntime(model: Model, feeds) -> dict[str, np.ndarray]:
    onnx_model = _bfloat16_outputs_as_float32(model.onnx)
    if _has_bfloat16(onnx_model):
        sess = _plain_onnxruntime_session(onnx_model)  # io's session feeds weights as numpy: no bfloat16 there
    else:
        sess = io.onnxruntime_session(onnx_model)
    inputs = {}
    for i in sess.get_inputs():
        if i.name not in feeds:
            continue
        if i.type == "tensor(bfloat16)":  # numpy has no bfloat16 for onnxruntime: hand it the bits
            import onnxruntime as ort

            bits = np.ascontiguousarray(np.asarray(feeds[i.name]).astype(ml_dtypes.bfloat16).view(np.uint16))
            inputs[i.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, int(ir.DataType.BFLOAT16))
            continue
        want = _ORT_TYPES.get(i.type)
        inputs[i.name] = np.asarray(feeds[i.name]).astype(want) if want else feeds[i.name]
    names = [o.name for o in sess.get_outputs()]
    if any(not isinstance(v, np.ndarray) for v in inputs.values()):
        values = sess.run_with_ort_values(None, inputs)
        results = [v.numpy() for v in values]
    else:
        results = sess.run(None, inputs)
    bf16 = {v.name for v in model.onnx.graph.outputs if v.dtype == ir.DataType.BFLOAT16}
    return {n: (r.astype(ml_dtypes.bfloat16) if n in bf16 else r) for n, r in zip(names, results)}


def _has_bfloat16(model: ir.Model) -> bool:
    graph = model.graph
    return any(v.dtype == ir.DataType.BFLOAT16 for v in [*graph.inputs, *graph.initializers.values()])


def _plain_onnxruntime_session(model: ir.Model):
    import onnxruntime as ort

    proto = io.to_proto(model)
    proto.ir_version = min(proto.ir_version, io.onnxruntime_max_ir_version())
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _bfloat16_outputs_as_float32(model: ir.Model) -> ir.Model:
    """onnxruntime's Python API cannot return bfloat16 arrays: a copy whose bfloat16 outputs pass through an exact
    Cast to float32 (the caller rounds them back)."""
    if not any(v.dtype == ir.DataType.BFLOAT16 for v in model.graph.outputs):
        return model
    copy = ir.serde.deserialize_model(io.to_proto(model))
    graph = copy.graph
    for i, v in enumerate(list(graph.outputs)):
        if v.dtype != ir.DataType.BFLOAT16:
            continue
        name = v.name
        v.name = f"{name}.bfloat16"
        out = ir.Value(name=name, shape=v.shape, type=ir.TensorType(ir.DataType.FLOAT))
        graph.append(ir.Node("", "Cast", [v], attributes=[ir.AttrInt64("to", int(ir.DataType.FLOAT))],
                             outputs=[out]))
        graph.outputs[i] = out
    return copy


def _run_openvino(model: Model, feeds) -> dict[str, np.ndarray]:
    import tempfile

    from rnnconv.engine import openvino_runtime

    with tempfile.TemporaryDirectory(prefix="rnnconv-verify-") as tmp:
        if model.path is not None and (model.format != "onnx" or (model.onnx is not None and _saved_as_is(model))):
            ov_model = openvino_runtime.read(model.path)
        elif model.format == "onnx":
            path = Path(tmp) / "model.onnx"
            io.save(model.onnx, path, force=True)
            ov_model = openvino_runtime.read(path)
        else:
            from rnnconv.dialects.openvino import ir as ovir

            xml, _ = ovir.write(model.graph, Path(tmp) / "model.xml")
            ov_model = openvino_runtime.read(xml)
        return openvino_runtime.by_tensor_name(openvino_runtime.infer(ov_model, feeds))


def _saved_as_is(model: Model) -> bool:
    return model.path is not None and model.path.is_file()
