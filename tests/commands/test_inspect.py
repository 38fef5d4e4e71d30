"""`rnnconv inspect` on every fixture, and one-line exit-4 errors for files that are not valid models."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import helper

import rnnconv
from tests.conftest import FIXTURES, recurrent_model, run_cli

# GRU/LSTM/RNN models (quantized/ holds DynamicQuantizeLSTM: tests/commands/test_quantized_fixture.py)
FIXTURE_MODELS = sorted(p for p in FIXTURES.rglob("*.onnx") if p.parent.name != "quantized")


@pytest.mark.parametrize("path", FIXTURE_MODELS, ids=[str(p.relative_to(p.parents[1])) for p in FIXTURE_MODELS])
def test_inspect_every_fixture(path):
    code, out, err = run_cli(["inspect", path, "--json"])
    assert code == 0, err
    info = json.loads(out)
    model = onnx.load(str(path))
    assert info["ir_version"] == model.ir_version
    recurrent = [n for n in model.graph.node if n.op_type in ("GRU", "LSTM", "RNN")]
    assert len(info["nodes"]) == len(recurrent)
    for row, node in zip(info["nodes"], recurrent):
        assert row["op"] == node.op_type
        assert {"name", "op", "version", "direction", "input_size", "hidden_size", "layout"} <= set(row)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert row["layout"] == attrs.get("layout", 0)
        assert row["direction"] == attrs.get("direction", b"forward").decode()
        assert row["runs_in"]["onnxruntime"] == (row["version"] >= 7 and row["layout"] == 0
                                                 and row["dtype"] not in ("float64", "bfloat16"))
    code, out, _ = run_cli(["inspect", path])
    assert code == 0 and "IR version" in out


def _lstm_model(**kw):
    """A forward LSTM (I=3, H=2, no B, Y only) named bad_lstm, to be broken by `kw`."""
    return recurrent_model("LSTM", T=4, N=1, I=3, H=2, bias=False, outputs=("Y",), name="bad_lstm", **kw)


def _bad_files(tmp_path):
    good = tmp_path / "good.onnx"
    onnx.save(_lstm_model(), good)
    data = good.read_bytes()
    (tmp_path / "garbage.onnx").write_bytes(b"\x00\xffnot a model at all" * 10)
    (tmp_path / "truncated.onnx").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.onnx").write_bytes(b"")
    schema = _lstm_model()
    del schema.graph.node[0].input[1:], schema.graph.initializer[:]
    onnx.save(schema, tmp_path / "schema.onnx")
    onnx.save(_lstm_model(weights={"W": np.full((1, 12, 3), 0.1, np.float32)}), tmp_path / "wrong_w.onnx")
    onnx.save(_lstm_model(attrs={"hidden_size": 3}), tmp_path / "wrong_hidden.onnx")
    return {
        "garbage.onnx": "not an ONNX model",
        "truncated.onnx": "",
        "empty.onnx": "",
        "schema.onnx": "invalid model",
        "wrong_w.onnx": "bad_lstm",
        "wrong_hidden.onnx": "bad_lstm",
        "missing.onnx": "no such file",
    }


def test_bad_input_is_one_line_exit_4(tmp_path):
    for name, needle in _bad_files(tmp_path).items():
        code, out, err = run_cli(["inspect", tmp_path / name])
        assert code == 4, (name, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, (name, err)
        assert name in lines[0], (name, lines[0])
        assert needle in lines[0], (name, lines[0])


def test_python_api_inspect():
    info = rnnconv.inspect(_lstm_model())
    assert info["opset_import"] == {"": 14}
    assert info["nodes"][0]["hidden_size"] == 2 and info["nodes"][0]["input_size"] == 3
