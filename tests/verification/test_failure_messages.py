"""What a user reads when verification cannot even run: the same words however openvino is missing, and what to
try when a node does not run on the inputs drawn for it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rnnconv.cli import main
from rnnconv.engine.openvino_runtime import NOT_INSTALLED
from tests.conftest import FIXTURES

# openvino absent (blocked, as `import openvino` fails where it is not installed), then each side of `verify`.
WITHOUT_OPENVINO = f"""
import sys
sys.modules["openvino"] = None
import numpy as np
from rnnconv.verification import engines
from rnnconv.verification.model import open_model
model = open_model({str(FIXTURES / "lstm.onnx")!r})
try:
    engines.run_once("openvino", model, {{"X": np.zeros((5, 3, 4), np.float32)}})
except engines.CannotRun as err:
    print(err)
"""


def test_a_missing_openvino_is_named_with_its_install_command():
    proc = subprocess.run([sys.executable, "-c", WITHOUT_OPENVINO], capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == NOT_INSTALLED == "openvino not installed: pip install 'rnnconv[openvino]'", \
        proc.stderr


def test_a_node_that_does_not_run_on_drawn_inputs_says_what_to_try(tmp_path, capsys):
    """h0's batch axis set apart from X's: the GRU node refuses the states, exit 4, the flags that change inputs."""
    out = tmp_path / "gru.onnx"
    with pytest.raises(SystemExit) as exc:
        main(["upgrade", str(FIXTURES / "torch" / "gru_initial_state_legacy9.onnx"), "-o", str(out),
              "--dim", "h0:1=5"])
    err = capsys.readouterr().err
    assert exc.value.code == 4, err
    assert err.startswith("rnnconv: error: node /rnn/GRU: it does not run alone on the inputs drawn for it")
    assert "h0 float32[1,5,8]" in err and err.rstrip().endswith("(try --dim, or --range)")
    assert len(err.splitlines()) == 1 and not out.exists()
