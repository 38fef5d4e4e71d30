"""Issue 25 item 1: the shipped torch fixtures downgrade below opset 5, where Reshape holds its shape as an
attribute (transpose folding read a second input that is not there). The result is held against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from onnx import helper, numpy_helper

from tests.conftest import TORCH, fixture_feeds, run_cli, run_onnxruntime

CASES = [("lstm", 1), ("lstm", 4), ("rnn", 1), ("rnn", 4), ("gru", 4)]


@pytest.mark.parametrize("op,opset", CASES, ids=[f"{op}-{o}" for op, o in CASES])
def test_downgrade_below_opset_5(op, opset, tmp_path):
    source = TORCH / f"{op}_batch_first_bidirectional_two_layers_initial_state_legacy9.onnx"
    out = tmp_path / "o.onnx"
    code, _, err = run_cli(["downgrade", source, "-o", out, "--opset", opset])
    assert code == 0, err
    model = onnx.load(str(out))
    assert next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) == opset
    reshapes = [n for n in model.graph.node if n.op_type == "Reshape"]
    assert all(len(n.input) == 1 and any(a.name == "shape" for a in n.attribute) for n in reshapes)
    feeds = fixture_feeds(source)
    expected = run_onnxruntime(onnx.load(str(source)), feeds)
    got = run_onnxruntime(as_opset_7(model), feeds)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5)


def test_gru_linear_before_reset_at_opset_1_is_refused_by_name(tmp_path):
    source = TORCH / "gru_batch_first_bidirectional_two_layers_initial_state_legacy9.onnx"
    code, _, err = run_cli(["downgrade", source, "-o", tmp_path / "o.onnx", "--opset", 1])
    assert code == 3 and "linear_before_reset" in err and "--opset 3" in err
    assert not (tmp_path / "o.onnx").exists()


def as_opset_7(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model relabelled opset 7, which onnxruntime runs (it has no LSTM-1/RNN-1 kernels), from the spec's
    changelog, not rnnconv's: LSTM/RNN/GRU-7 drop output_sequence (Y is always computed), Reshape-5 takes its
    shape as an input."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for o in out.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 7
    for node in out.graph.node:
        if node.op_type in ("LSTM", "RNN", "GRU"):
            kept = [a for a in node.attribute if a.name != "output_sequence"]
            del node.attribute[:]
            node.attribute.extend(kept)
        if node.op_type == "Reshape":
            shape = next(helper.get_attribute_value(a) for a in node.attribute if a.name == "shape")
            del node.attribute[:]
            name = f"{node.name}_shape_input"
            out.graph.initializer.append(numpy_helper.from_array(np.array(shape, dtype=np.int64), name))
            node.input.append(name)
    return out
