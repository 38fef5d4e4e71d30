"""from-openvino --verify node: each recurrent layer alone (its IR with its real weights, zero states and full
lengths rebuilt from X's shape as OpenVINO writes them) in rnnconv's IR interpreter against its ONNX translation
in rnnconv's engine; the whole model is not run. A wrong translation fails the node check (exit 1, nothing
written)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from rnnconv.commands.from_openvino import from_openvino
from rnnconv.dialects.openvino import gates
from rnnconv.errors import UsageError, VerificationFailed
from rnnconv.verification import VERIFY_MODES
from tests.conftest import FIXTURES, REPO

ov = pytest.importorskip("openvino")
import openvino.opset13 as op  # noqa: E402

OPENVINO_FIXTURES = FIXTURES / "openvino"


def test_node_mode_checks_each_layer_and_not_the_model(tmp_path):
    xml = OPENVINO_FIXTURES / "gru_bidirectional_dynamo.xml"
    result = from_openvino(xml, tmp_path / "m.onnx", verify="node")
    subjects = [c.subject for c in result.report.checks]
    assert subjects and all(s.startswith("node ") for s in subjects)
    assert len(subjects) == len(result.report.rewrites) and result.report.verified == "node"
    full = from_openvino(xml, None)  # full: the same node checks, then the whole model
    assert [c.subject for c in full.report.checks][:len(subjects)] == subjects
    assert any(c.subject == "model" for c in full.report.checks)


def test_a_wrong_gate_order_fails_the_node_check(tmp_path, monkeypatch):
    """The node check can fail: with the LSTM gate order of the translation swapped (f and i), the layer alone
    disagrees with its ONNX node and nothing is written."""
    monkeypatch.setitem(gates.ORDER, "LSTM", ("i", "f", "c", "o"))
    with pytest.raises(VerificationFailed) as err:
        from_openvino(OPENVINO_FIXTURES / "lstm_batch_first_legacy14.xml", tmp_path / "m.onnx", verify="node")
    assert [c.subject for c in err.value.report.checks if not c.ok][0].startswith("node ")
    assert not (tmp_path / "m.onnx").exists()


def test_zero_states_and_full_lengths_stay_absent_in_the_layer_alone():
    """The layer alone is translated as in the model: OpenVINO's synthesized zero states and full lengths come
    back absent there too (the node check covers that decision)."""
    from rnnconv.dialects.openvino import reader
    from rnnconv.dialects.openvino.to_onnx import Converter

    conv = Converter(reader.read(OPENVINO_FIXTURES / "lstm_batch_first_legacy14.xml"), 17, 0)
    conv.run()
    [rewritten] = conv.recurrent
    alone = Converter(rewritten.alone(), 17, 0)
    model = alone.run()
    [node] = [n for n in model.graph if n.op_type == "LSTM"]
    assert len([v for v in node.inputs if v is not None]) == 4  # X, W, R, B: no lengths, no initial states
    assert "synthesized initial_h, initial_c, sequence_lengths -> absent" in alone.rewrites[0]["what"]


def test_layer_alone_takes_its_sizes_from_the_weights(tmp_path):
    """X and the states of the layer alone get the input size, directions and hidden size of the weights where the
    IR leaves them dynamic (OpenVINO's PyTorch frontend does)."""
    from rnnconv.dialects.openvino import reader
    from rnnconv.dialects.openvino.to_onnx import Converter

    H, I = 4, 3
    rng = np.random.default_rng(0)
    x = op.parameter([-1, -1, -1], np.float32, name="x")
    h = op.parameter([-1, -1, -1], np.float32, name="h")
    lens = op.parameter([-1], np.int32, name="lens")
    seq = op.gru_sequence(x, h, lens, op.constant(rng.uniform(-1, 1, (2, 3 * H, I)).astype(np.float32)),
                          op.constant(rng.uniform(-1, 1, (2, 3 * H, H)).astype(np.float32)),
                          op.constant(rng.uniform(-1, 1, (2, 3 * H)).astype(np.float32)), H, "bidirectional")
    xml = tmp_path / "m.xml"
    ov.save_model(ov.Model([op.result(seq.output(1))], [x, h, lens], "m"), str(xml))
    conv = Converter(reader.read(xml), 17, 0)
    conv.run()
    alone = conv.recurrent[0].alone()
    assert {p.outputs[0].names[0]: p.outputs[0].dims for p in alone.parameters()} == {
        "x": [-1, -1, I], "h": [-1, 2, H], "lens": [-1]}
    result = from_openvino(xml, None, verify="node", dims={"batch": 2, "sequence": 3})
    assert result.report.ok


def test_verify_modes_are_the_pipelines():
    from rnnconv import conversion

    assert conversion.VERIFY_MODES is VERIFY_MODES and "node" in VERIFY_MODES  # the one tuple, not a copy
    with pytest.raises(UsageError, match="verify='nodes': expected one of full, node, none"):
        from_openvino(OPENVINO_FIXTURES / "gru_bidirectional_dynamo.xml", verify="nodes")


def test_cli_verify_node(tmp_path):
    out = tmp_path / "m.onnx"
    xml = OPENVINO_FIXTURES / "gru_bidirectional_dynamo.xml"
    res = subprocess.run([sys.executable, "-m", "rnnconv", "from-openvino", str(xml), "-o", str(out), "--verify",
                          "node", "--json"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["verified"] == "node" and out.exists()
