"""`rnnconv fuse` on silero-vad 6.2.3's silero_vad_op18_ifless.onnx, whose decoder LSTMCell is written out once per
sample-rate branch of an If (Gemm + Split + Sigmoid/Tanh, no recurrent node): each becomes a one-step LSTM node in
its branch, the interface unchanged, and the fused model equals onnxruntime on the source at both sample rates."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest

from tests.real.conftest import rnnconv_cli

pytestmark = pytest.mark.real


@pytest.mark.parametrize("real_model", ["silero_vad_op18_ifless"], indirect=True)
def test_silero_cells_fuse_in_their_branches(real_model, tmp_path):
    import onnxruntime as ort

    run = rnnconv_cli("fuse", real_model.path, "-o", tmp_path / "fused.onnx", *real_model.options)
    assert run.code == 0, run.stderr
    assert "fused 2 recurrence(s) (2 LSTM) from 2 unrolled step(s)" in run.stdout
    fused = onnx.load(str(tmp_path / "fused.onnx"))
    branch_ops = [Counter(n.op_type for n in a.g.node) for n in fused.graph.node if n.op_type == "If"
                  for a in n.attribute]
    assert sorted(ops["LSTM"] for ops in branch_ops) == [1, 1] and not any(ops["Gemm"] for ops in branch_ops)
    source = onnx.load(str(real_model.path))
    assert [(v.name, v.type) for v in fused.graph.input] == [(v.name, v.type) for v in source.graph.input]
    assert [(v.name, v.type) for v in fused.graph.output] == [(v.name, v.type) for v in source.graph.output]
    rng = np.random.default_rng(3)
    want = ort.InferenceSession(str(real_model.path), providers=["CPUExecutionProvider"])
    got = ort.InferenceSession(str(tmp_path / "fused.onnx"), providers=["CPUExecutionProvider"])
    for sr, samples in ((16000, 576), (8000, 288)):  # 512 or 256 new samples and their context
        feeds = {"input": rng.uniform(-0.5, 0.5, (2, samples)).astype(np.float32),
                 "state": rng.uniform(-0.5, 0.5, (2, 2, 128)).astype(np.float32), "sr": np.array(sr, np.int64)}
        for a, b in zip(want.run(None, feeds), got.run(None, feeds)):
            np.testing.assert_allclose(b, a, atol=1e-5, rtol=1e-5, err_msg=f"sr={sr}")
