"""A source given in memory (ModelProto or onnx_ir Model) is never changed by a conversion, whether it is written,
refused or fails verification (onnxsim returns a new model; so does rnnconv)."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

import rnnconv
from rnnconv.errors import VerificationFailed
from rnnconv.verification import results, runner
from tests.conftest import recurrent_model


def _source(kind: str, proto: onnx.ModelProto):
    return proto if kind == "proto" else ir.serde.deserialize_model(proto)


def _bytes(source) -> bytes:
    proto = source if isinstance(source, onnx.ModelProto) else ir.serde.serialize_model(source)
    return proto.SerializeToString(deterministic=True)


CONVERSIONS = {
    "upgrade": lambda m, out: rnnconv.upgrade(m, out, opset=14),
    "downgrade": lambda m, out: rnnconv.downgrade(m, out, opset=7),
    "layout": lambda m, out: rnnconv.convert_layout(m, out, to=1, opset=14),
    "to_openvino": lambda m, out: rnnconv.to_openvino(m, out.with_suffix(".xml")),
}


@pytest.mark.parametrize("kind", ["proto", "ir"])
@pytest.mark.parametrize("command", sorted(CONVERSIONS))
def test_a_source_in_memory_is_unchanged_when_written(tmp_path, kind, command):
    source = _source(kind, recurrent_model("GRU", opset=11 if command != "downgrade" else 14, layout=0))
    before = _bytes(source)
    result = CONVERSIONS[command](source, tmp_path / "o.onnx")
    assert result.report.ok and result.model is not source
    assert _bytes(source) == before


@pytest.mark.parametrize("kind", ["proto", "ir"])
def test_a_source_in_memory_is_unchanged_when_verification_fails(tmp_path, kind, monkeypatch):
    """The failure comes from the node checks (rewritten nodes replaced by others, as a wrong step would):
    nothing is written, and the caller's model is as it was, so a retry or another command starts from it."""
    source = _source(kind, recurrent_model("LSTM", opset=7))
    before = _bytes(source)
    bad = results.Check("node lstm", "engine", [results.failed("Y", "wrong on purpose")])
    monkeypatch.setattr(runner, "check_nodes", lambda *a, **k: [bad])
    with pytest.raises(VerificationFailed):
        rnnconv.upgrade(source, tmp_path / "o.onnx", opset=14)
    assert list(tmp_path.iterdir()) == []
    assert _bytes(source) == before
    monkeypatch.undo()
    assert rnnconv.upgrade(source, tmp_path / "o.onnx", opset=14).report.ok  # the same object converts after


def test_an_ir_model_converted_twice_gives_the_same_model(tmp_path):
    """Once rewritten in place, the second conversion of one onnx_ir Model started from the first's output."""
    source = ir.serde.deserialize_model(recurrent_model("GRU", opset=7))
    first = rnnconv.upgrade(source, None, opset=14).model
    second = rnnconv.upgrade(source, None, opset=14).model
    assert _bytes(first) == _bytes(second)
    assert source.opset_imports[""] == 7


def test_nodes_inside_bodies_are_rewritten_in_the_copy_only(tmp_path):
    """The recurrent nodes of an If's branches move too: the caller's branches keep theirs."""
    from tests.conftest import if_lstm

    source = ir.serde.deserialize_model(if_lstm())
    before = _bytes(source)
    result = rnnconv.convert_layout(source, tmp_path / "o.onnx", to=1)
    assert result.report.ok and len(result.report.rewrites) == 2
    assert _bytes(source) == before
