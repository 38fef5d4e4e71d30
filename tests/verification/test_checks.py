"""The checks every rewrite goes through (verification/checks.py): a runtime that ran the source must run the
converted model too."""

from __future__ import annotations

import pytest

import rnnconv
from rnnconv.engine import onnxruntime_runtime
from rnnconv.errors import VerificationFailed
from tests.conftest import ALL_OPTIONAL, recurrent_model


def test_converted_model_that_onnxruntime_refuses_fails_verification(monkeypatch):
    """onnxruntime ran the source, so the converted model must run there too: a refusal is a failed check."""
    real = onnxruntime_runtime.Session
    calls = []

    def refuse_second(model, **kw):
        calls.append(model)
        if len(calls) == 2:
            raise RuntimeError("simulated: no kernel for this node")
        return real(model, **kw)

    monkeypatch.setattr(onnxruntime_runtime, "Session", refuse_second)
    with pytest.raises(VerificationFailed) as err:
        rnnconv.upgrade(recurrent_model("LSTM", opset=7, **ALL_OPTIONAL), opset=14)
    problems = [o.problem for c in err.value.report.checks for o in c.outputs if o.problem]
    assert any("onnxruntime cannot run it: RuntimeError: simulated" in p for p in problems), problems
