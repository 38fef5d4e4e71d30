"""The one module that imports `onnx`: loading, saving, checking, and onnx's reference runtime.

The in-memory graph everywhere else is `onnx_ir` (measured: it memory-maps external data, so a 1 GiB model
loads and saves in ~73 MiB, where raw protobuf needs ~2 GiB and cannot hold a tensor over 2 GiB at all).
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np
import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from rnnconv.errors import BadInput, IOFailure, UsageError

ModelSource = Union[str, os.PathLike, "onnx.ModelProto", ir.Model]

# Above this many bytes of initializers a saved model keeps its weights in an external data file.
EXTERNAL_DATA_THRESHOLD = 1_800_000_000


def load(source: ModelSource, *, check: bool = True) -> ir.Model:
    """Read a model from a path, a ModelProto or an ir.Model; every failure is a one-line BadInput.

    A path is checked before anything else reads it: a graph that computes nothing, an opset newer than the
    installed onnx, external data outside the model's folder or shorter than declared are all refused.
    """
    if isinstance(source, ir.Model):
        return source
    if isinstance(source, onnx.ModelProto):
        _check_graph(source, "<ModelProto>")
        _check_tensors(source, "<ModelProto>")
        if check:
            _check_proto(source, "<ModelProto>")
        return _deserialize(source, "<ModelProto>", check)
    path = Path(source)
    if not path.exists():
        raise BadInput(f"{path}: no such file")
    if path.is_dir():
        raise BadInput(f"{path}: is a directory, not a model file")
    if not path.is_file():  # a FIFO or a device (/dev/zero) would block or never end
        raise BadInput(f"{path}: not a regular file")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except OSError as err:
        raise IOFailure(f"{path}: cannot read ({err.strerror or err})") from err
    except (DecodeError, RuntimeWarning, ValueError) as err:
        raise BadInput(f"{path}: not an ONNX model ({_first_line(err)})") from err
    except Exception as err:  # protobuf's C++ parser and onnx raise more types on hostile bytes
        raise BadInput(f"{path}: not an ONNX model ({type(err).__name__}: {_first_line(err)})") from err
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise BadInput(f"{path}: not an ONNX model (no graph or no IR version; truncated or not ONNX?)")
    _check_graph(proto, str(path))
    _check_external_data(proto, path)
    _check_tensors(proto, str(path))
    if check:
        # By path, so onnx resolves external data against the model's folder, not the working directory.
        _check_proto(str(path), str(path))
    model = _deserialize(proto, str(path), check)
    ir.external_data.set_base_dir(model.graph, str(path.parent))
    return model


def _deserialize(proto: "onnx.ModelProto", where: str, checked: bool) -> ir.Model:
    try:
        return ir.serde.deserialize_model(proto)
    except Exception as err:  # onnx_ir raises several types on malformed protos
        if not checked:  # the checker names the problem better than the deserializer does
            _check_proto(proto, where)
        raise BadInput(f"{where}: malformed model ({_root_cause(err)})") from err


def _root_cause(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return _first_line(err)


def _check_graph(proto: "onnx.ModelProto", where: str) -> None:
    """What onnx.checker lets through but no command can work with."""
    if len(proto.graph.output) == 0:
        what = "empty graph" if len(proto.graph.node) == 0 else f"{len(proto.graph.node)} node(s)"
        raise BadInput(f"{where}: the graph has no outputs ({what}): nothing to convert or verify")
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    latest = latest_opset()
    if opset is not None and opset > latest:
        from rnnconv.errors import Unsupported

        raise Unsupported(f"{where}: default-domain opset {opset} is newer than the installed onnx knows "
                          f"({latest}); upgrade onnx, or export at opset {latest} or older")


def _check_tensors(proto: "onnx.ModelProto", where: str) -> None:
    """Every tensor held inside the model must hold exactly what its dims and type declare: onnx.checker does
    not compare them, and onnx_ir reads the bytes lazily (a mismatch would surface later as a numpy error)."""
    graph = proto.graph
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            _check_element_type(vi.type.tensor_type.elem_type, f"{where}: value {vi.name!r}")
    for tensor in _all_initializers(graph):
        label = f"{where}: tensor {tensor.name!r}"
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            _check_element_type(tensor.data_type, label)
            continue
        _check_element_type(tensor.data_type, label)
        if any(d < 0 for d in tensor.dims):
            raise BadInput(f"{label}: negative dimension in {list(tensor.dims)}")
        if tensor.HasField("raw_data"):
            expected = _declared_nbytes(tensor)
            if expected is not None and expected != len(tensor.raw_data):
                raise BadInput(f"{label}: holds {len(tensor.raw_data)} bytes, its shape {list(tensor.dims)} of "
                               f"{onnx.TensorProto.DataType.Name(tensor.data_type)} needs {expected}")
            continue
        try:
            onnx.numpy_helper.to_array(tensor)  # typed fields (float_data, ...): small by nature, check by decoding
        except Exception as err:
            raise BadInput(f"{label}: data does not match its shape {list(tensor.dims)} and type "
                           f"({_first_line(err)})") from err


def _check_element_type(code: int, label: str) -> None:
    if code not in onnx.TensorProto.DataType.values() or code == onnx.TensorProto.UNDEFINED:
        raise BadInput(f"{label}: element type {code} is not an ONNX type")
    try:
        ir.DataType(code)
    except ValueError:
        from rnnconv.errors import Unsupported

        raise Unsupported(f"{label}: element type {onnx.TensorProto.DataType.Name(code)} is not supported by the "
                          f"installed onnx_ir") from None


def source_name(source) -> str:
    """How messages name a model source: its path, or a placeholder for in-memory models."""
    return str(source) if isinstance(source, (str, os.PathLike)) else "<model>"


def _check_proto(proto: "onnx.ModelProto | str", where: str) -> None:
    try:
        onnx.checker.check_model(proto, full_check=False)
    except onnx.checker.ValidationError as err:
        raise BadInput(f"{where}: invalid model: {_checker_message(err)}") from err
    except Exception as err:
        raise BadInput(f"{where}: invalid model: {_first_line(err)}") from err


def _check_external_data(proto: "onnx.ModelProto", path: Path) -> None:
    """External data must stay inside the model's folder and hold every byte it declares."""
    base = path.parent.resolve()
    for tensor in _all_initializers(proto.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in tensor.external_data}
        location = info.get("location", "")
        where = f"{path}: initializer {tensor.name!r}"
        if not location or os.path.isabs(location) or ".." in Path(location).parts:
            raise BadInput(f"{where}: external data location {location!r} is outside the model's folder")
        target = (base / location).resolve()
        if base not in target.parents:
            raise BadInput(f"{where}: external data location {location!r} resolves outside the model's folder")
        if not target.exists():
            raise BadInput(f"{where}: external data file {location!r} is missing")
        if not target.is_file():
            raise BadInput(f"{where}: external data {location!r} is not a regular file")
        try:
            offset = int(info.get("offset") or 0)
            length = int(info["length"]) if info.get("length") else None
        except ValueError:
            raise BadInput(f"{where}: external data offset/length {info.get('offset')!r}/{info.get('length')!r} "
                           f"are not integers") from None
        expected = _declared_nbytes(tensor)
        if offset < 0 or (length is not None and length < 0):
            raise BadInput(f"{where}: external data offset {offset} / length {length} is negative")
        if length is not None and expected is not None and length != expected:
            raise BadInput(f"{where}: external data {location!r} declares {length} bytes, its shape "
                           f"{list(tensor.dims)} needs {expected}")
        size = target.stat().st_size
        need = offset + (length if length is not None else (expected or 0))
        if need > size:
            raise BadInput(f"{where}: external data {location!r} holds {size} bytes, needs {need} (truncated?)")


def _declared_nbytes(tensor: "onnx.TensorProto") -> int | None:
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except Exception:
        return None
    if tensor.data_type in _SUB_BYTE_TYPES:
        return None
    n = 1
    for d in tensor.dims:
        n *= d
    return n * itemsize


_SUB_BYTE_TYPES = {getattr(onnx.TensorProto, t) for t in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
                   if hasattr(onnx.TensorProto, t)}


def _all_initializers(graph: "onnx.GraphProto"):
    """Every tensor that can hold external data: initializers and tensor attributes, subgraphs included."""
    yield from graph.initializer
    yield from (t.values for t in graph.sparse_initializer)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                yield from attr.tensors
            elif attr.type == onnx.AttributeProto.SPARSE_TENSOR:
                yield attr.sparse_tensor.values
            elif attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_initializers(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_initializers(g)


def _checker_message(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    # The checker puts the reason first and a dump of the node after it.
    return lines[0] if lines else type(err).__name__


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def to_proto(model: ir.Model) -> "onnx.ModelProto":
    return ir.serde.serialize_model(model)


def check_full(model: ir.Model | "onnx.ModelProto") -> None:
    """onnx.checker with full_check (shape inference included); raises BadInput with the checker's reason."""
    proto = model if isinstance(model, onnx.ModelProto) else _proto_for_check(model)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as err:
        raise BadInput(f"model fails onnx.checker: {_checker_message(err)}") from err


def _proto_for_check(model: ir.Model) -> "onnx.ModelProto":
    """The model's proto with external-data weights as typed graph inputs: onnx's checker resolves external
    data against the working directory when it is given a proto, and the weights' bytes are not its business."""
    graph = model.graph
    external = [v for v in graph.initializers.values() if isinstance(v.const_value, ir.ExternalTensor)]
    if not external:
        return to_proto(model)
    added = [v for v in external if v not in graph.inputs]
    try:
        for v in external:
            graph.initializers.pop(v.name)
            if v.type is None:
                v.type = ir.TensorType(v.const_value.dtype)
            if v.shape is None:
                v.shape = ir.Shape(v.const_value.shape)
        graph.inputs.extend(added)
        return to_proto(model)
    finally:
        for v in added:
            graph.inputs.remove(v)
        for v in external:
            graph.register_initializer(v)


def save(model: ir.Model, path: str | os.PathLike, *, force: bool = False, inputs: tuple = (),
         external_data: bool | None = None, early: Optional["EarlyCopy"] = None) -> Path:
    """Write atomically: a temporary folder beside the target, then a rename; on any failure nothing is left.

    `early`: the weights' copy started before the model was final (EarlyCopy), used where its layout agrees.

    Never writes over any of `inputs` or the files the model's external data is read from (compared by
    resolved path and inode), refuses an existing output unless `force`. External data (`<name>.data` beside
    the model) when asked or when the weights are large; a replaced `.data` is put back if the model's rename
    fails, so the pair on disk is always the old one or the new one.
    """
    out = Path(path)
    if external_data is None:
        external_data = _initializer_bytes(model) > EXTERNAL_DATA_THRESHOLD or _has_external(model)
    folder = out.parent if str(out.parent) else Path(".")
    data_name = out.name + ".data"
    sources = [*inputs, *_external_paths(model)]
    guard_output(out, force=force, inputs=sources)
    if external_data:
        guard_output(folder / data_name, force=force, inputs=sources)
    created = [p for p in (folder, *folder.parents) if not p.exists()]  # removed again if the write fails
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmpdir = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=folder))
    except OSError as err:
        _remove_empty(created)
        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    backup, done = None, False
    try:
        tmp_model = tmpdir / out.name
        if external_data:
            _save_streaming(model, tmp_model, tmpdir / data_name, data_name, folder, early)
        else:
            ir.save(model, tmp_model)
        if external_data and (tmpdir / data_name).exists():
            if (folder / data_name).exists():
                backup = tmpdir / (data_name + ".previous")
                os.replace(folder / data_name, backup)
            os.replace(tmpdir / data_name, folder / data_name)
            try:
                os.replace(tmp_model, out)
            except BaseException:
                _restore(folder / data_name, backup)
                raise
        else:
            os.replace(tmp_model, out)
        done = True
    except OSError as err:
        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    except ValueError as err:
        raise IOFailure(f"{out}: cannot serialize ({_first_line(err)}); try external data") from err
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
        if not done:
            _remove_empty(created)
    return out


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


def _copy_range(src: int, dst: int, src_offset: int, dst_offset: int, length: int) -> None:
    """Copy bytes file to file in the kernel (copy_file_range); plain reads and writes where it is unavailable."""
    kernel = hasattr(os, "copy_file_range")
    while length > 0:
        if kernel:
            try:
                n = os.copy_file_range(src, dst, min(length, 1 << 30), src_offset, dst_offset)
            except OSError:  # another file system, or a kernel without it
                kernel = False
                continue
        else:
            chunk = os.pread(src, min(length, 1 << 24), src_offset)
            n = os.pwrite(dst, chunk, dst_offset) if chunk else 0
        if n == 0:
            raise OSError(f"external data ended {length} bytes early")
        src_offset, dst_offset, length = src_offset + n, dst_offset + n, length - n


def _restore(target: Path, backup: Path | None) -> None:
    """Put the previous external-data file back (or remove the new one when there was none)."""
    with contextlib.suppress(OSError):
        if backup is not None:
            os.replace(backup, target)
        else:
            target.unlink()


def _external_paths(model: ir.Model) -> list[Path]:
    """The files the model's weights are memory-mapped from: writing over them would destroy the input."""
    out = []
    for v in model.graph.initializers.values():
        if isinstance(v.const_value, ir.ExternalTensor):
            with contextlib.suppress(Exception):
                out.append(Path(v.const_value.path))
    return out


def release_pages(view: np.ndarray) -> None:
    """Drop the pages of a memory-mapped array view from this process's resident set once they are read.

    The kernel keeps them in its page cache (a later read faults them back in cheaply), so scanning a multi-GB
    weight costs one chunk of resident memory, not the weight. A no-op for arrays that are not memory-mapped.
    """
    found = _mapped(view)
    if found is None or not hasattr(found[0], "madvise") or view.nbytes == 0:
        return
    mm, start = found
    with contextlib.suppress(Exception):
        stop = min(start + view.nbytes, len(mm))
        start -= start % mmap.PAGESIZE
        mm.madvise(mmap.MADV_DONTNEED, start, stop - start)


def _mapped(view) -> Optional[tuple[mmap.mmap, int]]:
    """The mmap an array view reads from and the view's start in it, or None (not memory-mapped)."""
    mm, base = view, None
    while isinstance(mm, (np.ndarray, memoryview)) and not isinstance(mm, mmap.mmap):
        if isinstance(mm, memoryview):
            base, mm = mm, mm.obj
        else:
            mm = mm.base
    if not isinstance(mm, mmap.mmap) or base is None:
        return None
    try:
        return mm, view.__array_interface__["data"][0] - np.frombuffer(base, np.uint8).__array_interface__["data"][0]
    except (TypeError, ValueError):
        return None


class KernelCopier:
    """`copier(view, fd, offset)`: copies a C-contiguous view of `model`'s memory-mapped external data to
    `offset` of the open file `fd` by the kernel (copy_file_range), so the bytes never enter this process; False
    for any other view. onnx_ir maps each data file whole, so a view's place in its map is its place in the file."""

    def __init__(self, model: ir.Model):
        self._tensors = [v.const_value for g in model.graphs() for v in g.initializers.values()
                         if isinstance(v.const_value, ir.ExternalTensor)]
        self._files: dict[str, int] = {}

    def __call__(self, view, fd: int, offset: int) -> bool:
        if not isinstance(view, np.ndarray) or not view.flags.c_contiguous or view.nbytes == 0:
            return False
        found = _mapped(view)
        path = None if found is None else next((t.path for t in self._tensors if t.raw is found[0]), None)
        if path is None:
            return False
        if path not in self._files:
            self._files[path] = os.open(path, os.O_RDONLY)
        _copy_range(self._files[path], fd, found[1], offset, view.nbytes)
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


def release_external(model: ir.Model) -> None:
    """release_pages for every external weight of `model` that has been read."""
    for graph in model.graphs():
        for v in graph.initializers.values():
            t = v.const_value
            if isinstance(t, ir.ExternalTensor) and t.raw is not None:
                release_pages(t.numpy())


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
        raise UsageError(f"{out}: exists (use --force to overwrite)")


def _initializer_bytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def _has_external(model: ir.Model) -> bool:
    return any(isinstance(v.const_value, ir.ExternalTensor) for v in model.graph.initializers.values())


def schema_since_version(op_type: str, opset: int, domain: str = "") -> int | None:
    """The version of `op_type`'s schema in force at `opset`, or None when the op does not exist there."""
    try:
        return onnx.defs.get_schema(op_type, opset, domain).since_version
    except onnx.defs.SchemaError:
        return None


def latest_opset() -> int:
    return onnx.defs.onnx_opset_version()


def reference_session(model: ir.Model | "onnx.ModelProto", kernels: dict[str, Callable]):
    """onnx's ReferenceEvaluator for the non-recurrent ops, with our kernels for the ops in `kernels`.

    A kernel is called as kernel(node_attributes: dict, *inputs) and returns a tuple of outputs.
    onnx's own GRU/LSTM/RNN are never used: they ignore activations, clip, input_forget and sequence_lens.
    """
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun

    def make(op_type: str, kernel: Callable):
        def _run(self, *inputs, **_):
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in self.onnx_node.attribute}
            attrs = {k: (v.decode() if isinstance(v, bytes) else
                         [x.decode() if isinstance(x, bytes) else x for x in v] if isinstance(v, list) else v)
                     for k, v in attrs.items()}
            n_out = len(self.onnx_node.output)
            return tuple(kernel(attrs, *inputs))[:n_out]

        return type(op_type, (OpRun,), {"op_domain": "", "_run": _run})

    if isinstance(model, onnx.ModelProto):
        model = ir.serde.deserialize_model(model)
    proto, weights = _weights_as_inputs(model)
    evaluator = ReferenceEvaluator(proto, new_ops=[make(op, k) for op, k in kernels.items()])
    return _WithWeights(evaluator, weights)


class _WithWeights:
    """A ReferenceEvaluator whose initializers are fed as (memory-mapped) arrays at each run."""

    def __init__(self, evaluator, weights: dict):
        self.evaluator, self.weights = evaluator, weights

    def run(self, output_names, feeds: dict):
        return self.evaluator.run(output_names, {**self.weights, **feeds})


def _weights_as_inputs(model: ir.Model) -> tuple["onnx.ModelProto", dict]:
    """The model's proto without initializer data (they become graph inputs) plus the arrays by name.

    Weights are never copied into protobuf: external data stays memory-mapped and models over 2 GB run.
    """
    weights = {name: v.const_value.numpy() for name, v in model.graph.initializers.items()
               if v.const_value is not None}
    proto = ir.serde.serialize_model(model) if not weights else _serialize_without(model, weights)
    return proto, weights


def _serialize_without(model: ir.Model, weights: dict) -> "onnx.ModelProto":
    graph = model.graph
    saved = dict(graph.initializers)
    extra_inputs = [v for name, v in saved.items() if v not in graph.inputs]
    try:
        graph.initializers.clear()
        graph.inputs.extend(extra_inputs)
        for v in saved.values():
            if v.type is None and v.const_value is not None:
                v.type = ir.TensorType(v.const_value.dtype)
            if v.shape is None and v.const_value is not None:
                v.shape = ir.Shape(v.const_value.shape)
        return ir.serde.serialize_model(model)
    finally:
        for v in extra_inputs:
            graph.inputs.remove(v)
        for v in saved.values():
            graph.register_initializer(v)


def onnxruntime_session(model: ir.Model | "onnx.ModelProto"):
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    if isinstance(model, onnx.ModelProto):
        model = ir.serde.deserialize_model(model)
    proto, weights = _weights_as_inputs(model)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    # onnxruntime lags onnx's IR version; the graph features our models use exist in its newest one.
    proto.ir_version = min(proto.ir_version, onnxruntime_max_ir_version())
    sess = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return _OrtWithWeights(sess, weights)


@functools.lru_cache(maxsize=1)
def onnxruntime_max_ir_version() -> int:
    import onnxruntime as ort

    for ir_version in range(onnx.IR_VERSION, 3, -1):
        node = onnx.helper.make_node("Identity", ["x"], ["y"])
        vi = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [1]) for n in "xy"]
        model = onnx.helper.make_model(onnx.helper.make_graph([node], "g", vi[:1], vi[1:]),
                                       opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=ir_version)
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            return ir_version
        except Exception:
            continue
    return 3


class RuntimeCrash(Exception):
    """A runtime's own process ended without an answer (a crash in native code)."""


def onnxruntime_outputs_isolated(models: list, feeds: dict) -> list[tuple[Optional[dict], str]]:
    """Run each model in onnxruntime in one child process (engine/ort_worker.py): per model, (outputs, "") or
    (None, why onnxruntime refused or failed); RuntimeCrash if the process died. External weights are named by
    file and offset, not sent: the child maps them once for all models, and this process holds none of them
    while onnxruntime runs."""
    import pickle
    import subprocess
    import sys

    job: dict = {"models": [], "feeds": {k: np.asarray(v) for k, v in feeds.items()}}
    for model in models:
        proto, weights = _weights_as_inputs(model)
        proto.ir_version = min(proto.ir_version, onnxruntime_max_ir_version())
        specs = {}
        for name, array in weights.items():
            t = model.graph.initializers[name].const_value
            native = np.dtype(array.dtype).kind in "fiub" and np.dtype(array.dtype).isnative
            if isinstance(t, ir.ExternalTensor) and native and array.flags.c_contiguous:
                specs[name] = (t.path, t.offset or 0, np.dtype(array.dtype).str, tuple(array.shape))
            else:
                specs[name] = np.ascontiguousarray(array)
        job["models"].append((proto.SerializeToString(), specs))
    worker = Path(__file__).resolve().parent / "engine" / "ort_worker.py"
    proc = subprocess.run([sys.executable, str(worker)], input=pickle.dumps(job), capture_output=True)
    if proc.returncode != 0:
        tail = (proc.stderr.decode(errors="replace").strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise RuntimeCrash(f"onnxruntime's process failed ({tail[:300]})")
    return pickle.loads(proc.stdout)


class _OrtWithWeights(_WithWeights):
    """An onnxruntime session fed its weights as inputs (no copy into protobuf, works past 2 GB)."""

    def get_outputs(self):
        return self.evaluator.get_outputs()

    def get_inputs(self):
        return [i for i in self.evaluator.get_inputs() if i.name not in self.weights]


def convert_version(model: ir.Model, target: int) -> ir.Model:
    """onnx's version converter on a (small, weight-free) model; failures raise Unsupported with its reason."""
    from onnx import version_converter

    from rnnconv.errors import Unsupported

    try:
        converted = version_converter.convert_version(to_proto(model), target)
    except Exception as err:
        raise Unsupported(_first_line(err)) from err
    return ir.serde.deserialize_model(converted)


def schema_type_lists(op_type: str, version: int, domain: str = "") -> tuple[list, list]:
    """For each formal input, and each formal output, of the schema: the allowed element types ('float', ...)."""
    schema = onnx.defs.get_schema(op_type, version, domain)
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}

    def allowed(type_str: str) -> set[str] | None:
        strs = constraints.get(type_str, [type_str])
        out = {t[len("tensor("):-1] for t in strs if t.startswith("tensor(")}
        return {"double" if t == "double" else t for t in out} or None

    return [allowed(f.type_str) for f in schema.inputs], [allowed(f.type_str) for f in schema.outputs]


def min_ir_version(opset: int) -> int:
    """The lowest IR version that can hold a default-domain opset (onnx's VERSION_TABLE)."""
    best = None
    for _release, ir_version, ai_onnx, *_ in onnx.helper.VERSION_TABLE:
        if ai_onnx >= opset and (best is None or ir_version < best):
            best = ir_version
    return best or onnx.IR_VERSION
