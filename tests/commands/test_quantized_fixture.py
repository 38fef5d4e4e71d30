"""The shipped DynamicQuantizeLSTM model (fixtures/quantized/, made by fixtures/make_quantized_fixtures.py) is what
the README and `rnnconv dequantize --help` say: onnxruntime's own quantizer output, int8 weights of 7 bits, so that
no CPU saturates them and the dequantize example prints the same everywhere."""

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


def test_to_openvino_refuses_it_naming_the_command_that_would_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["to-openvino", str(MODEL), "-o", str(tmp_path / "q.xml")])
    err = capsys.readouterr().err
    assert exc.value.code == 3, err
    assert "DynamicQuantizeLSTM node(s) 'lstm_quant'" in err and err.rstrip().endswith("(try rnnconv dequantize)")
    assert list(tmp_path.iterdir()) == []
