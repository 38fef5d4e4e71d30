"""`rnnconv check`: every finding is proven here by running the target on a small model and observing the refusal
or the wrong number (never taken on faith)."""

from __future__ import annotations

import json
import shlex

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from rnnconv import runtimes
from rnnconv.cli import cli
from rnnconv.commands import check
from rnnconv.commands import verify as verify_cmd
from tests.conftest import FIXTURES, reference, run_cli, run_onnxruntime, run_openvino


def load(name):
    path = FIXTURES / f"{name}.onnx"
    return path, dict(np.load(path.with_suffix(".npz")))


def in_output_order(path, outputs: dict) -> list:
    return [outputs[o.name] for o in onnx.load(str(path), load_external_data=False).graph.output]


def spec_outputs(path, feeds):
    """The spec's answer: onnxruntime (on tests/oracle.py's re-expression where it does not run the model)."""
    return in_output_order(path, reference(path, feeds))


def onnxruntime_run(path, feeds):
    return in_output_order(path, run_onnxruntime(path, feeds))


def openvino_run(path, feeds):
    """OpenVINO's own ONNX import (the target `check` speaks of), f32."""
    pytest.importorskip("openvino")
    return in_output_order(path, run_openvino(path, feeds))


def reference_run(path, feeds):
    return ReferenceEvaluator(str(path)).run(None, feeds)


def max_error(got, want):
    return max(float(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)).max()) for g, w in zip(got, want))


def findings(name, target):
    return check.findings(str(FIXTURES / f"{name}.onnx"), [target])


RUNNERS = {"onnxruntime": onnxruntime_run, "openvino": openvino_run, "onnx-reference": reference_run}

# (fixture, target, words of the finding, what the target does: "raises" or "wrong")
CASES = [
    ("gru14_layout1", "onnxruntime", "layout=1", "raises"),
    ("lstm14_layout1", "onnxruntime", "layout=1", "raises"),
    ("gru1_forward", "onnxruntime", "GRU-1", "raises"),
    ("lstm1_forward", "onnxruntime", "LSTM-1", "raises"),
    ("rnn1_forward", "onnxruntime", "RNN-1", "raises"),
    ("gru7_float64", "onnxruntime", "float64", "raises"),
    ("lstm7_float64", "onnxruntime", "float64", "raises"),
    ("gru22_bfloat16", "onnxruntime", "bfloat16", "raises"),
    ("lstm7_peepholes", "openvino", "peepholes", "wrong"),
    ("lstm7_input_forget", "openvino", "input_forget", "wrong"),
    ("gru14_layout1", "openvino", "layout=1", "wrong"),
    ("lstm14_layout1", "openvino", "layout=1", "wrong"),
    ("gru7_activations", "openvino", "activations", "raises"),
    ("lstm7_activations", "openvino", "activations", "raises"),
    ("gru7_bidirectional_mixed_activations", "openvino", "per direction", "wrong"),
    ("lstm7_bidirectional_mixed_activations", "openvino", "per direction", "wrong"),
    ("lstm7_activations", "onnx-reference", "activations", "wrong"),
    ("gru7_activations", "onnx-reference", "activations", "wrong"),
    ("rnn7_activations", "onnx-reference", "activations", "raises"),
    ("lstm7_clip", "onnx-reference", "clip", "wrong"),
    ("gru7_clip", "onnx-reference", "clip", "wrong"),
    ("rnn7_clip", "onnx-reference", "clip", "wrong"),
    ("lstm7_input_forget", "onnx-reference", "input_forget", "wrong"),
    ("lstm7_reverse_seq_lens", "onnx-reference", "sequence_lens", "wrong"),
    ("gru7_reverse_seq_lens", "onnx-reference", "sequence_lens", "wrong"),
]


@pytest.mark.parametrize("name,target,words,effect", CASES, ids=[f"{c[1]}-{c[0]}" for c in CASES])
def test_each_finding_is_what_the_target_does(name, target, words, effect):
    found = findings(name, target)
    assert any(words in f.problem for f in found), [f.problem for f in found]
    assert all(f.fix for f in found)
    path, feeds = load(name)
    if effect == "raises":
        assert any(f.effect == runtimes.REFUSES for f in found if words in f.problem)
        with pytest.raises(Exception) as err:
            RUNNERS[target](path, feeds)
        assert not isinstance(err.value, (KeyError, TypeError)), err.value  # the target's refusal, not ours
        return
    assert all(f.effect == runtimes.WRONG for f in found if words in f.problem)
    got = RUNNERS[target](path, feeds)
    want = spec_outputs(path, feeds)
    shapes_differ = [np.shape(g) for g in got] != [np.shape(w) for w in want]
    assert shapes_differ or max_error(got, want) > 1e-2, "the target ran this node right: the finding is stale"


def test_openvino_runs_peepholes_as_zero():
    """Not only wrong: exactly the model with P = 0 (the finding's wording)."""
    path, feeds = load("lstm7_peepholes")
    model = onnx.load(str(path))
    for init in model.graph.initializer:
        if init.name == "P":
            init.CopyFrom(onnx.numpy_helper.from_array(np.zeros_like(onnx.numpy_helper.to_array(init)), "P"))
    got = openvino_run(path, feeds)
    want = in_output_order(path, reference(model, feeds))
    assert max_error(got, want) < 1e-5


@pytest.mark.parametrize("name", ["gru7_forward", "lstm7_bidirectional", "rnn7_reverse", "lstm14_forward"])
def test_no_finding_means_every_target_runs_it_right(name):
    assert findings(name, "onnxruntime") == [] and findings(name, "openvino") == []
    assert findings(name, "onnx-reference") == []
    path, feeds = load(name)
    want = spec_outputs(path, feeds)
    for target, runner in RUNNERS.items():
        assert max_error(runner(path, feeds), want) < 1e-5, target


def test_zero_peepholes_are_no_finding():
    assert findings("lstm7_forward", "openvino") == []


def test_cli_exit_codes_and_json():
    def invoke(*args):
        code, out, _ = run_cli(args)
        return code, out

    code, out = invoke("check", FIXTURES / "lstm14_layout1_all_features.onnx", "--target", "openvino", "--json")
    assert code == 1
    doc = json.loads(out)
    problems = [f["problem"] for f in doc["findings"]]
    assert len(problems) == 3 and all(f["fix"].startswith("rnnconv to-openvino") for f in doc["findings"])
    code, out = invoke("check", FIXTURES / "gru1_forward.onnx", "--target", "onnxruntime")
    assert code == 1 and "rnnconv upgrade" in out
    code, out = invoke("check", FIXTURES / "gru7_forward.onnx", "--target", "onnxruntime", "--target", "openvino",
                       "--target", "onnx-reference")
    assert code == 0 and "nothing found" in out
    code, _ = invoke("check", FIXTURES / "gru7_forward.onnx", "--target", "tensorrt")
    assert code == 2


@pytest.mark.parametrize("name", ["gru1_forward", "lstm14_layout1", "gru22_bfloat16"])
def test_the_suggested_fix_removes_the_finding(name, tmp_path, monkeypatch):
    """Run the `fix` command check prints; the result has no finding and onnxruntime runs it to the spec."""
    (found,) = findings(name, "onnxruntime")
    monkeypatch.chdir(tmp_path)
    args = shlex.split(found.fix)
    assert args[0] == "rnnconv"
    code, out, err = run_cli(args[1:])
    assert code == 0, out + err
    out = tmp_path / args[args.index("-o") + 1]
    assert check.findings(str(out), ["onnxruntime"]) == []

    report = verify_cmd.verify(str(FIXTURES / f"{name}.onnx"), str(out), candidate_engine="onnxruntime")
    assert report.ok, report.lines()


def test_every_fix_names_a_real_command():
    seen = set()
    for path in sorted(FIXTURES.glob("*.onnx")):
        for f in check.findings(str(path)):
            for part in f.fix.replace("none yet (export the model in float32); to run it: ", "").split(", or "):
                args = shlex.split(part.split(" (")[0])
                assert args[0] == "rnnconv" and args[1] in cli.commands, f.fix
                seen.add(args[1])
    assert seen == {"upgrade", "layout", "downgrade", "to-openvino", "verify"}
