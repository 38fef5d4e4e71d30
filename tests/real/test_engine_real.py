"""rnnconv's engine on every packaged real model: `verify M M --engine all` agrees (exit 0), every engine that runs
the model against the first; rnnconv's engine ran each model in onnxruntime wherever onnxruntime runs it as the spec
says, which the report says instead of counting a comparison of onnxruntime with itself."""

from __future__ import annotations

import json

import pytest

from tests.real.conftest import NAMES, rnnconv_cli

pytestmark = [pytest.mark.real, pytest.mark.parametrize("real_model", NAMES, indirect=True)]


def test_verify_all_engines_agrees_on_an_unchanged_model(real_model):
    ranges = ["--range", "sr:16000,16000"] if "sr" in real_model.feeds else []
    run = rnnconv_cli("verify", real_model.path, real_model.path, "--engine", "all", *real_model.options, *ranges,
                      "--json")
    assert run.code == 0, run.stdout[-3000:] + run.stderr
    report = json.loads(run.stdout)
    assert report["ok"] and report["checks"], report["notes"]
    for side in ("reference", "candidate"):
        placed = report["placements"][side]
        assert placed and all(set(where) == {"onnxruntime"} for where in placed.values()), placed
        assert any(n.startswith(f"{side}[onnxruntime]: not compared, the same runtime") for n in report["notes"])
