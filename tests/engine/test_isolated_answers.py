"""A big model that onnxruntime runs entirely: rnnconv's engine runs it in onnxruntime's own process, as the
whole-model check does, and the check is answered from that run instead of a second child reading the weights
again. Outputs held against onnxruntime run here by the test; the children counted at the one place that starts
them."""

from __future__ import annotations

import os

import numpy as np
import onnxruntime
import pytest

from rnnconv import io
from rnnconv.engine import onnx_graph
from rnnconv.engine import onnxruntime_runtime as ort_runtime
from rnnconv.verification import inputs as vinputs
from tests.conftest import lstm_file


@pytest.fixture
def children(monkeypatch):
    """Every job sent to onnxruntime's child process, with big meaning any external weights."""
    sent = []
    ask = ort_runtime._ask
    monkeypatch.setattr(ort_runtime, "_ask", lambda job: sent.append(job) or ask(job))
    monkeypatch.setattr(onnx_graph, "ISOLATE_WEIGHT_BYTES", 0)
    monkeypatch.setattr(ort_runtime, "_ANSWERED", [])
    return sent


def _onnxruntime(path, feeds):
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def test_engine_runs_a_big_model_in_the_child_and_the_check_reuses_it(tmp_path, children, monkeypatch):
    path = lstm_file(tmp_path / "m.onnx")
    model = io.load(path)
    feeds = vinputs.random_inputs(model, 0)
    monkeypatch.setattr(ort_runtime.Session, "__init__", lambda *a, **k: pytest.fail("an in-process session"))
    placements: dict = {}
    engine = onnx_graph.run_onnx(model, feeds, "float32", placements, partitioned=True)
    assert placements == {"LSTM": {"onnxruntime": 1}} and len(children) == 1
    [(check, why)] = ort_runtime.run_isolated([model], feeds)  # the whole-model check's question
    assert why == "" and len(children) == 1  # answered from the engine's run
    expected = _onnxruntime(path, feeds)  # weights as initializers here (packed by onnxruntime): float32 rounding
    assert engine.keys() == check.keys() == expected.keys()
    for k in expected:
        np.testing.assert_allclose(engine[k], expected[k], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(check[k], engine[k])


def test_other_inputs_or_changed_weights_run_again(tmp_path, children):
    path = lstm_file(tmp_path / "m.onnx")
    model = io.load(path)
    feeds = vinputs.random_inputs(model, 0)
    ort_runtime.run_isolated([model], feeds)
    other = {k: v + 1 for k, v in feeds.items()}
    [(got, _)] = ort_runtime.run_isolated([model], other)
    assert len(children) == 2
    for k, v in _onnxruntime(path, other).items():
        np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6)
    data = tmp_path / "w.data"
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # the file rewritten, as far as it shows
    ort_runtime.run_isolated([model], feeds)
    assert len(children) == 3
