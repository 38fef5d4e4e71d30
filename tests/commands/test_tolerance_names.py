"""A tolerance given for an output the model does not have is a usage error (exit 2) naming the outputs, in every
command that takes --atol / --rtol, before anything is converted or written."""

from __future__ import annotations

import pytest

from rnnconv.errors import EXIT_USAGE
from tests.conftest import REPO, run_cli

FIXTURES = REPO / "fixtures"
COMMANDS = {
    "upgrade": ["upgrade", FIXTURES / "gru1_forward.onnx"],
    "downgrade": ["downgrade", FIXTURES / "gru22_forward.onnx", "--opset", "14"],
    "layout": ["layout", FIXTURES / "gru14_layout1.onnx", "--to", "0"],
    "to-openvino": ["to-openvino", FIXTURES / "gru14_forward.onnx"],
    "from-openvino": ["from-openvino", FIXTURES / "openvino" / "gru_bidirectional_dynamo.xml"],
    "dequantize": ["dequantize", FIXTURES / "quantized" / "lstm_int8.onnx"],
    "fuse": ["fuse", FIXTURES / "fuse" / "lstm_cell_dynamo.onnx"],
}


@pytest.mark.parametrize("option", ["--atol", "--rtol"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_unknown_output_name_in_a_tolerance_is_refused(command, option, tmp_path):
    suffix = ".xml" if command == "to-openvino" else ".onnx"
    out = tmp_path / f"out{suffix}"
    code, stdout, stderr = run_cli([*COMMANDS[command], "-o", out, option, "nosuch=1e-3"])
    assert code == EXIT_USAGE, stdout + stderr
    assert "tolerance given for no output named nosuch (outputs: " in stderr, stderr
    assert not out.exists()
