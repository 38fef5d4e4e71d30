"""to-openvino of com.microsoft DynamicQuantizeLSTM (issue 22): models quantize_dynamic wrote, converted by the
command and run in OpenVINO's runtime (CPU, f32), against onnxruntime on the source (one intra-op thread: with
more, onnxruntime quantizes H per thread's rows of a batch, the IR over the whole batch).

Measured on x86-64 with AVX512-VNNI: the LSTMs' outputs equal to the bit on every model and input here, the
OCR-shaped model's logits within 2.4e-7 (its float MatMul head, summed in another order). On x86 CPUs without VNNI
onnxruntime saturates int16 pair sums of full-range int8 weights, which the IR does not reproduce: there the
test holds the issue's bound, 2e-2, instead.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnxruntime.quantization import QuantType

from rnnconv.commands.to_openvino import to_openvino
from rnnconv.dialects.mlas import mlas_saturates
from tests.engine.test_dynamic_quantize_lstm_steps import ocr_like
from tests.quantized_models import float_lstm, quantize

ov = pytest.importorskip("openvino")
F32 = np.float32
# float32 rounding of the float ops around the LSTMs; one quantization step taken otherwise moves outputs by 1e-3+
ATOL = 2e-2 if mlas_saturates() else 1e-5
# The command's own OpenVINO runtime check left out: each test compiles the IR and holds it against onnxruntime
# on more inputs than that check draws (one compile of these IRs less, seconds each); the command's IR interpreter
# checks still run, and tests/commands/test_to_openvino.py holds the runtime check itself.
RUNTIME = False

MODELS = {  # name: (float model, quantize_dynamic options, input -> shape at T)
    "forward": (lambda: float_lstm("forward", I=4, H=8), {}, lambda T: {"X": (T, 2, 4)}),
    "reverse_per_channel": (lambda: float_lstm("reverse", I=16, H=8), {"per_channel": True},
                            lambda T: {"X": (T, 3, 16)}),
    "uint8_weights": (lambda: float_lstm("forward", I=6, H=5), {"weight_type": QuantType.QUInt8},
                      lambda T: {"X": (T, 2, 6)}),
    "bidirectional_ocr_sizes": (lambda: float_lstm("bidirectional", I=512, H=256), {}, lambda T: {"X": (T, 5, 512)}),
    "ocr_shaped_conv_front": (ocr_like, {}, lambda T: {"image": (1, 3, 32, 8 * T)}),
}


def onnxruntime_session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", MODELS)
def test_openvino_runs_the_ir_as_onnxruntime_runs_the_source(name, tmp_path):
    make, options, shapes = MODELS[name]
    path = quantize(make(), tmp_path, name, op_types_to_quantize=["LSTM"], **options)
    result = to_openvino(path, tmp_path / "q.xml", runtime=RUNTIME)
    assert result.report.ok and any("run-time quantization" in r["what"] for r in result.report.rewrites)
    session = onnxruntime_session(path)
    compiled = ov.Core().compile_model(str(tmp_path / "q.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    names = [o.name for o in session.get_outputs()]
    for T in (1, 8, 20, 50):
        rng = np.random.default_rng(T)
        feeds = {k: rng.standard_normal(shape).astype(F32) for k, shape in shapes(T).items()}
        want = dict(zip(names, session.run(None, feeds)))
        got = compiled(feeds)
        for port in compiled.outputs:
            [key] = [n for n in port.get_names() if n in want]
            np.testing.assert_allclose(got[port], want[key], rtol=0, atol=ATOL, err_msg=f"{key} at T={T}")


@pytest.mark.parametrize("name", ["forward", "reverse_per_channel", "ocr_shaped_conv_front"])
def test_openvinos_own_ir_converts_back_and_runs_as_openvino_runs_it(name, tmp_path):
    from rnnconv.commands.from_openvino import from_openvino

    make, options, shapes = MODELS[name]
    path = quantize(make(), tmp_path, name, op_types_to_quantize=["LSTM"], **options)
    xml = tmp_path / "ov.xml"
    ov.save_model(ov.convert_model(str(path)), str(xml), compress_to_fp16=False)
    assert from_openvino(xml, tmp_path / "back.onnx").report.ok
    session = onnxruntime_session(tmp_path / "back.onnx")
    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    names = [o.name for o in session.get_outputs()]
    for T in (1, 20):
        rng = np.random.default_rng(T)
        feeds = {k: rng.standard_normal(shape).astype(F32) for k, shape in shapes(T).items()}
        want = dict(zip(names, session.run(None, feeds)))
        got = compiled(feeds)
        for port in compiled.outputs:
            [key] = [n for n in port.get_names() if n in want]
            # OpenVINO's import computes a float LSTM of the dequantized weights: float32 arithmetic both sides
            np.testing.assert_allclose(got[port], want[key], rtol=1e-5, atol=1e-5, err_msg=f"{key} at T={T}")


def with_lengths(model: onnx.ModelProto, outputs) -> onnx.ModelProto:
    """The quantized model with a sequence_lens graph input `lens`, its node computing only `outputs`."""
    (node,) = [n for n in model.graph.node if n.op_type == "DynamicQuantizeLSTM"]
    node.input[4] = "lens"
    model.graph.input.append(helper.make_tensor_value_info("lens", TensorProto.INT32, ["N"]))
    for k, name in enumerate(("Y", "Y_h", "Y_c")):
        if name not in outputs:
            node.output[k] = ""
    while node.output and node.output[-1] == "":
        node.output.pop()
    kept = [o for o in model.graph.output if o.name in outputs]
    del model.graph.output[:]
    model.graph.output.extend(kept)
    return model


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("outputs", [("Y", "Y_h", "Y_c"), ("Y_h", "Y_c")])
def test_sequence_lens_as_onnxruntime(direction, outputs, tmp_path):
    path = quantize(float_lstm(direction, I=32, H=16, seed=4), tmp_path, "lens", op_types_to_quantize=["LSTM"])
    onnx.save(with_lengths(onnx.load(str(path)), outputs), str(path))
    assert to_openvino(path, tmp_path / "q.xml", runtime=RUNTIME).report.ok
    session = onnxruntime_session(path)
    compiled = ov.Core().compile_model(str(tmp_path / "q.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    names = [o.name for o in session.get_outputs()]
    # Lengths 0 with Y not requested leave rows of onnxruntime's H buffer uninitialised (the engine's kernel says
    # so too): with Y, and without it where every length is at least 1.
    cases = [[7, 3, 1, 5], [7, 7, 7, 7], [4, 6, 2, 3]] + ([[4, 0, 2, 3]] if "Y" in outputs else [])
    for k, lens in enumerate(cases):
        feeds = {"X": np.random.default_rng(k).standard_normal((7, 4, 32)).astype(F32),
                 "lens": np.array(lens, np.int32)}
        want = dict(zip(names, session.run(None, feeds)))
        got = compiled(feeds)
        for port in compiled.outputs:
            [key] = [n for n in port.get_names() if n in want]
            np.testing.assert_allclose(got[port], want[key], rtol=0, atol=ATOL, err_msg=f"{key} lens {lens}")


def test_fp16_keeps_the_8_bit_weights_and_says_so(tmp_path):
    """--fp16 compresses float weights; a DynamicQuantizeLSTM's are 8-bit integers, kept as they are (and its
    numbers still onnxruntime's), which the rewrite says instead of the flag doing nothing silently."""
    make, options, shapes = MODELS["forward"]
    path = quantize(make(), tmp_path, "fp16", op_types_to_quantize=["LSTM"], **options)
    result = to_openvino(path, tmp_path / "q.xml", fp16=True, runtime=RUNTIME)
    [what] = [r["what"] for r in result.report.rewrites if "run-time quantization" in r["what"]]
    assert "weights kept 8-bit (fp16 compresses float weights only)" in what
    feeds = {k: np.random.default_rng(5).standard_normal(s).astype(F32) for k, s in shapes(8).items()}
    session = onnxruntime_session(path)
    want = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    compiled = ov.Core().compile_model(str(tmp_path / "q.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled(feeds)
    for port in compiled.outputs:
        [key] = [n for n in port.get_names() if n in want]
        np.testing.assert_allclose(got[port], want[key], rtol=0, atol=ATOL, err_msg=key)
