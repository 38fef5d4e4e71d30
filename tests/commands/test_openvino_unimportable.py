"""The openvino package installed but `import openvino` failing (a missing library): the OpenVINO runtime check
is skipped with the reason, as when the package is absent, never a failed check; the OpenVINO route exits 3 with
the reason. And without openvino, a node rnnconv's own writer cannot map (run-time Pad pads) names the install that
would convert it. Results held against onnxruntime and the real OpenVINO runtime of this process."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import FIXTURES, REPO, assert_close, fixture_feeds, run_onnxruntime

INSTALL = "pip install 'rnnconv[openvino]'"
REASON = "libopenvino.so.2600: cannot open shared object file"


def rnnconv_with_broken_openvino(tmp_path, *argv) -> subprocess.CompletedProcess:
    """`rnnconv ARGV` in a process where `import openvino` raises ImportError from inside the package."""
    fake = tmp_path / "site" / "openvino"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text(f"raise ImportError({REASON!r})\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "rnnconv", *map(str, argv)], capture_output=True, text=True, env=env)


def test_to_openvino_skips_the_runtime_check_with_the_reason(tmp_path):
    pytest.importorskip("openvino")
    res = rnnconv_with_broken_openvino(tmp_path, "to-openvino", FIXTURES / "lstm.onnx", "-o", tmp_path / "m.xml")
    assert res.returncode == 0, res.stderr
    assert (f"skipped: OpenVINO runtime (CPU, f32): openvino cannot be imported (ImportError: {REASON})"
            in res.stdout), res.stdout
    assert "FAIL" not in res.stdout and "inf" not in res.stdout
    assert "1 skipped" in res.stdout
    # The IR written without the runtime check still runs in the (working) OpenVINO runtime as onnxruntime runs
    # the source.
    from tests.conftest import run_openvino

    feeds = fixture_feeds(FIXTURES / "lstm.onnx")
    assert_close(run_onnxruntime(FIXTURES / "lstm.onnx", feeds), run_openvino(tmp_path / "m.xml", feeds,
                                                                              reshape=True), tol=1e-4)


def test_from_openvino_skips_the_runtime_check_with_the_reason(tmp_path):
    res = rnnconv_with_broken_openvino(tmp_path, "from-openvino", FIXTURES / "openvino" /
                                       "lstm_batch_first_legacy14.xml", "-o", tmp_path / "m.onnx")
    assert res.returncode == 0, res.stderr
    assert f"skipped: OpenVINO runtime (CPU, f32): openvino cannot be imported (ImportError: {REASON})" in res.stdout


def test_the_openvino_route_exits_3_with_the_reason(tmp_path):
    res = rnnconv_with_broken_openvino(tmp_path, "to-openvino", FIXTURES / "lstm.onnx", "-o", tmp_path / "m.xml",
                                       "--route", "openvino")
    assert res.returncode == 3, res.stderr
    assert f"openvino cannot be imported (ImportError: {REASON})" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "m.xml").exists()


def run_time_pad_lstm() -> onnx.ModelProto:
    """X padded in time by pads computed from its shape (Shape -> Slice -> Concat), then an LSTM."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Shape", ["X"], ["s"]), helper.make_node("Slice", ["s", "one", "two", "zero"], ["n"]),
             helper.make_node("Concat", ["n", "zeros"], ["pads"], axis=0),
             helper.make_node("Pad", ["X", "pads"], ["P"]),
             helper.make_node("LSTM", ["P", "W", "R"], ["Y"], hidden_size=3)]
    inits = {"zero": np.array([0], np.int64), "one": np.array([1], np.int64), "two": np.array([2], np.int64),
             "zeros": np.zeros(5, np.int64), "W": rng.standard_normal((1, 12, 2)).astype(np.float32),
             "R": rng.standard_normal((1, 12, 3)).astype(np.float32)}
    graph = helper.make_graph(nodes, "pad", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 2, 2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [6, 1, 2, 3])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def test_without_openvino_run_time_pad_pads_name_the_install(tmp_path):
    path = tmp_path / "pad.onnx"
    onnx.save(run_time_pad_lstm(), path)
    hide = "import sys; sys.modules['openvino'] = None; import runpy; runpy.run_module('rnnconv', run_name='__main__')"
    res = subprocess.run([sys.executable, "-c", hide, "to-openvino", str(path), "-o", str(tmp_path / "pad.xml")],
                         capture_output=True, text=True)
    assert res.returncode == 3, res.stderr
    assert "Pad node" in res.stderr and "pads computed at run time" in res.stderr
    assert "OpenVINO's ONNX import converts them" in res.stderr and INSTALL in res.stderr
    assert not (tmp_path / "pad.xml").exists()


def test_with_openvino_run_time_pad_pads_convert_as_said(tmp_path):
    """What the message promises: with openvino installed the same model converts and runs as onnxruntime runs it."""
    pytest.importorskip("openvino")
    from rnnconv.commands.to_openvino import to_openvino
    from tests.conftest import run_openvino

    model = run_time_pad_lstm()
    report = to_openvino(model, tmp_path / "pad.xml").report
    assert report.ok
    feeds = {"X": np.random.default_rng(4).standard_normal((4, 2, 2)).astype(np.float32)}
    assert_close(run_onnxruntime(model, feeds), run_openvino(tmp_path / "pad.xml", feeds), tol=1e-4)
