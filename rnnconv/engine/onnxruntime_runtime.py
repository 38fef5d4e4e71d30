"""onnxruntime as a second opinion: in this process, or in one child process for big models; and one node at a
time, for rnnconv's engine (`NodeSession`: the ops onnx's reference lacks or gets wrong, and other domains).

Weights are fed as inputs (no copy into protobuf, so models past 2 GB run). The child (`ort_worker`) maps
external weights itself: the checking process then holds none of them while onnxruntime runs.

A model holding com.microsoft DynamicQuantizeLSTM runs with `ONNXRUNTIME_THREADS` intra-op threads: the op's
result depends on the thread count when the batch is above 1, and rnnconv's kernel computes it for that count.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Mapping, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects import onnx_quantized
from rnnconv.engine import serving
from rnnconv.engine.op_dynamic_quantize_lstm import ONNXRUNTIME_THREADS
from rnnconv.io.mapping import release_external
from rnnconv.io.reading import weights_as_inputs

BFLOAT16 = int(ir.DataType.BFLOAT16)


class Crashed(Exception):
    """onnxruntime's own process ended without an answer (a crash in native code)."""


# onnxruntime declares an opset before it has a kernel for every op version in it (1.32 at opset 28 has no
# DequantizeLinear-28, though its kernel registry lists DequantizeLinear 25 and up): its refusal names the op
# version it lacks, read here once.
_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\)")


def no_kernel(message: str) -> Optional[tuple[str, int]]:
    """(op, version) when onnxruntime's refusal `message` says it has no kernel for that op version, else None."""
    found = _NO_KERNEL.search(message)
    return (found.group(1), int(found.group(2))) if found else None


class Refusal(str):
    """Why onnxruntime refused or failed a model, as run_isolated reports it; `no_kernel` as no_kernel() reads it."""

    @property
    def no_kernel(self) -> Optional[tuple[str, int]]:
        return no_kernel(self)


def _options(threads: Optional[int] = None):
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    if threads is not None:
        options.intra_op_num_threads = threads
    return options


def threads_for(model: ir.Model) -> Optional[int]:
    """The intra-op thread count a session of `model` must use for rnnconv's engine to agree with it (None:
    onnxruntime's default)."""
    return ONNXRUNTIME_THREADS if onnx_quantized.holds(model) else None


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
        try:
            self.session = ort.InferenceSession(proto.SerializeToString(), _options(threads_for(model)),
                                                providers=["CPUExecutionProvider"])
        except Exception as err:
            err.no_kernel = no_kernel(str(err))  # the fact a caller acts on (upgrade goes one opset lower)
            raise

    def inputs(self):
        return [i for i in self.session.get_inputs() if i.name not in self.weights]

    def output_names(self) -> list[str]:
        return [o.name for o in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.output_names(), _run(self.session, {**self.weights, **feeds})))


def _run(session, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    if not any(np.asarray(v).dtype.name == "bfloat16" for v in feeds.values()):
        return session.run(None, dict(feeds))
    import onnxruntime as ort

    # onnxruntime's Python API takes bfloat16 only as OrtValues made from the bit pattern.
    values = {k: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.asarray(v).view(np.uint16), BFLOAT16)
              if np.asarray(v).dtype.name == "bfloat16" else ort.OrtValue.ortvalue_from_numpy(np.asarray(v))
              for k, v in feeds.items()}
    return [v.numpy() for v in session.run_with_ort_values(None, values)]


# Constant inputs of a node up to this size go inside its one-node model (some kernels want shapes, axes or
# quantization parameters as initializers); bigger ones are fed at each run like the other inputs.
ORT_WORKER = "rnnconv.engine.ort_worker"  # run_isolated's child
NODE_CONSTANT_BYTES = 4096


class NodeSession:
    """One node alone in onnxruntime: a one-node model whose inputs are typed after the arrays of its first run.

    `attributes` are the node's (a function's attribute references resolved), `outputs` which of its outputs the
    node produces (an optional output left out can change what a kernel computes), `opsets` the graph's imports,
    `constants` the inputs (by position) that are constant in the model. Runs on one thread, with basic graph
    optimizations only, so that nothing but the node's own kernel computes."""

    def __init__(self, domain: str, op_type: str, attributes, inputs, outputs, opsets: Mapping[str, int],
                 constants: Optional[Mapping[int, np.ndarray]] = None):
        import onnxruntime as ort

        constants = constants or {}
        values, initializers, self.fed = [], [], {}
        for k, array in enumerate(inputs):
            if array is None:
                values.append(None)
                continue
            array = np.asarray(array)
            value = ir.Value(name=f"input{k}", type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
                             shape=ir.Shape([None] * array.ndim))
            if k in constants and np.asarray(constants[k]).nbytes <= NODE_CONSTANT_BYTES:
                value.const_value = ir.tensor(np.asarray(constants[k]), name=value.name)
                initializers.append(value)
            else:
                self.fed[k] = value.name
            values.append(value)
        produced = [ir.Value(name=f"output{k}" if wanted else "") for k, wanted in enumerate(outputs)]
        self.outputs = [k for k, wanted in enumerate(outputs) if wanted]
        node = ir.Node(domain, op_type, values, attributes=list(attributes), outputs=produced)
        graph = ir.Graph([v for v in values if v is not None and v.const_value is None],
                         [produced[k] for k in self.outputs], nodes=[node], initializers=initializers,
                         opset_imports=dict(opsets))
        proto = ir.serde.serialize_model(ir.Model(graph, ir_version=max_ir_version()))
        options = _options(threads=1)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        self.session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def run(self, *inputs) -> list[Optional[np.ndarray]]:
        """The node's outputs in order (None for those it does not produce)."""
        got = _run(self.session, {name: inputs[k] for k, name in self.fed.items()})
        out: list[Optional[np.ndarray]] = [None] * (max(self.outputs, default=-1) + 1)
        for k, value in zip(self.outputs, got):
            out[k] = value
        return out


def run_model(model: ir.Model, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
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
    """The newest default-domain opset that both the installed onnx and onnxruntime accept. Probing it imports
    onnxruntime and opens sessions (about 0.15 s and 30 MB, a fifth of an unverified `upgrade`): the answer is
    kept in the user's cache, under the installed pair (`_installed`), so later runs read it."""
    installed = _installed()
    cache = _opset_cache()
    known = _read_json(cache) if installed and cache else {}
    if isinstance(known.get(installed), int):
        return known[installed]
    opset = _probe_newest_opset()
    if installed and cache:
        # One entry per installation (virtual environments share the cache), the newest 16 kept.
        _write_json(cache, dict(list({k: v for k, v in known.items() if k != installed}.items())[-15:],
                                **{installed: opset}))
    return opset


def _probe_newest_opset() -> int:
    import onnxruntime as ort

    for opset in range(schemas.latest_opset(), 6, -1):
        proto = _identity(opset, min(schemas.min_ir_version(opset), max_ir_version()))
        try:
            ort.InferenceSession(proto.SerializeToString(), _options(), providers=["CPUExecutionProvider"])
            return opset
        except Exception:
            continue
    return 7


def run_file(path, feeds: Mapping[str, np.ndarray], *, threads: Optional[int] = None, isolate: bool = False
             ) -> dict[str, np.ndarray]:
    """The outputs of the ONNX file `path`, loaded as users load it (`InferenceSession(path)`, the default session
    options but `threads`, as threads_for says) and run on `feeds` (those it takes); onnxruntime's refusal or
    failure is raised. `isolate`: in one child process (`ort_worker`), which maps the weights itself."""
    if isolate:
        [(out, why)] = _ask({"models": [(str(path), {}, threads)],
                             "feeds": {k: np.asarray(v) for k, v in feeds.items()}})
        if out is None:
            raise RuntimeError(why)
        return out
    session = ort_session(path, threads)
    taken = {i.name for i in session.get_inputs()}
    return dict(zip([o.name for o in session.get_outputs()],
                    _run(session, {k: v for k, v in feeds.items() if k in taken})))


def ort_session(path, threads: Optional[int] = None):
    """onnxruntime's session of the file at `path`, as users make it (quiet)."""
    import onnxruntime as ort

    return ort.InferenceSession(str(path), _options(threads), providers=["CPUExecutionProvider"])


def _installed() -> str:
    """onnx's newest opset and onnxruntime's native library (path, size, modification time), found without
    importing onnxruntime: any reinstall of either changes it. Empty when onnxruntime is not installed."""
    try:
        spec = importlib.util.find_spec("onnxruntime")
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.submodule_search_locations:
        return ""
    native = sorted(Path(next(iter(spec.submodule_search_locations)), "capi").glob("onnxruntime_pybind11_state*"))
    if not native:
        return ""
    st = native[0].stat()
    return f"onnx opset {schemas.latest_opset()}; {native[0]} {st.st_size} {st.st_mtime_ns}"


def _opset_cache():
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root, "rnnconv", "onnxruntime-opset.json") if os.path.isabs(root) else None


def _read_json(path) -> dict:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_json(path, value: dict) -> None:
    """Atomically (a parallel run reads the old file or the new one); a cache that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".opset-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


# Models whose external weights pass this run in onnxruntime's own process (run_isolated), whoever asks: rnnconv's
# engine (onnx_graph's whole-model session) as the whole-model checks.
ISOLATE_WEIGHT_BYTES = 64 << 20
# run_isolated's last answers, by what it sent: rnnconv's engine runs a model onnxruntime runs entirely as one
# onnxruntime session, and the whole-model check then asks onnxruntime for that very run (the same model bytes,
# weights, threads and inputs), which a second child would only repeat (about the model's size read again).
_ANSWERED: list = []
_ANSWERS_KEPT = 4
KEY_BYTES = 16 << 20  # weights sent in memory up to this size are part of the key (bigger: not kept)


def external_bytes(model: ir.Model) -> int:
    """The bytes of the model's weights held in external data files."""
    return sum(v.const_value.nbytes for v in model.graph.initializers.values()
               if isinstance(v.const_value, ir.ExternalTensor))


def run_isolated(models: list[ir.Model], feeds: Mapping[str, np.ndarray]) -> list[tuple[Optional[dict], str]]:
    """Run each model in one child process (`ort_worker`): per model, (outputs, "") or (None, why onnxruntime
    refused or failed); Crashed if the process died. External weights are named by file and offset, not sent.
    A model and inputs already answered in this process are answered again from that run (`_ANSWERED`), or from
    the run asked ahead for them (`ask_ahead`)."""
    job = _job(models, feeds)
    key = _job_key(job)
    known = next((answer for k, answer in _ANSWERED if k == key), None) if key is not None else None
    if known is not None:
        return _refusals(_copied(known))
    ahead = next((a for a in _AHEAD if a.key == key), None) if key is not None else None
    if ahead is not None:
        _AHEAD.remove(ahead)
    answers = ahead.answers() if ahead is not None else _ask(job)
    if key is not None and all(out is not None for out, _ in answers):
        _ANSWERED[:] = [*_ANSWERED[-(_ANSWERS_KEPT - 1):], (key, _copied(answers))]
    return _refusals(answers)


def _job(models: list[ir.Model], feeds: Mapping[str, np.ndarray]) -> dict:
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
        job["models"].append((proto.SerializeToString(), specs, threads_for(model)))
    return job


_AHEAD: list = []  # runs asked ahead, not yet taken by run_isolated


class Ahead:
    """A run_isolated question asked before it is asked: its child runs (a thread waits for it) while this process
    does other work, such as the node checks of a big model on the other core; run_isolated on the same job takes
    the answer. `cancel()` ends the child when nobody took it."""

    def __init__(self, job: dict, key: tuple):
        self.key = key
        self._proc: list = []
        self._answer = None
        self._done = threading.Event()
        threading.Thread(target=self._run, args=(job,), daemon=True).start()

    def _run(self, job: dict) -> None:
        try:
            self._answer = _ask(job, self._proc)
        except BaseException as err:  # handed to whoever takes the answer
            self._answer = err
        finally:
            self._done.set()

    def answers(self) -> list:
        self._done.wait()
        if isinstance(self._answer, BaseException):
            raise self._answer
        return self._answer

    def cancel(self) -> None:
        if self in _AHEAD:
            _AHEAD.remove(self)
        while not self._done.is_set():  # the child may not have started yet: killed once it has
            for proc in self._proc:
                with contextlib.suppress(OSError):
                    proc.kill()
            self._done.wait(0.05)


def ask_ahead(models: list[ir.Model], feeds: Mapping[str, np.ndarray]) -> Optional[Ahead]:
    """Start the run run_isolated(models, feeds) will ask for (None where its answer would not be kept: models
    without external weights, whose run costs little; or in batch mode, whose one child answers in turn)."""
    if serving.sharing():
        return None
    job = _job(models, feeds)
    key = _job_key(job)
    if key is None:
        return None
    ahead = Ahead(job, key)
    _AHEAD.append(ahead)
    return ahead


def _copied(answers: list) -> list:
    """Answers whose arrays no other caller holds (one may change its outputs in place)."""
    return [(None if out is None else {k: np.array(v, copy=True) for k, v in out.items()}, why)
            for out, why in answers]


def _job_key(job: dict) -> Optional[tuple]:
    """What a job computes, comparable: the model bytes, each weight's file (with its size and modification time),
    offset, type and shape, or its bytes, the threads, and the inputs' bytes. None (not kept) for a model without
    external weights (small: running it again costs little) or whose weights sent in memory pass KEY_BYTES."""
    models, held = [], 0
    for proto, specs, *settings in job["models"]:  # settings: the threads (and whatever a job adds)
        weights, files = [], {}
        for name, spec in sorted(specs.items()):
            if isinstance(spec, np.ndarray):
                held += spec.nbytes
                if held > KEY_BYTES:
                    return None
                weights.append((name, _array_key(spec)))
                continue
            path = spec[0]
            if path not in files:
                try:
                    st = os.stat(path)
                except OSError:
                    return None
                files[path] = (st.st_size, st.st_mtime_ns)
            weights.append((name, spec))
        if not files:
            return None
        models.append((proto, tuple(weights), tuple(sorted(files.items())), repr(settings)))
    rest = repr(sorted((k, v) for k, v in job.items() if k not in ("models", "feeds")))  # options a job may gain
    return tuple(models), tuple(sorted((k, _array_key(v)) for k, v in job["feeds"].items())), rest


def _array_key(a: np.ndarray) -> tuple:
    return a.dtype.name, a.dtype.str, a.shape, a.tobytes()


def _ask(job: dict, started: Optional[list] = None) -> list:
    """The child's answer to `job`; `started` gets the child's Popen (to end it early)."""
    if serving.sharing():  # batch mode: the child that answered the previous models
        try:
            return serving.child(ORT_WORKER).ask(job)
        except serving.Gone as err:
            serving.drop(ORT_WORKER)
            raise Crashed(f"onnxruntime's process failed ({err})") from None
    with subprocess.Popen([sys.executable, "-m", ORT_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        if started is not None:
            started.append(proc)
        out, err = proc.communicate(pickle.dumps(job))
    if proc.returncode != 0:
        tail = (err.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise Crashed(f"onnxruntime's process failed ({tail[:300]})")
    return pickle.loads(out)


def _refusals(answers: list) -> list[tuple[Optional[dict], str]]:
    return [(out, Refusal(why)) for out, why in answers]
