"""CheckOptions checks itself when built, for the CLI and the Python API alike: every public call refuses what the
CLI refuses, with a usage error (exit 2) naming the value, never a TypeError or a silent change."""

from __future__ import annotations

import inspect

import click
import numpy as np
import pytest

import rnnconv
from rnnconv.errors import EXIT_USAGE, UsageError
from rnnconv.verification.options import CHECK_OPTIONS, CheckOptions
from tests.conftest import FIXTURES, run_cli

LSTM = FIXTURES / "lstm.onnx"


@pytest.mark.parametrize("given, named", [
    ({"runs": 0}, "runs=0"), ({"runs": 1.5}, "runs=1.5"), ({"runs": True}, "runs=True"),
    ({"seed": -1}, "seed=-1"), ({"seed": "1"}, "seed='1'"),
    ({"atol": -1}, "atol=-1"), ({"rtol": float("nan")}, "rtol=nan"), ({"atol": {"Y": -0.5}}, "atol['Y']=-0.5"),
    ({"atol": "0.1"}, "atol='0.1'"),
    ({"dims": {"batch": 0}}, "dims['batch']=0"), ({"dims": {"batch": 2.5}}, "dims['batch']=2.5"),
    ({"dims": ["batch"]}, "dims=['batch']"),
    ({"ranges": {"X": (1, 0)}}, "ranges['X']=(1, 0)"), ({"ranges": {"X": (0,)}}, "ranges['X']=(0,)"),
    ({"ranges": {"X": (0, float("inf"))}}, "ranges['X']=inf"),
    ({"inputs": 3}, "inputs=3"),
])
def test_bad_values_are_refused_when_built(given, named):
    with pytest.raises(UsageError) as err:
        CheckOptions(**given)
    assert str(err.value).startswith(named), str(err.value)
    assert err.value.exit_code == EXIT_USAGE


def test_good_values_are_kept_and_copied():
    dims, atol = {"batch": np.int64(2)}, {"Y": 1}
    options = CheckOptions(seed=3, runs=2, dims=dims, ranges={"X": (0, 1)}, atol=atol, rtol=0)
    dims["batch"], atol["Y"] = 7, 9  # the caller's dicts stay theirs
    assert options.dims == {"batch": 2} and type(options.dims["batch"]) is int
    assert options.atol == {"Y": 1.0} and options.rtol == 0.0 and options.ranges == {"X": (0.0, 1.0)}
    assert options.tolerances.atol == {"Y": 1.0}


@pytest.mark.parametrize("call", [
    lambda out: rnnconv.upgrade(str(LSTM), str(out), runs=0),
    lambda out: rnnconv.downgrade(str(LSTM), str(out), opset=7, atol=-1),
    lambda out: rnnconv.convert_layout(str(LSTM), str(out), to=0, dims={"batch": 0}),
    lambda out: rnnconv.to_openvino(str(LSTM), str(out.with_suffix(".xml")), seed=-2),
    lambda out: rnnconv.verify(str(LSTM), str(LSTM), runs=0),
])
def test_the_api_refuses_what_the_cli_refuses(tmp_path, call):
    """runs=0 once became 1 silently through the API; the CLI refuses --runs 0 (exit 2)."""
    with pytest.raises(UsageError):
        call(tmp_path / "out.onnx")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_them_alike(tmp_path):
    code, _, stderr = run_cli(["upgrade", LSTM, "-o", tmp_path / "out.onnx", "--runs", "0"])
    assert code == EXIT_USAGE and "--runs" in stderr
    code, _, stderr = run_cli(["upgrade", LSTM, "-o", tmp_path / "out.onnx", "--seed", "-1"])
    assert code == EXIT_USAGE and "--seed" in stderr  # once numpy's ValueError, an internal error (exit 70)
    assert list(tmp_path.iterdir()) == []


def test_options_and_keywords_together_are_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="give options or seed, not both"):
        rnnconv.upgrade(str(LSTM), str(tmp_path / "o.onnx"), options=CheckOptions(), seed=1)
    with pytest.raises(UsageError, match="options="):
        rnnconv.upgrade(str(LSTM), str(tmp_path / "o.onnx"), options={"seed": 1})


def test_unknown_keywords_are_still_refused(tmp_path):
    with pytest.raises(TypeError, match="sed"):
        rnnconv.upgrade(str(LSTM), str(tmp_path / "o.onnx"), sed=1)


@pytest.mark.parametrize("name", ["upgrade", "downgrade", "convert_layout", "dequantize", "to_openvino",
                                  "from_openvino", "fuse", "verify"])
def test_every_api_call_shows_the_check_options_by_name(name):
    """help(rnnconv.NAME) lists each check option as a keyword, as CheckOptions names it."""
    parameters = inspect.signature(getattr(rnnconv, name)).parameters
    assert [p for p in parameters if p in CHECK_OPTIONS] == list(CHECK_OPTIONS)
    assert all(parameters[p].kind is inspect.Parameter.KEYWORD_ONLY for p in CHECK_OPTIONS)


@pytest.mark.parametrize("command", ["upgrade", "verify", "to-openvino", "fuse"])
def test_the_cli_flags_are_the_check_options(command):
    """The CLI's check flags set exactly CheckOptions' fields (their names are written once, there)."""
    from rnnconv.cli import cli

    params = {p.name for p in cli.commands[command].params}
    assert set(CHECK_OPTIONS) <= params


def test_check_takes_one_target_as_the_cli_does():
    """A single target string was read letter by letter ("unknown target 'o'")."""
    one = rnnconv.check(str(LSTM), targets="onnxruntime")
    assert one["targets"] == ["onnxruntime"]
    assert rnnconv.check(str(LSTM), ["onnxruntime", "onnxruntime"])["targets"] == ["onnxruntime"]
    with pytest.raises(UsageError, match="unknown target 'tensorrt'"):
        rnnconv.check(str(LSTM), targets="tensorrt")
    with pytest.raises(UsageError, match="no target"):
        rnnconv.check(str(LSTM), targets=[])


@pytest.mark.parametrize("opset", ["14", 14.0, None])
def test_an_opset_is_an_integer(tmp_path, opset):
    with pytest.raises(UsageError, match="opset="):
        rnnconv.downgrade(str(LSTM), str(tmp_path / "o.onnx"), opset=opset)
    if opset is not None:
        with pytest.raises(UsageError, match="opset="):
            rnnconv.upgrade(str(LSTM), str(tmp_path / "o.onnx"), opset=opset)


def test_cli_check_flags_parse_into_checked_options():
    from rnnconv.cli.options import check_values

    values = {"atol": ("Y=0.5", "0.1"), "rtol": (), "seed": 4, "runs": None, "dims": ("batch=2",),
              "ranges": ("X:0,1",), "inputs": None, "other": 1}
    options = check_values(values)
    assert options == CheckOptions(seed=4, dims={"batch": 2}, ranges={"X": (0.0, 1.0)}, atol={"Y": 0.5, "*": 0.1})
    assert values == {"other": 1}  # the command's own values are left to it
    with pytest.raises((UsageError, click.BadParameter)):
        check_values({**values, "atol": (), "rtol": (), "seed": -1, "runs": None, "dims": (), "ranges": (),
                      "inputs": None})


@pytest.mark.parametrize("call, named", [
    (lambda out: rnnconv.to_openvino(str(LSTM), str(out.with_suffix(".xml")), fp16="no"), "fp16='no'"),
    (lambda out: rnnconv.fuse(str(LSTM), str(out), free_sequence=1), "free_sequence=1"),
    (lambda out: rnnconv.upgrade(str(LSTM), str(out), force="yes"), "force='yes'"),
    (lambda out: rnnconv.from_openvino(str(LSTM), str(out), runtime="off"), "runtime='off'"),
])
def test_switches_take_true_or_false(tmp_path, call, named):
    """A CLI flag is on or off; `fp16="no"` once converted with float16 weights (a non-empty string is true)."""
    with pytest.raises(UsageError, match=f"^{named}: expected True or False"):
        call(tmp_path / "out.onnx")
    assert list(tmp_path.iterdir()) == []
