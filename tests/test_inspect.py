"""`rnnconv inspect` on every fixture, and one-line exit-4 errors for files that are not valid models."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from rnnconv.cli import main

# GRU/LSTM/RNN models (quantized/ holds DynamicQuantizeLSTM: tests/commands/test_quantized_fixture.py)
FIXTURES = sorted(p for p in (Path(__file__).parent.parent / "fixtures").rglob("*.onnx")
                  if p.parent.name != "quantized")


def run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.mark.parametrize("path", FIXTURES, ids=[str(p.relative_to(p.parents[1])) for p in FIXTURES])
def test_inspect_every_fixture(path, capsys):
    code, out, err = run(["inspect", str(path), "--json"], capsys)
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
    code, out, _ = run(["inspect", str(path)], capsys)
    assert code == 0 and "IR version" in out


def _lstm_model(W_shape=(1, 8, 3), hidden_size=2):
    W = helper.make_tensor("W", TensorProto.FLOAT, W_shape, [0.1] * int(__import__("numpy").prod(W_shape)))
    R = helper.make_tensor("R", TensorProto.FLOAT, (1, 8, 2), [0.1] * 16)
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=hidden_size, name="bad_lstm")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 1, 3])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["t", "d", "n", "h"])], [W, R])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _bad_files(tmp_path):
    good = tmp_path / "good.onnx"
    onnx.save(_lstm_model(), good)
    data = good.read_bytes()
    (tmp_path / "garbage.onnx").write_bytes(b"\x00\xffnot a model at all" * 10)
    (tmp_path / "truncated.onnx").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.onnx").write_bytes(b"")
    schema = helper.make_model(helper.make_graph(
        [helper.make_node("LSTM", ["X"], ["Y"], hidden_size=2, name="no_weights")], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 1, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["t", "d", "n", "h"])]), opset_imports=[helper.make_opsetid("", 14)])
    onnx.save(schema, tmp_path / "schema.onnx")
    onnx.save(_lstm_model(W_shape=(1, 12, 3)), tmp_path / "wrong_w.onnx")
    onnx.save(_lstm_model(hidden_size=3), tmp_path / "wrong_hidden.onnx")
    return {
        "garbage.onnx": "not an ONNX model",
        "truncated.onnx": "",
        "empty.onnx": "",
        "schema.onnx": "invalid model",
        "wrong_w.onnx": "bad_lstm",
        "wrong_hidden.onnx": "bad_lstm",
        "missing.onnx": "no such file",
    }


def test_bad_input_is_one_line_exit_4(tmp_path, capsys):
    for name, needle in _bad_files(tmp_path).items():
        code, out, err = run(["inspect", str(tmp_path / name)], capsys)
        assert code == 4, (name, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, (name, err)
        assert name in lines[0], (name, lines[0])
        assert needle in lines[0], (name, lines[0])


def test_version_and_help_list_exit_codes(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and "rnnconv" in out
    code, out, _ = run(["--help"], capsys)
    assert code == 0 and "3 unsupported construct" in out and "5 I/O error" in out


def test_python_api_inspect():
    import rnnconv

    info = rnnconv.inspect(_lstm_model())
    assert info["opset_import"] == {"": 14}
    assert info["nodes"][0]["hidden_size"] == 2 and info["nodes"][0]["input_size"] == 3
