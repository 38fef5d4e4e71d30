"""No command exits 70 on a real model: every command, with its default options (and the input sizes a model needs
to run at all, RealModel.options), on every recurrent model of the pinned packages (conftest.PACKAGES) and on silero's
quantized twins (conftest.QUANTIZED). Each ends with a documented exit code (0, 1, 3, 4; 2 where the sweep's fixed
options do not suit the model: BELOW_13); a failure prints exactly one `rnnconv: error:`
line, its last on stderr, and check's findings (its exit 1) are its report on stdout, nothing on stderr.
`EXPECTED` lists every command that does not exit 0 and why, so that a change either way is seen.
"""

from __future__ import annotations

import re

import pytest

from tests.real.conftest import DOCUMENTED_EXIT_CODES, NAMES, OUT, QUANTIZED, rnnconv_cli, shared_cli
from tests.real.test_to_openvino_real import REFUSED

pytestmark = pytest.mark.real

COMMANDS = ["inspect", "check onnxruntime", "check openvino", "upgrade", "downgrade 13", "layout 1", "to-openvino",
            "verify upgraded"]
BELOW_13 = ["enc", "erb_dec", "df_dec", "ddddocr_common", "ddddocr_common_old", "speechmos_plcmos_v2",
            *(f"speechmos_Run_{run}_Stage_0" for run in (1663829550, 1663915512, 1668423760))]
# (model, command) -> (exit code, what the one line on stderr, or check's report, says)
EXPECTED = {
    # OpenVINO's own import refuses these (an If whose branches give two ranks): check says so and names
    # to-openvino, which settles the If (issue 21) and converts them.
    **{(name, "check openvino"): (1, "rnnconv to-openvino") for name in REFUSED},
    # Shipped below opset 13 (DeepFilterNet and ddddocr at 12, AECMOS at 9, PLCMOS at 11): "downgrade --opset 13"
    # is a usage error (exit 2), and layout 1 needs 14.
    **{(name, "downgrade 13"): (2, "that is an upgrade") for name in BELOW_13},
    **{(name, "layout 1"): (3, "needs opset 14") for name in BELOW_13},
    **{(name, "check openvino"): (1, "computes differently") for name in [*QUANTIZED, "ddddocr_common_old"]},
    **{(name, "layout 1"): (3, "no layout attribute") for name in QUANTIZED},
}


def _run(command: str, model, tmp_path):
    """The command's run; where another file runs the same command on the same model (upgrade, downgrade 13, the
    upgrade --no-verify before verify, to-openvino and from-openvino), the one run both share (`shared_cli`)."""
    path, options = model.path, model.options
    if command == "inspect":
        return rnnconv_cli("inspect", path)
    if command.startswith("check"):
        return rnnconv_cli("check", path, "--target", command.split()[1])
    if command == "upgrade":
        return shared_cli("upgrade", path, "-o", f"{OUT}/up.onnx", *options)[0]
    if command == "downgrade 13":
        return shared_cli("downgrade", path, "-o", f"{OUT}/down.onnx", "--opset", "13", *options)[0]
    if command == "layout 1":
        return rnnconv_cli("layout", path, "-o", tmp_path / "l1.onnx", "--to", "1", *options)
    if command == "to-openvino":
        run, folder = shared_cli("to-openvino", path, "-o", f"{OUT}/m.xml", *options)
        if run.code != 0:
            return run
        _documented(run, "to-openvino")
        return shared_cli("from-openvino", folder / "m.xml", "-o", f"{OUT}/back.onnx", *options)[0]
    if command == "verify upgraded":
        run, folder = shared_cli("upgrade", path, "-o", f"{OUT}/up.onnx", "--no-verify")
        _documented(run, "upgrade --no-verify")
        return rnnconv_cli("verify", path, folder / "up.onnx", *options)
    raise AssertionError(command)


def _documented(run, command: str, usage: bool = False) -> str:
    """What a finished command said when it did not exit 0 (asserting the documented form), else "". `usage`: the
    command's fixed options do not suit the model, so a usage error (exit 2) is right too."""
    codes = DOCUMENTED_EXIT_CODES + ((2,) if usage else ())
    assert run.code in codes, f"{command}: exit {run.code}\n{run.stdout[-2000:]}\n{run.stderr}"
    if run.code == 0:
        return ""
    if command.startswith("check") and run.code == 1:  # findings: the report, on stdout
        assert run.stderr == "" and "finding(s)" in run.stdout.strip().splitlines()[-1], run.stdout + run.stderr
        return run.stdout
    return run.error_line()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("real_model", NAMES, indirect=True)
def test_every_command_on_every_real_model(real_model, command, tmp_path):
    _expect(real_model, command, _run(command, real_model, tmp_path))


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("quantized_model", sorted(QUANTIZED), indirect=True)
def test_every_command_on_every_quantized_model(quantized_model, command, tmp_path):
    _expect(quantized_model, command, _run(command, quantized_model, tmp_path))


def _expect(model, command: str, run) -> None:
    code, why = EXPECTED.get((model.name, command), (0, ""))
    said = _documented(run, command, usage=code == 2)
    print(f"{model.name} {command}: exit {run.code} {said.splitlines()[-1] if said else ''}")
    assert run.code == code, f"{command}: exit {run.code}, expected {code}\n{run.stdout[-2000:]}\n{run.stderr}"
    assert why in said, said
    if run.code == 0:
        _exercised_or_said_why(run.stdout, command)


# "exercised: NODE OP 5 steps, batch 3 (why)": the report's line for each recurrent node a whole-model check ran.
EXERCISED = re.compile(r"exercised: (\S+) \S+ (\d+|steps not known)(?: steps?)?, (?:batch (\d+)|batch not known)"
                       r"(?: \((.+)\))?$")


def _exercised_or_said_why(stdout: str, command: str) -> None:
    """No "verified" at fewer than 8 time steps or a batch below 2 where the model allows more (issue 29): each
    recurrent node a whole-model check ran took at least 8 steps and a batch of 2, or the report says why not."""
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("exercised:"):
            continue
        m = EXERCISED.match(line)
        assert m, f"{command}: unreadable {line!r}"
        node, steps, batch, why = m.groups()
        short = (steps.isdigit() and int(steps) < 8) or (batch is not None and int(batch) < 2)
        assert why or not short, f"{command}: {node} ran short and the report says not why: {line!r}"
