"""`rnnconv fuse` on Keras 3 Bidirectional layers converted by tf2onnx 1.17 (fixtures/tf2onnx, made by
fixtures/make_tf2onnx_fixtures.py): each direction a Loop over one cell step (float16 under mixed precision, the
float32 weights passed through the loop and cast in its body; the backward one fed through ReverseSequence).
Each becomes a recurrent node, no Loop left, and the fused model equals onnxruntime on the source (1e-3 float16,
1e-5 float32) and Keras' own answer stored beside the export; its IR (to-openvino) runs in OpenVINO with the same
numbers. A masked layer's Loops are named, with the reason."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.conftest import FIXTURES, run_cli, run_onnxruntime

TF2ONNX = FIXTURES / "tf2onnx"
ENTRIES = json.loads((TF2ONNX / "index.json").read_text())
FUSED = [e for e in ENTRIES if e["fused"] is not None]


def _tolerance(entry) -> float:
    return 1e-3 if entry["policy"] == "mixed_float16" else 1e-5


def _fuse(tmp_path, entry, *options):
    out = tmp_path / "fused.onnx"
    code, said, err = run_cli(["fuse", TF2ONNX / entry["file"], "-o", out, *options])
    assert code == 0, err + said
    fused = onnx.load(str(out))
    onnx.checker.check_model(fused, full_check=True)
    return fused, said


def _directions(model) -> list:
    return sorted(helper.get_attribute_value(a).decode() for n in model.graph.node
                  if n.op_type in ("LSTM", "GRU", "RNN") for a in n.attribute if a.name == "direction")


@pytest.mark.parametrize("bidirectional", [False, True], ids=["two_nodes", "bidirectional"])
@pytest.mark.parametrize("entry", FUSED, ids=[e["file"][:-5] for e in FUSED])
def test_keras_loops_become_recurrent_nodes(tmp_path, entry, bidirectional):
    fused, said = _fuse(tmp_path, entry, *(["--bidirectional"] if bidirectional else []))
    ops = Counter(n.op_type for n in fused.graph.node)
    assert ops["Loop"] == 0, ops
    assert _directions(fused) == (["bidirectional"] if bidirectional else ["forward", "reverse"])
    node = next(n for n in fused.graph.node if n.op_type == entry["fused"]["op"])
    W = next(t for t in fused.graph.initializer if t.name == node.input[1])
    # the node computes in the body's dtype: float16 weights under mixed precision (the body's cast values)
    assert W.data_type == (onnx.TensorProto.FLOAT16 if entry["policy"] == "mixed_float16" else onnx.TensorProto.FLOAT)
    if entry["options"].get("reset_after") is False:
        assert all(a.i == 0 for a in node.attribute if a.name == "linear_before_reset")
    elif entry["fused"]["op"] == "GRU":
        assert any(a.name == "linear_before_reset" and a.i == 1 for a in node.attribute)
    assert "from 2 Loop node(s)" in said
    data = np.load(TF2ONNX / entry["data"])
    want = run_onnxruntime(TF2ONNX / entry["file"], {"x": data["x"]})["y"]
    got = run_onnxruntime(fused, {"x": data["x"]})["y"]
    np.testing.assert_allclose(got, want, atol=_tolerance(entry), rtol=0)
    np.testing.assert_allclose(got, data["y"], atol=2 * _tolerance(entry), rtol=0)  # Keras' own answer


def test_a_loop_over_a_dynamic_time_axis_fuses_for_every_length(tmp_path):
    entry = next(e for e in ENTRIES if e["time"] is None)
    fused, _ = _fuse(tmp_path, entry)
    rng = np.random.default_rng(5)
    for T in (1, 2, 9):
        x = {"x": rng.standard_normal((3, T, 3)).astype(np.float32)}
        np.testing.assert_allclose(run_onnxruntime(fused, x)["y"], run_onnxruntime(TF2ONNX / entry["file"], x)["y"],
                                   atol=1e-3, rtol=0, err_msg=f"T={T}")


def test_masked_loops_are_named_with_the_reason(tmp_path):
    entry = next(e for e in ENTRIES if e["masking"])
    code, said, err = run_cli(["inspect", TF2ONNX / entry["file"]])
    assert code == 0, err
    assert said.count("not fused: its body keeps the state where a per-step mask is false (Keras masking)") == 2
    fused, said = _fuse(tmp_path, entry)  # the first step, which Keras computes before its loop, is fused alone
    assert Counter(n.op_type for n in fused.graph.node)["Loop"] == 2
    data = np.load(TF2ONNX / entry["data"])
    np.testing.assert_allclose(run_onnxruntime(fused, {"x": data["x"]})["y"], data["y"], atol=2e-3, rtol=0)


@pytest.mark.parametrize("entry", FUSED, ids=[e["file"][:-5] for e in FUSED])
def test_the_fused_model_converts_to_openvino(tmp_path, entry):
    pytest.importorskip("openvino")
    from tests.conftest import openvino_outputs

    _fuse(tmp_path, entry)
    code, said, err = run_cli(["to-openvino", tmp_path / "fused.onnx", "-o", tmp_path / "m.xml"])
    assert code == 0, err + said
    data = np.load(TF2ONNX / entry["data"])
    want = run_onnxruntime(TF2ONNX / entry["file"], {"x": data["x"]})["y"]
    got = openvino_outputs(tmp_path / "m.xml", {"x": data["x"]})["y"]
    np.testing.assert_allclose(got, want, atol=_tolerance(entry), rtol=0)
