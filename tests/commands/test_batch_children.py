"""Batch mode keeps one onnxruntime child and one OpenVINO child for the whole batch (rnnconv.engine.serving), not
a process per model; a child that dies fails that model's check only, and the next model gets a new one."""

from __future__ import annotations

import functools
import shutil

import pytest

from rnnconv.cli import batch
from rnnconv.cli.to_openvino import convert
from rnnconv.engine import serving
from tests.conftest import FIXTURES

pytest.importorskip("openvino")
CONVERT = functools.partial(convert, fp16=False, route="auto")


@pytest.fixture
def started(monkeypatch):
    modules = []
    real = serving.Child.__init__

    def counting(self, module):
        modules.append(module)
        real(self, module)

    monkeypatch.setattr(serving.Child, "__init__", counting)
    return modules


def _plan(tmp_path, n):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    for k in range(n):
        shutil.copyfile(FIXTURES / "lstm.onnx", zoo / f"m{k}.onnx")
    return batch.batch_plan([str(zoo)], str(tmp_path / "out"), ".onnx", ".xml")


def test_one_child_per_runtime_for_the_whole_batch(tmp_path, started):
    rows = batch.run_batch("to-openvino", CONVERT, _plan(tmp_path, 3), {"verify": "full", "force": False},
                           jobs=1, progress=False)
    assert [r["exit_code"] for r in rows] == [0, 0, 0], rows
    engines = [c["engines"] for r in rows for c in r["report"]["checks"]]
    assert sum("OpenVINO runtime" in e for e in engines) == 3  # every model checked in OpenVINO
    # one child per runtime, kept across the 3 models
    assert sorted(started) == ["rnnconv.engine.openvino_runtime", "rnnconv.engine.ort_worker"]
    assert not serving.sharing() and not serving._CHILDREN  # ended with the batch


def test_a_child_that_dies_fails_one_check_and_the_next_model_gets_a_new_one(tmp_path, started, monkeypatch):
    real_send = serving.Child.send
    calls = []

    def send(self, job):
        real_send(self, job)
        if self.module == "rnnconv.engine.openvino_runtime":
            calls.append(job)
            if len(calls) == 1:  # the first model's job: the child dies before answering
                self.close()

    monkeypatch.setattr(serving.Child, "send", send)
    rows = batch.run_batch("to-openvino", CONVERT, _plan(tmp_path, 2), {"verify": "full", "force": False},
                           jobs=1, progress=False)
    assert [r["exit_code"] for r in rows] == [1, 0], rows
    [crashed] = [c for c in rows[0]["report"]["checks"] if "OpenVINO runtime" in c["engines"]]
    assert not crashed["ok"] and crashed["max_abs"] == "inf"  # a crash is a failed check (checks.py), as one-shot
    assert started.count("rnnconv.engine.openvino_runtime") == 2
