"""Verification sized for big models: --verify node checks each rewritten node only, --verify none nothing; big
layers are checked in float32 at small sizes; OpenVINO's compile is left out, and said so, when it would not fit
in memory."""

from __future__ import annotations

import json

import pytest

from rnnconv import io
from rnnconv.commands.to_openvino import to_openvino
from rnnconv.errors import Unsupported, UsageError
from rnnconv.verification import allowances, checks
from rnnconv.verification.inputs import SMALL_DIM
from tests.conftest import FIXTURES, NO_OPENVINO, OPENVINO, lstm_file, run_cli


def test_verify_node_is_reported(tmp_path):
    src = lstm_file(tmp_path / "m.onnx", opset=7)
    code, stdout, stderr = run_cli(["upgrade", str(src), "-o", str(tmp_path / "o.onnx"), "--verify", "node",
                                    "--json"])
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["verified"] == "node"
    assert report["checks"] and all(c["subject"].startswith("node ") for c in report["checks"])
    code, stdout, _ = run_cli(["upgrade", str(src), "-o", str(tmp_path / "p.onnx"), "--verify", "node"])
    assert code == 0 and "per node only" in stdout


def test_no_verify_is_verify_none(tmp_path):
    src = lstm_file(tmp_path / "m.onnx", opset=7)
    code, stdout, stderr = run_cli(["upgrade", str(src), "-o", str(tmp_path / "o.onnx"), "--no-verify", "--json"])
    assert code == 0, stderr
    assert json.loads(stdout)["verified"] == "none" and json.loads(stdout)["checks"] == []


def test_big_layers_are_checked_in_float32(monkeypatch):
    model = io.load(FIXTURES / "lstm.onnx")
    assert checks.precision_for(model) == "float64"
    monkeypatch.setattr(checks, "BIG_WEIGHT_BYTES", 0)
    assert checks.precision_for(model) == "float32"


def test_big_layers_verify_in_float32_with_small_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(checks, "BIG_WEIGHT_BYTES", 0)
    report = to_openvino(lstm_file(tmp_path / "m.onnx"), tmp_path / "o.xml", runtime=False).report
    assert report.ok and len(report.checks) == 2
    assert all("float32" in c.engines for c in report.checks)
    shapes = {o.name: o.shape for c in report.checks for o in c.outputs}
    assert shapes["Y"] == (SMALL_DIM["sequence"], 2, SMALL_DIM["batch"], 8)


def test_verify_node_checks_each_recurrent_node_only(tmp_path):
    report = to_openvino(lstm_file(tmp_path / "m.onnx"), tmp_path / "o.xml", verify="node").report
    assert report.ok and report.verified == "node" and (tmp_path / "o.bin").exists()
    assert [c.subject for c in report.checks] == ["node lstm"]
    with pytest.raises(UsageError):
        to_openvino(tmp_path / "m.onnx", verify="some")


def test_runtime_check_left_out_when_compiling_would_not_fit(tmp_path, monkeypatch):
    # OpenVINO's compile needs about 4x the IR's weights: without that memory the check is skipped and said so.
    src = lstm_file(tmp_path / "m.onnx", H=16, I=8)
    if not OPENVINO:  # asked for, the runtime check cannot run: refused, not a failed verification (exit 1)
        with pytest.raises(Unsupported, match="needs the openvino package"):
            to_openvino(str(src), tmp_path / "q.xml", runtime=True)
        assert not (tmp_path / "q.xml").exists()
        pytest.skip(NO_OPENVINO)
    monkeypatch.setattr(allowances, "available_memory", lambda: 1000)
    report = to_openvino(str(src), tmp_path / "o.xml", runtime=True).report
    assert report.ok and len(report.skipped) == 1 and "GiB is available" in report.skipped[0]
    assert all("OpenVINO runtime" not in c.engines for c in report.checks)
    assert ", 1 skipped" in report.verdict() and "skipped" in report.as_dict()
    assert any(line.startswith("  skipped: OpenVINO runtime: compiling this IR needs") for line in report.lines())
    monkeypatch.setattr(allowances, "available_memory", lambda: 1 << 40)
    report = to_openvino(str(src), tmp_path / "q.xml", runtime=True).report
    assert not report.skipped and any("OpenVINO runtime" in c.engines for c in report.checks)
