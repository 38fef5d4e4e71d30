"""The `rnnconv` command line as a whole (rnnconv/cli/__init__.py, rnnconv/errors.py): the documented exit codes,
one line on stderr for every failure (a bug included), the traceback only with --debug."""

from __future__ import annotations

import numpy as np

import rnnconv.commands.inspect
from rnnconv import errors
from rnnconv.cli import EXIT_INTERNAL
from rnnconv.errors import BadInput, IOFailure, RnnconvError, Unsupported, UsageError, VerificationFailed
from tests.conftest import recurrent_model, run_cli


def test_version_and_help_list_exit_codes():
    code, out, _ = run_cli(["--version"])
    assert code == 0 and "rnnconv" in out
    code, out, _ = run_cli(["--help"])
    assert code == 0 and "3 unsupported construct" in out and "5 I/O error" in out


def test_exit_codes_are_the_documented_ones():
    assert (VerificationFailed.exit_code, UsageError.exit_code, Unsupported.exit_code, BadInput.exit_code,
            IOFailure.exit_code) == (1, 2, 3, 4, 5)
    assert issubclass(IOFailure, RnnconvError) and EXIT_INTERNAL == 70
    assert "4 bad input" in errors.exit_codes_help() and "70 internal error" in errors.exit_codes_help()


def test_internal_errors_are_one_line_and_debug_shows_the_traceback(monkeypatch, tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(recurrent_model().SerializeToString())

    def boom(*_a, **_k):
        raise KeyError("a bug\nwith two lines")

    monkeypatch.setattr(rnnconv.commands.inspect, "inspect", boom)
    code, _, stderr = run_cli(["inspect", str(model)])
    assert code == 70 and len(stderr.strip().splitlines()) == 1
    assert stderr.startswith("rnnconv: internal error: KeyError") and "--debug" in stderr
    code, _, stderr = run_cli(["--debug", "inspect", str(model)])
    assert code == 70 and "Traceback (most recent call last)" in stderr and "KeyError" in stderr
    # after the command too, where a user adds it to the failing line
    code, _, stderr = run_cli(["inspect", str(model), "--debug"])
    assert code == 70 and "Traceback (most recent call last)" in stderr and "KeyError" in stderr


def test_debug_after_the_command_is_the_same_option(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(recurrent_model().SerializeToString())
    out = tmp_path / "out" / "m.onnx"
    code, _, stderr = run_cli(["upgrade", str(model), "-o", str(out), "--verify", "node", "--debug"])
    assert code == 0 and out.exists(), stderr
    code, _, stderr = run_cli(["upgrade", str(model), "-o", str(out), "--debug"])  # exists: exit 2, traceback
    assert code == 2 and "No such option" not in stderr and "Traceback" in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith("rnnconv: error: ")


def test_out_of_memory_is_exit_5_not_a_bug(monkeypatch, tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(recurrent_model().SerializeToString())

    def hungry(*_a, **_k):
        return np.empty(1 << 40, dtype=np.float64)  # 8 TiB: refused at once

    monkeypatch.setattr(rnnconv.commands.inspect, "inspect", hungry)
    code, _, stderr = run_cli(["inspect", str(model)])
    assert code == 5 and stderr.startswith("rnnconv: error: out of memory (Unable to allocate")
