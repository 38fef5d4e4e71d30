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
    """X [64, 2] @ [10.3, -10]: float16 stores 10.3 as 10.296875 (its step there is 1/128), 3e-3 off wherever
    |x0| is near 1, while rows where the two products nearly cancel leave float16's relative tolerance nothing to
    hold the difference. In float32 both products are exact to 1e-6."""
    w = numpy_helper.from_array(np.array([[10.3], [-10.0]], np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "w"], ["out"], name="head")], "m",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [64, 2])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [64, 1])], [w])
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
