"""A command run with --no-verify loads no checking code and no runtime: the checks' modules, onnxruntime and
OpenVINO cost an unverified conversion most of its start (issue: an unverified `upgrade` of a big model at 1.5x
`cp` + `import onnx`). Read from the modules the child process holds at exit, not from its timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LSTM = REPO / "fixtures" / "lstm14_forward.onnx"
# The command, then the modules it loaded that an unverified conversion does not use.
PROBE = """
import atexit, sys
from rnnconv.cli import main
UNUSED = ("onnxruntime", "openvino", "rnnconv.verification.checks", "rnnconv.verification.engines",
          "rnnconv.verification.exercise", "rnnconv.verification.allowances", "rnnconv.verification.extract",
          "rnnconv.runtimes")
atexit.register(lambda: print("loaded", *sorted(m for m in sys.modules if m.partition(".")[0] in UNUSED or m in UNUSED)))
main(sys.argv[1:])
"""


def loaded(tmp_path: Path, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return next(ln for ln in run.stdout.splitlines() if ln.startswith("loaded")).split()[1:]


@pytest.mark.parametrize("command", [["upgrade", "--opset", "22"], ["downgrade", "--opset", "13"],
                                     ["layout", "--to", "1"]], ids=lambda c: c[0])
def test_no_verify_loads_no_checking_code(tmp_path, command):
    assert loaded(tmp_path, command[0], str(LSTM), "-o", str(tmp_path / "out.onnx"), *command[1:],
                  "--no-verify") == []


def test_to_openvino_no_verify_loads_no_checking_code(tmp_path):
    """rnnconv's own IR writer: no node taken out to be checked alone, no runtime."""
    assert loaded(tmp_path, "to-openvino", str(LSTM), "-o", str(tmp_path / "out.xml"), "--no-verify") == []


def test_default_opset_read_from_the_cache_without_onnxruntime(tmp_path):
    """The default target (the newest opset onnx and onnxruntime share) is probed in onnxruntime once, then read
    from the user's cache: the second unverified upgrade loads no onnxruntime, and writes the same opset."""
    ort = pytest.importorskip("onnxruntime")
    first = loaded(tmp_path, "upgrade", str(LSTM), "-o", str(tmp_path / "a.onnx"), "--no-verify")
    assert "onnxruntime" in first  # the probe
    assert loaded(tmp_path, "upgrade", str(LSTM), "-o", str(tmp_path / "b.onnx"), "--no-verify") == []
    import onnx

    opsets = [next(o.version for o in onnx.load(tmp_path / f"{n}.onnx").opset_import if o.domain in ("", "ai.onnx"))
              for n in "ab"]
    assert opsets[0] == opsets[1]
    # onnxruntime itself: it loads the written model, and the model is at onnx's newest opset or refused above it.
    ort.InferenceSession(str(tmp_path / "b.onnx"), providers=["CPUExecutionProvider"])
    assert opsets[1] == onnx.defs.onnx_opset_version() or not _runs_opset(ort, opsets[1] + 1)
    cache = json.loads((tmp_path / "cache" / "rnnconv" / "onnxruntime-opset.json").read_text())
    assert list(cache.values()) == [opsets[1]]


def test_unreadable_cache_falls_back_to_the_probe(tmp_path):
    pytest.importorskip("onnxruntime")
    (tmp_path / "cache" / "rnnconv").mkdir(parents=True)
    (tmp_path / "cache" / "rnnconv" / "onnxruntime-opset.json").write_text("{not json")
    assert "onnxruntime" in loaded(tmp_path, "upgrade", str(LSTM), "-o", str(tmp_path / "a.onnx"), "--no-verify")
    assert loaded(tmp_path, "upgrade", str(LSTM), "-o", str(tmp_path / "b.onnx"), "--no-verify") == []


def _runs_opset(ort, opset: int) -> bool:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return True
    except Exception:
        return False
