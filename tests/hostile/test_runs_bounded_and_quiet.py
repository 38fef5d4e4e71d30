"""Issue 25 items 8 and 9.

8: OpenVINO's conversion time doubles with each level of nested If bodies; to-openvino refuses a model nested
   deeper than it converts quickly (exit 3 naming the body and the limit) instead of running for minutes.
9: the runtimes' usage telemetry is switched off: a command writes nothing into the home or temp folders (a CLI
   run in a process of its own, with HOME and TMPDIR pointing at empty folders).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import FIXTURES, REPO, recurrent_model, run_cli

N, H = 2, 4
DEEP = 17  # one more than to-openvino takes


def nested_ifs(depth: int) -> onnx.ModelProto:
    """An LSTM inside `depth` Ifs, each a level deeper (then: the next level, else: zeros)."""
    m = recurrent_model("LSTM", opset=14, T=5, N=N, I=3, H=H, outputs=("Y_h",))
    out = helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, N, H])
    body = helper.make_graph(list(m.graph.node), "lstm_body", [], [out], list(m.graph.initializer))
    for k in range(depth):
        zeros = numpy_helper.from_array(np.zeros((1, N, H), np.float32), f"z{k}")
        other = helper.make_graph([helper.make_node("Identity", [f"z{k}"], [f"e{k}"])], f"else{k}", [],
                                  [helper.make_tensor_value_info(f"e{k}", TensorProto.FLOAT, [1, N, H])], [zeros])
        node = helper.make_node("If", ["c"], [f"out{k}"], then_branch=body, else_branch=other, name=f"if{k}")
        body = helper.make_graph([node], f"level{k}", [],
                                 [helper.make_tensor_value_info(f"out{k}", TensorProto.FLOAT, [1, N, H])])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    graph = helper.make_graph(list(body.node), "m", [cond, m.graph.input[0]], list(body.output))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("route", ["auto", "openvino"])
def test_deeply_nested_ifs_are_refused_quickly(route, tmp_path):
    pytest.importorskip("openvino")
    model = tmp_path / "deep.onnx"
    onnx.save(nested_ifs(DEEP), str(model))
    started = time.monotonic()
    code, _, err = run_cli(["to-openvino", model, "-o", tmp_path / "o.xml", "--route", route])
    assert time.monotonic() - started < 30
    assert code == 3, err
    assert "lies 17 subgraphs deep" in err and "at most 16" in err and "if16.then_branch/if15.then_branch" in err
    assert not (tmp_path / "o.xml").exists() and not (tmp_path / "o.bin").exists()


def test_nested_ifs_within_the_limit_still_convert(tmp_path):
    pytest.importorskip("openvino")
    model = tmp_path / "nested.onnx"
    onnx.save(nested_ifs(3), str(model))
    code, _, err = run_cli(["to-openvino", model, "-o", tmp_path / "o.xml"])
    assert code == 0, err


def _cli_in_fresh_home(argv, tmp_path) -> tuple[subprocess.CompletedProcess, Path, Path]:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir(parents=True)
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "CI")}
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "rnnconv", *map(str, argv)], env=env, capture_output=True,
                          text=True, timeout=600)
    return proc, home, tmp


@pytest.mark.parametrize("command", ["upgrade", "to-openvino", "verify-ir"])
def test_no_telemetry_files_in_home_or_temp(command, tmp_path):
    if command != "upgrade":
        pytest.importorskip("openvino")
    out = tmp_path / "out"
    argv = {
        "upgrade": ["upgrade", FIXTURES / "lstm7_forward.onnx", "-o", out / "o.onnx"],
        "to-openvino": ["to-openvino", FIXTURES / "lstm14_forward.onnx", "-o", out / "o.xml", "--route", "openvino"],
        "verify-ir": ["to-openvino", FIXTURES / "lstm14_forward.onnx", "-o", out / "o.xml"],
    }[command]
    proc, home, tmp = _cli_in_fresh_home(argv, tmp_path)
    assert proc.returncode == 0, proc.stderr
    if command == "verify-ir":  # and the IR it wrote, through both runtimes
        proc, home2, tmp2 = _cli_in_fresh_home(["verify", out / "o.xml", FIXTURES / "lstm14_forward.onnx"],
                                               tmp_path / "again")
        assert proc.returncode == 0, proc.stderr
        assert not [p for p in [*home2.rglob("*"), *tmp2.rglob("*")]]
    # rnnconv's one documented file there: the default upgrade opset, found once per installed onnx and onnxruntime
    own = {home / ".cache", home / ".cache" / "rnnconv", home / ".cache" / "rnnconv" / "onnxruntime-opset.json"}
    assert not [p for p in [*home.rglob("*"), *tmp.rglob("*")] if p not in own]
