"""Reading ONNX models: from a path, a ModelProto or an onnx_ir Model, every defect refused up front as one
line (BadInput); and serializing them back to protos (for the checker and the runtimes).

The in-memory graph everywhere else is `onnx_ir` (measured: it memory-maps external data, so a 1 GiB model
loads and saves in ~73 MiB, where raw protobuf needs ~2 GiB and cannot hold a tensor over 2 GiB at all).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Union

import onnx
import onnx_ir as ir
from google.protobuf.message import DecodeError

from rnnconv import schemas
from rnnconv.errors import BadInput, IOFailure, RnnconvWarning, Unsupported, first_line
from rnnconv.io.constant_data import inline_constant_data
from rnnconv.io.dims import unset_minus_one

ModelSource = Union[str, os.PathLike, "onnx.ModelProto", ir.Model]


def load(source: ModelSource, *, check: bool = True) -> ir.Model:
    """Read a model from a path, a ModelProto or an ir.Model; every failure is a one-line BadInput.

    A path is checked before anything else reads it: a graph that computes nothing, an opset newer than the
    installed onnx, external data outside the model's folder or shorter than declared are all refused.
    """
    if isinstance(source, ir.Model):
        unset_minus_one(source)  # as read from a file: -1 is dynamic
        return source
    if isinstance(source, onnx.ModelProto):
        _check_graph(source, "<ModelProto>")
        _check_declared(source, "<ModelProto>")
        _check_tensors(source, "<ModelProto>")
        if _missing_domains(source):
            copied = onnx.ModelProto()
            copied.CopyFrom(source)  # the caller's proto is never changed
            source = copied
            _import_used_domains(source, "<ModelProto>")
        if check:
            _check_proto(source, "<ModelProto>")
        model = _deserialize(source, "<ModelProto>", check)
        if check:
            model.meta[FULL_CHECK] = _full_check(source, "<ModelProto>")
        inline_constant_data(model)
        return model
    path = Path(source)
    if not path.exists():
        raise BadInput(f"{path}: no such file")
    if path.is_dir():
        raise BadInput(f"{path}: is a directory, not a model file")
    if not path.is_file():  # a FIFO or a device (/dev/zero) would block or never end
        raise BadInput(f"{path}: not a regular file")
    if _looks_like_xml(path):
        raise BadInput(f"{path}: XML (OpenVINO IR?), not an ONNX model: `rnnconv from-openvino` reads OpenVINO IR")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except OSError as err:
        raise IOFailure(f"{path}: cannot read ({err.strerror or err})") from err
    except (DecodeError, RuntimeWarning, ValueError) as err:
        raise BadInput(f"{path}: not an ONNX model ({first_line(err)})") from err
    except Exception as err:  # protobuf's C++ parser and onnx raise more types on hostile bytes
        raise BadInput(f"{path}: not an ONNX model ({type(err).__name__}: {first_line(err)})") from err
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise BadInput(f"{path}: not an ONNX model (no graph or no IR version; truncated or not ONNX?)")
    _check_graph(proto, str(path))
    _check_declared(proto, str(path))
    _check_external_data(proto, path)
    _check_tensors(proto, str(path))
    imported = _import_used_domains(proto, str(path))
    if check:
        # By path, so onnx resolves external data against the model's folder, not the working directory.
        _check_proto(proto if imported else str(path), str(path))
    model = _deserialize(proto, str(path), check)
    if check:
        model.meta[FULL_CHECK] = _full_check(proto, str(path))
    ir.external_data.set_base_dir(model.graph, str(path.parent))
    inline_constant_data(model, path.parent)
    return model


def _looks_like_xml(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(256).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return False
    return head.startswith(b"<")


def _deserialize(proto: "onnx.ModelProto", where: str, checked: bool) -> ir.Model:
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as err:  # onnx_ir raises several types on malformed protos
        if not checked:  # the checker names the problem better than the deserializer does
            _check_proto(proto, where)
        raise BadInput(f"{where}: malformed model ({_root_cause(err)})") from err
    unset_minus_one(model)  # -1 is dynamic, never a size; written back as -1 (rnnconv.io.dims)
    return model


def _root_cause(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return first_line(err)


def _check_graph(proto: "onnx.ModelProto", where: str) -> None:
    """What onnx.checker lets through but no command can work with."""
    _check_text(proto, where)
    if len(proto.graph.output) == 0:
        what = "empty graph" if len(proto.graph.node) == 0 else f"{len(proto.graph.node)} node(s)"
        raise BadInput(f"{where}: the graph has no outputs ({what}): nothing to convert or verify")
    _check_imports(proto.opset_import, f"{where}: the model")
    for f in proto.functions:
        _check_imports(f.opset_import, f"{where}: function {f.domain}::{f.name}")
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    latest = schemas.latest_opset()
    if opset is not None and opset > latest:
        raise Unsupported(f"{where}: default-domain opset {opset} is newer than the installed onnx knows "
                          f"({latest}); upgrade onnx, or export at opset {latest} or older")


def _check_text(message, where: str, path: str = "model") -> None:
    """Every string field is UTF-8. protobuf reads an ONNX (proto2) string as the bytes it holds when they are
    not (a flipped byte in a name), which onnx's checker lets through and onnx_ir cannot write back."""
    for field, value in message.ListFields():
        name = f"{path}.{field.name}"
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        if field.type == field.TYPE_MESSAGE:
            if repeated:
                for k, item in enumerate(value):
                    _check_text(item, where, f"{name}[{k}]")
            else:
                _check_text(value, where, name)
        elif field.type == field.TYPE_STRING:
            for k, item in enumerate(value if repeated else [value]):
                if isinstance(item, bytes):
                    raise BadInput(f"{where}: malformed model ({name} holds {item[:60]!r}, which is not UTF-8 text)")


def _declared_dims(type_proto: "onnx.TypeProto"):
    """(axis, dim) of the tensor a type holds, through sequence, optional and map types."""
    which = type_proto.WhichOneof("value")
    if which in ("tensor_type", "sparse_tensor_type"):
        tensor = getattr(type_proto, which)
        if tensor.HasField("shape"):
            yield from enumerate(tensor.shape.dim)
    elif which in ("sequence_type", "optional_type"):
        yield from _declared_dims(getattr(type_proto, which).elem_type)
    elif which == "map_type":
        yield from _declared_dims(type_proto.map_type.value_type)


def _check_imports(imports, where: str) -> None:
    """One version per domain: onnx and onnx_ir silently keep the last of two imports, onnxruntime the first. The
    same version twice (`onnx.compose.merge_models` lists each model's imports) means one thing: kept once."""
    seen: dict[str, int] = {}
    repeated = []
    for k, o in enumerate(imports):
        domain = "" if o.domain == "ai.onnx" else o.domain
        if domain in seen and seen[domain] != o.version:
            raise BadInput(f"{where} imports domain {o.domain or 'ai.onnx (default)'!r} twice (versions "
                           f"{seen[domain]} and {o.version}): which one it means is ambiguous; keep one")
        if domain in seen:
            repeated.append(k)
        seen[domain] = o.version
    for k in reversed(repeated):
        del imports[k]


# Beyond this many bytes a tensor's size overflows int64, what onnxruntime and OpenVINO count sizes in.
MAX_TENSOR_BYTES = 2**63 - 1


def _check_declared(proto: "onnx.ModelProto", where: str) -> None:
    """Types and shapes the model declares (inputs, outputs, value_info, in every graph and function): no negative
    dim but -1, which onnxruntime and exporters read as dynamic (onnx 1.23's shape inference aborts the process on
    the others), no size past int64, graph inputs of a known type."""
    def values(graph):
        yield from graph.input
        yield from graph.output
        yield from graph.value_info

    graph = proto.graph
    declared = [(vi, True) for vi in graph.input] + [(vi, False) for vi in (*graph.output, *graph.value_info)]
    declared += [(vi, False) for g in list(_all_graphs(graph))[1:] for vi in values(g)]
    for f in proto.functions:
        declared += [(vi, False) for vi in f.value_info]
        declared += [(vi, False) for g in _function_graphs(f) for sub in _all_graphs(g) for vi in values(sub)]
    for vi, is_input in declared:
        kind = vi.type.WhichOneof("value")
        if kind is None and is_input:
            raise BadInput(f"{where}: graph input {vi.name!r} declares no type")
        if kind != "tensor_type":
            continue
        tt = vi.type.tensor_type
        label = f"{where}: {'graph input' if is_input else 'value'} {vi.name!r}"
        if is_input and tt.elem_type == onnx.TensorProto.UNDEFINED:
            raise BadInput(f"{label} has no element type (UNDEFINED)")
        if not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
        for axis, d in enumerate(dims):
            if isinstance(d, int) and d < -1:
                raise BadInput(f"{label} declares dim {d} at axis {axis} of its shape {dims} (a size is >= 0; a "
                               "dynamic dim is unset, a name, or -1)")
        static = 1
        for d in dims:
            static *= d if isinstance(d, int) and d >= 0 else 1
        itemsize = _itemsize(tt.elem_type) or 1
        if static * itemsize > MAX_TENSOR_BYTES:
            raise BadInput(f"{label} has shape {dims}: {static} elements, more bytes than int64 counts (no "
                           f"runtime can hold it)")


def _itemsize(code: int) -> int | None:
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(code).itemsize
    except Exception:
        return None


FULL_CHECK = "rnnconv.full_check"  # model.meta key: what onnx's full check of the input found ("" nothing)


def check_input(model: ir.Model) -> None:
    """Raise what onnx.checker's full check (strict shape inference) found in the input model `load` read: a
    model whose declared types and shapes contradict its nodes is bad input, not a step rnnconv lacks. Apart from
    `load` so that rnnconv's own checks of recurrent nodes, which name what is wrong more precisely, come first."""
    problem = model.meta.get(FULL_CHECK)
    if problem:
        raise BadInput(problem)


def _full_check(proto: "onnx.ModelProto", where: str) -> str:
    """What onnx.checker's full check says of the model ("" when it passes).

    Checked on a shell of the model: weights bigger than a few KiB become typed graph inputs (their bytes are not
    the checker's business, and external data must not be resolved against the working directory)."""
    try:
        onnx.checker.check_model(_shell(proto), full_check=True)
    except Exception as err:
        return f"{where}: invalid model (onnx's full check, shape inference included): {_checker_message(err)}"
    return ""


def _shell(proto: "onnx.ModelProto") -> "onnx.ModelProto":
    shell = onnx.ModelProto()
    _copy_fields(proto, shell, skip=("graph",))
    graph, g = proto.graph, shell.graph
    _copy_fields(graph, g, skip=("initializer", "sparse_initializer"))
    inputs = {vi.name for vi in graph.input}
    for t in graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL and t.ByteSize() <= _SHELL_INLINE_BYTES:
            g.initializer.append(t)
        elif t.name not in inputs:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    g.sparse_initializer.extend(graph.sparse_initializer)
    for sub in _all_graphs(g):  # a dim declared -1 is dynamic (as onnxruntime reads it), not a size to hold
        for value in (*sub.input, *sub.output, *sub.value_info):
            for _, d in _declared_dims(value.type):
                if d.HasField("dim_value") and d.dim_value == -1:
                    d.Clear()
    if shell.ir_version < 4:  # IR 3 requires every initializer to be a graph input
        shell.ir_version = 4
    return shell


_SHELL_INLINE_BYTES = 4096


def _copy_fields(src, dst, skip) -> None:
    for field, value in src.ListFields():
        if field.name in skip:
            continue
        if hasattr(value, "extend"):
            getattr(dst, field.name).extend(value)
        elif field.message_type is not None:
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)


# Domains onnxruntime's own tools write without importing them (quantize_dynamic inside If bodies): version 1 is
# the only one onnxruntime defines.
IMPLIED_DOMAINS = {"com.microsoft": 1}


def _missing_domains(proto: "onnx.ModelProto") -> set[str]:
    imported = {o.domain for o in proto.opset_import}
    used = {node.domain for graph in _all_graphs(proto.graph) for node in graph.node}
    used |= {node.domain for f in proto.functions for node in f.node}
    return {d for d in used if d in IMPLIED_DOMAINS and d not in imported}


def _import_used_domains(proto: "onnx.ModelProto", where: str) -> bool:
    """Add the import of a domain the model's nodes use without importing it, with a warning: onnx.checker
    refuses such a model, onnxruntime runs it."""
    missing = sorted(_missing_domains(proto))
    for domain in missing:
        proto.opset_import.append(onnx.helper.make_opsetid(domain, IMPLIED_DOMAINS[domain]))
        warnings.warn(RnnconvWarning(f"{where}: nodes of domain {domain} but no import of it (as onnxruntime's "
                                     f"quantize_dynamic writes into subgraphs): read as {domain} version "
                                     f"{IMPLIED_DOMAINS[domain]}, and written so"))
    return bool(missing)


def _check_tensors(proto: "onnx.ModelProto", where: str) -> None:
    """Every tensor held inside the model must hold exactly what its dims and type declare: onnx.checker does
    not compare them, and onnx_ir reads the bytes lazily (a mismatch would surface later as a numpy error)."""
    graph = proto.graph
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            _check_element_type(vi.type.tensor_type.elem_type, f"{where}: value {vi.name!r}")
    for tensor in _all_model_tensors(proto):
        label = f"{where}: tensor {tensor.name!r}"
        _check_element_type(tensor.data_type, label)
        if any(d < 0 for d in tensor.dims):
            raise BadInput(f"{label}: negative dimension in {list(tensor.dims)}")
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            continue
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
                           f"({first_line(err)})") from err


def _check_element_type(code: int, label: str) -> None:
    if code not in onnx.TensorProto.DataType.values() or code == onnx.TensorProto.UNDEFINED:
        raise BadInput(f"{label}: element type {code} is not an ONNX type")
    try:
        ir.DataType(code)
    except ValueError:
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
        raise BadInput(f"{where}: invalid model: {first_line(err)}") from err


def _check_external_data(proto: "onnx.ModelProto", path: Path) -> None:
    """External data must stay inside the model's folder and hold every byte it declares."""
    base = path.parent.resolve()
    for tensor in _all_model_tensors(proto):
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


def _all_graphs(graph: "onnx.GraphProto"):
    """The graph and every subgraph in its nodes' attributes, at any depth."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            for g in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else
                      attr.graphs if attr.type == onnx.AttributeProto.GRAPHS else []):
                yield from _all_graphs(g)


def _function_graphs(f: "onnx.FunctionProto"):
    """The graphs in the attributes of a function's nodes (their own subgraphs come from _all_graphs)."""
    for node in f.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield attr.g
            elif attr.type == onnx.AttributeProto.GRAPHS:
                yield from attr.graphs


def _all_model_tensors(proto: "onnx.ModelProto"):
    """Every tensor of the model that can hold external data, functions' Constant values included."""
    yield from _all_initializers(proto.graph)
    for f in proto.functions:
        shell = onnx.GraphProto()
        shell.node.extend(f.node)
        yield from _all_initializers(shell)


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


def weights_as_inputs(model: ir.Model) -> tuple["onnx.ModelProto", dict]:
    """The model's proto without initializer data (they become graph inputs) plus the arrays by name.

    Weights are never copied into protobuf: external data stays memory-mapped and models over 2 GB run.
    """
    weights = {name: v.const_value.numpy() for name, v in model.graph.initializers.items()
               if v.const_value is not None}
    proto = ir.serde.serialize_model(model) if not weights else _serialize_without(model, weights)
    return proto, weights


def _serialize_without(model: ir.Model, weights: dict) -> "onnx.ModelProto":
    """The model's proto with the initializers named in `weights` as typed graph inputs instead."""
    graph = model.graph
    saved = dict(graph.initializers)
    extra_inputs = [v for name, v in saved.items() if name in weights and v not in graph.inputs]
    try:
        graph.initializers.clear()
        for name, v in saved.items():
            if name not in weights:
                graph.register_initializer(v)
        graph.inputs.extend(extra_inputs)
        for v in (saved[n] for n in weights if n in saved):
            if v.type is None and v.const_value is not None:
                v.type = ir.TensorType(v.const_value.dtype)
            if v.shape is None and v.const_value is not None:
                v.shape = ir.Shape(v.const_value.shape)
        return ir.serde.serialize_model(model)
    finally:
        for v in extra_inputs:
            graph.inputs.remove(v)
        graph.initializers.clear()  # every one again, in its order
        for v in saved.values():
            graph.register_initializer(v)


SMALL_CONSTANT_BYTES = 4096  # initializers kept in the proto shape inference reads (Reshape targets, axes)


def inferred_shapes(model: ir.Model, symbols: dict[tuple[str, int], "str | int"]) -> dict[str, list]:
    """The shapes onnx's shape inference gives the main graph's values when the graph inputs' axes in `symbols`
    ((input, axis) -> name or size) are those symbols or sizes: {value: [int | str | None per axis]}. Big weights
    stay out of the proto (their shapes only); -1 dims count as unset. If inference fails: the declared shapes."""
    graph = model.graph
    big = {name: v for name, v in graph.initializers.items()
           if v.const_value is not None and v.const_value.nbytes > SMALL_CONSTANT_BYTES}
    proto = ir.serde.serialize_model(model) if not big else _serialize_without(model, big)
    for kind in (proto.graph.input, proto.graph.output, proto.graph.value_info):
        for value in kind:
            for axis, d in _declared_dims(value.type):
                if (value.name, axis) in symbols and kind is proto.graph.input:
                    sym = symbols[value.name, axis]
                    if isinstance(sym, int):
                        d.dim_value = sym
                    else:
                        d.dim_param = sym
                elif d.HasField("dim_value") and d.dim_value < 0:
                    d.Clear()
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False)  # data_prop off, as in onnx_ir's pass
    except Exception:  # a help for drawing inputs, never a requirement
        inferred = proto
    shapes = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        if value.type.WhichOneof("value") == "tensor_type" and value.type.tensor_type.HasField("shape"):
            shapes[value.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param or None
                                  for d in value.type.tensor_type.shape.dim]
    return shapes
