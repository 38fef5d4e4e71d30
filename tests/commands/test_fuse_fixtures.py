"""`rnnconv fuse` on the shipped PyTorch exports (fixtures/fuse, made by fixtures/make_fuse_fixtures.py), without
torch: onnxruntime on the fused model against the outputs torch computed, stored beside each export."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import pytest

from tests.conftest import FIXTURES, interface, run_cli, run_onnxruntime

FUSE = FIXTURES / "fuse"
RECURRENT = ("RNN", "GRU", "LSTM")


def directions(model: onnx.ModelProto) -> int:
    """The recurrent directions the model's nodes run (a bidirectional node runs two)."""
    count = 0
    for n in model.graph.node:
        if n.op_type in RECURRENT:
            d = next((a.s.decode() for a in n.attribute if a.name == "direction"), "forward")
            count += 2 if d == "bidirectional" else 1
    return count


CASES = json.loads((FUSE / "index.json").read_text())["fixtures"] if (FUSE / "index.json").exists() else []


@pytest.mark.parametrize("entry", CASES, ids=[e["file"] for e in CASES])
def test_fuse_shipped_export(tmp_path, entry):
    src, out = FUSE / entry["file"], tmp_path / "fused.onnx"
    code, stdout, stderr = run_cli(["fuse", src, "-o", out])
    if entry["fused"] is None:  # steps with their own weights: nothing to fuse, and why
        assert code == 3 and "not fused" in stderr and "differs" in stderr, stderr
        return
    assert code == 0, stdout + stderr
    fused = onnx.load(str(out))
    ops = Counter(n.op_type for n in fused.graph.node)
    assert ops["MatMul"] == 0 and ops["Gemm"] == 0, ops
    assert ops[entry["fused"]["op"]] == directions(fused) == entry["fused"]["directions"]  # a node per direction
    assert interface(src) == interface(out)
    data = np.load(FUSE / entry["file"].replace(".onnx", ".npz"))
    got = run_onnxruntime(out, {k: data[k] for k in entry["inputs"]})
    for name in entry["outputs"]:
        np.testing.assert_allclose(got[name], data[name], atol=1e-5, rtol=1e-5, err_msg=name)


def test_inspect_and_check_list_the_unrolled_steps():
    src = FUSE / "rnn_two_layers_bidirectional_batch_first_initial_state_dynamo.onnx"
    code, stdout, _ = run_cli(["inspect", src])
    assert code == 0 and stdout.count("unrolled RNN step(s) at") == 4 and "try rnnconv fuse" in stdout
    code, stdout, _ = run_cli(["check", FUSE / "lstm_cell_dynamo.onnx", "--target", "openvino"])
    assert "unrolled: 6 unrolled LSTM step(s) at" in stdout
    code, stdout, _ = run_cli(["inspect", FUSE / "lstm_cell_own_weights_per_step_dynamo.onnx", "--json"])
    assert any("differs" in line for line in json.loads(stdout)["unrolled"])
