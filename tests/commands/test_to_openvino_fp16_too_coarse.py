"""to-openvino --fp16 on weights whose float16 rounding alone moves an output past float16's tolerance (as on real
models: silero-vad's LSTM state, DeepFilterNet's encoder): exit 1, nothing written, and the one error line says the
float16 weights are the cause and which tolerance options would accept them; float32 weights, or a tolerance that
holds the rounding, pass."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.errors import EXIT_VERIFY
from tests.conftest import run_cli


def coarse_matmul() -> onnx.ModelProto:
    """X [64, 1] @ [100.3, 100.29] @ [1, -1]: 0.01 x in float32, but float16 stores both 100.3 and 100.29 as
    100.3125 (its step there is 1/16), so the output is 0: up to 0.01 off on an output whose largest magnitude is
    0.01, past float16's tolerance even with its scale term (2e-3 + 2e-3 x 0.01). In float32 the difference of the
    two products is exact to 1e-5."""
    w = numpy_helper.from_array(np.array([[100.3, 100.29]], np.float32), "w")
    d = numpy_helper.from_array(np.array([[1.0], [-1.0]], np.float32), "d")
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "w"], ["two"], name="head"),
                               helper.make_node("MatMul", ["two", "d"], ["out"], name="difference")], "m",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [64, 1])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [64, 1])], [w, d])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(coarse_matmul(), path)
    return path


def test_fp16_weights_too_coarse_for_the_tolerance_say_so(model, tmp_path):
    code, _, stderr = run_cli(["to-openvino", str(model), "-o", str(tmp_path / "m.xml"), "--fp16"])
    assert code == EXIT_VERIFY
    errors = [ln for ln in stderr.splitlines() if ln.startswith("rnnconv: error: ")]
    assert len(errors) == 1 and errors[0] == stderr.strip().splitlines()[-1], stderr
    assert "float16 weights (fp16)" in errors[0] and errors[0].endswith("(try --atol, or --rtol)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


@pytest.mark.parametrize("extra", [[], ["--fp16", "--atol", "1"]], ids=["float32", "tolerance"])
def test_float32_weights_or_a_tolerance_that_holds_the_rounding_pass(model, tmp_path, extra):
    code, stdout, stderr = run_cli(["to-openvino", str(model), "-o", str(tmp_path / "m.xml"), *extra])
    assert code == 0, stdout + stderr
