"""com.microsoft DynamicQuantizeLSTM read into the float layer: dequantize() undoes what onnxruntime's
quantize_dynamic did to a float LSTM's weights (to within half a quantization step), read() keeps the rest of the
LSTM exactly, and nodes onnxruntime refuses are refused naming them."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from rnnconv import io
from rnnconv.dialects import onnx_quantized as dq
from rnnconv.dialects import onnx_recurrent
from rnnconv.errors import BadInput
from tests.conftest import FIXTURES

SOURCES = ["lstm7_bidirectional_peepholes_input_forget_seq_lens_initial_states", "lstm7_activations", "lstm14_forward"]


def quantized(tmp_path, name, **options):
    from onnxruntime.quantization import quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)
    source = onnx.load(str(FIXTURES / f"{name}.onnx"))
    source.ir_version = 7  # quantize_dynamic keeps it; IR 3 wants every initializer a graph input
    onnx.save(source, str(tmp_path / "float.onnx"))
    quantize_dynamic(str(tmp_path / "float.onnx"), str(tmp_path / "quantized.onnx"), **options)
    return io.load(FIXTURES / f"{name}.onnx"), io.load(tmp_path / "quantized.onnx")


@pytest.mark.parametrize("name", SOURCES)
@pytest.mark.parametrize("per_channel,reduce_range", [(False, False), (True, False), (False, True)])
def test_read_recovers_the_float_lstm(tmp_path, name, per_channel, reduce_range):
    float_model, model = quantized(tmp_path, name, per_channel=per_channel, reduce_range=reduce_range)
    (source,) = onnx_recurrent.find(float_model)
    (node,) = dq.find(model)
    assert dq.holds(model) and not dq.holds(float_model)
    assert (node.weight_type, node.per_channel) == ("int8", per_channel)
    layer, want = node.layer, source.layer
    for field in ("kind", "direction", "hidden_size", "input_size", "clip", "input_forget", "has_bias",
                  "has_peepholes"):
        assert getattr(layer, field) == getattr(want, field), field
    scales = [onnx_recurrent.constant_array(node.inputs[k]) for k in ("W_scale", "R_scale")]
    for d, (got, expected) in enumerate(zip(layer.cells, want.cells)):
        assert got.activations == expected.activations
        for tensor, scale in (("W", scales[0]), ("R", scales[1])):
            step = scale.reshape(len(layer.cells), -1)[d]  # per direction, or per gate row i, o, f, c
            for k, gate in enumerate(dq.GATES):
                half = 0.5 * (step[k * layer.hidden_size:(k + 1) * layer.hidden_size, None] if step.size > 1 else step)
                w = getattr(expected, tensor)[gate]
                error = np.abs(getattr(got, tensor)[gate] - w)
                assert np.all(error <= half + np.spacing(np.abs(w))), (tensor, gate)  # + the product's rounding
        for tensor in ("Wb", "Rb", "P"):  # carried over unquantized
            for gate, array in getattr(expected, tensor).items():
                np.testing.assert_array_equal(getattr(got, tensor)[gate], array)


def test_dequantize_layout_and_zero_points():
    rng = np.random.default_rng(0)
    D, I, H = 2, 3, 2
    W = rng.integers(0, 256, (D, I, 4 * H)).astype(np.uint8)
    R = rng.integers(0, 256, (D, H, 4 * H)).astype(np.uint8)
    W_scale, W_zero = np.array([0.5, 0.25], np.float32), np.array([128, 100], np.uint8)
    R_scale, R_zero = np.full((D, 4 * H), 0.125, np.float32), np.full((D, 4 * H), 7, np.uint8)
    Wf, Rf = dq.dequantize(W, R, W_scale, W_zero, R_scale, R_zero)
    assert Wf.shape == (D, 4 * H, I) and Rf.shape == (D, 4 * H, H) and Wf.dtype == np.float32
    np.testing.assert_array_equal(Wf[1, 5, 2], (int(W[1, 2, 5]) - 100) * 0.25)
    np.testing.assert_array_equal(Rf[0, 3, 1], (int(R[0, 1, 3]) - 7) * 0.125)


@pytest.mark.parametrize("zero_point,message", [
    (np.array([[1] * 8, [1] * 8], np.int8), "must be all 0"),
    (np.array([[3] * 8, [4] * 8], np.uint8), "one value"),
    (np.array(3, np.uint8), r"shape \[\]"),
])
def test_zero_points_onnxruntime_refuses(zero_point, message):
    dtype = zero_point.dtype
    W = np.zeros((2, 3, 8), dtype)
    R = np.zeros((2, 2, 8), dtype)
    scale = np.ones(zero_point.shape, np.float32)
    with pytest.raises(BadInput, match=message):
        dq.dequantize(W, R, scale, zero_point, scale, zero_point)


def test_node_with_layout_1_is_refused_by_name(tmp_path):
    _, model = quantized(tmp_path, "lstm14_forward")
    (node,) = [n for n in model.graph if dq.is_quantized_lstm(n)]
    node.attributes["layout"] = ir.AttrInt64("layout", 1)
    with pytest.raises(BadInput, match=f"{dq.OP} node {node.name!r}: .*no layout attribute"):
        dq.find(model)
    node.attributes["layout"] = ir.AttrInt64("layout", 0)  # what quantize_dynamic up to 1.17 wrote: the op's meaning
    assert dq.find(model)[0].layer.layout == 0
