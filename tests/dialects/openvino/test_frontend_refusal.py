"""What OpenVINO's ONNX import refuses comes out as one line naming each ONNX node it failed on, the op and
OpenVINO's reason; a node refused for want of a static rank also names the If upstream whose branches give two
ranks (as PyTorch exports `x.squeeze(-1)` of a dim that may be 1: silero-vad's models)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.errors import Unsupported
from tests.conftest import run_cli

pytest.importorskip("openvino")


def squeeze_if_then_conv() -> onnx.ModelProto:
    """x [1, 4, T] -> If(T == 1): Squeeze(x, 2) (rank 2) else Identity (rank 3) -> Conv named 'the_conv'."""
    value = helper.make_tensor_value_info

    def i64(name, v):
        return numpy_helper.from_array(np.asarray(v, np.int64), name)

    then = helper.make_graph([helper.make_node("Squeeze", ["x", "axes"], ["sq"])], "then", [],
                             [value("sq", TensorProto.FLOAT, [1, 4])], initializer=[i64("axes", [2])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])], "else", [],
                              [value("same", TensorProto.FLOAT, [1, 4, "T"])])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "two"], ["t"], axis=0),
             helper.make_node("Equal", ["t", "one"], ["cond"]),
             helper.make_node("If", ["cond"], ["picked"], name="squeeze_if", then_branch=then, else_branch=other),
             helper.make_node("Conv", ["picked", "w"], ["y"], name="the_conv")]
    w = numpy_helper.from_array(np.ones((2, 4, 1), np.float32), "w")
    graph = helper.make_graph(nodes, "g", [value("x", TensorProto.FLOAT, [1, 4, "T"])],
                              [value("y", TensorProto.FLOAT, [1, 2, "T"])],
                              initializer=[i64("two", 2), i64("one", 1), w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


def test_a_node_openvino_refuses_is_named_with_the_if_that_decides_its_rank(tmp_path):
    """OpenVINO's import on the model as it is (to-openvino settles this If first, see below)."""
    from rnnconv import io
    from rnnconv.commands.to_openvino import onnx_to_ir
    from rnnconv.dialects.openvino import frontend

    path = tmp_path / "m.onnx"
    onnx.save(squeeze_if_then_conv(), path)
    with pytest.raises(Unsupported) as err:
        frontend.import_onnx(str(path), io.load(path), onnx_to_ir, tmpdir=str(tmp_path))
    text = str(err.value)
    assert text.startswith("OpenVINO's ONNX import refuses the model: failed on Conv node 'the_conv' (Conv-")
    assert "rank" in text and "If node 'squeeze_if' (output 0: rank 2 in then_branch, 3 in else_branch)" in text


def test_to_openvino_settles_that_if_and_converts(tmp_path):
    """The then-branch (rank 2) can never reach the output (the Conv needs rank 3): to-openvino keeps the other
    branch, says so, and OpenVINO runs the IR as onnxruntime runs the source."""
    path = tmp_path / "m.onnx"
    onnx.save(squeeze_if_then_conv(), path)
    code, stdout, stderr = run_cli(["to-openvino", str(path), "-o", str(tmp_path / "m.xml")])
    assert code == 0, stdout + stderr
    assert "settled If node 'squeeze_if': else_branch kept" in stdout
    assert "ok   model [onnxruntime vs OpenVINO runtime (CPU, f32)]" in stdout
