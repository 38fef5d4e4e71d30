"""Models built with onnx.helper for the OpenVINO route (no torch), and the independent references the tests hold
OpenVINO's runtime against: onnxruntime, else rnnconv's engine in float64 (layout 1, bfloat16, GRU-1...), or the
outputs PyTorch itself computed (fixtures/torch/*.npz)."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"
TOL = 1e-4  # OpenVINO runtime (CPU, f32) against onnxruntime, float32 models
TOLERANCE = {np.dtype(np.float16): 2e-3, np.dtype(ml_dtypes.bfloat16): 2e-2}


def fixture_cases() -> list[str]:
    """Every synthetic fixture and PyTorch export, as paths relative to fixtures/."""
    index = json.loads((FIXTURES / "index.json").read_text())["fixtures"]
    return [f["file"] for f in index] + [f"torch/{p.name}" for p in sorted((FIXTURES / "torch").glob("*.onnx"))]


def fixture_feeds(path: Path) -> dict[str, np.ndarray]:
    """The fixture's sample inputs (bfloat16 stored as its bits), by graph input name."""
    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    data = np.load(path.with_suffix(".npz"))
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        value = data[vi.name]
        if vi.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            value = value.view(ml_dtypes.bfloat16)
        feeds[vi.name] = value
    return feeds


def reference(path_or_model, feeds: dict) -> dict[str, np.ndarray]:
    """onnxruntime's outputs; rnnconv's engine (float64) where onnxruntime refuses the model."""
    import onnxruntime as ort

    from rnnconv import io
    from rnnconv.engine.onnx_graph import run_onnx

    model = path_or_model if isinstance(path_or_model, onnx.ModelProto) else onnx.load(str(path_or_model))
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    except Exception:
        return run_onnx(io.load(model), feeds, "float64")


def openvino_outputs(xml: Path, feeds: dict) -> dict[str, np.ndarray]:
    """The IR in OpenVINO's runtime (CPU, f32 precision), by output name."""
    from rnnconv.engine import openvino_runtime

    return {n: o.value for o in openvino_runtime.run(xml, feeds, reshape=True) for n in o.names}


def assert_close(ref: dict, got: dict, names, tol: float = TOL) -> float:
    """Every output within `tol` (wider for float16 and bfloat16 outputs); the largest difference."""
    worst = 0.0
    for n in names:
        want = np.asarray(ref[n])
        tol_n = max(tol, TOLERANCE.get(want.dtype, 0.0), TOLERANCE.get(np.asarray(got[n]).dtype, 0.0))
        assert got[n].shape == want.shape, (n, got[n].shape, want.shape)
        a, b = np.asarray(got[n], np.float64), want.astype(np.float64)
        np.testing.assert_allclose(a, b, atol=tol_n, rtol=tol_n, err_msg=n)
        worst = max(worst, float(np.max(np.abs(a - b), initial=0.0)))
    return worst


def _init(rng, name, shape, scale=0.5):
    return numpy_helper.from_array(rng.uniform(-scale, scale, size=shape).astype(np.float32), name)


def lstm_node(rng, name: str, x: str, I: int, H: int, *, prefix: str = "", bidirectional: bool = False,
              peepholes: bool = False, input_forget: bool = False, outputs=("Y", "Y_h", "Y_c")):
    """An LSTM node reading `x` [T, N, I] and its initializers (named `prefix` + W/R/B/P)."""
    D = 2 if bidirectional else 1
    inits = [_init(rng, prefix + "W", [D, 4 * H, I]), _init(rng, prefix + "R", [D, 4 * H, H]),
             _init(rng, prefix + "B", [D, 8 * H])]
    inputs = [x, prefix + "W", prefix + "R", prefix + "B"]
    if peepholes:
        inits.append(_init(rng, prefix + "P", [D, 3 * H]))
        inputs += ["", "", "", prefix + "P"]
    attrs = {"hidden_size": H}
    if bidirectional:
        attrs["direction"] = "bidirectional"
    if input_forget:
        attrs["input_forget"] = 1
    return helper.make_node("LSTM", inputs, list(outputs), name=name, **attrs), inits


def conv_lstm(conv: str = "1d", *, peepholes: bool = True, input_forget: bool = True, bidirectional: bool = True,
              H: int = 6, seed: int = 0) -> onnx.ModelProto:
    """A convolutional front end and an LSTM, as speech and OCR models are: audio [N, 3, L] through Conv1d
    (kernel 3, 4 channels), or an image [N, 1, 4, L] through Conv2d (kernel 3x3, padding 1, 2 channels, the
    height folded into features); InstanceNormalization (outside rnnconv's own table); Relu; [L, N, F]; the LSTM; Y back to [L, N, D*H]; a MatMul head."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    if conv == "1d":
        x = helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["N", 3, "L"])
        inits.append(_init(rng, "conv_w", [4, 3, 3]))
        nodes.append(helper.make_node("Conv", ["audio", "conv_w"], ["conv"], pads=[1, 1], name="conv"))
        F = 4
        nodes += _norm(rng, inits, 4)
        nodes.append(helper.make_node("Relu", ["norm"], ["act"]))
        feats = "act"
    else:
        x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 4, "L"])
        inits.append(_init(rng, "conv_w", [2, 1, 3, 3]))
        nodes.append(helper.make_node("Conv", ["image", "conv_w"], ["conv"], pads=[1, 1, 1, 1], name="conv"))
        nodes += _norm(rng, inits, 2)
        nodes.append(helper.make_node("Relu", ["norm"], ["act"]))
        F = 8
        inits.append(numpy_helper.from_array(np.array([0, F, -1], np.int64), "fold"))
        nodes.append(helper.make_node("Reshape", ["act", "fold"], ["feats"]))
        feats = "feats"
    nodes.append(helper.make_node("Transpose", [feats], ["seq"], perm=[2, 0, 1]))
    node, lstm_inits = lstm_node(rng, "lstm", "seq", F, H, bidirectional=bidirectional, peepholes=peepholes,
                                 input_forget=input_forget)
    nodes.append(node)
    inits += lstm_inits
    D = 2 if bidirectional else 1
    nodes.append(helper.make_node("Transpose", ["Y"], ["y_t"], perm=[0, 2, 1, 3]))
    inits.append(numpy_helper.from_array(np.array([0, 0, D * H], np.int64), "flat"))
    nodes.append(helper.make_node("Reshape", ["y_t", "flat"], ["y_flat"]))
    inits.append(_init(rng, "head", [D * H, 5]))
    nodes.append(helper.make_node("MatMul", ["y_flat", "head"], ["logits"]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["L", "N", 5]),
               helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [D, "N", H])]
    graph = helper.make_graph(nodes, f"conv{conv}_lstm", [x], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _norm(rng, inits: list, channels: int) -> list:
    """InstanceNormalization after the Conv: an op outside rnnconv's own OpenVINO table (OpenVINO imports it)."""
    inits += [_init(rng, "norm_scale", [channels]), _init(rng, "norm_bias", [channels])]
    return [helper.make_node("InstanceNormalization", ["conv", "norm_scale", "norm_bias"], ["norm"], name="norm")]


def if_lstm(H: int = 5, I: int = 4, seed: int = 0) -> onnx.ModelProto:
    """An If choosing between an LSTM with peepholes and input_forget (then) and a plain bidirectional LSTM
    (else), both on the outer X; the else branch reads an outer initializer."""
    rng = np.random.default_rng(seed)
    then_node, then_inits = lstm_node(rng, "lstm_then", "X", I, H, prefix="then_", peepholes=True,
                                      input_forget=True, outputs=["then_Y", "then_Y_h", ""])
    then_out = helper.make_node("Squeeze", ["then_Y", "axis1"], ["then_y"])
    else_node, else_inits = lstm_node(rng, "lstm_else", "X", I, H, prefix="else_", bidirectional=True,
                                      outputs=["else_Y", "else_Y_h", ""])
    else_out = helper.make_node("ReduceSum", ["else_Y", "axis1"], ["else_y"], keepdims=0)
    axis = numpy_helper.from_array(np.array([1], np.int64), "axis1")
    out = helper.make_tensor_value_info
    then_graph = helper.make_graph([then_node, then_out], "then", [], [out("then_y", TensorProto.FLOAT, None)],
                                   then_inits)
    else_graph = helper.make_graph([else_node, else_out], "else", [], [out("else_y", TensorProto.FLOAT, None)],
                                   [i for i in else_inits if i.name != "else_W"])
    outer_w = next(i for i in else_inits if i.name == "else_W")
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph, name="if")
    graph = helper.make_graph([node], "if_lstm", [out("X", TensorProto.FLOAT, [5, 3, I]),
                                                  out("cond", TensorProto.BOOL, [])],
                              [out("y", TensorProto.FLOAT, [5, 3, H])], [axis, outer_w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def dynamic_quantize_lstm(H: int = 4, I: int = 3) -> onnx.ModelProto:
    """com.microsoft DynamicQuantizeLSTM as onnxruntime's quantize_dynamic writes it: int8 W [D, I, 4H] and R
    [D, H, 4H] with per-direction scales and zero points."""
    rng = np.random.default_rng(0)
    q = lambda name, shape: numpy_helper.from_array(rng.integers(-100, 100, shape).astype(np.int8), name)  # noqa
    inits = [q("W_q", [1, I, 4 * H]), q("R_q", [1, H, 4 * H]), _init(rng, "B", [1, 8 * H]),
             numpy_helper.from_array(np.array([0.01], np.float32), "W_scale"),
             numpy_helper.from_array(np.array([0], np.int8), "W_zp"),
             numpy_helper.from_array(np.array([0.02], np.float32), "R_scale"),
             numpy_helper.from_array(np.array([0], np.int8), "R_zp")]
    node = helper.make_node("DynamicQuantizeLSTM", ["X", "W_q", "R_q", "B", "", "", "", "", "W_scale", "W_zp",
                                                    "R_scale", "R_zp"], ["Y"], domain="com.microsoft",
                            hidden_size=H, name="lstm_quant")
    graph = helper.make_graph([node], "dq", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, 2, I])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [5, 1, 2, H])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid(
        "com.microsoft", 1)], ir_version=8)
