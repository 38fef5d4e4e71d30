"""The time axis of each output (verification/time_axis.py), which the per-step errors need."""

from __future__ import annotations

from rnnconv.commands.to_openvino import to_openvino
from rnnconv.verification import model as vmodel
from rnnconv.verification import time_axis as vtime
from tests.conftest import FIXTURES, recurrent_model, with_transposed_y, write_model


def test_time_axis_followed_to_the_graph_outputs(tmp_path):
    """Per-step errors need the time axis of each output: through Squeeze and a MatMul head, and in IR Y."""
    assert vtime.time_axes(vmodel.open_model(str(FIXTURES / "lstm14_squeeze_head.onnx"))) == {"logits": 0}
    assert vtime.time_axes(vmodel.open_model(str(FIXTURES / "lstm14_layout1.onnx"))) == {"Y": 1}
    write_model(with_transposed_y(recurrent_model("GRU", T=3, N=3)), tmp_path / "t.onnx")
    assert vtime.time_axes(vmodel.open_model(str(tmp_path / "t.onnx"))) == {"Y": 2}
    to_openvino(str(FIXTURES / "gru7_forward.onnx"), str(tmp_path / "m.xml"))
    assert vtime.time_axes(vmodel.open_model(str(tmp_path / "m.xml"))) == {"Y": 0}
