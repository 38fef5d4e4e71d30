"""A model made by `onnx.compose.merge_models` lists each part's imports, so ai.onnx twice at one version: onnx's
checker, onnxruntime and OpenVINO accept it, and so does every command of rnnconv; what it writes lists the domain
once. Two versions of one domain stay bad input (tests/hostile/test_input_contract.py). onnxruntime on the merged
source is the oracle of every written ONNX model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.compose
import pytest

from tests.conftest import dynamic_quantize_lstm, feeds, recurrent_model, run_cli, run_onnxruntime
from tests.passes.test_fuse_scan import scan_model

OPSET = 18


def _at(model: onnx.ModelProto, opset: int = OPSET) -> onnx.ModelProto:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = opset
    model.ir_version = 8
    return model


def merged(second: onnx.ModelProto) -> onnx.ModelProto:
    first = _at(recurrent_model("LSTM", opset=14, T=5, N=2, I=3, H=4))
    m = onnx.compose.merge_models(first, _at(second), io_map=[], prefix1="a_")  # a body reads names unprefixed
    assert [o.domain for o in m.opset_import].count("") == 2  # what the merge writes: the case
    onnx.checker.check_model(m, full_check=True)
    return m


PARTS = {"fuse": lambda: scan_model("LSTM", loop=True), "dequantize": dynamic_quantize_lstm}
COMMANDS = {
    "upgrade": ["upgrade", "{m}", "-o", "{o}.onnx"],
    "downgrade": ["downgrade", "{m}", "-o", "{o}.onnx", "--opset", "14"],
    "layout": ["layout", "{m}", "-o", "{o}.onnx", "--to", "1"],
    "dequantize": ["dequantize", "{m}", "-o", "{o}.onnx"],
    "fuse": ["fuse", "{m}", "-o", "{o}.onnx"],
    "to-openvino": ["to-openvino", "{m}", "-o", "{o}.xml"],
    "verify": ["verify", "{m}", "{m}"],
    "inspect": ["inspect", "{m}"],
    "check": ["check", "{m}", "--target", "onnxruntime"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_merged_model_goes_through_every_command(command, tmp_path):
    model = merged(PARTS.get(command, lambda: recurrent_model("GRU", opset=14, T=5, N=2, I=3, H=4))())
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    out = tmp_path / "o"
    code, said, err = run_cli([a.format(m=path, o=out) for a in COMMANDS[command]])
    assert code == 0, err + said
    assert "twice" not in err + said
    if command == "inspect":
        assert "opsets: ai.onnx 18\n" in said or "opsets: ai.onnx 18," in said, said
    written = Path(f"{out}.onnx")
    if not written.exists():
        return
    converted = onnx.load(str(written))
    assert [o.domain for o in converted.opset_import if o.domain in ("", "ai.onnx")] == [""], converted.opset_import
    onnx.checker.check_model(converted, full_check=True)
    if command in ("layout", "dequantize"):
        return  # layout 1 is refused by onnxruntime; a dequantized layer is an approximation (its own tests)
    inputs = feeds(model)
    want, got = run_onnxruntime(model, inputs), run_onnxruntime(converted, inputs)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)


def test_the_merged_model_runs_in_openvino_after_to_openvino_and_comes_back(tmp_path):
    pytest.importorskip("openvino")
    from tests.conftest import openvino_outputs

    model = merged(recurrent_model("GRU", opset=14, T=5, N=2, I=3, H=4))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    code, _, err = run_cli(["to-openvino", path, "-o", tmp_path / "m.xml"])
    assert code == 0, err
    inputs = feeds(model)
    want, got = run_onnxruntime(model, inputs), openvino_outputs(tmp_path / "m.xml", inputs)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)
    code, _, err = run_cli(["from-openvino", tmp_path / "m.xml", "-o", tmp_path / "back.onnx"])  # and back
    assert code == 0, err
    back = onnx.load(str(tmp_path / "back.onnx"))
    assert [o.domain for o in back.opset_import if o.domain in ("", "ai.onnx")] == [""]
    got = run_onnxruntime(back, inputs)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)
