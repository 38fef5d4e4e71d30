"""Every ONNX file a command writes loads and runs in onnxruntime as users run it: `InferenceSession(path)` with
the default session options. onnxruntime 1.32's extended optimizations (the default level) rewrite
DequantizeLinear(int8) -> Transpose -> DynamicQuantizeLinear at opset 21 and later into a QuantizeLinear that fails
its own type check, where the basic level runs the model: `upgrade` steps down to the newest opset that loads,
saying why; a forced opset fails (exit 1), naming onnxruntime's refusal, and writes nothing."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from rnnconv.errors import EXIT_VERIFY
from tests.conftest import run_cli

TOKENS = np.array([[1, 2, 3, 9], [4, 5, 6, 0]], np.int64)


def quantized_front(opset: int, V: int = 11, I: int = 4, H: int = 3) -> onnx.ModelProto:
    """Gather of an int8 table -> DequantizeLinear (int8 zero point) -> Transpose -> DynamicQuantizeLinear ->
    DequantizeLinear -> LSTM, as onnxruntime's quantizer leaves an embedding in front of a recurrence."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.integers(-100, 100, (V, I)).astype(np.int8), "E"),
             nh.from_array(np.array(0.02, np.float32), "s"), nh.from_array(np.array(3, np.int8), "z"),
             nh.from_array((rng.standard_normal((1, 4 * H, I)) * 0.3).astype(np.float32), "W"),
             nh.from_array((rng.standard_normal((1, 4 * H, H)) * 0.3).astype(np.float32), "R")]
    nodes = [h.make_node("Gather", ["E", "tokens"], ["g"]),
             h.make_node("DequantizeLinear", ["g", "s", "z"], ["d"]),
             h.make_node("Transpose", ["d"], ["t"], perm=[1, 0, 2]),
             h.make_node("DynamicQuantizeLinear", ["t"], ["q", "qs", "qz"]),
             h.make_node("DequantizeLinear", ["q", "qs", "qz"], ["x"]),
             h.make_node("LSTM", ["x", "W", "R"], ["Y", "Y_h"], hidden_size=H, name="lstm")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("tokens", TP.INT64, ["N", "T"])],
                         [h.make_tensor_value_info("Y_h", TP.FLOAT, [1, "N", H])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def users_run(path) -> list:
    return ort.InferenceSession(str(path)).run(None, {"tokens": TOKENS})  # default SessionOptions


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "m20.onnx"
    onnx.save(quantized_front(20), path)
    return path


def test_the_pattern_refuses_at_the_default_level_from_opset_21(tmp_path):
    """The runtime fact the rule stands on (onnxruntime 1.32): skipped once onnxruntime no longer refuses it."""
    path = tmp_path / "m21.onnx"
    onnx.save(quantized_front(21), path)
    try:
        users_run(path)
    except Exception as err:  # noqa: BLE001 - onnxruntime's own exception types
        assert "QuantizeLinear" in str(err)
    else:
        pytest.skip("this onnxruntime loads the pattern at opset 21 at its default level")
    basic = ort.SessionOptions()
    basic.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    ort.InferenceSession(str(path), basic)  # what the comparisons' sessions ran


def test_upgrade_goes_to_the_newest_opset_that_loads_as_users_run_it(tmp_path, source):
    out = tmp_path / "up.onnx"
    code, stdout, stderr = run_cli(["upgrade", source, "-o", out])
    assert code == 0, stdout + stderr
    assert "onnxruntime refuses the written model at its default session options" in stdout
    got, want = users_run(out), users_run(source)  # the oracle: onnxruntime on the source
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7)
    assert onnx.load(str(out)).opset_import[0].version >= 20


def test_a_forced_opset_onnxruntime_refuses_fails_and_writes_nothing(tmp_path, source):
    out = tmp_path / "up27.onnx"
    code, stdout, stderr = run_cli(["upgrade", source, "-o", out, "--opset", "27"])
    assert code == EXIT_VERIFY, stdout + stderr
    assert "FAIL written model [onnxruntime, default options]" in stderr
    assert "QuantizeLinear" in stderr and "TypeInferenceError" in stderr  # onnxruntime's refusal, named
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["m20.onnx"]


def test_a_source_onnxruntime_refuses_alike_is_not_the_conversions_doing(tmp_path):
    """At opset 21 the source itself does not load at the default level: the conversion is not held to it."""
    path = tmp_path / "m21.onnx"
    onnx.save(quantized_front(21), path)
    code, stdout, stderr = run_cli(["upgrade", path, "-o", tmp_path / "up.onnx", "--opset", "22"])
    assert code == 0, stdout + stderr


def test_the_comparison_and_the_load_are_one_session(tmp_path, monkeypatch):
    """The converted model's onnxruntime comparison runs the file about to be written, as users load it: no
    second load of a big model (the onnxruntime side of the check costs one session, as before)."""
    import rnnconv
    from rnnconv.verification import engines
    from tests.conftest import recurrent_model

    loaded = []
    real = engines.run_as_written
    monkeypatch.setattr(engines, "run_as_written", lambda path, *a, **k: loaded.append(path) or real(path, *a, **k))
    sessions = []
    real_session = engines.ort.Session
    monkeypatch.setattr(engines.ort, "Session", lambda model, **k: sessions.append(model) or real_session(model, **k))
    report = rnnconv.upgrade(recurrent_model("LSTM", opset=7), tmp_path / "o.onnx", opset=14).report
    assert report.ok and [c.engines for c in report.checks if c.subject == "model"][-1] == "onnxruntime"
    assert len(loaded) == 1 and loaded[0].name == "o.onnx" and loaded[0].parent != tmp_path  # the staged file
    assert len(sessions) == 1  # the source's, fed its weights as inputs; none more for the converted model
