"""Where rnnconv's engine ran each node, as the report says: `placements` in JSON (per model, every node counted
once) and one note. Whole-model runs hand onnxruntime every node it runs as the spec says (quantized models
entirely); only what onnxruntime refuses (layout 1, versions below 7) runs in rnnconv's kernels; when the engine ran
both models entirely in onnxruntime, its engine-vs-engine check is left out and said so."""

from __future__ import annotations

import collections
import json

import onnx
import pytest

from tests.conftest import OPENVINO, recurrent_model, run_cli
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
    return [n for n in notes if n.startswith("engine")]


@pytest.mark.parametrize("command", ["upgrade", "dequantize"])
def test_quantized_models_run_entirely_in_onnxruntime(quantized, command, tmp_path):
    out = tmp_path / "out.onnx"
    code, text, err = run_cli([command, quantized, "-o", out, "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    for side, path in (("source", quantized), ("converted", out)):
        placed = report["placements"][side]
        counts = op_counts(path)
        assert counts["MatMulInteger"] >= 1
        assert placed == {op: {"onnxruntime": n} for op, n in counts.items()}
    notes = engine_notes(report["notes"])
    assert any(n.startswith("engine vs engine: left out") for n in notes), notes
    if command == "upgrade":  # the same nodes on both sides: one line
        assert f"engine: onnxruntime {sum(op_counts(quantized).values())} nodes" in notes, notes
    code, text, err = run_cli([command, quantized, "-o", out, "--force"])
    assert code == 0 and "  note: engine" in text, text + err


def test_verify_all_engines_says_same_runtime(tmp_path):
    path = tmp_path / "float.onnx"
    onnx.save(float_lstm("bidirectional", head=True), str(path))
    code, text, err = run_cli(["verify", path, path, "--engine", "all", "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    n = sum(op_counts(path).values())
    for side in ("reference", "candidate"):
        assert sum(sum(c.values()) for c in report["placements"][side].values()) == n
    subjects = [c["subject"] for c in report["checks"]]
    expected = ["reference[openvino]", "candidate[rnnconv]", "candidate[openvino]"]
    assert subjects == expected if OPENVINO else [s for s in expected if "openvino" not in s], subjects
    for side in ("reference", "candidate"):
        assert any(note.startswith(f"{side}[onnxruntime]: not compared, the same runtime") for note in report["notes"])


def test_layout_1_runs_in_rnnconv_the_rest_in_onnxruntime(tmp_path):
    """onnxruntime refuses layout=1: that node runs in rnnconv's kernel, the Transposes `layout --to 0` writes
    around the converted one run in onnxruntime, and the engine check compares the two (it is not the same
    runtime)."""
    source, out = tmp_path / "layout1.onnx", tmp_path / "out.onnx"
    onnx.save(recurrent_model("GRU", layout=1, direction="bidirectional"), str(source))
    code, text, err = run_cli(["layout", source, "--to", "0", "-o", out, "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    assert report["placements"]["source"] == {"GRU": {"rnnconv": 1}}
    assert set(report["placements"]["converted"]["GRU"]) == {"onnxruntime"}
    assert not any(n.startswith("engine vs engine") for n in report["notes"])
    assert [c for c in report["checks"] if c["subject"] == "model" and c["engines"] == "engine"]


def test_the_note_tells_the_models_apart(tmp_path):
    source, out = tmp_path / "lstm1.onnx", tmp_path / "out.onnx"
    onnx.save(recurrent_model("LSTM", opset=1), str(source))
    code, text, err = run_cli(["upgrade", source, "-o", out, "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    assert report["placements"]["source"]["LSTM"] == {"rnnconv": 1}
    assert report["placements"]["converted"]["LSTM"] == {"onnxruntime": 1}
    (note,) = [n for n in report["notes"] if n.startswith("engine:")]
    assert "source: " in note and "rnnconv LSTM 1" in note and "converted model: onnxruntime" in note, note


def test_a_model_onnxruntime_runs_whole_runs_once(tmp_path, monkeypatch):
    """The converted model, which onnxruntime runs whole, is not also run by rnnconv's engine (handing it to
    onnxruntime again) only for that comparison to be left out: a big model is loaded once for its check. The
    report still places its nodes: onnxruntime ran them, as the runtime comparison (held against the source's
    onnxruntime run) shows."""
    from rnnconv.verification import runner

    runs = []
    real = runner.run_sets
    monkeypatch.setattr(runner, "run_sets", lambda model, engine, *a, **k: runs.append(
        (engine, k.get("partitioned", True))) or real(model, engine, *a, **k))
    source, out = tmp_path / "lstm.onnx", tmp_path / "out.onnx"
    onnx.save(recurrent_model("LSTM", opset=14, direction="bidirectional"), str(source))
    code, text, err = run_cli(["upgrade", source, "-o", out, "--opset", "22", "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    assert ("rnnconv", False) in runs and ("rnnconv", True) not in runs, runs  # node checks, no whole-model run
    assert report["placements"]["converted"] == {"LSTM": {"onnxruntime": 1}}
    assert any(n.startswith("engine vs engine: left out") for n in report["notes"])
    assert [c["engines"] for c in report["checks"] if c["subject"] == "model"] == ["onnxruntime"]
