"""QuantizeLinear / DequantizeLinear below opset 13: per-tensor quantization (one scale, one zero point) means the
same in version 10, per-axis has no version-10 form. Held against onnxruntime on the source."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnconv
from rnnconv.errors import Unsupported
from tests.passes.test_adapter_steps import downgrade, node, x

F = TensorProto.FLOAT


def model(nodes, opset, inputs, y_shape, consts=None):
    """One output y of float32 and shape `y_shape` (onnx's reference ops have no DequantizeLinear-13 to infer it)."""
    graph = helper.make_graph(
        nodes, "step", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                        for k, v in inputs.items()], [helper.make_tensor_value_info("y", F, y_shape)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 19 else 10
    return m


W = np.random.default_rng(1).integers(-100, 100, (4, 3)).astype(np.int8)


def qdq(opset, scale_shape=(), axis=None):
    """x -> QuantizeLinear -> DequantizeLinear, times int8 weights through DequantizeLinear."""
    nodes = [node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], **({} if axis is None else {"axis": axis})),
             node("MatMul", ["xf", "wf"], ["y"])]
    consts = {"w": W, "ws": np.full(scale_shape, 0.05, np.float32), "wz": np.full(scale_shape, 3, np.int8),
              "xs": np.array(0.02, np.float32), "xz": np.array(128, np.uint8)}
    return model(nodes, opset, {"x": x(2, 4)}, [2, 3], consts)


@pytest.mark.parametrize("source", [13, 19, 21, 23])
@pytest.mark.parametrize("target", [12, 10])
def test_per_tensor_qdq_goes_to_version_10(source, target):
    out = downgrade(qdq(source), target, {"x": x(2, 4)})
    assert {n.op_type for n in out.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    assert all(a.name != "axis" for n in out.graph.node for a in n.attribute)


def test_one_value_scale_becomes_a_scalar():
    out = downgrade(qdq(13, scale_shape=(1,)), 11, {"x": x(2, 4)})
    dq = next(n for n in out.graph.node if n.input[0] == "w")
    inits = {i.name: i for i in out.graph.initializer}
    assert [list(inits[name].dims) for name in dq.input[1:]] == [[], []]


def test_run_time_one_value_scale_is_reshaped_to_a_scalar():
    nodes = [node("Abs", ["s"], ["sa"]), node("QuantizeLinear", ["x", "sa"], ["q"]),
             node("DequantizeLinear", ["q", "sa"], ["y"])]
    feeds = {"x": x(2, 4), "s": np.array([0.03], np.float32)}
    out = downgrade(model(nodes, 13, feeds, [2, 4]), 11, feeds)
    assert [n.op_type for n in out.graph.node].count("Reshape") == 2


def test_per_axis_is_refused_naming_the_node_and_the_opset():
    with pytest.raises(Unsupported, match=r"DequantizeLinear node 'wf'.*per-axis quantization \(scale of shape \[3\]\) "
                                          r"exists only from DequantizeLinear-13.*keep opset 13"):
        rnnconv.downgrade(qdq(13, scale_shape=(3,), axis=1), opset=11)


def test_int8_model_from_onnxruntime_static_quantization_goes_to_opset_11(tmp_path):
    """onnxruntime's quantize_static (QDQ format, per-tensor) of a small MatMul + Add model."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    rng = np.random.default_rng(2)
    graph = helper.make_graph(
        [node("MatMul", ["x", "w"], ["m"]), node("Add", ["m", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("x", F, [2, 8])], [helper.make_tensor_value_info("y", F, [2, 5])],
        [numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")])
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    source.ir_version = 8
    onnx.save(source, tmp_path / "f.onnx")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"x": rng.standard_normal((2, 8)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=False)
    quantized = onnx.load(tmp_path / "q.onnx")
    assert "DequantizeLinear" in {n.op_type for n in quantized.graph.node}
    downgrade(quantized, 11, {"x": rng.standard_normal((2, 8)).astype(np.float32)})
