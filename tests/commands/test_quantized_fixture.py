"""The shipped DynamicQuantizeLSTM model (fixtures/quantized/, made by fixtures/make_quantized_fixtures.py) is what
docs/commands.md and `rnnconv dequantize --help` say: onnxruntime's own quantizer output, int8 weights of 7 bits,
so that no CPU saturates them and the dequantize example prints the same everywhere."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rnnconv import io
from rnnconv.cli import main
from rnnconv.commands.dequantize import _full_range
from rnnconv.dialects import onnx_quantized
from tests.conftest import FIXTURES

MODEL = FIXTURES / "quantized" / "lstm_int8.onnx"


def test_the_fixture_holds_one_7_bit_dynamic_quantize_lstm():
    [q] = onnx_quantized.find(io.load(MODEL))
    assert (q.op, q.weight_type, q.per_channel) == ("DynamicQuantizeLSTM", "int8", False)
    assert (q.layer.input_size, q.layer.hidden_size, q.layer.direction) == (4, 6, "forward")
    assert not _full_range(q)  # reduce_range=True: no saturation note, whatever the CPU
    W, zero = (np.asarray(onnx_quantized.constant_array(q.inputs[k]), np.int32) for k in ("W", "W_zero_point"))
    assert np.abs(W - zero.reshape(-1)[0]).max() > 32  # the 7 bits are used


def test_inspect_lists_it(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["inspect", str(MODEL), "--json"])
    assert exc.value.code == 0
    [row] = json.loads(capsys.readouterr().out)["nodes"]
    assert (row["op"], row["domain"], row["weights"]) == ("DynamicQuantizeLSTM", "com.microsoft", "int8")
    assert row["runs_in"] == {"onnxruntime": True, "openvino": False}


def test_to_openvino_converts_it_as_onnxruntime_computes_it(tmp_path, capsys):
    ov = pytest.importorskip("openvino")
    import onnxruntime as ort

    with pytest.raises(SystemExit) as exc:
        main(["to-openvino", str(MODEL), "-o", str(tmp_path / "q.xml")])
    out = capsys.readouterr()
    assert exc.value.code == 0, out.out + out.err
    assert "run-time quantization" in out.out
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # onnxruntime quantizes H per thread's rows of a batch of 3: the IR as one
    session = ort.InferenceSession(str(MODEL), options, providers=["CPUExecutionProvider"])
    compiled = ov.Core().compile_model(str(tmp_path / "q.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    name, shape = session.get_inputs()[0].name, session.get_inputs()[0].shape  # static: [5, 3, 4]
    for seed in range(10):
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        want, got = session.run(None, {name: x}), compiled({name: x})
        for k, w in enumerate(want):  # measured: within 3e-7 (float32 rounding of the activations)
            np.testing.assert_allclose(got[k], w, rtol=0, atol=1e-5)


