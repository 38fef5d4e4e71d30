"""Whole quantized models run in rnnconv's engine, the nodes onnx's reference has no kernel for (or computes
otherwise) computed one by one by onnxruntime; the report says which nodes ran where: `placements` in JSON (per
model, every node counted once) and one note naming those onnxruntime computed."""

from __future__ import annotations

import collections
import json

import onnx
import pytest

from tests.conftest import run_cli
from tests.quantized_models import float_lstm, quantize


def op_counts(path) -> dict:
    """Nodes per op, as the placements name them ("domain::op" outside the default domain), read with onnx."""
    model = onnx.load(str(path))
    return collections.Counter(f"{n.domain}::{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
                               for n in model.graph.node)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """An LSTM and a MatMul head, quantize_dynamic'ed: DynamicQuantizeLSTM, DynamicQuantizeLinear, MatMulInteger..."""
    return quantize(float_lstm("forward", head=True), tmp_path_factory.mktemp("placements"), "head")


def engine_notes(notes: list) -> list:
    return [n for n in notes if n.startswith("engine:")]


@pytest.mark.parametrize("command", ["upgrade", "dequantize"])
def test_the_report_says_where_each_node_ran(quantized, command, tmp_path):
    out = tmp_path / "out.onnx"
    code, text, err = run_cli([command, quantized, "-o", out, "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    for side, path in (("source", quantized), ("converted", out)):
        placed = report["placements"][side]
        counts = op_counts(path)
        assert counts["MatMulInteger"] >= 1
        # every node of the model placed once (loops run a node many times; it still counts once)
        assert {op: sum(where.values()) for op, where in placed.items()} == dict(counts)
        assert placed["MatMulInteger"] == {"onnxruntime": counts["MatMulInteger"]}
        recurrent = "LSTM" if side == "converted" and command == "dequantize" else "com.microsoft::DynamicQuantizeLSTM"
        assert placed[recurrent] == {"rnnconv": 1}
    (note,) = engine_notes(report["notes"])
    n = op_counts(quantized)["MatMulInteger"]
    assert note == (f"engine: onnxruntime computed MatMulInteger {n} (onnx reference computes it otherwise), "
                    f"node by node")
    code, text, err = run_cli([command, quantized, "-o", out, "--force"])
    assert code == 0 and f"  note: {note}\n" in text, text + err


def test_verify_says_where_each_node_ran(quantized):
    code, text, err = run_cli(["verify", quantized, quantized, "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    n = op_counts(quantized)["MatMulInteger"]
    for side in ("reference", "candidate"):
        assert report["placements"][side]["MatMulInteger"] == {"onnxruntime": n}
    assert engine_notes(report["notes"]) == [f"engine: onnxruntime computed MatMulInteger {n} (onnx reference "
                                             f"computes it otherwise), node by node"]


def test_no_note_when_rnnconv_and_the_reference_ran_everything(tmp_path):
    source, out = tmp_path / "float.onnx", tmp_path / "out.onnx"
    onnx.save(float_lstm("bidirectional", head=True), str(source))
    code, text, err = run_cli(["upgrade", source, "-o", out, "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    assert report["placements"]["source"] == {"LSTM": {"rnnconv": 1}, "MatMul": {"onnx reference": 1}}
    assert not engine_notes(report["notes"])


def test_the_note_tells_the_models_apart(tmp_path):
    """Softmax-11 (a 2-D coercion) is computed by onnxruntime, Softmax-13 by onnx's reference: upgraded, the
    source and the converted model ran it in different places."""
    model = float_lstm("forward", head=True, opset=11)
    model.graph.node.append(onnx.helper.make_node("Softmax", ["logits"], ["probs"], axis=2, name="softmax"))
    model.graph.output.append(onnx.helper.make_tensor_value_info("probs", onnx.TensorProto.FLOAT, [1, "N", 5]))
    source, out = tmp_path / "softmax11.onnx", tmp_path / "out.onnx"
    onnx.save(model, str(source))
    code, text, err = run_cli(["upgrade", source, "-o", out, "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    assert report["placements"]["source"]["Softmax"] == {"onnxruntime": 1}
    assert report["placements"]["converted"]["Softmax"] == {"onnx reference": 1}
    assert engine_notes(report["notes"]) == [("engine: onnxruntime computed, node by node: in the source: Softmax 1 "
                                              "(onnx reference computes it otherwise); in the converted model: "
                                              "nothing")]
