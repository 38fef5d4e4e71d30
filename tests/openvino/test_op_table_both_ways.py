"""The op table is one table: each ONNX op added for from-openvino serves to-openvino too. Each case goes ONNX ->
to-openvino (verified by to-openvino itself: onnxruntime against rnnconv's IR interpreter and the OpenVINO
runtime) -> from-openvino (verified again), and the ONNX model that comes back gives onnxruntime's numbers for the
original (1e-5)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.commands.from_openvino import from_openvino
from rnnconv.commands.to_openvino import to_openvino

ov = pytest.importorskip("openvino")
ort = pytest.importorskip("onnxruntime")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, inits=(), opset=20):
    g = helper.make_graph(nodes, "ops", inputs, outputs, initializer=[numpy_helper.from_array(np.asarray(v), k)
                                                                      for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    inferred = onnx.shape_inference.infer_shapes(m)
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for out in m.graph.output:
        if not out.HasField("type") and out.name in known:
            out.CopyFrom(known[out.name])
    return m


def vi(name, shape, t=F):
    return onnx.ValueInfoProto(name=name) if shape is None else helper.make_tensor_value_info(name, t, shape)


def one(op, inits=(), x=None, opset=20, **attrs):
    x = x or vi("x", [2, 3, 4])
    return model([helper.make_node(op, ["x"] + [k for k, _ in inits], ["y"], **attrs)], [x], [vi("y", None)],
                 inits, opset)


def chain(ops, x=None):
    x = x or vi("x", [2, 3, 4])
    names = ["x"] + [f"t{k}" for k in range(len(ops) - 1)] + ["y"]
    return model([helper.make_node(o, [names[k]], [names[k + 1]]) for k, o in enumerate(ops)], [x], [vi("y", None)])


R = np.random.default_rng(0)
W = R.uniform(-.5, .5, (4, 3, 3, 2)).astype(np.float32)
FORWARD = {
    "trigonometry": chain(["Sin", "Cos", "Tan", "Atan", "Sinh", "Asinh", "Tanh", "Asin", "Acos", "Cosh", "Acosh"]),
    "Atanh-Sign-Softsign": chain(["Tanh", "Atanh", "Sign", "Softsign"]),
    "Mish-HardSwish-Elu": chain(["Mish", "HardSwish", "Elu"]),
    "Gelu-tanh": one("Gelu", approximate="tanh"),
    "Gelu": one("Gelu"),
    "Round": model([helper.make_node("Mul", ["x", "k"], ["m"]), helper.make_node("Round", ["m"], ["y"])],
                   [vi("x", [2, 3, 4])], [vi("y", None)], [("k", np.float32(2.5))]),
    "Selu": one("Selu", alpha=1.5, gamma=1.2),
    "Mod-fmod": one("Mod", [("d", np.float32(0.3))], fmod=1),
    "Xor": model([helper.make_node("Greater", ["x", "z"], ["a"]), helper.make_node("Less", ["x", "h"], ["b"]),
                  helper.make_node("Xor", ["a", "b"], ["y"])], [vi("x", [2, 3, 4])], [vi("y", None)],
                 [("z", np.float32(0)), ("h", np.float32(.5))]),
    "Conv": one("Conv", [("w", W), ("b", np.arange(4, dtype=np.float32))], x=vi("x", [1, 3, 6, 5]),
                pads=[1, 0, 0, 1], strides=[2, 1]),
    "Conv-group": one("Conv", [("w", R.uniform(-.5, .5, (4, 2, 3, 3)).astype(np.float32))], x=vi("x", [1, 4, 5, 5]),
                      group=2, auto_pad="SAME_UPPER"),
    "ConvTranspose": one("ConvTranspose", [("w", R.uniform(-.5, .5, (3, 2, 3)).astype(np.float32)),
                                           ("b", np.ones(2, np.float32))], x=vi("x", [1, 3, 5]), strides=[2],
                         pads=[1, 0], output_padding=[1]),
    "MaxPool": one("MaxPool", x=vi("x", [1, 2, 7, 6]), kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 0],
                   ceil_mode=1),
    "AveragePool": one("AveragePool", x=vi("x", [1, 2, 6, 6]), kernel_shape=[2, 3], pads=[1, 1, 0, 1],
                       count_include_pad=1),
    "Pad": one("Pad", [("p", np.array([0, 1, 2, 0, 0, 1], np.int64))], mode="reflect"),
    "ScatterND": model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")],
                       [vi("x", [2, 3, 4])], [vi("y", None)], [("i", np.array([[1, 0], [0, 2]], np.int64)),
                                                               ("u", np.ones((2, 4), np.float32))]),
    "NonZero-CumSum": model([helper.make_node("Greater", ["x", "z"], ["g"]), helper.make_node("NonZero", ["g"], ["n"]),
                             helper.make_node("CumSum", ["n", "a"], ["y"], reverse=1)], [vi("x", [2, 3, 4])],
                            [vi("y", None)], [("z", np.float32(0)), ("a", np.array(1, np.int64))]),
    "Einsum": model([helper.make_node("Einsum", ["x", "w"], ["y"], equation="bij,jk->bik")], [vi("x", [2, 3, 4])],
                    [vi("y", None)], [("w", R.uniform(-1, 1, (4, 5)).astype(np.float32))]),
    "MeanVarianceNormalization": one("MeanVarianceNormalization", axes=[0, 2], x=vi("x", [2, 3, 4])),
    "LayerNormalization": one("LayerNormalization", [("s", R.uniform(.5, 1.5, 4).astype(np.float32)),
                                                     ("b", R.uniform(-1, 1, 4).astype(np.float32))], epsilon=1e-3),
    "BatchNormalization": one("BatchNormalization", [("s", np.array([1, 2, 3], np.float32)),
                                                     ("b", np.array([.1, .2, .3], np.float32)),
                                                     ("m", np.array([0, .5, -.5], np.float32)),
                                                     ("v", np.array([1, 2, .5], np.float32))]),
    "Resize": model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")], [vi("x", [1, 2, 3, 4])],
                    [vi("y", None)], [("s", np.array([1, 1, 2, 1.5], np.float32))]),
    "ReverseSequence": model([helper.make_node("ReverseSequence", ["x", "n"], ["y"], batch_axis=1, time_axis=0)],
                             [vi("x", [4, 3, 2])], [vi("y", None)], [("n", np.array([4, 1, 3], np.int64))]),
    "STFT": model([helper.make_node("STFT", ["x", "st", "w", "n"], ["y"])], [vi("x", [2, 32, 1])], [vi("y", None)],
                  [("st", np.array(4, np.int64)), ("w", np.hanning(8).astype(np.float32)),
                   ("n", np.array(8, np.int64))]),
}


def _feeds(m, seed):
    rng = np.random.default_rng(seed)
    return {i.name: rng.uniform(-.9, .9, [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in m.graph.input}


def _ort(m, feeds):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_op_goes_to_openvino_and_comes_back(tmp_path, name):
    m = FORWARD[name]
    onnx.checker.check_model(m, full_check=True)
    feeds = _feeds(m, 0)
    xml = tmp_path / "m.xml"
    assert to_openvino(m, xml, inputs=feeds).report.ok
    back = from_openvino(xml, tmp_path / "back.onnx", inputs=feeds)
    assert back.report.ok
    ref, got = _ort(m, feeds), _ort(onnx.load(str(tmp_path / "back.onnx")), feeds)
    for k, want in ref.items():
        assert got[k].shape == want.shape
        np.testing.assert_allclose(got[k].astype(np.float64), want.astype(np.float64), atol=1e-5, rtol=1e-5)
