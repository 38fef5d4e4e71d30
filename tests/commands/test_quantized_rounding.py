"""Rounding at exact ties in to-openvino of com.microsoft DynamicQuantizeLSTM. onnxruntime quantizes X and H at run
time rounding half to even; the IR rnnconv writes must round so too (OpenVINO's Round-5, mode half_to_even).
Random inputs never land on a tie, so these feed an X that does: all of it >= 0 with a maximum of 31.875, so that
the scale is 0.125 exactly and every other value, an odd multiple of 0.0625, quantizes to k + 0.5.

The IR runs in rnnconv's IR interpreter and, when the openvino package is installed, in the OpenVINO runtime,
against onnxruntime (one thread) running the source; and an IR whose Round layers round half away from zero
(injected here) must fail to-openvino's own verification on those inputs: the source's run-time rounding is no
excuse for the IR's own."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from rnnconv.commands.to_openvino import to_openvino
from rnnconv.dialects.openvino.graph import IRGraph
from rnnconv.engine.ir_graph import run_ir
from rnnconv.errors import VerificationFailed
from tests.conftest import OPENVINO, dynamic_quantize_lstm, openvino_outputs

SCALE = 0.125  # (31.875 - 0) / 255


def ties(shape, seed: int = 0) -> np.ndarray:
    """X whose every value but the maximum quantizes to an exact tie k + 0.5 (k = 0..254)."""
    x = ((np.random.default_rng(seed).integers(0, 255, shape) + 0.5) * SCALE).astype(np.float32)
    x.flat[0] = 255 * SCALE
    assert (x / SCALE % 1 == 0.5).sum() == x.size - 1
    return x


def onnxruntime_outputs(path, feeds) -> dict:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # with more, onnxruntime quantizes H per thread's rows
    options.log_severity_level = 4
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "q.onnx"
    onnx.save(dynamic_quantize_lstm(), str(path))
    return path, {"X": ties((5, 2, 3))}


def test_ties_round_half_to_even_as_onnxruntime(source, tmp_path):
    path, feeds = source
    xml = tmp_path / "q.xml"
    assert to_openvino(path, xml, inputs=feeds).report.ok
    want = onnxruntime_outputs(path, feeds)["Y"]
    # half away from zero moves these by ~8e-3; half to even gives onnxruntime's numbers to the bit
    np.testing.assert_allclose(run_ir(xml, feeds, "float32")["Y"], want, rtol=0, atol=1e-6)
    if OPENVINO:
        np.testing.assert_allclose(openvino_outputs(xml, feeds)["Y"], want, rtol=0, atol=1e-6)


def test_an_ir_rounding_otherwise_fails_verification(source, tmp_path, monkeypatch):
    path, feeds = source
    op = IRGraph.op

    def away_from_zero(self, type_, *inputs, **attrs):
        if type_ == "Round":
            attrs["mode"] = "half_away_from_zero"
        return op(self, type_, *inputs, **attrs)

    monkeypatch.setattr(IRGraph, "op", away_from_zero)
    xml = tmp_path / "q.xml"
    with pytest.raises(VerificationFailed) as failed:
        to_openvino(path, xml, inputs=feeds)
    assert not xml.exists()
    lines = failed.value.report.lines()
    assert any(line.lstrip().startswith("FAIL") for line in lines), lines
    # the fault is real: the IR it would have written rounds away from zero and differs from onnxruntime
    monkeypatch.setattr(IRGraph, "op", away_from_zero)
    written = to_openvino(path, tmp_path / "unchecked.xml", verify="none")
    assert 'mode="half_away_from_zero"' in (tmp_path / "unchecked.xml").read_text() and written.report.ok
    got = run_ir(tmp_path / "unchecked.xml", feeds, "float32")["Y"]
    assert np.abs(got - onnxruntime_outputs(path, feeds)["Y"]).max() > 1e-3
