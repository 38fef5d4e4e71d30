"""The IR rnnconv writes agrees with itself on both ends of every edge (element type and dims), as OpenVINO's
reader and rnnconv's own expect: after FoldIRTransposes rewires a Transpose, its ports are inferred again.
Before, bidirectional PyTorch exports with static shapes did not read back (`edge '/rnn/GRU':6 ->
'/rnn/Transpose':0 joins shapes [3, 2, 5, 16] and [5, 2, 3, 16]`)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv import io
from rnnconv.commands.from_openvino import from_openvino
from rnnconv.commands.to_openvino import onnx_to_ir, to_openvino
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import reader, validate
from tests.conftest import FIXTURES, OPENVINO_TOL, assert_close, check_ir, fixture_cases, openvino_outputs, reference


def test_edge_mismatches_names_every_stale_port():
    g = ovir.IRGraph("m")
    x = g.parameter("x", "f32", [3, 5])
    t = g.op("Transpose", x, g.const(np.array([1, 0], np.int64)))
    y = g.op("Relu", t)
    g.result(y)
    assert validate.edge_mismatches(g) == []
    t.layer.inputs[0].dims = [5, 3]
    y.layer.inputs[0].element_type = "f16"
    found = validate.edge_mismatches(g)
    assert len(found) == 2
    assert "'x':0 -> 'Transpose_2':0 joins f32[3, 5] and f32[5, 3]" in found[0]
    assert "f32[5, 3] and f16[5, 3]" in found[1]


def bidirectional_export(kind: str, T=5, N=3, I=16, H=16) -> "onnx.ModelProto":  # noqa: F821
    """A batch-first bidirectional layer as torch.onnx exports it, static shapes: X transposed in, Y [T,2,N,H]
    transposed to [N,T,2,H] and flattened."""
    rng = np.random.default_rng(0)
    G = {"GRU": 3, "LSTM": 4}[kind]
    inits = [numpy_helper.from_array(rng.uniform(-.5, .5, s).astype(np.float32), n)
             for n, s in (("W", (2, G * H, I)), ("R", (2, G * H, H)), ("B", (2, 2 * G * H)))]
    inits.append(numpy_helper.from_array(np.array([N, T, 2 * H], np.int64), "flat"))
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             helper.make_node(kind, ["xt", "W", "R", "B"], ["Y"], hidden_size=H, direction="bidirectional",
                              name=f"/rnn/{kind}"),
             helper.make_node("Transpose", ["Y"], ["yt"], perm=[2, 0, 1, 3], name="/rnn/Transpose"),
             helper.make_node("Reshape", ["yt", "flat"], ["y"])]
    graph = helper.make_graph(nodes, "export", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, T, I])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, T, 2 * H])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_folded_transposes_read_back_and_round_trip(tmp_path, kind):
    pytest.importorskip("openvino")
    model = bidirectional_export(kind)
    xml = tmp_path / "m.xml"
    assert to_openvino(model, xml, route="rnnconv").report.ok
    graph = reader.read(xml)
    validate.validate(graph)  # raised "joins shapes" before
    assert validate.edge_mismatches(graph) == []
    feeds = {"x": np.random.default_rng(1).uniform(-1, 1, (3, 5, 16)).astype(np.float32)}
    assert_close(reference(model, feeds), openvino_outputs(xml, feeds), ["y"], OPENVINO_TOL)
    back = from_openvino(xml, tmp_path / "back.onnx")
    assert back.report.ok


@pytest.mark.parametrize("fp16", [False, True])
def test_every_fixture_converts_to_consistent_ir(fp16):
    for name in fixture_cases():
        check_ir(onnx_to_ir(io.load(FIXTURES / name), fp16).graph, name)
