"""What the installed onnx knows: schema versions and type lists, IR versions, and its version converter."""

from __future__ import annotations

import functools
from typing import Mapping, Optional, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from rnnconv.errors import Unsupported


def schema_since_version(op_type: str, opset: int, domain: str = "") -> int | None:
    """The version of `op_type`'s schema in force at `opset`, or None when the op does not exist there."""
    try:
        return onnx.defs.get_schema(op_type, opset, domain).since_version
    except onnx.defs.SchemaError:
        return None


def latest_opset() -> int:
    return onnx.defs.onnx_opset_version()


def latest_ir_version() -> int:
    return onnx.IR_VERSION


def convert_version(model: ir.Model, target: int) -> ir.Model:
    """onnx's version converter on a (small, weight-free) model; failures raise Unsupported with its reason."""
    from onnx import version_converter

    try:
        converted = version_converter.convert_version(ir.serde.serialize_model(model), target)
    except Exception as err:
        lines = str(err).strip().splitlines()
        reason = lines[0].split("Assertion `false` failed: ")[-1] if lines else type(err).__name__
        raise Unsupported(reason) from err
    return ir.serde.deserialize_model(converted)


@functools.lru_cache(maxsize=None)
def schema_formals(op_type: str, version: int, domain: str = "") -> tuple[tuple, tuple]:
    """The schema's formal inputs and outputs, each as (type parameter, allowed types, variadic, homogeneous): the
    allowed types as onnx writes them ("tensor(float)", "seq(tensor(int64))"); formals that share a type parameter
    must have one type, but for the values of a heterogeneous variadic (Loop's and Scan's `V`, If's outputs), each
    of which may have its own."""
    schema = onnx.defs.get_schema(op_type, version, domain)
    constraints = {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints}
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic

    def formal(f):
        return (f.type_str, constraints.get(f.type_str, frozenset([f.type_str])), f.option == variadic,
                f.option != variadic or f.is_homogeneous)

    return tuple(formal(f) for f in schema.inputs), tuple(formal(f) for f in schema.outputs)


def attribute_type(op_type: str, version: int, name: str, domain: str = "") -> str:
    """The type of one attribute of the schema: "INT", "INTS", "FLOAT", "FLOATS", "STRING", ..."""
    return onnx.defs.get_schema(op_type, version, domain).attributes[name].type.name


def min_ir_version(opset: int) -> int:
    """The lowest IR version that can hold a default-domain opset (onnx's VERSION_TABLE)."""
    best = None
    for _release, ir_version, ai_onnx, *_ in onnx.helper.VERSION_TABLE:
        if ai_onnx >= opset and (best is None or ir_version < best):
            best = ir_version
    return best or onnx.IR_VERSION


def infer_shapes(model: ir.Model, *, strict: bool = False, inputs: Optional[Mapping[str, Sequence[int]]] = None,
                 known: Optional[Mapping[str, np.ndarray]] = None, data_prop: bool = False
                 ) -> tuple[dict, str | None]:
    """What onnx's shape inference says each named value's shape is (a tuple of ints, None where a dim is unknown;
    None for an unknown rank), from the graph inputs' declared shapes and the ops alone: the model's own value_info
    and output shapes are set aside (a stale annotation is no fact). With `strict`, also the first line of onnx's
    strict-mode error (None when there is none; the shapes are then empty). `inputs`: graph inputs at these shapes
    instead of their declared ones; `known`: values whose contents are known (a shape computed from shapes),
    taken as constants in the graph that computes them."""
    proto = _without_weights(model)
    for g in _graphs(proto.graph):
        del g.value_info[:]
        for out in g.output:
            if out.type.HasField("tensor_type"):
                out.type.tensor_type.ClearField("shape")
    for value in proto.graph.input:
        if value.name in (inputs or {}) and value.type.HasField("tensor_type"):
            shape = value.type.tensor_type.shape
            shape.ClearField("dim")
            for n in inputs[value.name]:
                shape.dim.add().dim_value = int(n)
    for g in _graphs(proto.graph) if known else ():
        folded = [n.output[0] for n in g.node if len(n.output) == 1 and n.output[0] in known]
        kept = [n for n in g.node if not (len(n.output) == 1 and n.output[0] in known)]
        del g.node[:]
        g.node.extend(kept)
        g.initializer.extend(onnx.numpy_helper.from_array(np.asarray(known[name]), name) for name in folded)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=strict, data_prop=data_prop)
    except Exception as err:  # InferenceError (strict mode) or a shape-inference crash on a malformed model
        return {}, (str(err).strip().splitlines() or [type(err).__name__])[0]
    found: dict = {}
    for g in _graphs(inferred.graph):
        for info in [*g.input, *g.output, *g.value_info]:
            t = info.type.tensor_type if info.type.HasField("tensor_type") else None
            shape = None if t is None or not t.HasField("shape") else \
                tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
            found[info.name] = shape if found.get(info.name, shape) == shape else None
    return found, None


def _without_weights(model: ir.Model, most: int = 1024) -> "onnx.ModelProto":
    """The model's proto, its initializers of more than `most` elements as typed graph inputs (shapes never depend
    on a weight's values; its bytes are not copied)."""
    graph = model.graph
    big = [v for v in graph.initializers.values() if v.const_value is not None and v.const_value.size > most
           and v.type is not None and v.shape is not None]
    added = [v for v in big if v not in graph.inputs]
    try:
        for v in big:
            graph.initializers.pop(v.name)
        graph.inputs.extend(added)
        return ir.serde.serialize_model(model)
    finally:
        for v in added:
            graph.inputs.remove(v)
        for v in big:
            graph.register_initializer(v)


def _graphs(graph: "onnx.GraphProto"):
    yield graph
    for node in graph.node:
        for a in node.attribute:
            for body in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                yield from _graphs(body)
