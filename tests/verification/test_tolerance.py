"""Which tolerance applies (verification/tolerance.py): a value given for one output (NAME=X) beats one given for
all (X), whatever the order given, for atol and rtol alike; either beats the default. Expectations are the
numbers given here, not the product's table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rnnconv.cli.options import parse_tolerance
from rnnconv.verification.tolerance import Tolerances
from tests.conftest import initializers, recurrent_model, run_cli, write_model

DEFAULT = object()  # the dtype default: whatever it is, not a value the user gave


@pytest.mark.parametrize("given,want_y,want_yh", [
    ([], DEFAULT, DEFAULT),
    (["0.1"], 0.1, 0.1),
    (["Y=1e-9"], 1e-9, DEFAULT),
    (["0.1", "Y=1e-9"], 1e-9, 0.1),
    (["Y=1e-9", "0.1"], 1e-9, 0.1),
    (["Y=1e-9", "Y_h=0.3", "0.1"], 1e-9, 0.3),
    (["0.1", "0.2"], 0.2, 0.2),  # the last one given for all
])
@pytest.mark.parametrize("which", ["atol", "rtol"])
@pytest.mark.parametrize("fp16_weights", [False, True])
def test_a_value_for_one_output_beats_one_for_all(given, want_y, want_yh, which, fp16_weights):
    value = parse_tolerance(given, f"--{which}")
    t = Tolerances(**{which: value}, fp16_weights=fp16_weights)
    plain = Tolerances(fp16_weights=fp16_weights)
    index = 0 if which == "atol" else 1
    for name, want in (("Y", want_y), ("Y_h", want_yh)):
        got = t.for_output(name, np.float32, np.float32)
        default = plain.for_output(name, np.float32, np.float32)
        assert got[index] == (default[index] if want is DEFAULT else want), (given, name)
        assert got[1 - index] == default[1 - index]  # the other one untouched


def _pair(tmp_path):
    """Two GRUs that differ by about 1e-3 on Y and Y_h (W moved by 1e-3)."""
    ref = recurrent_model("GRU", T=3, N=2, I=4, H=5)
    W = initializers(ref)["W"] + np.float32(1e-3)
    cand = recurrent_model("GRU", T=3, N=2, I=4, H=5, weights={"W": W})
    return write_model(ref, tmp_path / "ref.onnx"), write_model(cand, tmp_path / "cand.onnx")


@pytest.mark.parametrize("args,failing", [
    (["--atol", "0.1"], []),
    (["--atol", "0.1", "--atol", "Y=1e-9"], ["Y"]),
    (["--atol", "Y=1e-9", "--atol", "0.1"], ["Y"]),
    (["--atol", "0.1", "--atol", "Y_h=1e-9"], ["Y_h"]),
    (["--atol", "0", "--rtol", "100"], []),
    (["--atol", "0", "--rtol", "100", "--rtol", "Y=0"], ["Y"]),
    (["--atol", "0", "--atol", "Y_h=0.1", "--rtol", "0", "--rtol", "Y=100"], []),
    (["--atol", "0.1", "--atol", "Y=0", "--rtol", "0"], ["Y"]),
])
def test_verify_on_models_that_differ(args, failing, tmp_path):
    """`verify A B --atol 0.1 --atol Y=1e-9` on models differing on Y must disagree on Y (exit 1)."""
    ref, cand = _pair(tmp_path)
    code, out, err = run_cli(["verify", ref, cand, *args, "--json"])
    assert code == (1 if failing else 0), out + err
    (check,) = json.loads(out)["checks"]
    assert [o["name"] for o in check["outputs"] if not o["ok"]] == failing, out


def test_default_atol_follows_the_outputs_scale_and_a_given_one_does_not():
    """docs/verification.md: float32's default atol adds 1e-6 times the output's largest |reference|. Two correct
    float32 runtimes differ by 3.4e-5 on a near-zero element of an output reaching 153 (a real IR's case): within
    the default; a given --atol is taken as given."""
    from rnnconv.verification.results import compare_outputs
    from rnnconv.verification.tolerance import Tolerances as T

    ref = np.array([153.0, 1e-6, -40.0], np.float32)
    cand = ref + np.array([0, 3.4e-5, 0], np.float32)
    (out,) = compare_outputs("model", "a vs b", {"y": ref}, {"y": cand}).outputs
    assert out.ok and abs(out.atol - (1e-5 + 1e-6 * 153)) < 1e-9, out
    assert "float32 default" in out.tolerance and "153" in out.tolerance
    (given,) = compare_outputs("model", "a vs b", {"y": ref}, {"y": cand}, T(atol=1e-5)).outputs
    assert not given.ok and given.atol == 1e-5 and given.tolerance.startswith("atol given")


def _scaled(path, c: float):
    """y = x * c, x [4, 5] float32."""
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    g = h.make_graph([h.make_node("Mul", ["x", "c"], ["y"])], "g", [h.make_tensor_value_info("x", TP.FLOAT, [4, 5])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [4, 5])], [nh.from_array(np.float32(c), "c")])
    return write_model(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)


@pytest.mark.parametrize("relative,agree", [(1e-4, False), (1e-7, True)])
def test_the_default_is_float32s_documented_tolerance(relative, agree, tmp_path):
    """docs/verification.md: float32 outputs agree within atol 1e-5 (+ 1e-6 x the largest |reference|) and rtol
    1e-5. y = x * c against y = x * c (1 + relative), x drawn in [-1, 1]: 1e-4 relative is past that where |x|
    nears 1 (as a looser atol or rtol would not say), 1e-7 within everywhere."""
    ref, cand = _scaled(tmp_path / "ref.onnx", 1.0), _scaled(tmp_path / "cand.onnx", 1.0 + relative)
    code, out, err = run_cli(["verify", ref, cand, "--engine", "onnxruntime"])
    assert code == (0 if agree else 1), out + err


def test_equal_outputs_agree_at_zero_tolerance(tmp_path):
    """An element is bad when |candidate - reference| > atol + rtol x |reference|: equal ones pass at 0 and 0."""
    ref, _ = _pair(tmp_path)
    code, out, err = run_cli(["verify", ref, ref, "--atol", "0", "--rtol", "0", "--engine", "onnxruntime"])
    assert code == 0, out + err
