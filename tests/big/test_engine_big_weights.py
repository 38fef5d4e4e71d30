"""The engine and the IR interpreter on big weights: gate blocks multiplied where they lie (a view over an ONNX
node's blocks, gate by gate over memory-mapped pieces) and a stacked copy each give onnxruntime's numbers."""

from __future__ import annotations

import numpy as np
import pytest

from rnnconv import io
from rnnconv.commands.to_openvino import onnx_to_ir
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import writer as ov_writer
from tests.conftest import OUTPUTS, lstm_file, recurrent_model, run_onnxruntime


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("lbr", [0, 1])
def test_big_weights_are_multiplied_where_they_lie(op, lbr, monkeypatch):
    # The engine's three ways to multiply by a layer's gates each give onnxruntime's numbers: one view over an
    # ONNX node's gate blocks (no copy), gate by gate where the weights lie (big layers in another gate order), a
    # stacked copy; a big matrix at a batch of a few (N=3 here) by matrix-vector products over row blocks.
    from rnnconv.engine import onnx_graph, recurrence

    if lbr and op != "GRU":
        pytest.skip("linear_before_reset is GRU's")
    rng = np.random.default_rng(0)
    G, H, I, T, N = {"LSTM": 4, "GRU": 3, "RNN": 1}[op], 6, 5, 4, 3
    args = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((T, N, I), (2, G * H, I), (2, G * H, H),
                                                               (2, 2 * G * H))]
    attrs = dict(hidden_size=H, direction="bidirectional", dtype=np.float32)
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    model = recurrent_model(op, direction="bidirectional", T=T, N=N, I=I, H=H, lbr=lbr, outputs=OUTPUTS[op],
                            weights=dict(zip("WRB", args[1:])))
    want = run_onnxruntime(model, {"X": args[0]})
    viewed = onnx_graph.KERNELS[op](*args, **attrs)
    monkeypatch.setattr(recurrence, "_adjacent", lambda mats: None)
    stacked = onnx_graph.KERNELS[op](*args, **attrs)
    monkeypatch.setattr(recurrence, "NO_COPY_BYTES", 0)
    in_place = onnx_graph.KERNELS[op](*args, **attrs)
    for way, got in (("viewed", viewed), ("stacked", stacked), ("in place", in_place)):
        for name, value in zip(OUTPUTS[op], got):
            np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-6, err_msg=f"{name} {way}")


def test_adjacent_gate_blocks_join_without_copy():
    from rnnconv.engine.recurrence import _adjacent

    W = np.arange(24, dtype=np.float32).reshape(6, 4)
    blocks = [W[0:2], W[2:4], W[4:6]]
    joined = _adjacent(blocks)
    assert joined is not None and np.shares_memory(joined, W)
    np.testing.assert_array_equal(joined, W)
    assert _adjacent([W[2:4], W[0:2], W[4:6]]) is None  # another order needs a copy
    assert _adjacent([W[0:2], np.array(W[2:4]), W[4:6]]) is None  # equal values elsewhere in memory
    assert _adjacent([W[0:2, :3], W[2:4, :3]]) is None  # not contiguous


def test_ir_interpreter_reads_big_weights_where_they_lie(tmp_path, monkeypatch):
    # A Sequence op takes its gate blocks straight from the pieces: never joined, the same numbers as joined.
    from rnnconv.engine import ir_graph
    from rnnconv.verification.inputs import random_inputs

    monkeypatch.setattr(ov_writer, "VIEW_BYTES", 0)
    path = lstm_file(tmp_path / "m.onnx", H=16, I=8)
    model = io.load(path)
    feeds = random_inputs(model)
    want = run_onnxruntime(path, feeds)
    monkeypatch.setattr(ir_graph, "_TAKES_PIECES", frozenset())  # every op gets joined arrays
    joined = ir_graph.run_ir(onnx_to_ir(model).graph, feeds, "float32")
    monkeypatch.undo()
    monkeypatch.setattr(ov_writer, "VIEW_BYTES", 0)
    graph = onnx_to_ir(model).graph
    assert any(isinstance(layer.value, ovir.Pieces) for layer in graph.layers)

    def refuse(self, *a, **k):
        raise AssertionError("weights joined")

    monkeypatch.setattr(ovir.Pieces, "__array__", refuse)
    lazy = ir_graph.run_ir(graph, feeds, "float32")
    for way, got in (("joined", joined), ("lazy", lazy)):
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5, err_msg=f"{k} {way}")
