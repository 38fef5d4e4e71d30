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
    monkeypatch.setattr(ort_runtime, "_ask", lambda job, *a: sent.append(job) or ask(job, *a))
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


def test_a_run_asked_ahead_answers_the_question(tmp_path, children):
    """ask_ahead starts the child at once; run_isolated on the same job takes its answer (no second child)."""
    path = lstm_file(tmp_path / "m.onnx")
    model = io.load(path)
    feeds = vinputs.random_inputs(model, 0)
    ahead = ort_runtime.ask_ahead([model], feeds)
    assert ahead is not None and len(children) in (0, 1)  # its thread may not have sent it yet
    [(got, why)] = ort_runtime.run_isolated([model], feeds)
    assert why == "" and len(children) == 1 and not ort_runtime._AHEAD
    for k, v in _onnxruntime(path, feeds).items():
        np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6)


def test_a_run_asked_ahead_and_not_taken_ends(tmp_path, children):
    path = lstm_file(tmp_path / "m.onnx")
    model = io.load(path)
    ahead = ort_runtime.ask_ahead([model], vinputs.random_inputs(model, 0))
    ahead.cancel()
    assert not ort_runtime._AHEAD and all(p.poll() is not None for p in ahead._proc)


def test_a_conversion_asks_for_the_big_sources_run_before_its_node_checks(tmp_path, children, monkeypatch):
    """upgrade of a model with external weights: the source's onnxruntime run (the baseline, which rnnconv's
    engine hands onnxruntime whole) starts before the node checks, and the comparison takes it: two children in
    all (the source, and the written file as users load it)."""
    import rnnconv
    from rnnconv.verification import engines, runner

    monkeypatch.setattr(engines, "ISOLATE_WEIGHT_BYTES", 0)
    seen = []
    check_nodes = runner.check_nodes
    monkeypatch.setattr(runner, "check_nodes", lambda *a, **k: seen.append(list(ort_runtime._AHEAD))
                        or check_nodes(*a, **k))
    result = rnnconv.upgrade(lstm_file(tmp_path / "m.onnx"), tmp_path / "out.onnx", opset=22)
    assert result.report.ok
    assert len(seen) == 1 and len(seen[0]) == 1, seen  # asked ahead, before the node checks
    assert len(children) == 2 and not ort_runtime._AHEAD
