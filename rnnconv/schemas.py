"""What the installed onnx knows: schema versions and type lists, IR versions, and its version converter."""

from __future__ import annotations

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
        raise Unsupported(lines[0] if lines else type(err).__name__) from err
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
