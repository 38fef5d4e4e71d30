"""The checks every rewrite goes through (verification/checks.py): a runtime that ran the source must run the
converted model too."""

from __future__ import annotations

import numpy as np
import pytest

import rnnconv
from rnnconv.engine import onnxruntime_runtime
from rnnconv.errors import VerificationFailed
from tests.conftest import ALL_OPTIONAL, recurrent_model, whole_model


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


def _rounding_model(c: float, quantize: bool):
    """x -> (DynamicQuantizeLinear -> DequantizeLinear, or Identity) -> Add c."""
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    front = ([h.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
              h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"])] if quantize else
             [h.make_node("Identity", ["x"], ["d"])])
    g = h.make_graph(front + [h.make_node("Add", ["d", "c"], ["y"])], "g",
                     [h.make_tensor_value_info("x", TP.FLOAT, [3, 4])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [3, 4])], initializer=[nh.from_array(np.full([4], c, np.float32), "c")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


@pytest.mark.parametrize("quantize", [True, False])
def test_a_source_rounding_at_run_time_excuses_no_node_that_computes_differently(tmp_path, quantize):
    """A whole-model comparison between ONNX and IR fails where a node computes differently given identical inputs,
    whether or not the source rounds values computed at run time (once held again to 'dequantized', atol 0.5, which
    passed this 0.01): the IR is the source's with the final Add moved by 0.01, and the failure names that Add."""
    pytest.importorskip("openvino")
    import onnx

    from rnnconv.commands.to_openvino import to_openvino
    from rnnconv.verification.model import open_model

    onnx.save(_rounding_model(0.0, quantize), tmp_path / "a.onnx")
    onnx.save(_rounding_model(0.01, quantize), tmp_path / "b.onnx")
    to_openvino(tmp_path / "a.onnx", tmp_path / "a.xml", verify="none")
    found = whole_model(open_model(tmp_path / "b.onnx"), open_model(tmp_path / "a.xml")).checks
    assert found and not any(c.ok for c in found)
    for check in found:
        divergence = check.first_divergence.as_dict()
        assert (divergence["node"], divergence["op_type"], divergence["cause"]) == ("y", "Add", "node"), divergence
        assert divergence["alone_max_abs"] == pytest.approx(0.01, rel=1e-3)
