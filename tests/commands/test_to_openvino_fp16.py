"""--fp16 on every path to-openvino has: Sequence ops, the explicit recurrence (TensorIterator bodies), per-direction
splits, glue ops (a MatMul head), and the OpenVINO route (grafted nodes, compressed at save). On each, the .bin
holds half the float bytes, no float32 weight is left (scalars aside), and the IR still runs within the fp16
tolerance of onnxruntime (in the OpenVINO runtime; without the openvino package, in rnnconv's IR interpreter)."""

from __future__ import annotations

import glob

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv import io
from rnnconv.commands.to_openvino import onnx_to_ir, to_openvino
from rnnconv.dialects.openvino import reader
from tests.conftest import FIXTURES, assert_close, conv_lstm, ir_outputs, lstm_node, needs_openvino, reference

H, I, T, N = 32, 16, 5, 3


def _model(nodes, inits, outputs, x_shape=(T, N, I)):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x_shape))],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _outputs(names, D):
    return [helper.make_tensor_value_info(n, TensorProto.FLOAT, [T, D, N, H] if n == "Y" else [D, N, H])
            for n in names]


def sequence():
    node, inits = lstm_node(np.random.default_rng(0), "lstm", "X", I, H, bidirectional=True)
    return _model([node], inits, _outputs(("Y", "Y_h", "Y_c"), 2)), "LSTMSequence"


def explicit_recurrence():
    node, inits = lstm_node(np.random.default_rng(1), "lstm", "X", I, H, peepholes=True, input_forget=True)
    return _model([node], inits, _outputs(("Y", "Y_h", "Y_c"), 1)), "TensorIterator"


def split_directions():
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.uniform(-.5, .5, s).astype(np.float32), n)
             for n, s in (("W", (2, 3 * H, I)), ("R", (2, 3 * H, H)), ("B", (2, 6 * H)))]
    node = helper.make_node("GRU", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H, direction="bidirectional",
                            activations=["Sigmoid", "Tanh", "Sigmoid", "Relu"], name="gru")
    return _model([node], inits, _outputs(("Y", "Y_h"), 2)), "GRUSequence"


def glue():
    rng = np.random.default_rng(3)
    node, inits = lstm_node(rng, "lstm", "X", I, H, outputs=("Y", "", ""))
    inits += [numpy_helper.from_array(np.array([1], np.int64), "axis"),
              numpy_helper.from_array(rng.uniform(-.5, .5, (H, 256)).astype(np.float32), "head"),
              numpy_helper.from_array(rng.uniform(-.5, .5, (256,)).astype(np.float32), "bias")]
    nodes = [node, helper.make_node("Squeeze", ["Y", "axis"], ["y"]), helper.make_node("MatMul", ["y", "head"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["logits"])]
    return _model(nodes, inits, [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [T, N, 256])]), "MatMul"


def grafted():
    return conv_lstm("1d", H=H), "Convolution"


def _float_consts(xml):
    layers = [la for la in reader.read(xml).all_layers() if la.type == "Const"]
    return ([la.name for la in layers if la.value.dtype == np.float32 and la.value.size > 1],
            [la for la in layers if la.value.dtype == np.float16])


@pytest.mark.parametrize("make", [sequence, explicit_recurrence, split_directions, glue,
                                  pytest.param(grafted, marks=needs_openvino)])  # the OpenVINO route
def test_fp16_halves_the_weights_on_every_path(tmp_path, make):
    model, op = make()
    sizes, float_bytes = {}, {}
    for fp16 in (False, True):
        xml = tmp_path / f"m{int(fp16)}.xml"
        assert to_openvino(model, xml, fp16=fp16).report.ok
        sizes[fp16] = xml.with_suffix(".bin").stat().st_size
        float_bytes[fp16] = sum(la.value.nbytes for la in reader.read(xml).all_layers()
                                if la.type == "Const" and la.value.dtype.kind == "f")
    xml = tmp_path / "m1.xml"
    assert f'type="{op}"' in xml.read_text()
    f32, f16 = _float_consts(xml)
    assert f32 == [] and f16
    if op == "TensorIterator":  # the body's weights too
        assert any(la.value.size >= H * I for la in f16)
    assert float_bytes[True] < 0.51 * float_bytes[False], float_bytes
    assert sizes[True] < 0.6 * sizes[False], sizes  # the rest: integer constants, page alignment
    x = np.random.default_rng(0).uniform(-1, 1, [d.dim_value or N for d in model.graph.input[0].type.tensor_type
                                                  .shape.dim]).astype(np.float32)
    feeds = {model.graph.input[0].name: x}
    names = [o.name for o in model.graph.output]
    assert_close(reference(model, feeds), ir_outputs(xml, feeds), names, tol=2e-3)


def test_no_fp16_conversion_writes_a_float32_weight():
    """Every fixture and PyTorch export, rnnconv's own writer: each float32 constant of more than one element
    (weights, folded biases, synthesized zero states, TensorIterator bodies) is stored as f16."""
    for path in sorted(glob.glob(str(FIXTURES / "*.onnx"))) + sorted(glob.glob(str(FIXTURES / "torch" / "*.onnx"))):
        graph = onnx_to_ir(io.load(path), fp16=True).graph
        left = [la.name for la in graph.all_layers()
                if la.type == "Const" and np.dtype(la.value.dtype) == np.float32 and la.value.size > 1]
        assert not left, (path, left)
