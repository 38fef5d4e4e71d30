"""The real OpenVINO runtime as a second opinion: CPU, f32 precision set explicitly, bfloat16 passed as its bits.

One place for what every caller needs: OpenVINO's CPU plugin may run bf16 by default on some hosts
(../shared/spec/README.md), and its Python API takes and returns bf16 tensors as 16-bit patterns typed float16.
`python -m rnnconv.engine.openvino_runtime` runs one model in a child process (a crash of the plugin, seen in
2026.4 on some graphs, then fails a check instead of ending rnnconv); it reads a pickled job on stdin and writes
the pickled outputs on stdout. `Worker` starts that process ahead of its job, so that a big IR's compile can
overlap the caller's other checks. The process gets a session of its own, ended with it: `import openvino` sends a
telemetry event from a process it forks (openvino.tools.ovc, 2026.4), which holds the child's pipes and, without
network, can wait forever; killed alone, the child would leave it holding them, and the caller waiting.

While the CPU plugin compiles and runs an IR, `MappedWeights` keeps the IR's mapped .bin out of the resident set:
the plugin copies each recurrent op's weights into oneDNN's gate order, then packs that copy and frees it, so the
map's pages would otherwise stay resident beside both copies (3.1x the weights at the peak on a 1 GiB LSTM, 2.1x
without them; benchmarks/convert.py, docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import os
import pickle
import signal
import subprocess
import sys
import threading
from typing import Mapping, Optional

import ml_dtypes
import numpy as np

from rnnconv.engine import serving, telemetry

CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
MODULE = "rnnconv.engine.openvino_runtime"
CHILD = [sys.executable, "-m", MODULE]  # the process a Worker runs
INSTALL = "pip install 'rnnconv[openvino]'"  # what installs the openvino package with rnnconv
NOT_INSTALLED = f"openvino not installed: {INSTALL}"  # how every report says so
_CORE: list = []


class Crashed(Exception):
    """The child process running OpenVINO ended without an answer."""


class CannotImport(ImportError):
    """The openvino package is installed but `import openvino` fails (a missing library, a broken install): like
    an absent package, a check to skip, never a verdict on the model."""


def cannot_import(err: ImportError) -> str:
    """How every report says so."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return f"openvino cannot be imported ({type(err).__name__}: {lines[0] if lines else ''})"[:300]


def available() -> bool:
    """Whether the openvino package is installed."""
    import importlib.util

    return importlib.util.find_spec("openvino") is not None


def core():
    import openvino as ov

    if not _CORE:
        _CORE.append(ov.Core())  # creating a Core costs more than compiling a small model
    return _CORE[0]


def offline_transforms(model) -> None:
    """What `ov.convert_model` applies after an import (constant folding off, smart reshape on; fused names
    cleaned), in place on an openvino.Model: the frontend's graph becomes the IR ov.save_model writes."""
    from openvino._offline_transformations import apply_fused_names_cleanup, apply_moc_transformations

    apply_moc_transformations(model, cf=False, smart_reshape=True)
    apply_fused_names_cleanup(model)


def read(path, bin_path=None):
    return core().read_model(str(path), None if bin_path is None else str(bin_path))


def weights_file(path, bin_path=None) -> Optional[str]:
    """The .bin that read(path, bin_path) maps: None for an ONNX model (OpenVINO's own import)."""
    if bin_path is not None:
        return str(bin_path)
    root, ext = os.path.splitext(str(path))
    return root + ".bin" if ext.lower() == ".xml" else None


class MappedWeights:
    """While open, a thread drops from this process's resident set, every `every` seconds and once at the end,
    the pages of each shared read-only map of the file at `path` (OpenVINO's read_model maps the IR's .bin so;
    a no-op for None, elsewhere than Linux, or without libc's madvise).

    Exact: a shared read-only map holds no bytes of its own; a later read refaults them, unchanged, from the
    kernel's page cache (which keeps them as it keeps any file's). Private maps are left alone: they may hold
    written copies of pages, which dropping would lose."""

    def __init__(self, path, every: float = 0.05):
        self._where = _file_id(path)
        self._every, self._stop, self._thread = every, threading.Event(), None

    def __enter__(self):
        if self._where is not None and _madvise() is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.drop()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.drop()

    def drop(self) -> int:
        """Drop the pages now; the bytes of the maps found."""
        madvise, total = _madvise(), 0
        for start, length in shared_read_only_maps(*self._where) if self._where and madvise else ():
            madvise(start, length, mmap.MADV_DONTNEED)
            total += length
        return total


def _file_id(path) -> Optional[tuple[int, int, int]]:
    """(major, minor, inode) of the file at `path`, as /proc/self/maps names it; None without a file or /proc."""
    if path is None or not os.path.exists("/proc/self/maps"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.major(st.st_dev), os.minor(st.st_dev), st.st_ino


def shared_read_only_maps(major: int, minor: int, inode: int) -> list[tuple[int, int]]:
    """(start, length) of this process's maps of that file with permissions r--s."""
    found = []
    with contextlib.suppress(OSError, ValueError), open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) < 5 or fields[1] != "r--s" or int(fields[4]) != inode:
                continue
            if tuple(int(x, 16) for x in fields[3].split(":")) == (major, minor):
                start, stop = (int(x, 16) for x in fields[0].split("-"))
                found.append((start, stop - start))
    return found


_MADVISE: list = []


def _madvise():
    """libc's madvise(addr, length, advice), or None where it cannot be called."""
    if not _MADVISE:
        fn = None
        with contextlib.suppress(Exception):
            import ctypes

            fn = ctypes.CDLL(None, use_errno=True).madvise
            fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
        _MADVISE.append(fn if hasattr(mmap, "MADV_DONTNEED") else None)
    return _MADVISE[0]


@dataclasses.dataclass
class Output:
    names: set[str]  # tensor names of the Result's port
    result: str  # the Result's friendly name (IR 10 keeps names there)
    value: np.ndarray


def infer(model, feeds: Mapping[str, np.ndarray], *, reshape: bool = False, weights=None) -> list[Output]:
    """Run an ov.Model on feeds keyed by tensor name (or Parameter friendly name, for IR 10); `weights`: the
    .bin file the model was read from (kept out of the resident set meanwhile, see MappedWeights).

    `reshape`: fix dynamic dims to the feeds' shapes first (the CPU plugin ignores sequence_lengths on dynamic
    shapes, measured on 2026.4), unless an If is left: its shapes would be fixed in the branch the feeds do not
    take too, whose ops may refuse them (silero-vad's 8 kHz LSTM: "batch_size not matched")."""
    import openvino as ov

    def by_name(ports) -> dict:
        out = {}
        for param, port in zip(model.get_parameters(), ports):
            for n in [*port.get_names(), param.get_friendly_name()]:
                out.setdefault(n, port)
        return out

    if reshape and not any(op.get_type_name() == "If" for op in model.get_ordered_ops()):
        params = by_name(model.inputs)
        shapes = {params[k]: ov.PartialShape(list(np.shape(v))) for k, v in feeds.items() if k in params}
        if shapes:
            model.reshape(shapes)
    with MappedWeights(weights):  # dynamic shapes: the plugin packs the weights at the first inference
        compiled = core().compile_model(model, "CPU", CONFIG)
        ports = by_name(compiled.inputs)
        inputs = {ports[k]: _tensor(ov, np.asarray(v), ports[k].get_element_type()) for k, v in feeds.items()
                  if k in ports}
        result = compiled.create_infer_request().infer(inputs)
    out = []
    for res, port in zip(model.get_results(), compiled.outputs):
        value = np.array(result[port])
        if port.get_element_type() == ov.Type.bf16:
            value = value.view(np.uint16).view(ml_dtypes.bfloat16)
        out.append(Output(set(port.get_names()), res.get_friendly_name(), value))
    return out


def run_files(path, feeds: Mapping[str, np.ndarray], bin_path: Optional[object] = None, *, reshape: bool = False,
              isolate: bool = False) -> list[Output]:
    """The IR (or ONNX, through OpenVINO's own import) at `path` on `feeds`; `isolate`: in a child process."""
    if not isolate:
        return infer(read(path, bin_path), feeds, reshape=reshape, weights=weights_file(path, bin_path))
    worker = Worker()
    worker.submit(path, feeds, bin_path, reshape=reshape)
    return worker.result()


def compile_error(path, bin_path: Optional[object] = None) -> Optional[str]:
    """Why OpenVINO's CPU plugin refuses to compile the IR at `path` as written (its dynamic shapes kept), in a
    child process; None when it compiles (or openvino cannot be imported there)."""
    worker = Worker()
    try:
        worker.submit(path, None, bin_path)
        worker.result()
        return None
    except RuntimeError as err:
        return str(err)
    except (Crashed, CannotImport):
        return None
    finally:
        worker.close()


class Worker:
    """One run in a child process (`python -m rnnconv.engine.openvino_runtime`), started before its job is known:
    the child imports openvino and makes its Core while the caller still converts, then waits for the job.
    `submit` hands it over (the compile then overlaps whatever the caller does next), `result` collects it; a
    worker never given a job is ended by `close`."""

    def __init__(self):
        # batch mode (serving.sharing): the child that ran the previous models, which keeps its Core
        self.shared = serving.child(MODULE) if serving.sharing() else None
        self.proc = None if self.shared else subprocess.Popen(CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                              stderr=subprocess.PIPE, start_new_session=True)

    def submit(self, path, feeds: Mapping[str, np.ndarray], bin_path: Optional[object] = None, *,
               reshape: bool = False) -> None:
        job = {"path": str(path), "bin": None if bin_path is None else str(bin_path), "reshape": reshape,
               "feeds": None if feeds is None else {k: np.asarray(v) for k, v in feeds.items()}}
        if self.shared is not None:
            self.shared.send(job)
            return
        try:  # the child reads one pickle, not to the end of its stdin: communicate() closes it later
            self.proc.stdin.write(pickle.dumps(job))
            self.proc.stdin.flush()
        except OSError:  # the child is gone: result() says why
            pass

    def result(self) -> list[Output]:
        if self.shared is not None:
            try:
                answer = self.shared.receive()
            except serving.Gone as err:
                serving.drop(MODULE)
                raise Crashed(f"the OpenVINO runtime failed on this model ({err})") from None
            if isinstance(answer, dict):
                raise CannotImport(answer["cannot_import"])
            if isinstance(answer, str):
                raise RuntimeError(answer)
            return [Output(set(names), result, value) for names, result, value in answer]
        # The pipes reach their end once the child and what it forked are gone: end those once the child exits.
        threading.Thread(target=self._end_session_after_exit, daemon=True).start()
        stdout, stderr = self.proc.communicate()
        if self.proc.returncode != 0 or not stdout:
            tail = (stderr.decode(errors="replace").strip().splitlines() or
                    [f"exit status {self.proc.returncode}"])[-1]
            raise Crashed(f"the OpenVINO runtime failed on this model ({tail[:300]})")
        answer = pickle.loads(stdout)
        if isinstance(answer, dict):
            raise CannotImport(answer["cannot_import"])
        if isinstance(answer, str):
            raise RuntimeError(answer)
        return [Output(set(names), result, value) for names, result, value in answer]

    def close(self) -> None:
        if self.shared is not None:
            while self.shared.pending > 0:  # a job never collected: its answer read, the child kept in step
                try:
                    self.shared.receive()
                except (serving.Gone, Exception):
                    serving.drop(MODULE)
                    break
            return
        if self.proc.returncode is None:  # neither collected nor ended
            self._end_session()
            self.proc.communicate()

    def _end_session_after_exit(self) -> None:
        self.proc.wait()
        self._end_session()

    def _end_session(self) -> None:
        """Kill the child's session: the child and every process it forked."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # already gone
            pass


def _tensor(ov, value: np.ndarray, element_type):
    # np.asarray(order="C"), not np.ascontiguousarray: that makes a scalar (an If condition) a [1] tensor.
    if element_type == ov.Type.bf16:  # copy the bits: `.data` of a bf16 tensor is typed float16
        arr = np.asarray(value.astype(ml_dtypes.bfloat16), order="C")
        tensor = ov.Tensor(ov.Type.bf16, list(arr.shape))
        tensor.data.view(np.uint16)[...] = arr.view(np.uint16)
        return tensor
    # np.asarray(order="C"), not ascontiguousarray: a scalar input must stay rank 0 (OpenVINO checks the shape).
    if element_type.is_dynamic():
        return np.asarray(value, order="C")
    return np.asarray(value.astype(element_type.to_dtype(), copy=False), order="C")


def _answer(job: dict):
    if job["feeds"] is None:  # compile_error's job: compile as written, the whole refusal if any
        try:
            with MappedWeights(weights_file(job["path"], job["bin"])):
                core().compile_model(read(job["path"], job["bin"]), "CPU", CONFIG)
            return []
        except Exception as err:
            return f"{type(err).__name__}: " + " ".join(ln.strip() for ln in str(err).splitlines() if ln.strip())
    try:
        outputs = infer(read(job["path"], job["bin"]), job["feeds"], reshape=job["reshape"],
                        weights=weights_file(job["path"], job["bin"]))
        answer = [(sorted(o.names), o.result, o.value) for o in outputs]  # plain data: __main__ has Output
    except Exception as err:  # OpenVINO refused the model: the caller reports it
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
        answer = f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]
    return answer


def _child() -> None:
    telemetry.switch_off()  # rnnconv's own process: no files in home and temp
    answer = _answer
    try:
        core()  # before the job arrives (see Worker)
    except ImportError as err:  # installed, but it cannot be imported: every job gets the reason
        reason = {"cannot_import": cannot_import(err)}
        answer = lambda job: reason  # noqa: E731
    if sys.argv[1:] == ["--serve"]:  # batch mode: every model's job, one at a time
        serving.serve(answer)
        return
    pickle.dump(answer(pickle.load(sys.stdin.buffer)), sys.stdout.buffer)


if __name__ == "__main__":
    _child()
