"""atomic_write (io/writing.py), the writer of every file besides models and IR (--report, --save-inputs,
--save-outputs, --plot): a write that fails midway leaves the previous file as it was and nothing else."""

from __future__ import annotations

import errno
import json

import numpy as np
import pytest

from rnnconv import io
from rnnconv.errors import IOFailure
from tests.conftest import recurrent_model, run_cli, write_model

PREVIOUS = b"the previous file, which a failed write must leave as it was\n"
DISK_FULL = OSError(errno.ENOSPC, "No space left on device")


def _half_then(error):
    """A `write(f)` that writes some bytes, then fails with `error`."""
    def write(f):
        f.write(b"half of the new content")
        f.flush()
        raise error
    return write


@pytest.mark.parametrize("error", [DISK_FULL, ValueError("a writer's own bug"), KeyboardInterrupt()])
def test_a_write_failing_midway_leaves_the_previous_file(error, tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(PREVIOUS)
    with pytest.raises(IOFailure if isinstance(error, OSError) else type(error)):
        io.atomic_write(target, _half_then(error), force=True)
    assert target.read_bytes() == PREVIOUS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_a_write_failing_midway_leaves_no_file_where_there_was_none(tmp_path):
    with pytest.raises(IOFailure):
        io.atomic_write(tmp_path / "new" / "out.bin", _half_then(DISK_FULL))
    assert list(tmp_path.iterdir()) == []


def test_the_target_is_written_only_when_complete(tmp_path):
    """While `write` runs, the target still holds the previous file (the new bytes go elsewhere)."""
    target = tmp_path / "out.bin"
    target.write_bytes(PREVIOUS)
    seen = []

    def write(f):
        f.write(b"new")
        f.flush()
        seen.append(target.read_bytes())

    io.atomic_write(target, write, force=True)
    assert seen == [PREVIOUS] and target.read_bytes() == b"new"


@pytest.mark.parametrize("option", ["--save-inputs", "--save-outputs"])
def test_verify_saving_arrays_failing_midway_keeps_the_previous_file(option, tmp_path, monkeypatch):
    m = write_model(recurrent_model("GRU"), tmp_path / "m.onnx")
    saved = tmp_path / "saved.npz"
    saved.write_bytes(PREVIOUS)
    savez = np.savez

    def half_savez(f, **arrays):
        savez(f, **arrays)
        f.truncate(f.tell() // 2)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", half_savez)
    code, _, err = run_cli(["verify", m, m, option, saved, "--force"])
    assert code == 5 and "No space left on device" in err, err
    assert saved.read_bytes() == PREVIOUS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "saved.npz"]


def test_batch_report_failing_keeps_the_previous_report(tmp_path, monkeypatch):
    models = tmp_path / "models"
    write_model(recurrent_model("GRU", opset=7), models / "a.onnx")
    report = tmp_path / "report.json"
    report.write_bytes(PREVIOUS)
    dumps = json.dumps

    def failing_dumps(obj, **kw):
        if isinstance(obj, dict) and "models" in obj:
            raise OSError(errno.ENOSPC, "No space left on device")
        return dumps(obj, **kw)

    monkeypatch.setattr(json, "dumps", failing_dumps)
    code, _, err = run_cli(["upgrade", models, "--out-dir", tmp_path / "up", "--report", report, "--force",
                            "--no-verify", "--quiet"])
    assert code == 5, err
    assert report.read_bytes() == PREVIOUS
