"""Running a model in an engine: rnnconv (the ONNX engine, partitioned between onnxruntime and rnnconv's
spec-exact kernels, or the IR interpreter; kernels in float64 or float32), onnxruntime (ONNX, CPU) or OpenVINO
(IR, or ONNX through its own import; CPU, f32).

Every failure is CannotRun with the engine's reason in one line; a runtime whose process died is Crashed.
onnxruntime and openvino are imported only when a run needs them, so importing rnnconv stays light.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Mapping, Optional

import ml_dtypes
import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import writer as ov_writer
from rnnconv.engine import ENGINES, ONNXRUNTIME, OPENVINO, RNNCONV
from rnnconv.engine import onnxruntime_runtime as ort
from rnnconv.engine import openvino_runtime
from rnnconv.engine.ir_graph import run_ir
from rnnconv.engine.onnx_graph import run_onnx, whole_in_onnxruntime
from rnnconv.errors import NodeFailed, RnnconvError, UsageError
from rnnconv.verification.model import Model

# External weights above this many bytes are run by onnxruntime in a child process that maps them itself.
ISOLATE_WEIGHT_BYTES = ort.ISOLATE_WEIGHT_BYTES


class CannotRun(Exception):
    """An engine cannot run a model; the message says why (one line). `no_kernel`: (op, version) when onnxruntime
    has no kernel for that op version (the engine read it from its refusal)."""

    def __init__(self, message: str = "", no_kernel: Optional[tuple[str, int]] = None):
        super().__init__(message)
        self.no_kernel = no_kernel


class Crashed(CannotRun):
    """The runtime's own process died: never a known refusal, always a failed check."""


class Unavailable(CannotRun):
    """The engine's package is installed but cannot be imported: the check is skipped, as when it is absent."""


def label(engine: str, model: Model, precision: str = "float64") -> str:
    """How a report names a run: `engine` / `IR interpreter` (rnnconv's, with `, float32` when not float64),
    `onnxruntime`, `OpenVINO runtime (CPU, f32)`."""
    if engine == RNNCONV:
        name = "engine" if model.format == "onnx" else "IR interpreter"
        return name if precision == "float64" else f"{name}, {precision}"
    return {OPENVINO: "OpenVINO runtime (CPU, f32)"}.get(engine, engine)


def can_read(engine: str, model: Model) -> Optional[str]:
    """Why `engine` cannot even read the model's format (None when it can)."""
    if engine == ONNXRUNTIME and model.format != "onnx":
        return "onnxruntime reads ONNX only"
    return None


def run_once(engine: str, model: Model, feeds: Mapping[str, np.ndarray], *, precision: str = "float64",
             isolate: bool = False, placements: Optional[dict] = None, partitioned: bool = True
             ) -> dict[str, np.ndarray]:
    """Run `model` in `engine` on one input set, outputs by name. `isolate`: a real runtime runs in a child
    process; `placements`: filled by rnnconv's ONNX engine with where each node ran (engine.onnx_graph.run_onnx);
    `partitioned`: that engine hands onnxruntime what it runs as the spec says (False: every recurrent node in
    rnnconv's kernels, the node checks)."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)} or all")
    why = can_read(engine, model)
    if why:
        raise CannotRun(why)
    try:
        if engine == RNNCONV:
            return _run_rnnconv(model, feeds, precision, placements, partitioned)
        if engine == ONNXRUNTIME:
            return _run_onnxruntime(model, feeds, isolate)
        return _run_openvino(model, feeds, isolate)
    except NodeFailed as err:
        raise CannotRun(str(err)) from err  # these inputs, not the model: other sizes may run (runnable_sets)
    except (CannotRun, RnnconvError):
        raise  # BadInput: the model or the inputs are malformed (exit 4), whichever engine noticed
    except openvino_runtime.CannotImport as err:
        raise Unavailable(str(err)) from err
    except ImportError as err:
        if engine == OPENVINO and err.name == "openvino":  # the optional package, absent
            raise CannotRun(openvino_runtime.NOT_INSTALLED) from err
        if engine == OPENVINO:
            raise Unavailable(openvino_runtime.cannot_import(err)) from err
        raise CannotRun(f"{engine} cannot be imported ({one_line(err)})") from err
    except Exception as err:  # the engine's own error, kept to one line
        raise CannotRun(one_line(err), getattr(err, "no_kernel", None)) from err


def one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip() and not ln.strip().startswith("Exception from")]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def _inputs_of(model: Model) -> set[str]:
    if model.format == "onnx":
        return {v.name for v in model.onnx.graph.inputs}
    return {ovir.parameter_name(p) for p in model.graph.parameters()}


def _run_rnnconv(model: Model, feeds, precision: str, placements: Optional[dict], partitioned: bool
                 ) -> dict[str, np.ndarray]:
    wanted = _inputs_of(model)
    feeds = {k: v for k, v in feeds.items() if k in wanted}
    if model.format == "onnx":
        return run_onnx(model.onnx, feeds, precision, placements, partitioned=partitioned)
    try:
        return run_ir(model.graph, feeds, precision)
    finally:
        model.graph.release()


_ORT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
              "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def external_bytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values()
               if isinstance(v.const_value, ir.ExternalTensor))


def _run_onnxruntime(model: Model, feeds, isolate: bool) -> dict[str, np.ndarray]:
    onnx_model = _bfloat16_outputs_as_float32(model.onnx)
    wanted = _inputs_of(model)
    feeds = {k: v for k, v in feeds.items() if k in wanted}
    if isolate or external_bytes(onnx_model) > ISOLATE_WEIGHT_BYTES:
        try:
            [(out, why)] = ort.run_isolated([onnx_model], feeds)
        except ort.Crashed as err:
            raise Crashed(str(err)) from err
        if out is None:
            raise CannotRun(why, getattr(why, "no_kernel", None))
        return _bfloat16_back(model, out)
    try:
        sess = ort.Session(onnx_model, weights_inside=_has_bfloat16(onnx_model))
        inputs = {}
        for i in sess.inputs():
            if i.name in feeds:
                want = _ORT_TYPES.get(i.type)
                inputs[i.name] = np.asarray(feeds[i.name]).astype(want) if want else feeds[i.name]
        return _bfloat16_back(model, sess.run(inputs))
    finally:
        io.release_external(onnx_model)


def ask_ahead(model: Model, engine: str, feeds: Mapping[str, np.ndarray]) -> Optional[ort.Ahead]:
    """Start now, in onnxruntime's own process, the whole run of a big ONNX model that `engine` will ask
    onnxruntime for on `feeds` (run_isolated takes the answer); None where it would ask for none."""
    if model.format != "onnx" or external_bytes(model.onnx) <= ISOLATE_WEIGHT_BYTES:
        return None
    wanted = _inputs_of(model)
    feeds = {k: v for k, v in feeds.items() if k in wanted}
    if engine == ONNXRUNTIME:
        return ort.ask_ahead([_bfloat16_outputs_as_float32(model.onnx)], feeds)
    if engine == RNNCONV and whole_in_onnxruntime(model.onnx) is not None:  # as onnx_graph's whole run asks
        return ort.ask_ahead([model.onnx], feeds)
    return None


def run_as_written(path, model: Model, feeds: Mapping[str, np.ndarray], *, isolate: bool = False
                   ) -> dict[str, np.ndarray]:
    """The ONNX file `path` (holding `model`) loaded in onnxruntime as users load it (`InferenceSession(path)`,
    default session options: every graph optimization, the weights as initializers) and run on `feeds`, outputs
    by name: CannotRun with onnxruntime's refusal or failure, Crashed when its process died. A big model (or
    `isolate`) runs in a child process."""
    isolate = isolate or external_bytes(model.onnx) > ISOLATE_WEIGHT_BYTES
    try:
        return ort.run_file(path, feeds, threads=ort.threads_for(model.onnx), isolate=isolate)
    except ort.Crashed as err:
        raise Crashed(str(err)) from err
    except Exception as err:
        lines = str(err).strip().splitlines()
        raise CannotRun(_ORT_PREFIX.sub("", lines[0] if lines else "")[:300] or type(err).__name__) from err


_ORT_PREFIX = re.compile(r"^.*?\[ONNXRuntimeError\] : \d+ : \w+ : ")  # the status code before onnxruntime's message


def runs_as_written(model: Model) -> bool:
    """Whether onnxruntime's Python API can run the file of `model` as it is (bfloat16 inputs and outputs it
    cannot take or give as numpy arrays; `_run_onnxruntime` casts them in a copy)."""
    graph = model.onnx.graph
    return not any(v.dtype == ir.DataType.BFLOAT16 for v in [*graph.inputs, *graph.outputs])


def _has_bfloat16(model: ir.Model) -> bool:
    graph = model.graph
    return any(v.dtype == ir.DataType.BFLOAT16 for v in [*graph.inputs, *graph.initializers.values()])


def _bfloat16_back(model: Model, out: dict) -> dict:
    bf16 = {v.name for v in model.onnx.graph.outputs if v.dtype == ir.DataType.BFLOAT16}
    return {n: (r.astype(ml_dtypes.bfloat16) if n in bf16 else r) for n, r in out.items()}


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


def _run_openvino(model: Model, feeds, isolate: bool) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory(prefix="rnnconv-openvino-") as tmp:
        path, bin_path = model.path, model.bin_path
        if path is None or not Path(path).is_file():
            if model.format == "onnx":
                path, bin_path = Path(tmp) / "model.onnx", None
                io.save(model.onnx, path, force=True)
            else:
                path, bin_path = ov_writer.write(model.graph, Path(tmp) / "model.xml")
        # The CPU plugin ignores sequence_lengths on dynamic shapes (2026.4): IR runs at the feeds' static shapes.
        try:
            outputs = openvino_runtime.run_files(path, feeds, bin_path, reshape=model.format == "ir",
                                                 isolate=isolate)
        except openvino_runtime.Crashed as err:
            raise Crashed(str(err)) from err
    return _openvino_outputs(model, outputs)


class Pending:
    """A run of the OpenVINO runtime on a model's files, handed now to a started `openvino_runtime.Worker`;
    `result()` gives what `run` would (and raises as it does)."""

    def __init__(self, model: Model, feeds: Mapping[str, np.ndarray], worker: "openvino_runtime.Worker"):
        self.model, self.worker = model, worker
        worker.submit(model.path, feeds, model.bin_path, reshape=model.format == "ir")

    def result(self) -> dict[str, np.ndarray]:
        try:
            return _openvino_outputs(self.model, self.worker.result())
        except openvino_runtime.Crashed as err:
            raise Crashed(str(err)) from err
        except openvino_runtime.CannotImport as err:
            raise Unavailable(str(err)) from err
        except Exception as err:  # OpenVINO refused the model
            raise CannotRun(one_line(err)) from err


def _openvino_outputs(model: Model, outputs: list) -> dict[str, np.ndarray]:
    if model.format == "onnx":
        return {n: o.value for o in outputs for n in o.names}
    # Each Result under the name rnnconv gives it: found by the Result's name, else by a tensor name.
    names = model.graph.output_names()
    by_result = dict(zip((r.name for r in model.graph.results()), names))
    out = {}
    for o in outputs:
        name = by_result.get(o.result) or next((n for n in sorted(o.names) if n in names), None)
        if name is not None:
            out[name] = o.value
    return out
