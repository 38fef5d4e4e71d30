"""A bidirectional layer whose weights pass from_onnx.SPLIT_BYTES is written as its two directions (a forward and a
reverse Sequence op, each with Consts of its own, and a Concat): what OpenVINO's CPU plugin compiles a
bidirectional op into, without the copy of every weight it makes to split one. A smaller layer stays one op."""

from __future__ import annotations

import numpy as np
import pytest

from rnnconv import io
from rnnconv.commands.to_openvino import to_openvino
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import from_onnx, gates
from rnnconv.dialects.openvino import reader as ov_reader
from tests.conftest import assert_close, lstm_file, openvino_outputs, reference

H, I = 16, 8
WR_BYTES = 2 * 4 * H * (I + H) * 4  # W and R of both directions, float32


def sequences(xml):
    graph = ov_reader.read(xml)
    return graph, [layer for layer in graph.layers if layer.type == "LSTMSequence"]


def feeding(graph, layer, port):
    """The Const behind an input port (through the f16 decompression Convert)."""
    producers, by_id = graph.producers(), graph.by_id()
    src = by_id[producers[(layer.id, port)][0]]
    return by_id[producers[(src.id, 0)][0]] if src.type == "Convert" else src


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("fp16", [False, True])
def test_a_big_bidirectional_layer_becomes_its_two_directions(layout, fp16, tmp_path, monkeypatch):
    monkeypatch.setattr(from_onnx, "SPLIT_BYTES", WR_BYTES - 1)
    src = lstm_file(tmp_path / "m.onnx", H=H, I=I, layout=layout)
    result = to_openvino(src, tmp_path / "m.xml", fp16=fp16)
    assert result.report.ok
    assert any("forward and reverse LSTMSequence-5 + Concat" in r["what"] for r in result.report.rewrites)
    graph, seqs = sequences(tmp_path / "m.xml")
    assert [s.attrs["direction"] for s in seqs] == ["forward", "reverse"]
    assert not [layer for layer in graph.layers if layer.type == "Split" and layer.inputs[0].dims[0] == 2]
    (rn,) = onnx_recurrent.find(io.load(src))
    want = gates.sequence_tensors(rn.layer)
    for d, seq in enumerate(seqs):
        for port, k in ((4, "W"), (5, "R"), (6, "B")):
            got = feeding(graph, seq, port).value
            np.testing.assert_array_equal(got, want[k][d:d + 1].astype(np.float16 if fp16 else np.float32))
    # Held against onnxruntime here, not only by the command's own checks.
    pytest.importorskip("openvino")
    x = np.random.default_rng(3).standard_normal((2, 3, I) if layout else (3, 2, I)).astype(np.float32)
    assert_close(reference(str(src), {"X": x}), openvino_outputs(tmp_path / "m.xml", {"X": x}), ["Y", "Y_h"],
                 tol=2e-3 if fp16 else 1e-4)


def test_a_layer_at_the_threshold_stays_one_op(tmp_path, monkeypatch):
    monkeypatch.setattr(from_onnx, "SPLIT_BYTES", WR_BYTES)
    src = lstm_file(tmp_path / "m.onnx", H=H, I=I)
    assert to_openvino(src, tmp_path / "m.xml", runtime=False).report.ok
    _, seqs = sequences(tmp_path / "m.xml")
    assert [s.attrs["direction"] for s in seqs] == ["bidirectional"]
