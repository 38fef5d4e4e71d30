"""Recurrent nodes reading one X: OpenVINO 2026.4's CPU plugin folds X's Transpose, a Sequence op and Y's Transpose
into one time-major op and rewires the shared Transpose for every reader, so the other Sequence op got X
untransposed (wrong at batch above 1; to-openvino's check refused the model). Such single-direction nodes write Y
back through Squeeze, Transpose and Unsqueeze (from_onnx._outputs): each IR, run in OpenVINO, is held against
onnxruntime on the source at batch 3 (to_openvino_and_check), and fuse's default two-node output converts."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnconv
from tests.conftest import FIXTURES, to_openvino_and_check

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
T, N, I, H = 5, 3, 4, 6


def readers_of_one_x(op: str, directions, dynamic: bool = False) -> onnx.ModelProto:
    """One `op` node per direction in `directions` ("bidirectional" too), all reading X; each Y a graph output."""
    rng = np.random.default_rng(0)
    t, n = ("T", "N") if dynamic else (T, N)
    nodes, inits, outs = [], [], []
    for k, direction in enumerate(directions):
        D, G = (2 if direction == "bidirectional" else 1), GATES[op]
        for name, shape in (("W", (D, G * H, I)), ("R", (D, G * H, H)), ("B", (D, 2 * G * H))):
            inits.append(numpy_helper.from_array((0.4 * rng.standard_normal(shape)).astype(np.float32), f"{name}{k}"))
        nodes.append(helper.make_node(op, ["X", f"W{k}", f"R{k}", f"B{k}"], [f"Y{k}"], hidden_size=H,
                                      direction=direction, name=f"{op.lower()}{k}"))
        outs.append(helper.make_tensor_value_info(f"Y{k}", TensorProto.FLOAT, [t, D, n, H]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [t, n, I])], outs,
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_forward_and_reverse_over_one_x(tmp_path, op):
    to_openvino_and_check(tmp_path, readers_of_one_x(op, ("forward", "reverse")), shapes=((T, N),))


def test_bidirectional_and_forward_over_one_dynamic_x(tmp_path):
    to_openvino_and_check(tmp_path, readers_of_one_x("RNN", ("bidirectional", "forward"), dynamic=True),
                          shapes=((T, N), (2, 1)))


def test_fuse_default_output_converts(tmp_path):
    """dynamo's two-layer bidirectional nn.RNN (batch 2), fused into a forward and a reverse node per layer."""
    fused = tmp_path / "fused.onnx"
    rnnconv.fuse(FIXTURES / "fuse" / "rnn_two_layers_bidirectional_batch_first_initial_state_dynamo.onnx", fused,
                 verify="none")
    assert rnnconv.to_openvino(fused, tmp_path / "m.xml").report.ok
