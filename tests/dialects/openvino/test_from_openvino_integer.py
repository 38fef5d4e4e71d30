"""IR that OpenVINO itself writes for int8 models and activations it keeps as one layer: its import of ONNX
ConvInteger (a Convolution of i32 data: Convert of u8 / i8 data minus a zero point, i32 filters) and of
onnxruntime's quantize_dynamic Conv models (zero points computed at run time), HardSigmoid-1. from-openvino's
ONNX, run in onnxruntime, equals OpenVINO's run of the IR."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.commands.from_openvino import from_openvino
from rnnconv.errors import Unsupported
from tests.conftest import openvino_ir, run_onnxruntime, run_openvino

ov = pytest.importorskip("openvino")
RNG = np.random.default_rng(5)


def model(nodes, inputs, outputs, inits, opset=13):
    graph = helper.make_graph(nodes, "m", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def back_and_compare(tmp_path, source: onnx.ModelProto, feeds, exact: bool = True) -> onnx.ModelProto:
    xml = openvino_ir(source, tmp_path / "m.xml")
    from_openvino(xml, tmp_path / "back.onnx")
    back = onnx.load(tmp_path / "back.onnx")
    onnx.checker.check_model(back, full_check=True)
    want, got = run_openvino(xml, feeds), run_onnxruntime(back, feeds)
    for name, value in got.items():
        if exact:
            np.testing.assert_array_equal(value, want[name])
        else:
            np.testing.assert_allclose(value, want[name], rtol=1e-6, atol=1e-6)
    return back


def ops(m) -> list[str]:
    return [n.op_type for n in m.graph.node]


@pytest.mark.parametrize("x_type,w_type,x_zero,w_zero", [("u8", "i8", 128, 0), ("u8", "u8", 3, 100),
                                                         ("i8", "i8", -5, 2), ("u8", "i8", None, None)])
def test_conv_integer_comes_back_as_conv_integer(tmp_path, x_type, w_type, x_zero, w_zero):
    xt, wt = {"u8": np.uint8, "i8": np.int8}[x_type], {"u8": np.uint8, "i8": np.int8}[w_type]
    inits = {"w": RNG.integers(np.iinfo(wt).min, np.iinfo(wt).max, (4, 2, 3, 3), endpoint=True).astype(wt)}
    ins = ["x", "w"]
    if x_zero is not None:
        inits |= {"xz": np.array(x_zero, xt), "wz": np.array(w_zero, wt)}
        ins += ["xz", "wz"]
    source = model([helper.make_node("ConvInteger", ins, ["y"], pads=[1, 0, 1, 0], strides=[1, 2])],
                   [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(np.dtype(xt)), [1, 2, 6, 7])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, None)], inits)
    feeds = {"x": RNG.integers(np.iinfo(xt).min, np.iinfo(xt).max, (1, 2, 6, 7), endpoint=True).astype(xt)}
    back = back_and_compare(tmp_path, source, feeds)
    assert ops(back) == ["ConvInteger"]
    np.testing.assert_array_equal(run_onnxruntime(back, feeds)["y"], run_onnxruntime(source, feeds)["y"])


@pytest.mark.parametrize("weight_type", ["QUInt8", "QInt8"])
def test_quantize_dynamic_conv_model_comes_back(tmp_path, weight_type):
    """onnxruntime's quantize_dynamic of a Conv + Relu + grouped Conv model: DynamicQuantizeLinear feeds
    ConvInteger its run-time zero point; OpenVINO's import subtracts it in i32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1]),
                    helper.make_node("Relu", ["c"], ["r"]),
                    helper.make_node("Conv", ["r", "w2"], ["y"], group=2)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 16])],
                   {"w": RNG.standard_normal((6, 4, 3)).astype(np.float32),
                    "b": RNG.standard_normal(6).astype(np.float32),
                    "w2": RNG.standard_normal((6, 3, 1)).astype(np.float32)})
    onnx.save(source, tmp_path / "f.onnx")
    quantize_dynamic(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), weight_type=getattr(QuantType, weight_type),
                     op_types_to_quantize=["Conv"])
    quantized = onnx.load(tmp_path / "q.onnx")
    assert ops(quantized).count("ConvInteger") == 2
    feeds = {"x": RNG.standard_normal((1, 4, 16)).astype(np.float32)}
    back = back_and_compare(tmp_path, quantized, feeds, exact=False)
    assert ops(back).count("ConvInteger") == 2
    # and within onnxruntime's own run of the int8 model
    np.testing.assert_allclose(run_onnxruntime(back, feeds)["y"], run_onnxruntime(quantized, feeds)["y"], atol=1e-5)


def test_hard_sigmoid_comes_back_as_hard_sigmoid(tmp_path):
    source = model([helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.3, beta=0.4)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8])], {})
    feeds = {"x": (RNG.standard_normal((3, 8)) * 4).astype(np.float32)}
    back = back_and_compare(tmp_path, source, feeds, exact=False)
    assert ops(back) == ["HardSigmoid"]


def _ir(tmp_path, params, result, name="m"):
    xml = tmp_path / f"{name}.xml"
    ov.save_model(ov.Model([result], params, name), str(xml), compress_to_fp16=False)
    return xml


def test_hard_sigmoid_with_run_time_alpha_and_beta(tmp_path):
    """Written with OpenVINO's own opset API (its importers always give constants)."""
    import openvino.opset1 as op

    x, a, b = (op.parameter(s, np.float32, name=n) for s, n in (([2, 5], "x"), ([], "alpha"), ([], "beta")))
    xml = _ir(tmp_path, [x, a, b], op.hard_sigmoid(x, a, b))
    from_openvino(xml, tmp_path / "back.onnx")
    feeds = {"x": (RNG.standard_normal((2, 5)) * 4).astype(np.float32), "alpha": np.array(0.7, np.float32),
             "beta": np.array(0.2, np.float32)}
    # OpenVINO's CPU plugin runs HardSigmoid with constant alpha and beta only: the spec's formula is the oracle.
    want = np.clip(0.7 * feeds["x"] + 0.2, 0, 1)
    got = run_onnxruntime(tmp_path / "back.onnx", feeds)
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-6, atol=1e-6)


def test_integer_convolution_of_other_data_is_refused_naming_the_layer(tmp_path):
    import openvino.opset1 as op

    x = op.parameter([1, 2, 5], np.int32, name="x")
    w = op.constant(RNG.integers(-3, 3, (3, 2, 1)).astype(np.int32))
    xml = _ir(tmp_path, [x], op.convolution(x, w, [1], [0], [0], [1], name="conv"))
    with pytest.raises(Unsupported, match=r"IR layer 'conv' \(Convolution-opset1\): a convolution of i32 data that "
                                          r"is not Convert of u8 / i8 data"):
        from_openvino(xml, tmp_path / "back.onnx")
    assert not (tmp_path / "back.onnx").exists()
