"""Property test: random recurrent nodes (kind, direction, layout, optional inputs, lbr, clip, activations,
peepholes, input_forget, weights as inputs, dynamic dims) convert, and the IR interpreter agrees with the ONNX
engine; a few examples also run in OpenVINO."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rnnconv.commands.to_openvino import translate
from rnnconv.engine.ir_graph import run_ir
from rnnconv.engine.onnx_graph import run_onnx
from rnnconv.io import load
from tests.test_openvino_convert import feeds_for, recurrent_model

ACTS = {"LSTM": 3, "GRU": 2, "RNN": 1}
NAMES = ["Sigmoid", "Tanh", "Relu", "HardSigmoid", "Softsign", "Elu", "Affine", "ScaledTanh", "LeakyRelu"]


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(["GRU", "LSTM", "RNN"]))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    D = 2 if direction == "bidirectional" else 1
    kw = dict(direction=direction, layout=draw(st.sampled_from([0, 1])), bias=draw(st.booleans()),
              seq_lens=draw(st.booleans()), initial_h=draw(st.booleans()), dynamic=draw(st.booleans()),
              weights_as_inputs=draw(st.booleans()), clip=draw(st.sampled_from([None, 0.5, 3.0])),
              H=draw(st.integers(1, 4)), I=draw(st.integers(1, 3)), seed=draw(st.integers(0, 99)))
    if kind == "GRU":
        kw["lbr"] = draw(st.sampled_from([0, 1]))
    if kind == "LSTM":
        kw.update(initial_c=draw(st.booleans()), peepholes=draw(st.booleans()),
                  input_forget=draw(st.sampled_from([0, 1])))
    if draw(st.booleans()):
        kw["activations"] = draw(st.lists(st.sampled_from(NAMES), min_size=ACTS[kind] * D, max_size=ACTS[kind] * D))
    return kind, kw, draw(st.integers(1, 5)), draw(st.integers(1, 3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_interpreter_agrees_with_onnx_engine(case):
    kind, kw, T, N = case
    model, extra = recurrent_model(kind, T=T, N=N, **kw)
    m = load(model)
    graph = translate(m).graph
    feeds = feeds_for(model, T=T, N=N, extra=extra)
    ref = run_onnx(m, feeds)
    got = run_ir(graph, feeds)
    for name, want in ref.items():
        np.testing.assert_allclose(got[name], want, atol=1e-6, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("seed", range(3))
def test_random_cases_run_in_openvino(tmp_path, seed):
    pytest.importorskip("openvino")
    from rnnconv.commands.to_openvino import to_openvino

    @settings(max_examples=5, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(cases())
    def check(case):
        kind, kw, T, N = case
        kw["seed"] = kw["seed"] + seed
        model, _ = recurrent_model(kind, T=T, N=N, **kw)
        assert to_openvino(model, tmp_path / "m.xml", force=True).report.ok  # includes the OpenVINO runtime check

    check()
