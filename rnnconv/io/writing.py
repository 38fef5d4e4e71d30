"""Writing files atomically: every output (models, IR, reports, inputs files, plots) goes to a temporary name
beside its target and is renamed into place only when complete; on any failure nothing is left.

Models with external data are written streaming (`save`): untouched weights are copied file to file by the kernel,
possibly before the model is final (`EarlyCopy`); the input and its data files are never written over."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.errors import IOFailure, UsageError, first_line
from rnnconv.io.dims import declared_minus_one
from rnnconv.io.mapping import _copy_range

EXTERNAL_DATA_THRESHOLD = 1_800_000_000


class Staged:
    """Temporary files beside their targets (a hidden folder `.NAME.XXXX/` in the targets' folder), renamed into
    place together by `commit()` only when all are complete.

    Targets are replaced in the order given (a model's data before the model, an IR's .bin before its .xml);
    if a later rename fails, the earlier targets get their previous files back (kept as hard links, or copies,
    so a target is only ever replaced by a rename), or vanish when they had none. On any failure nothing is
    left: no temporary file and no folder the write created. A target whose temporary file was not written is
    left alone."""

    def __init__(self, targets, what: Optional[str] = None):
        self.targets = [Path(t) for t in targets]
        self.what = what or str(self.targets[-1])
        self.folder = self.targets[0].parent if str(self.targets[0].parent) else Path(".")
        self.created = [p for p in (self.folder, *self.folder.parents) if not p.exists()]
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.tmpdir = Path(tempfile.mkdtemp(prefix=f".{self.targets[-1].name}.", dir=self.folder))
        except OSError as err:
            _remove_empty(self.created)
            raise IOFailure(f"{self.what}: cannot write ({err.strerror or err})") from err
        # Each under its target's name: a model's temporary file names its data file as it will be named, so
        # onnxruntime can load the staged pair before it is renamed into place.
        names = [t.name for t in self.targets]
        self.temps = [self.tmpdir / (name if len(set(names)) == len(names) else f"{i}.{name}")
                      for i, name in enumerate(names)]
        self.done = False

    def __enter__(self) -> "Staged":
        return self

    def commit(self) -> None:
        committed: list[tuple[Path, Optional[Path]]] = []
        try:
            for i, (tmp, target) in enumerate(zip(self.temps, self.targets)):
                if not tmp.exists():
                    continue
                backup = None
                if target.exists() or target.is_symlink():
                    backup = self.tmpdir / f".{i}.previous"
                    try:
                        os.link(target, backup, follow_symlinks=False)
                    except OSError:
                        shutil.copy2(target, backup, follow_symlinks=False)
                os.replace(tmp, target)
                committed.append((target, backup))
        except BaseException as err:
            for target, backup in reversed(committed):
                with contextlib.suppress(OSError):
                    os.replace(backup, target) if backup is not None else target.unlink()
            if isinstance(err, OSError):
                raise IOFailure(f"{self.what}: cannot write ({err.strerror or err})") from err
            raise
        self.done = True

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        if not self.done:
            _remove_empty(self.created)


def atomic_write(path, write: Callable, *, force: bool = False, inputs: tuple = ()) -> Path:
    """`write(file)` into a temporary file beside `path`, renamed into place when complete (see Staged)."""
    out = Path(path)
    guard_output(out, force=force, inputs=inputs)
    with Staged([out]) as staged:
        try:
            with open(staged.temps[0], "wb") as f:
                write(f)
        except OSError as err:
            raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
        staged.commit()
    return out


def save(model: ir.Model, path: str | os.PathLike, *, force: bool = False, inputs: tuple = (),
         external_data: bool | None = None, early: Optional["EarlyCopy"] = None) -> Path:
    """Write an ONNX model atomically (see Staged and `stage`): on any failure nothing is left."""
    with stage(model, path, force=force, inputs=inputs, external_data=external_data, early=early) as staged:
        staged.commit()
    return Path(path)


def stage(model: ir.Model, path: str | os.PathLike, *, force: bool = False, inputs: tuple = (),
          external_data: bool | None = None, early: Optional["EarlyCopy"] = None) -> Staged:
    """Write an ONNX model beside `path`, not yet in place: the Staged files, complete (the model is the last
    of `temps`), renamed into place by its commit(); leaving it without a commit removes them.

    `early`: the weights' copy started before the model was final (EarlyCopy), used where its layout agrees.

    Never writes over any of `inputs` or the files the model's external data is read from (compared by
    resolved path and inode), refuses an existing output unless `force`. External data (`<name>.data` beside
    the model) when asked or when the weights are large; the pair on disk is always the old one or the new one.
    """
    out = Path(path)
    if external_data is None:
        external_data = _initializer_bytes(model) > EXTERNAL_DATA_THRESHOLD or _has_external(model)
    folder = out.parent if str(out.parent) else Path(".")
    data_name = out.name + ".data"
    sources = [*inputs, *external_paths(model)]
    guard_output(out, force=force, inputs=sources)
    if external_data:
        guard_output(folder / data_name, force=force, inputs=sources)
    staged = Staged([folder / data_name, out] if external_data else [out])
    tmp_model = staged.temps[-1]
    try:
        with declared_minus_one(model):  # the interface's -1 dims as the source declared them
            if external_data:  # the model names its data file as it will be, beside it in `folder`
                _save_streaming(model, tmp_model, staged.temps[0], data_name, folder, early)
            else:
                ir.save(model, tmp_model)
    except BaseException as err:
        staged.__exit__(None, None, None)
        if isinstance(err, OSError):
            raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
        if isinstance(err, ValueError):
            raise IOFailure(f"{out}: cannot serialize ({first_line(err)}); try external data") from err
        raise
    return staged


def _remove_empty(folders: list[Path]) -> None:
    """Remove folders this write created (deepest first), if nothing else was put in them meanwhile."""
    for p in folders:
        with contextlib.suppress(OSError):
            p.rmdir()


SMALL_TENSOR_BYTES = 256  # onnx_ir's default: smaller tensors are stored inside the model file


ALIGNMENT = 4096  # tensors appended to a data file start on a page, so each one memory-maps on its own


_SPAN_GAP = 1 << 20  # unreferenced bytes between two referenced ranges of a source file copied rather than split


def _save_streaming(model: ir.Model, model_path: Path, data_path: Path, data_name: str, folder: Path,
                    early: Optional["EarlyCopy"] = None) -> None:
    """Write `model_path` and its external data `data_path` (referenced as `data_name`) without decoding weights.

    External tensors the rewrite left alone are copied file to file by the kernel (copy_file_range), at their
    own offsets for the first source file, so their bytes never enter this process; tensors held in memory are
    appended one at a time; tensors of at most SMALL_TENSOR_BYTES go inside the model file. Only the graph is
    serialized. The model is left as it was (its tensors still read from where they did).
    """
    replaced: list[tuple[object, str, object]] = []  # (owner, attribute, previous tensor) to put back

    def swap(owner, attr: str, tensor) -> None:
        replaced.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, tensor)

    try:
        values = [v for g in model.graphs() for v in g.initializers.values() if v.const_value is not None]
        for attr in _tensor_attributes(model):  # Constant values read from external data: inline, as onnx does
            if isinstance(attr.value, ir.ExternalTensor):
                swap(attr, "_value", _in_memory(attr.value))
        external = _external_values(model)
        spans = _copy_plan(external)
        done = early.take(spans, data_path) if early is not None else []
        with open(data_path, "r+b" if done else "wb") as dst:
            placed = _copy_external(spans, dst, done)
            end = max((off + n for off, n in placed.values()), default=0)
            for v in values:
                t = v.const_value
                if v in placed:
                    offset, length = placed[v]
                elif t.nbytes <= SMALL_TENSOR_BYTES:
                    if isinstance(t, ir.ExternalTensor):
                        swap(v, "const_value", _in_memory(t))
                    continue
                else:
                    offset = -(-end // ALIGNMENT) * ALIGNMENT
                    dst.seek(offset)
                    dst.write(t.tobytes())  # one tensor at a time: released before the next
                    length = t.nbytes
                    end = offset + length
                swap(v, "const_value", ir.ExternalTensor(
                    data_name, offset, length, t.dtype, shape=t.shape, name=t.name, doc_string=t.doc_string,
                    metadata_props=dict(t.metadata_props) or None, base_dir=str(folder)))
            dst.truncate(end)
        ir.save(model, model_path)  # no external_data: the references just made are written as they are
    finally:
        for owner, attr, previous in reversed(replaced):
            setattr(owner, attr, previous)


def _in_memory(t) -> ir.Tensor:
    return ir.Tensor(np.array(t.numpy(), copy=True), name=t.name, dtype=t.dtype)


def _tensor_attributes(model: ir.Model):
    for graph in model.graphs():
        for node in graph:
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.TENSOR and attr.value is not None:
                    yield attr


def _external_values(model: ir.Model) -> list:
    """Initializers read from external data that go to the output's data file (bigger than SMALL_TENSOR_BYTES)."""
    return [v for g in model.graphs() for v in g.initializers.values()
            if isinstance(v.const_value, ir.ExternalTensor) and v.const_value.nbytes > SMALL_TENSOR_BYTES]


def _copy_plan(values: list) -> list[tuple]:
    """Spans of the source files that `values` reference, as (path, start, stop, at, [(offset, length, value)]),
    `at` their place in the output's data file, or None when they follow the previous span page-aligned.

    The first source file's ranges keep their offsets (the output references the same bytes where they were)
    unless that would leave more than _SPAN_GAP bytes of holes; other files follow. Neighbouring ranges are
    copied as one span.
    """
    by_file: dict[str, list] = {}
    for v in values:
        by_file.setdefault(os.path.realpath(v.const_value.path), []).append(v)
    plan = []
    for i, (path, vs) in enumerate(by_file.items()):
        ranges = sorted(((v.const_value.offset or 0, v.const_value.length or v.const_value.nbytes, v) for v in vs),
                        key=lambda r: r[0])
        spans: list[list] = []  # [start, stop, [(offset, length, value)...]]
        for off, n, v in ranges:
            if spans and off <= spans[-1][1] + _SPAN_GAP:
                spans[-1][1] = max(spans[-1][1], off + n)
                spans[-1][2].append((off, n, v))
            else:
                spans.append([off, off + n, [(off, n, v)]])
        holes = spans[0][0] + sum(b[0] - a[1] for a, b in zip(spans, spans[1:]))
        in_place = i == 0 and holes <= _SPAN_GAP
        plan.extend((path, start, stop, start if in_place else None, members) for start, stop, members in spans)
    return plan


def _copy_external(plan: list[tuple], dst, done: list[tuple] = ()) -> dict:
    """Copy the spans of `plan` (_copy_plan) into `dst`; {value: (offset, length)} there. Spans in `done`
    (path, start, stop) are already there, at their own offsets."""
    placed: dict = {}
    end = 0
    sources: dict[str, int] = {}
    try:
        for path, start, stop, at, members in plan:
            at = -(-end // ALIGNMENT) * ALIGNMENT if at is None else at
            copied = at == start and any(p == path and a <= start and stop <= b for p, a, b in done)
            if not copied:
                if path not in sources:
                    sources[path] = os.open(path, os.O_RDONLY)
                _copy_range(sources[path], dst.fileno(), start, at, stop - start)
            for off, n, v in members:
                placed[v] = (at + off - start, n)
            end = max(end, at + stop - start)
    finally:
        for fd in sources.values():
            os.close(fd)
    return placed


class EarlyCopy:
    """The copy of a model's untouched external weights, started while the rewrite and its checks run.

    The output's data file keeps the first source file's offsets (_copy_plan), so those spans can be copied
    into a hidden file beside the output, in a thread, before the final model exists: the copy overlaps the
    rest of the command instead of following it. save() takes the file where its own plan agrees (rewrites
    leave weights alone) and copies the rest; discard() removes it on any failure.
    """

    def __init__(self, model: ir.Model, output: str | os.PathLike):
        import threading

        self.path: Optional[Path] = None
        self.spans: list[tuple] = []
        self._error: Optional[BaseException] = None
        self._thread = None
        plan = [(path, start, stop) for path, start, stop, at, _ in _copy_plan(_external_values(model))
                if at is not None]
        folder = Path(output).parent if str(Path(output).parent) else Path(".")
        if not plan or not folder.is_dir():
            return
        fd, self.path = _create_hidden(folder / f".{Path(output).name}.data")
        self.spans = plan
        self._thread = threading.Thread(target=self._copy, args=(fd,), daemon=True)
        self._thread.start()

    def _copy(self, fd: int) -> None:
        try:
            for path, start, stop in self.spans:
                src = os.open(path, os.O_RDONLY)
                try:
                    _copy_range(src, fd, start, start, stop - start)
                finally:
                    os.close(src)
        except BaseException as err:  # reported by take(): save() then copies everything itself
            self._error = err
        finally:
            os.close(fd)

    def take(self, plan: list[tuple], data_path: Path) -> list[tuple]:
        """Wait for the copy; move it to `data_path` and return its spans when `plan` keeps the same first file
        in place, else discard it and return []."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        in_place = {(path, start) for path, start, _, at, _ in plan if at == start}
        if self.path is None or self._error is not None or not any((p, a) in in_place for p, a, _ in self.spans):
            self.discard()
            return []
        os.replace(self.path, data_path)
        self.path = None
        return self.spans

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.discard()

    def discard(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


def _create_hidden(stem: Path) -> tuple[int, Path]:
    """A new file `stem.XXXXXXXX`, opened for writing; unlike mkstemp's 0600, its mode follows the umask as the
    output's other files do (it becomes the output's data file)."""
    import secrets

    while True:
        path = stem.with_name(f"{stem.name}.{secrets.token_hex(4)}")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), path
        except FileExistsError:
            continue


def external_paths(model: ir.Model) -> list[Path]:
    """The files the model's weights are memory-mapped from: writing over them would destroy the input."""
    out = []
    for v in model.graph.initializers.values():
        if isinstance(v.const_value, ir.ExternalTensor):
            with contextlib.suppress(Exception):
                out.append(Path(v.const_value.path))
    return out


def check_suffix(out, suffix: str, what: str) -> None:
    """An output must be named for what it holds (a model.onnx that holds IR XML misleads every reader)."""
    if Path(out).suffix.lower() != suffix:
        raise UsageError(f"{out}: {what} is written as NAME{suffix}; name the output *{suffix}")


def guard_output(out: Path, *, force: bool, inputs: tuple = ()) -> None:
    """Refuse to write over an input (even through a symlink, a hard link or another path) or, without force,
    any existing file; refuse a directory."""
    out = Path(out)
    for src in inputs:
        if src is None or not isinstance(src, (str, os.PathLike)):
            continue
        src = Path(src)
        try:
            same = out.exists() and src.exists() and os.path.samefile(out, src)
        except OSError:
            same = False
        if same or out.resolve() == src.resolve():
            raise UsageError(f"{out}: refusing to write over the input {src}")
    if out.is_dir():
        raise UsageError(f"{out}: is a directory; give a file name")
    if (out.exists() or out.is_symlink()) and not force:
        raise UsageError(f"{out}: exists", fixes=("force",))


def _initializer_bytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def _has_external(model: ir.Model) -> bool:
    return any(isinstance(v.const_value, ir.ExternalTensor) for v in model.graph.initializers.values())
