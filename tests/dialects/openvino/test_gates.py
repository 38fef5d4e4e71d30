"""Gate order and bias folding between ONNX layers and OpenVINO Sequence tensors (dialects/openvino/gates.py), held
against the spec's orders written out here (not gates' own tables), with and without openvino."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest

from rnnconv.dialects.onnx_recurrent import find
from rnnconv.dialects.openvino import gates
from rnnconv.io import load
from tests.conftest import (
    OPENVINO_TOL,
    assert_close,
    feeds,
    initializers,
    recurrent_model,
    run_onnxruntime,
    run_openvino,
)


@pytest.mark.parametrize("kind,lbr", [("LSTM", 0), ("GRU", 0), ("GRU", 1), ("RNN", 0)])
def test_gates_round_trip_for_the_reverse_direction(kind, lbr):
    """OpenVINO tensors back to a Layer (issue 6 uses this): W/R exact, biases exact in sum (Rb folded into Wb)."""
    (rn,) = find(load(recurrent_model(kind, direction="bidirectional", lbr=lbr)))
    t = gates.sequence_tensors(rn.layer)
    back = gates.layer_from_sequence(kind, gates.attributes(rn.layer), t["W"], t["R"], t["B"])
    for a, b in zip(rn.layer.cells, back.cells):
        for g in a.W:
            np.testing.assert_array_equal(a.W[g], b.W[g])
            np.testing.assert_array_equal(a.R[g], b.R[g])
            np.testing.assert_allclose(a.Wb[g] + a.Rb[g], b.Wb[g] + b.Rb[g], rtol=1e-6, atol=1e-7)
        if kind == "GRU" and lbr:
            np.testing.assert_array_equal(a.Rb["h"], b.Rb["h"])  # kept apart: it sits under r


# -- the spec's orders, written out here (shared spec README; OpenVINO LSTMSequence-5, GRUSequence-5) ---------
# OpenVINO's gate blocks, as indices of ONNX's: LSTM f,i,c,o from ONNX i,o,f,c; GRU z,r,h as ONNX; RNN one gate.
OV_FROM_ONNX = {"LSTM": [2, 0, 3, 1], "GRU": [0, 1, 2], "RNN": [0]}
# OpenVINO's B blocks as (ONNX Wb block or None, ONNX Rb block or None): Wb + Rb per gate, except GRU with
# linear_before_reset: [Wbz+Rbz, Wbr+Rbr, Wbh, Rbh].
OV_BIAS = {"LSTM": [(2, 2), (0, 0), (3, 3), (1, 1)], "GRU": [(0, 0), (1, 1), (2, 2)], "RNN": [(0, 0)],
           "GRU_lbr": [(0, 0), (1, 1), (2, None), (None, 2)]}
SPEC_CASES = [("LSTM", 0), ("GRU", 0), ("GRU", 1), ("RNN", 0)]
H, I = 5, 3


def _blocks(a: np.ndarray, n: int) -> list[np.ndarray]:
    return [a[k * H:(k + 1) * H] for k in range(n)]


def _spec_sequence_tensors(kind: str, lbr: int, onnx_w: dict) -> dict:
    """The OpenVINO W, R, B the spec asks for, from the ONNX node's W [D,G*H,I], R [D,G*H,H], B [D,2*G*H]."""
    order = OV_FROM_ONNX[kind]
    G = len(order)
    out = {"W": [], "R": [], "B": []}
    for d in range(onnx_w["W"].shape[0]):
        for k in ("W", "R"):
            blocks = _blocks(onnx_w[k][d], G)
            out[k].append(np.concatenate([blocks[j] for j in order]))
        wb, rb = _blocks(onnx_w["B"][d][:G * H], G), _blocks(onnx_w["B"][d][G * H:], G)
        slots = OV_BIAS["GRU_lbr" if kind == "GRU" and lbr else kind]
        out["B"].append(np.concatenate([(wb[w] if w is not None else 0) + (rb[r] if r is not None else 0)
                                        for w, r in slots]))
    return {k: np.stack(v) for k, v in out.items()}


def _onnx_weights(kind: str, lbr: int, direction: str) -> tuple:
    model = recurrent_model(kind, direction=direction, lbr=lbr, H=H, I=I, seed=7)
    return model, initializers(model)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("kind,lbr", SPEC_CASES)
def test_sequence_tensors_follow_the_spec(kind, lbr, direction):
    """gates.sequence_tensors and sequence_pieces (the streaming writer's) against the spec's orders on a layer
    whose every gate and bias block holds its own values."""
    model, w = _onnx_weights(kind, lbr, direction)
    want = _spec_sequence_tensors(kind, lbr, w)
    (rn,) = find(load(model))
    for got in (gates.sequence_tensors(rn.layer), gates.sequence_pieces(rn.layer, np.float32)):
        for k in ("W", "R", "B"):
            np.testing.assert_allclose(np.asarray(got[k]), want[k], rtol=1e-6, atol=1e-7, err_msg=k)


@pytest.mark.parametrize("kind,lbr", SPEC_CASES)
def test_layer_from_sequence_follows_the_spec(kind, lbr):
    """OpenVINO tensors built here in the spec's order back to ONNX gates: W and R exact, each gate's Wb + Rb the
    folded sum, GRU lbr's Rbh apart."""
    rng = np.random.default_rng(3)
    G = len(OV_FROM_ONNX[kind])
    W, R = rng.uniform(-1, 1, (2, G * H, I)), rng.uniform(-1, 1, (2, G * H, H))
    B = rng.uniform(-1, 1, (2, (4 if lbr else G) * H))
    attrs = {"hidden_size": str(H), "direction": "bidirectional", "linear_before_reset": "true" if lbr else "false"}
    layer = gates.layer_from_sequence(kind, attrs, W, R, B)
    onnx_names = {"LSTM": "iofc", "GRU": "zrh", "RNN": "i"}[kind]
    for d, cell in enumerate(layer.cells):
        for ov_block, onnx_block in enumerate(OV_FROM_ONNX[kind]):
            g = onnx_names[onnx_block]
            np.testing.assert_array_equal(cell.W[g], _blocks(W[d], G)[ov_block])
            np.testing.assert_array_equal(cell.R[g], _blocks(R[d], G)[ov_block])
        slots = OV_BIAS["GRU_lbr" if kind == "GRU" and lbr else kind]
        want_wb, want_rb = {g: 0.0 for g in onnx_names}, {g: 0.0 for g in onnx_names}
        for (w_src, r_src), block in zip(slots, _blocks(B[d], len(slots))):
            if w_src is not None and r_src is not None:
                want_wb[onnx_names[w_src]] = block  # folded: only the sum counts
            elif w_src is not None:
                want_wb[onnx_names[w_src]] = block
            else:
                want_rb[onnx_names[r_src]] = block
        for g in onnx_names:
            if kind == "GRU" and lbr and g == "h":
                np.testing.assert_array_equal(cell.Wb[g], want_wb[g])
                np.testing.assert_array_equal(cell.Rb[g], want_rb[g])
            else:
                np.testing.assert_allclose(cell.Wb[g] + cell.Rb[g], want_wb[g] + want_rb[g], rtol=1e-12)


def _ir_constants(xml: Path, layer_type: str) -> dict:
    """W, R, B of the one `layer_type` layer in an IR, read here with ElementTree and numpy (not rnnconv's reader):
    the Consts feeding its last three input ports."""
    root = ET.parse(xml).getroot()
    layers = {layer.get("id"): layer for layer in root.iter("layer")}
    (seq,) = [la for la in layers.values() if la.get("type") == layer_type]
    ports = sorted(int(p.get("id")) for p in seq.find("input").iter("port"))
    feeding = {int(e.get("to-port")): layers[e.get("from-layer")] for e in root.iter("edge")
               if e.get("to-layer") == seq.get("id")}
    blob = xml.with_suffix(".bin").read_bytes()
    out = {}
    for name, port in zip(("W", "R", "B"), ports[-3:]):
        const = feeding[port]
        assert const.get("type") == "Const", (name, const.get("type"))
        data = const.find("data")
        assert data.get("element_type") == "f32", data.attrib
        offset, size = int(data.get("offset")), int(data.get("size"))
        shape = [int(s) for s in data.get("shape").split(",")]
        out[name] = np.frombuffer(blob[offset:offset + size], np.float32).reshape(shape)
    return out


SEQUENCE = {"LSTM": "LSTMSequence", "GRU": "GRUSequence", "RNN": "RNNSequence"}


@pytest.mark.parametrize("kind,lbr", SPEC_CASES)
def test_to_openvino_writes_and_from_openvino_reads_the_spec_orders(kind, lbr, tmp_path):
    """The IR to-openvino writes holds the spec's W, R, B (read back here without rnnconv); from-openvino on it
    gives back the ONNX weights (W, R exact; each gate's Wb + Rb; GRU lbr's Rbh apart); onnxruntime runs the
    result as it runs the source."""
    from rnnconv.commands.from_openvino import from_openvino
    from rnnconv.commands.to_openvino import to_openvino

    model, w = _onnx_weights(kind, lbr, "bidirectional")
    to_openvino(model, tmp_path / "m.xml", verify="none")
    got = _ir_constants(tmp_path / "m.xml", SEQUENCE[kind])
    for k, want in _spec_sequence_tensors(kind, lbr, w).items():
        np.testing.assert_allclose(got[k], want, rtol=1e-6, atol=1e-7, err_msg=k)

    from_openvino(tmp_path / "m.xml", tmp_path / "back.onnx", verify="none")
    back = onnx.load(str(tmp_path / "back.onnx"))
    (node,) = [n for n in back.graph.node if n.op_type == kind]
    values = initializers(back)
    G = len(OV_FROM_ONNX[kind])
    np.testing.assert_array_equal(values[node.input[1]], w["W"])
    np.testing.assert_array_equal(values[node.input[2]], w["R"])
    B = values[node.input[3]]
    for d in range(2):
        wb, rb = _blocks(B[d][:G * H], G), _blocks(B[d][G * H:], G)
        want_wb, want_rb = _blocks(w["B"][d][:G * H], G), _blocks(w["B"][d][G * H:], G)
        for k in range(G):
            if kind == "GRU" and lbr and k == 2:
                np.testing.assert_array_equal(rb[k], want_rb[k])
                np.testing.assert_array_equal(wb[k], want_wb[k])
            else:
                np.testing.assert_allclose(wb[k] + rb[k], want_wb[k] + want_rb[k], rtol=1e-6, atol=1e-7)
    inputs = feeds(model)
    assert_close(run_onnxruntime(model, inputs), run_onnxruntime(back, inputs), tol=1e-5)


@pytest.mark.parametrize("kind,lbr", SPEC_CASES)
def test_openvino_runs_the_written_ir_as_onnxruntime_runs_the_model(kind, lbr, tmp_path):
    """With openvino installed: the OpenVINO runtime on the IR to-openvino wrote, against onnxruntime on the
    ONNX model (every gate with its own weights)."""
    pytest.importorskip("openvino")
    from rnnconv.commands.to_openvino import to_openvino

    model, _ = _onnx_weights(kind, lbr, "bidirectional")
    to_openvino(model, tmp_path / "m.xml", verify="none")
    inputs = feeds(model)
    assert_close(run_onnxruntime(model, inputs), run_openvino(tmp_path / "m.xml", inputs), tol=OPENVINO_TOL)
