"""The ONNX <-> OpenVINO op table, both halves: each mapped ONNX op converts and the IR gives onnxruntime's
numbers in rnnconv's IR interpreter and in the OpenVINO runtime, then comes back; IR layers OpenVINO writes come
back as ONNX ops; unsupported op types are all listed at once.

The table is one table: each ONNX op added for from-openvino serves to-openvino too (FORWARD). Each case goes
ONNX -> to-openvino (verified by to-openvino itself: onnxruntime against rnnconv's IR interpreter and the OpenVINO
runtime) -> from-openvino (verified again), and the ONNX model that comes back gives onnxruntime's numbers for the
original (1e-5). Without openvino the same runs, the OpenVINO runtime left out."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.commands.from_openvino import from_openvino
from rnnconv.commands.to_openvino import to_openvino
from rnnconv.dialects.openvino import ops as ov_ops
from rnnconv.engine.ir_graph import run_ir
from rnnconv.errors import Unsupported
from tests.conftest import assert_close, feeds, recurrent_model, run_onnxruntime, run_openvino

try:  # the table's tests run without openvino too (rnnconv's IR interpreter, onnxruntime); OpenVINO adds its runtime
    import openvino as ov
except ImportError:
    ov = None
needs_openvino = pytest.mark.skipif(ov is None, reason="needs the openvino package")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, inits=(), opset=17, ir_version=8):
    g = helper.make_graph(nodes, "ops", inputs, outputs, initializer=[numpy_helper.from_array(np.asarray(v), k)
                                                                      for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    inferred = onnx.shape_inference.infer_shapes(m)
    known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for out in m.graph.output:
        if not out.HasField("type") and out.name in known:
            out.CopyFrom(known[out.name])
    return m


def vi(name, shape, t=F):
    if shape is None:
        return onnx.ValueInfoProto(name=name)  # type left to shape inference
    return helper.make_tensor_value_info(name, t, shape)


X = vi("x", ["N", 3, 4])
Y = vi("y", None)


def one(op, inits=(), opset=17, extra_inputs=(), x=X, **attrs):
    names = ["x"] + [k for k, _ in inits] + [n.name for n in extra_inputs]
    return model([helper.make_node(op, names, ["y"], **attrs)], [x, *extra_inputs], [Y], inits, opset)


I64_ = np.int64
CASES = {
    "Add": one("Add", [("b", np.full((4,), .5, np.float32))]),
    "Sub": one("Sub", [("b", np.full((3, 4), .25, np.float32))]),
    "Mul": one("Mul", [("b", np.float32(2))]),
    "Div": one("Div", [("b", np.float32(3))]),
    "Relu": one("Relu"), "Sigmoid": one("Sigmoid"), "Tanh": one("Tanh"), "Exp": one("Exp"), "Neg": one("Neg"),
    "Abs": one("Abs"), "Erf": one("Erf"),
    "Softmax-13": one("Softmax", axis=1), "Softmax-11-axis1": one("Softmax", opset=11, axis=1),
    "LogSoftmax": one("LogSoftmax", axis=-1),
    # axis left out: -1 from opset 13, 1 (over the 2-D flattening) before
    "Softmax-17-no-axis": one("Softmax"), "LogSoftmax-13-no-axis": one("LogSoftmax", opset=13),
    "Softmax-11-no-axis": one("Softmax", opset=11),
    "MatMul": one("MatMul", [("w", np.arange(8, dtype=np.float32).reshape(4, 2) / 8)]),
    "Transpose": one("Transpose", perm=[2, 0, 1]), "Transpose-default": one("Transpose"),
    "Reshape": one("Reshape", [("s", np.array([0, -1], I64_))]),
    "Flatten": one("Flatten", axis=1), "Flatten-0": one("Flatten", axis=0), "Flatten-2": one("Flatten", axis=2),
    "Squeeze": one("Squeeze", [("a", np.array([1], I64_))], x=vi("x", ["N", 1, 4])),
    "Squeeze-11": one("Squeeze", opset=11, axes=[1], x=vi("x", ["N", 1, 4])),
    "Unsqueeze": one("Unsqueeze", [("a", np.array([0, 3], I64_))]),
    "Unsqueeze-11": one("Unsqueeze", opset=11, axes=[1]),
    "Concat": one("Concat", [("c", np.ones((1, 3, 4), np.float32))], axis=0),
    "Slice": one("Slice", [("s", np.array([1], I64_)), ("e", np.array([100], I64_)), ("a", np.array([2], I64_)),
                           ("st", np.array([2], I64_))]),
    "Slice-9": one("Slice", opset=9, starts=[0, 1], ends=[2, 3], axes=[1, 2]),
    "Gather": one("Gather", [("i", np.array([[0, 2], [-1, 1]], I64_))], axis=2),
    "Gather-embedding": model([helper.make_node("Gather", ["emb", "ids"], ["y"], axis=0)],
                              [vi("ids", ["N", "T"], I64)], [Y], [("emb", np.arange(12, dtype=np.float32)
                                                                   .reshape(6, 2))]),
    "Cast": one("Cast", to=TensorProto.INT32),
    "Identity": one("Identity"),
    "Dropout": one("Dropout"),
    "Expand": one("Expand", [("s", np.array([2, 1, 1, 1], I64_))]),
    "Gemm": model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=.5, beta=2., transB=1)],
                  [vi("a", ["N", 4])], [Y], [("b", np.arange(12, dtype=np.float32).reshape(3, 4) / 12),
                                             ("c", np.ones(3, np.float32))]),
    "ReduceMean-17": one("ReduceMean", axes=[1], keepdims=0),
    "ReduceMean-18": one("ReduceMean", [("a", np.array([-1], I64_))], opset=18),
    "ReduceMean-all": one("ReduceMean"),
    "Clip": one("Clip", [("lo", np.float32(-.2)), ("hi", np.float32(.3))]),
    "Where": model([helper.make_node("Greater", ["x", "z"], ["m"]), helper.make_node("Where", ["m", "x", "z"], ["y"])],
                   [X], [Y], [("z", np.float32(0))]),
    "Max": one("Max", [("b", np.float32(.1)), ("c", np.full((4,), -.1, np.float32))]),
    "Shape+ConstantOfShape": model([helper.make_node("Shape", ["x"], ["s"]),
                                    helper.make_node("ConstantOfShape", ["s"], ["y"],
                                                     value=helper.make_tensor("v", F, [1], [1.5]))], [X], [Y]),
    "Shape-15-start": model([helper.make_node("Shape", ["x"], ["y"], start=1)], [X], [Y], opset=15),
    "Split-13": model([helper.make_node("Split", ["x", "s"], ["y", "y2"], axis=2)], [X], [Y, vi("y2", None)],
                      [("s", np.array([1, 3], I64_))], opset=13),
    "Split-equal": model([helper.make_node("Split", ["x"], ["y", "y2"], axis=2)], [X], [Y, vi("y2", None)]),
    "Split-11": model([helper.make_node("Split", ["x"], ["y", "y2"], axis=2, split=[3, 1])], [X],
                      [Y, vi("y2", None)], opset=11),
    "LeakyRelu": one("LeakyRelu", alpha=0.2), "HardSigmoid": one("HardSigmoid", alpha=0.3, beta=0.4),
    "Softplus": one("Softplus"), "Log-of-Exp": model([helper.make_node("Exp", ["x"], ["e"]),
                                                       helper.make_node("Log", ["e"], ["y"])], [X], [Y]),
    "Sqrt-of-Abs": model([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Sqrt", ["a"], ["y"])], [X], [Y]),
    "Pow": model([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Pow", ["a", "p"], ["y"])], [X], [Y],
                 [("p", np.float32(1.5))]),
    "Floor": one("Floor"), "Ceil": one("Ceil"), "Min": one("Min", [("b", np.float32(.1))]),
    "ReduceSum-13": one("ReduceSum", [("a", np.array([1], I64_))], opset=13, keepdims=0),
    "ReduceMax": one("ReduceMax", axes=[2]),
    "Tile": one("Tile", [("r", np.array([1, 2, 3], I64_))]),
    "Range": model([helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i"], ["n"], axis=0),
                    helper.make_node("Range", ["z", "n", "o"], ["y"])], [X], [Y],
                   [("i", np.array(2, I64_)), ("z", np.array(0, I64_)), ("o", np.array(1, I64_))]),
    "Compare-Logic": model([helper.make_node("Less", ["x", "z"], ["l"]), helper.make_node("GreaterOrEqual",
                                                                                         ["x", "h"], ["g"]),
                            helper.make_node("Or", ["l", "g"], ["o"]), helper.make_node("Not", ["o"], ["n"]),
                            helper.make_node("Equal", ["x", "x"], ["e"]), helper.make_node("And", ["n", "e"], ["a"]),
                            helper.make_node("LessOrEqual", ["x", "h"], ["le"]),
                            helper.make_node("And", ["a", "le"], ["y"])], [X], [Y],
                           [("z", np.float32(0)), ("h", np.float32(.5))]),
    "Constant": model([helper.make_node("Constant", [], ["c"], value_floats=[1., 2., 3., 4.]),
                       helper.make_node("Add", ["x", "c"], ["y"])], [X], [Y]),
    # attributes left out: the spec's defaults, each chosen where another value gives other numbers
    "MaxPool-no-ceil_mode": one("MaxPool", kernel_shape=[2], strides=[2], x=vi("x", ["N", 3, 5])),
    "AveragePool-no-count_include_pad": one("AveragePool", kernel_shape=[3], pads=[1, 1]),
    "Mod-no-fmod": one("Mod", [("d", np.array([2, -3, 4], I64_))], x=vi("x", ["N", 3], I64)),
    "Selu-defaults": one("Selu"), "LeakyRelu-default": one("LeakyRelu"), "HardSigmoid-defaults": one("HardSigmoid"),
    "Clip-6-no-max": model([helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Clip", ["e"], ["y"], min=0.5)],
                           [X], [Y], opset=6),  # e^x reaches 2.7: past any finite max below it
    "Clip-6-no-min": model([helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Neg", ["e"], ["n"]),
                            helper.make_node("Clip", ["n"], ["y"], max=-0.5)], [X], [Y], opset=6),
    "Gemm-defaults": model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)], [vi("a", ["N", 4])], [Y],
                           [("b", np.arange(12, dtype=np.float32).reshape(3, 4) / 12), ("c", np.ones(3, np.float32))]),
    "ReduceMean-18-all": one("ReduceMean", opset=18),
    "ScatterND-no-reduction": model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"])], [vi("x", [3, 4])], [Y],
                                    [("i", np.array([[2], [0]], I64_)), ("u", np.full((2, 4), .25, np.float32))],
                                    opset=13),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_onnxruntime_both_ways(tmp_path, name):
    """The IR each mapping writes gives onnxruntime's numbers for the ONNX op, in rnnconv's IR interpreter and the
    OpenVINO runtime; then the other half of the shared table: that IR converts back to ONNX (verified against the
    IR by from-openvino itself), which still gives onnxruntime's numbers for the original model."""
    m = CASES[name]
    onnx.checker.check_model(m)
    inputs = feeds(m, seed=0)
    ref = run_onnxruntime(m, inputs)
    xml = tmp_path / "m.xml"
    report = to_openvino(m, xml).report
    assert report.ok
    for got in (run_ir(xml, inputs, "float32"), *([run_openvino(xml, inputs)] if ov is not None else [])):
        for k, want in ref.items():
            assert got[k].shape == want.shape, (k, got[k].shape, want.shape)
            np.testing.assert_allclose(got[k].astype(np.float64), want.astype(np.float64), atol=1e-5, rtol=1e-5)
    back = from_openvino(xml, tmp_path / "back.onnx")
    assert back.report.ok
    inputs = feeds(m, seed=1)
    ref, got = run_onnxruntime(m, inputs), run_onnxruntime(tmp_path / "back.onnx", inputs)
    for k, want in ref.items():
        np.testing.assert_allclose(got[k].astype(np.float64), want.astype(np.float64), atol=1e-5, rtol=1e-5)


def test_every_unsupported_op_type_is_listed_at_once(tmp_path):
    m = model([helper.make_node("Hardmax", ["x"], ["c"]), helper.make_node("Det", ["c"], ["n"]),
               helper.make_node("Hardmax", ["x"], ["y"])], [vi("x", [1, 1, 4, 4])], [Y])
    with pytest.raises(Unsupported) as err:
        to_openvino(m, tmp_path / "m.xml", route="rnnconv")  # auto would take OpenVINO's import (test_frontend.py)
    assert "Det, Hardmax" in str(err.value)
    assert not (tmp_path / "m.xml").exists()


def test_table_is_usable_in_reverse():
    rev = ov_ops.reverse_index()
    assert rev["Transpose"][0].onnx == "Transpose" and rev["Transpose"][0].reversible
    assert rev["Subtract"][0].onnx == "Sub"
    assert {"Split", "VariadicSplit"} <= set(rev) and "Gemm" in {m.onnx for m in rev["MatMul"]}
    for m in ov_ops.TABLE.values():
        assert m.to_openvino.__doc__ and "OpenVINO" in m.to_openvino.__doc__
    for t, fn in ov_ops.REVERSE.items():
        assert fn.__doc__ and "OpenVINO" in fn.__doc__ and "onnx__" in fn.__doc__, t


@needs_openvino
@pytest.mark.parametrize("dynamic", [True, False])
def test_bidirectional_lstm_split_squeeze_concat(tmp_path, dynamic):
    """A bidirectional LSTM followed by Split -> Squeeze -> Concat (Keras/PyTorch heads). OpenVINO 2026.4 aborts
    the process on it (its own import, and IR holding Split-1 there); rnnconv writes VariadicSplit, which runs."""
    base = recurrent_model("LSTM", direction="bidirectional", dynamic=dynamic)
    base.opset_import[0].version = 18
    g = base.graph
    g.node.extend([
        helper.make_node("Split", ["Y"], ["Yf", "Yb"], axis=1, num_outputs=2),
        helper.make_node("Squeeze", ["Yf", "ax"], ["Sf"]),
        helper.make_node("Squeeze", ["Yb", "ax"], ["Sb"]),
        helper.make_node("Concat", ["Sf", "Sb"], ["out"], axis=-1),
    ])
    g.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "ax"))
    del g.output[:]
    g.output.append(vi("out", ["T", "N", 10] if dynamic else [4, 2, 10]))
    onnx.checker.check_model(base)
    path = tmp_path / "s.onnx"
    onnx.save(base, path)
    xml = tmp_path / "s.xml"
    assert to_openvino(path, xml).report.ok
    x = np.random.default_rng(0).uniform(-1, 1, (4, 2, 3)).astype(np.float32)
    ref = run_onnxruntime(base, {"X": x})["out"]
    np.testing.assert_allclose(run_openvino(xml, {"X": x})["out"], ref, atol=1e-5, rtol=1e-5)
    # OpenVINO's own import: 2026.4 aborts the process ("free(): invalid pointer", measured); on any version it
    # either fails or computes onnxruntime's numbers
    code = ("import openvino as ov, numpy as np, sys; m = ov.convert_model(%r); "
            "c = ov.Core().compile_model(m, 'CPU', {'INFERENCE_PRECISION_HINT': 'f32'}); "
            "np.save(sys.stdout.buffer, np.asarray(c({'X': np.load(%r)})[0]))" % (str(path), str(tmp_path / "x.npy")))
    np.save(tmp_path / "x.npy", x)
    theirs = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    if theirs.returncode == 0:
        import io as _io

        np.testing.assert_allclose(np.load(_io.BytesIO(theirs.stdout)), ref, atol=1e-5, rtol=1e-5)


def test_every_table_entry_is_exercised_here():
    used = {n.op_type for m in [*CASES.values(), *FORWARD.values()] for n in m.graph.node}
    assert set(ov_ops.TABLE) - used == set()


# -- ONNX ops added for from-openvino, both ways (opset 20, IR 9) ------------------------------------------

def model20(nodes, inputs, outputs, inits=()):
    return model(nodes, inputs, outputs, inits, opset=20, ir_version=9)


def one20(op, inits=(), x=None, **attrs):
    x = x or vi("x", [2, 3, 4])
    return model20([helper.make_node(op, ["x"] + [k for k, _ in inits], ["y"], **attrs)], [x], [vi("y", None)],
                   inits)


def chain20(ops, x=None):
    x = x or vi("x", [2, 3, 4])
    names = ["x"] + [f"t{k}" for k in range(len(ops) - 1)] + ["y"]
    return model20([helper.make_node(o, [names[k]], [names[k + 1]]) for k, o in enumerate(ops)], [x],
                   [vi("y", None)])


R = np.random.default_rng(0)
W = R.uniform(-.5, .5, (4, 3, 3, 2)).astype(np.float32)
FORWARD = {  # at opset 20 (IR 9)
    "trigonometry": chain20(["Sin", "Cos", "Tan", "Atan", "Sinh", "Asinh", "Tanh", "Asin", "Acos", "Cosh", "Acosh"]),
    "Atanh-Sign-Softsign": chain20(["Tanh", "Atanh", "Sign", "Softsign"]),
    "Mish-HardSwish-Elu": chain20(["Mish", "HardSwish", "Elu"]),
    "Gelu-tanh": one20("Gelu", approximate="tanh"),
    "Gelu": one20("Gelu"),
    "Round": model20([helper.make_node("Mul", ["x", "k"], ["m"]), helper.make_node("Round", ["m"], ["y"])],
                     [vi("x", [2, 3, 4])], [vi("y", None)], [("k", np.float32(2.5))]),
    "Selu": one20("Selu", alpha=1.5, gamma=1.2),
    "Mod-fmod": one20("Mod", [("d", np.float32(0.3))], fmod=1),
    "Xor": model20([helper.make_node("Greater", ["x", "z"], ["a"]), helper.make_node("Less", ["x", "h"], ["b"]),
                    helper.make_node("Xor", ["a", "b"], ["y"])], [vi("x", [2, 3, 4])], [vi("y", None)],
                   [("z", np.float32(0)), ("h", np.float32(.5))]),
    "Conv": one20("Conv", [("w", W), ("b", np.arange(4, dtype=np.float32))], x=vi("x", [1, 3, 6, 5]),
                  pads=[1, 0, 0, 1], strides=[2, 1]),
    "Conv-group": one20("Conv", [("w", R.uniform(-.5, .5, (4, 2, 3, 3)).astype(np.float32))], x=vi("x", [1, 4, 5, 5]),
                        group=2, auto_pad="SAME_UPPER"),
    "ConvTranspose": one20("ConvTranspose", [("w", R.uniform(-.5, .5, (3, 2, 3)).astype(np.float32)),
                                             ("b", np.ones(2, np.float32))], x=vi("x", [1, 3, 5]), strides=[2],
                           pads=[1, 0], output_padding=[1]),
    "MaxPool": one20("MaxPool", x=vi("x", [1, 2, 7, 6]), kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 0],
                     ceil_mode=1),
    "AveragePool": one20("AveragePool", x=vi("x", [1, 2, 6, 6]), kernel_shape=[2, 3], pads=[1, 1, 0, 1],
                         count_include_pad=1),
    "Pad": one20("Pad", [("p", np.array([0, 1, 2, 0, 0, 1], np.int64))], mode="reflect"),
    "ScatterND": model20([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")],
                         [vi("x", [2, 3, 4])], [vi("y", None)], [("i", np.array([[1, 0], [0, 2]], np.int64)),
                                                                 ("u", np.ones((2, 4), np.float32))]),
    "NonZero-CumSum": model20([helper.make_node("Greater", ["x", "z"], ["g"]),
                               helper.make_node("NonZero", ["g"], ["n"]),
                               helper.make_node("CumSum", ["n", "a"], ["y"], reverse=1)], [vi("x", [2, 3, 4])],
                              [vi("y", None)], [("z", np.float32(0)), ("a", np.array(1, np.int64))]),
    "Einsum": model20([helper.make_node("Einsum", ["x", "w"], ["y"], equation="bij,jk->bik")], [vi("x", [2, 3, 4])],
                      [vi("y", None)], [("w", R.uniform(-1, 1, (4, 5)).astype(np.float32))]),
    "MeanVarianceNormalization": one20("MeanVarianceNormalization", axes=[0, 2], x=vi("x", [2, 3, 4])),
    "LayerNormalization": one20("LayerNormalization", [("s", R.uniform(.5, 1.5, 4).astype(np.float32)),
                                                       ("b", R.uniform(-1, 1, 4).astype(np.float32))], epsilon=1e-3),
    "BatchNormalization": one20("BatchNormalization", [("s", np.array([1, 2, 3], np.float32)),
                                                       ("b", np.array([.1, .2, .3], np.float32)),
                                                       ("m", np.array([0, .5, -.5], np.float32)),
                                                       ("v", np.array([1, 2, .5], np.float32))]),
    "Resize": model20([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")], [vi("x", [1, 2, 3, 4])],
                      [vi("y", None)], [("s", np.array([1, 1, 2, 1.5], np.float32))]),
    "ReverseSequence": model20([helper.make_node("ReverseSequence", ["x", "n"], ["y"], batch_axis=1, time_axis=0)],
                               [vi("x", [4, 3, 2])], [vi("y", None)], [("n", np.array([4, 1, 3], np.int64))]),
    "DFT": model20([helper.make_node("DFT", ["x", "n", "a"], ["y"], onesided=1)], [vi("x", [2, 12, 3, 1])],
                   [vi("y", None)], [("n", np.array(10, np.int64)), ("a", np.array(1, np.int64))]),
    "STFT": model20([helper.make_node("STFT", ["x", "st", "w", "n"], ["y"])], [vi("x", [2, 32, 1])], [vi("y", None)],
                    [("st", np.array(4, np.int64)), ("w", np.hanning(8).astype(np.float32)),
                     ("n", np.array(8, np.int64))]),
}


def _forward_feeds(m, seed):
    rng = np.random.default_rng(seed)
    return {i.name: rng.uniform(-.9, .9, [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in m.graph.input}


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_op_goes_to_openvino_and_comes_back(tmp_path, name):
    m = FORWARD[name]
    onnx.checker.check_model(m, full_check=True)
    feeds = _forward_feeds(m, 0)
    xml = tmp_path / "m.xml"
    assert to_openvino(m, xml, inputs=feeds).report.ok
    back = from_openvino(xml, tmp_path / "back.onnx", inputs=feeds)
    assert back.report.ok
    ref, got = run_onnxruntime(m, feeds), run_onnxruntime(onnx.load(str(tmp_path / "back.onnx")), feeds)
    for k, want in ref.items():
        assert got[k].shape == want.shape
        np.testing.assert_allclose(got[k].astype(np.float64), want.astype(np.float64), atol=1e-5, rtol=1e-5)


# -- IR layers written by OpenVINO, through the table's reverse half --------------------------------------

def _layer_ir(tmp_path, build, x_shape=(2, 3, 4)):
    """IR of y = build(x) (openvino.opset13 node factories), written by ov.save_model."""
    import openvino.opset13 as ops

    x = ops.parameter(list(x_shape), np.float32, name="x")
    y = build(ops, x)
    y.output(0).get_tensor().set_names({"y"})
    xml = tmp_path / "op.xml"
    ov.save_model(ov.Model([ops.result(y)], [x], "m"), str(xml), compress_to_fp16=False)
    return xml


def _i64(ops, v):
    return ops.constant(np.array(v, np.int64))


# name: (IR builder, the ONNX op types the result holds, input shape)
OP_LAYERS = {
    "PRelu-scalar": (lambda ops, x: ops.prelu(x, ops.constant(np.array([0.25], np.float32))), {"LeakyRelu"},
                     (2, 3, 4)),
    "PRelu-per-channel": (lambda ops, x: ops.prelu(x, ops.constant(np.array([.1, .2, .3], np.float32))), {"PRelu"},
                          (2, 3, 4)),
    "PRelu-last-axis": (lambda ops, x: ops.prelu(x, ops.constant(np.array([.1, .2, .3, .4], np.float32))),
                        {"PRelu"}, (2, 3, 4)),
    "PRelu-computed-slope": (lambda ops, x: ops.prelu(x, ops.reduce_mean(ops.abs(x), _i64(ops, [0, 2]), False)),
                             {"PRelu"}, (2, 3, 4)),
    "SoftPlus": (lambda ops, x: ops.softplus(ops.multiply(x, ops.constant(np.float32(30)))), {"Softplus"},
                 (2, 3, 4)),
    "Tile": (lambda ops, x: ops.tile(x, _i64(ops, [1, 2, 3])), {"Tile"}, (2, 3, 4)),
    "Tile-short-repeats": (lambda ops, x: ops.tile(x, _i64(ops, [2, 3])), {"Tile"}, (2, 3, 4)),
    "Tile-long-repeats": (lambda ops, x: ops.tile(x, _i64(ops, [2, 1, 1, 3])), {"Tile"}, (2, 3, 4)),
    "Tile-computed-short-repeats": (lambda ops, x: ops.tile(x, ops.shape_of(ops.reduce_sum(x, _i64(ops, [0]),
                                                                                             False))),
                                    {"Tile"}, (2, 3, 2)),
    "Range-f32": (lambda ops, x: ops.add(x, ops.range(ops.constant(np.float32(.5)), ops.add(ops.convert(
        ops.gather(ops.shape_of(x), _i64(ops, 2), _i64(ops, 0)), "f32"), ops.constant(np.float32(.5))),
        ops.constant(np.float32(1)), "f32")), {"Range"}, (2, 3, -1)),
    "Range-i64-to-f32": (lambda ops, x: ops.multiply(x, ops.range(
        _i64(ops, 0), ops.gather(ops.shape_of(x), _i64(ops, 2), _i64(ops, 0)), _i64(ops, 1), "f32")), {"Range"},
                         (2, 3, -1)),
}


@needs_openvino
@pytest.mark.parametrize("name", sorted(OP_LAYERS))
def test_op_layers_map_back(tmp_path, name):
    """PRelu, SoftPlus, Tile and Range layers come back as ONNX ops that match the OpenVINO runtime (the
    conversion verifies against it) and onnxruntime runs."""
    build, want_ops, x_shape = OP_LAYERS[name]
    xml = _layer_ir(tmp_path, build, x_shape)
    result = from_openvino(xml, tmp_path / "op.onnx", opset=17)
    assert result.report.ok
    assert {c.engines for c in result.report.checks} == {"IR interpreter vs engine",
                                                         "OpenVINO runtime (CPU, f32) vs onnxruntime"}
    model = onnx.load(str(tmp_path / "op.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert want_ops <= {n.op_type for n in model.graph.node}, [n.op_type for n in model.graph.node]
    x = np.random.default_rng(0).uniform(-1, 1, [d if d > 0 else 5 for d in x_shape]).astype(np.float32)
    assert_close(run_openvino(xml, {"x": x}, reshape=True), run_onnxruntime(model, {"x": x}), ["y"])


@needs_openvino
def test_prelu_slope_that_may_be_per_channel_is_refused(tmp_path):
    """A 1-D slope on data whose axis 1 is dynamic: OpenVINO decides per channel or numpy at run time."""
    xml = _layer_ir(tmp_path, lambda ops, x: ops.prelu(x, ops.constant(np.array([.1, .2, .3], np.float32))),
                    (2, -1, 3))
    with pytest.raises(Unsupported, match="per channel"):
        from_openvino(xml, tmp_path / "op.onnx")
    assert not (tmp_path / "op.onnx").exists()
