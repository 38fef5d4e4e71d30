"""Batch mode (rnnconv/cli/batch.py): several models and directories with --out-dir, a broken model among good
ones, the exit code of the most severe failure, the report file."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from tests.conftest import (
    FIXTURES,
    OPENVINO_TOL,
    assert_close,
    feeds,
    fixture_feeds,
    lstm_file,
    openvino_outputs,
    reference,
    run_cli,
)


def fleet(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("lstm.onnx", "gru1_forward.onnx"):
        (folder / name).write_bytes((FIXTURES / name).read_bytes())
    lstm_file(folder / "nested" / "external.onnx", opset=7)
    (folder / "broken.onnx").write_bytes(b"not a model at all")
    return folder


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_batch_over_a_directory_with_a_broken_model(jobs, tmp_path):
    models = fleet(tmp_path / "models")
    out, report = tmp_path / "out", tmp_path / "report.json"
    code, stdout, stderr = run_cli(["upgrade", str(models), "--out-dir", str(out), "--report", str(report),
                                    "--jobs", jobs])
    assert code == 4, stderr  # the broken model's exit code: bad input
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["gru1_forward.onnx", "lstm.onnx", "nested/external.onnx", "nested/external.onnx.data"]
    data = json.loads(report.read_text())
    assert data["exit_code"] == 4 and not data["ok"]
    rows = {Path(r["model"]).name: r for r in data["models"]}
    assert sorted(rows) == ["broken.onnx", "external.onnx", "gru1_forward.onnx", "lstm.onnx"]
    assert rows["broken.onnx"]["exit_code"] == 4 and "not an ONNX model" in rows["broken.onnx"]["error"]
    assert rows["broken.onnx"]["output"] is None
    for name in ("external.onnx", "gru1_forward.onnx", "lstm.onnx"):
        assert rows[name]["ok"] and rows[name]["nodes_rewritten"] == 1 and rows[name]["verified"] == "full"
        assert rows[name]["max_abs"] is not None and rows[name]["seconds"] >= 0
    assert "broken.onnx" in stdout and "3 of 4 model(s) converted, 1 failed" in stdout
    assert "not an ONNX model" in stderr
    # what it wrote holds the sources' numbers (onnxruntime on both sides, tests/oracle.py)
    for source, written in ((models / "lstm.onnx", out / "lstm.onnx"), (models / "gru1_forward.onnx",
                            out / "gru1_forward.onnx"), (models / "nested" / "external.onnx",
                            out / "nested" / "external.onnx")):
        inputs = feeds(onnx.load(str(source), load_external_data=False))
        assert_close(reference(source, inputs), reference(written, inputs))


def test_batch_exit_code_is_the_most_severe(tmp_path):
    a = lstm_file(tmp_path / "a.onnx", opset=7)
    b = tmp_path / "b.onnx"
    b.write_bytes(b"garbage")
    missing = tmp_path / "missing.onnx"
    code, stdout, stderr = run_cli(["upgrade", str(a), str(b), str(missing), "--out-dir", str(tmp_path / "o"),
                                    "--json"])
    data = json.loads(stdout)
    assert code == max(r["exit_code"] for r in data["models"]) == 4
    assert [r["ok"] for r in data["models"]] == [True, False, False]


def test_batch_to_openvino_and_back(tmp_path):
    pytest.importorskip("openvino")
    models = tmp_path / "models"
    models.mkdir()
    for name in ("lstm.onnx", "gru1_forward.onnx"):
        (models / name).write_bytes((FIXTURES / name).read_bytes())
    code, _, stderr = run_cli(["to-openvino", str(models), "--out-dir", str(tmp_path / "ir"), "--quiet"])
    assert code == 0, stderr
    assert sorted(p.name for p in (tmp_path / "ir").iterdir()) == ["gru1_forward.bin", "gru1_forward.xml",
                                                                   "lstm.bin", "lstm.xml"]
    code, _, stderr = run_cli(["from-openvino", str(tmp_path / "ir"), "--out-dir", str(tmp_path / "back"),
                               "--quiet"])
    assert code == 0, stderr
    assert sorted(p.name for p in (tmp_path / "back").iterdir()) == ["gru1_forward.onnx", "lstm.onnx"]
    # what batch mode wrote holds the sources' numbers: the IR in the OpenVINO runtime, the ONNX in onnxruntime
    for name in ("lstm", "gru1_forward"):
        inputs = fixture_feeds(FIXTURES / f"{name}.onnx")
        want = reference(FIXTURES / f"{name}.onnx", inputs)
        assert_close(want, openvino_outputs(tmp_path / "ir" / f"{name}.xml", inputs), tol=OPENVINO_TOL)
        assert_close(want, reference(tmp_path / "back" / f"{name}.onnx", inputs), tol=OPENVINO_TOL)


def test_batch_usage_errors(tmp_path):
    a = lstm_file(tmp_path / "x" / "m.onnx", opset=7)
    b = lstm_file(tmp_path / "y" / "m.onnx", opset=7)
    code, _, stderr = run_cli(["upgrade", str(a), str(b), "--out-dir", str(tmp_path / "o")])
    assert code == 2 and "would both be written" in stderr
    code, _, stderr = run_cli(["upgrade", str(a), str(b), "-o", str(tmp_path / "o.onnx")])
    assert code == 2 and "--out-dir" in stderr
    code, _, stderr = run_cli(["upgrade", str(a), "-o", str(tmp_path / "o.onnx"), "--out-dir", str(tmp_path)])
    assert code == 2
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.onnx").exists()


def test_one_model_with_a_report(tmp_path):
    a = lstm_file(tmp_path / "m.onnx", opset=7)
    code, _, stderr = run_cli(["layout", str(a), "-o", str(tmp_path / "o.onnx"), "--to", "0", "--report",
                               str(tmp_path / "r.json")])
    assert code == 0, stderr
    rows = json.loads((tmp_path / "r.json").read_text())["models"]
    assert len(rows) == 1 and rows[0]["output"] == str(tmp_path / "o.onnx")
