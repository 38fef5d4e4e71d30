"""The engines verification runs (verification/engines.py over engine/): values cross each runtime's API intact."""

from __future__ import annotations

import pytest

import rnnconv
from tests.conftest import FIXTURES, assert_close, fixture_feeds, openvino_outputs, reference

BF16_TOL = 2e-2  # bfloat16 keeps 8 bits of mantissa: a few units of its last place after a few steps


def test_openvino_bfloat16_inputs_and_outputs_keep_their_bits():
    """OpenVINO's Python API types bf16 tensors as float16 arrays: values must be moved as bits."""
    pytest.importorskip("openvino")
    path = FIXTURES / "gru22_bfloat16.onnx"
    report = rnnconv.verify(str(path), str(path), candidate_engine="openvino", atol=BF16_TOL, rtol=BF16_TOL)
    assert report.ok, report.lines()
    assert [o.atol for o in report.checks[0].outputs] == [BF16_TOL] * len(report.checks[0].outputs)
    # and against onnxruntime (the bfloat16 node in float32, tests/oracle.py), through the same runner
    feeds = fixture_feeds(path)
    got = openvino_outputs(path, feeds)
    assert all(v.dtype.name == "bfloat16" for v in got.values()), {k: v.dtype for k, v in got.items()}
    assert_close(reference(path, feeds), got, tol=BF16_TOL)


@pytest.mark.parametrize("isolate", [False, True])
def test_a_missing_onnxruntime_kernel_is_a_fact_on_the_failed_check(isolate):
    """onnxruntime declares an opset before it has a kernel for every op version in it: the version it refuses is
    carried, read once from its refusal, up to the failed check (what `upgrade` steps below), in this process and
    from onnxruntime's child process alike. The oracle: onnxruntime's own InferenceSession on the same model."""
    import numpy as np
    import onnx
    import onnx_ir as ir
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from rnnconv.engine.onnxruntime_runtime import newest_common_opset
    from rnnconv.verification import checks, engines
    from rnnconv.verification.model import onnx_model

    def dequantize_at(opset: int) -> onnx.ModelProto:
        graph = helper.make_graph(
            [helper.make_node("DequantizeLinear", ["x", "scale", "zero"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.UINT8, [3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
            [numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
             numpy_helper.from_array(np.array(3, np.uint8), "zero")])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)

    refused = None
    for opset in range(newest_common_opset(), 12, -1):
        try:
            ort.InferenceSession(dequantize_at(opset).SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception as err:
            refused = (opset, str(err))
            break
    if refused is None:
        pytest.skip("onnxruntime has a DequantizeLinear kernel at every opset it declares")
    opset, message = refused
    version = onnx.defs.get_schema("DequantizeLinear", opset).since_version
    assert f"DequantizeLinear({version})" in message  # what the engine reads
    model = onnx_model(ir.serde.deserialize_model(dequantize_at(opset)))
    sets = [({"x": np.array([1, 2, 3], np.uint8)}, [])]
    failed = checks.run_sets(model, "onnxruntime", sets, isolate=isolate)
    assert isinstance(failed.error, engines.CannotRun) and failed.error.no_kernel == ("DequantizeLinear", version)
    [check] = checks.compare_runs("model", failed, failed, checks.CheckOptions().tolerances, ["y"], {})
    assert not check.ok and check.no_kernel == ("DequantizeLinear", version)
