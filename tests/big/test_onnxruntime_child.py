"""onnxruntime on models with big external weights runs in a child process mapping the weights itself
(engine/ort_worker.py): the same answers as in this process, and a crash of the child fails the check."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from rnnconv import io
from rnnconv.engine import onnxruntime_runtime
from rnnconv.verification import inputs as vinputs
from tests.conftest import lstm_file, whole_model


def test_onnxruntime_runs_big_models_in_a_child_with_the_same_answers(tmp_path, monkeypatch):
    from rnnconv.verification import engines
    from rnnconv.verification.model import onnx_model

    model = io.load(lstm_file(tmp_path / "m.onnx"))
    layout1 = io.load(lstm_file(tmp_path / "l" / "m.onnx", layout=1))
    feeds = vinputs.random_inputs(model, 0)
    here = onnxruntime_runtime.run_model(model, feeds)
    (child, why), (refused, reason) = onnxruntime_runtime.run_isolated([model, layout1], feeds)
    assert why == "" and child.keys() == here.keys()
    for k in here:
        np.testing.assert_array_equal(child[k], here[k])
    assert refused is None and reason  # onnxruntime refuses layout 1: the reason comes back, nothing crashes
    calls = []
    monkeypatch.setattr(engines, "ISOLATE_WEIGHT_BYTES", 0)
    monkeypatch.setattr(onnxruntime_runtime, "run_isolated", lambda *a: calls.append(a) or [(here, "")])
    whole_model(onnx_model(model), onnx_model(model))
    assert len(calls) == 2  # past ISOLATE_WEIGHT_BYTES of external weights, each onnxruntime run takes the child


def test_onnxruntime_child_crash_fails_the_check(tmp_path, monkeypatch):
    import subprocess as sp

    from rnnconv.verification import engines
    from rnnconv.verification.model import onnx_model

    model = io.load(lstm_file(tmp_path / "m.onnx"))
    real = sp.Popen
    monkeypatch.setattr(sp, "Popen", lambda cmd, **k: real([sys.executable, "-c", "import os; os.abort()"], **k))
    with pytest.raises(onnxruntime_runtime.Crashed, match="onnxruntime's process failed"):
        onnxruntime_runtime.run_isolated([model], {})
    monkeypatch.setattr(engines, "ISOLATE_WEIGHT_BYTES", 0)
    report = whole_model(onnx_model(model), onnx_model(model))
    found, notes = report.checks, report.notes
    # rnnconv's engine ran both models in onnxruntime in this process: its check is left out as the same runtime
    assert any(n.startswith("engine vs engine: left out") for n in notes), notes
    assert len(found) == 1 and found[0].engines == "onnxruntime"
    assert not found[0].ok and "onnxruntime's process failed" in found[0].outputs[0].problem
