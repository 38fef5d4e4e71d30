"""The early copy (io.EarlyCopy): untouched external weights copied beside the output while the rewrite and its
checks run, kept as the output's data file where the layout agrees, dropped otherwise, never left behind."""

from __future__ import annotations

import os

import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv.verification import runner
from rnnconv.verification import results as vresults
from tests.conftest import initializers, lstm_file, run_cli


def test_early_copy_is_kept_when_weights_are_untouched(tmp_path, monkeypatch):
    src = lstm_file(tmp_path / "src" / "m.onnx")
    taken = []
    real = io.EarlyCopy.take
    monkeypatch.setattr(io.EarlyCopy, "take", lambda self, *a: taken.append(real(self, *a)) or taken[-1])
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    code, _, stderr = run_cli(["upgrade", str(src), "-o", str(out), "--no-verify"])
    assert code == 0, stderr
    assert len(taken) == 1 and taken[0]  # the copy made beside the rewrite became the output's data file
    assert (out.parent / "o.onnx.data").read_bytes() == (src.parent / "w.data").read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == ["o.onnx", "o.onnx.data"]
    umask = os.umask(0)
    os.umask(umask)
    assert (out.parent / "o.onnx.data").stat().st_mode & 0o777 == 0o666 & ~umask  # as any new file, not 0600


def test_early_copy_is_dropped_when_the_layout_changes(tmp_path, monkeypatch):
    # W replaced by a new tensor: R and B would leave a hole of W's size, so the output is laid out anew.
    src = lstm_file(tmp_path / "src" / "m.onnx", H=64, I=600)  # W: 1.2 MB, past the 1 MiB of holes kept
    model = io.load(src)
    out = tmp_path / "o.onnx"
    taken = []
    real = io.EarlyCopy.take
    monkeypatch.setattr(io.EarlyCopy, "take", lambda self, *a: taken.append(real(self, *a)) or taken[-1])
    with io.EarlyCopy(model, out) as early:
        assert early.path is not None and early.path.parent == tmp_path
        w = model.graph.initializers["W"]
        w.const_value = ir.tensor(w.const_value.numpy() * 2, name="W")
        io.save(model, out, early=early)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.onnx", "o.onnx.data", "src"]
    back = initializers(out)
    np.testing.assert_array_equal(back["W"], initializers(src)["W"] * 2)
    np.testing.assert_array_equal(back["R"], initializers(src)["R"])
    assert taken == [[]]


def test_failed_verification_leaves_no_early_copy(tmp_path, monkeypatch):
    src = lstm_file(tmp_path / "m.onnx")
    failing = vresults.Check("node lstm", "engine", [vresults.failed("Y", "injected")])
    monkeypatch.setattr(runner, "check_nodes", lambda *a, **k: [failing])
    code, _, _ = run_cli(["upgrade", str(src), "-o", str(tmp_path / "o.onnx")])
    assert code == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "w.data"]


def test_unknown_node_leaves_no_early_copy(tmp_path):
    src = lstm_file(tmp_path / "m.onnx")
    code, _, stderr = run_cli(["layout", str(src), "-o", str(tmp_path / "o.onnx"), "--to", "1", "--node", "nope"])
    assert code == 2 and "'nope'" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "w.data"]
