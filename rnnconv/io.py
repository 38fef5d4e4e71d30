"""The one module that imports `onnx`: loading, saving, checking, and onnx's reference runtime.

The in-memory graph everywhere else is `onnx_ir` (measured: it memory-maps external data, so a 1 GiB model
loads and saves in ~73 MiB, where raw protobuf needs ~2 GiB and cannot hold a tensor over 2 GiB at all).
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from pathlib import Path
from typing import Callable, Union

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from rnnconv.errors import BadInput, IOFailure, UsageError

ModelSource = Union[str, os.PathLike, "onnx.ModelProto", ir.Model]

# Above this many bytes of initializers a saved model keeps its weights in an external data file.
EXTERNAL_DATA_THRESHOLD = 1_800_000_000


def load(source: ModelSource, *, check: bool = True) -> ir.Model:
    """Read a model from a path, a ModelProto or an ir.Model; every failure is a one-line BadInput."""
    if isinstance(source, ir.Model):
        return source
    if isinstance(source, onnx.ModelProto):
        if check:
            _check_proto(source, "<ModelProto>")
        return ir.serde.deserialize_model(source)
    path = Path(source)
    if not path.exists():
        raise BadInput(f"{path}: no such file")
    if path.is_dir():
        raise BadInput(f"{path}: is a directory, not a model file")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except (DecodeError, RuntimeWarning, ValueError) as err:
        raise BadInput(f"{path}: not an ONNX model ({_first_line(err)})") from err
    except OSError as err:
        raise IOFailure(f"{path}: cannot read ({err.strerror or err})") from err
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise BadInput(f"{path}: not an ONNX model (no graph or no IR version; truncated or not ONNX?)")
    _check_external_data(proto, path)
    if check:
        _check_proto(proto, str(path))
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as err:  # onnx_ir raises several types on malformed protos
        raise BadInput(f"{path}: malformed model ({_first_line(err)})") from err
    ir.external_data.set_base_dir(model.graph, str(path.parent))
    return model


def source_name(source) -> str:
    """How messages name a model source: its path, or a placeholder for in-memory models."""
    return str(source) if isinstance(source, (str, os.PathLike)) else "<model>"


def _check_proto(proto: "onnx.ModelProto", where: str) -> None:
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
        if not target.is_file():
            raise BadInput(f"{where}: external data file {location!r} is missing")
        offset = int(info.get("offset", 0) or 0)
        length = info.get("length")
        expected = _declared_nbytes(tensor)
        size = target.stat().st_size
        need = offset + (int(length) if length else (expected or 0))
        if need > size:
            raise BadInput(f"{where}: external data {location!r} holds {size} bytes, needs {need} (truncated?)")


def _declared_nbytes(tensor: "onnx.TensorProto") -> int | None:
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except Exception:
        return None
    n = 1
    for d in tensor.dims:
        n *= d
    return n * itemsize


def _all_initializers(graph: "onnx.GraphProto"):
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_initializers(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_initializers(g)


def _checker_message(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    # The checker puts the reason first and a dump of the node after it.
    return lines[0] if lines else type(err).__name__


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def to_proto(model: ir.Model) -> "onnx.ModelProto":
    return ir.serde.serialize_model(model)


def check_full(model: ir.Model | "onnx.ModelProto") -> None:
    """onnx.checker with full_check (shape inference included); raises BadInput with the checker's reason."""
    proto = model if isinstance(model, onnx.ModelProto) else to_proto(model)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as err:
        raise BadInput(f"model fails onnx.checker: {_checker_message(err)}") from err


def save(model: ir.Model, path: str | os.PathLike, *, force: bool = False, inputs: tuple = (),
         external_data: bool | None = None) -> Path:
    """Write atomically: a temporary file in the target folder, then a rename.

    Never writes over any of `inputs` (compared by resolved path and inode), refuses an existing output
    unless `force`. External data (`<name>.data` beside the model) when asked or when the weights are large.
    """
    out = Path(path)
    guard_output(out, force=force, inputs=inputs)
    if external_data is None:
        external_data = _initializer_bytes(model) > EXTERNAL_DATA_THRESHOLD or _has_external(model)
    folder = out.parent if str(out.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmpdir = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=folder))
    except OSError as err:
        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    try:
        tmp_model = tmpdir / out.name
        data_name = out.name + ".data"
        if external_data:
            ir.save(model, tmp_model, external_data=data_name)
        else:
            ir.save(model, tmp_model)
        if external_data and (tmpdir / data_name).exists():
            os.replace(tmpdir / data_name, folder / data_name)
        os.replace(tmp_model, out)
    except OSError as err:
        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    except ValueError as err:
        raise IOFailure(f"{out}: cannot serialize ({_first_line(err)}); try external data") from err
    finally:
        for leftover in tmpdir.glob("*"):
            with contextlib.suppress(OSError):
                leftover.unlink()
        with contextlib.suppress(OSError):
            tmpdir.rmdir()
    return out


def guard_output(out: Path, *, force: bool, inputs: tuple = ()) -> None:
    """Refuse to write over an input (even through a symlink or another path) or, without force, any file."""
    for src in inputs:
        if src is None or not isinstance(src, (str, os.PathLike)):
            continue
        src = Path(src)
        if out.exists() and src.exists() and os.path.samefile(out, src):
            raise UsageError(f"{out}: refusing to write over the input model")
        if out.resolve() == src.resolve():
            raise UsageError(f"{out}: refusing to write over the input model")
    if out.exists() and not force:
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
