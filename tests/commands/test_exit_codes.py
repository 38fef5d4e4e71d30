"""Every documented failure gives its documented exit code, with and without --debug: one `rnnconv: error:` line
without, the traceback and the same code with."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES, run_cli


FAILURES = {  # name: (arguments (tmp_path -> list), documented code)
    "missing file": (lambda t: ["upgrade", t / "nope.onnx", "-o", t / "o.onnx"], 4),
    "not a model": (lambda t: ["inspect", FIXTURES / "README.md"], 4),
    "GRU linear_before_reset below opset 3": (
        lambda t: ["downgrade", FIXTURES / "gru3_linear_before_reset.onnx", "-o", t / "o.onnx", "--opset", "1"], 3),
    "an opset newer than the installed onnx": (
        lambda t: ["upgrade", FIXTURES / "lstm.onnx", "-o", t / "o.onnx", "--opset", "99"], 3),
    "unknown option": (lambda t: ["upgrade", FIXTURES / "lstm.onnx", "--nope"], 2),
    "missing argument": (lambda t: ["verify", FIXTURES / "lstm.onnx"], 2),
    "missing required option": (lambda t: ["layout", FIXTURES / "lstm.onnx", "-o", t / "o.onnx"], 2),
    "invalid choice": (lambda t: ["layout", FIXTURES / "lstm.onnx", "-o", t / "o.onnx", "--to", "2"], 2),
    "output exists": (lambda t: ["upgrade", FIXTURES / "lstm.onnx", "-o", FIXTURES / "gru7_forward.onnx"], 2),
    "output is the input": (lambda t: ["upgrade", FIXTURES / "lstm.onnx", "-o", FIXTURES / "lstm.onnx", "--force"],
                            2),
    "output of the wrong kind": (lambda t: ["to-openvino", FIXTURES / "lstm.onnx", "-o", t / "o.onnx"], 2),
    "verification failed": (lambda t: ["verify", FIXTURES / "lstm7_peepholes.onnx",
                                       FIXTURES / "lstm7_forward.onnx"], 1),
    "unwritable folder": (lambda t: ["upgrade", FIXTURES / "lstm.onnx", "-o", "/proc/rnnconv-test/o.onnx"], 5),
}


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
@pytest.mark.parametrize("name", sorted(FAILURES))
def test_documented_failure_keeps_its_code(name, debug, tmp_path):
    argv, code = FAILURES[name]
    got, out, err = run_cli([*(["--debug"] if debug else []), *argv(tmp_path)])
    assert got == code, (out, err)
    if code == 1:  # a verdict, not an error: the report says it
        return
    if debug and code != 2:
        assert "Traceback (most recent call last)" in err, err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith((" ", "Traceback"))]
    assert lines[-1].startswith("rnnconv: error: "), err
    if not debug:
        assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_internal_error_and_interrupt(debug, monkeypatch):
    import rnnconv.commands.inspect as inspect_command

    for error, code, words in ((KeyError("a bug"), 70, "rnnconv: internal error: KeyError"),
                               (KeyboardInterrupt(), 130, "rnnconv: interrupted (nothing written)")):
        def boom(*_a, error=error, **_k):
            raise error

        monkeypatch.setattr(inspect_command, "inspect", boom)
        got, _, err = run_cli([*(["--debug"] if debug else []), "inspect", FIXTURES / "lstm.onnx"])
        assert got == code and words in err, err
        assert ("Traceback" in err) == debug, err


def test_help_lists_the_codes_and_every_command_has_an_example():
    from rnnconv.cli import COMMANDS, cli as group

    code, out, _ = run_cli(["--help"])
    assert code == 0 and "70 internal error" in out and "130 interrupted" in out
    for name in COMMANDS:
        command = group.commands[name.replace("_", "-")]
        assert "Example: rnnconv " in (command.help or ""), name
