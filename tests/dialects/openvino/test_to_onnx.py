"""OpenVINO IR back into ONNX (dialects/openvino/to_onnx.py and tensor_iterator.py): explicit lengths and states are
kept, weights computed at run time come back as graph ops, a TensorIterator over one cell step becomes the ONNX
node, IR 10 names survive; layers with no ONNX mapping are listed. OpenVINO's runtime on the IR is the reference."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rnnconv.commands.from_openvino import from_openvino
from rnnconv.errors import Unsupported
from tests.conftest import (
    OUTPUTS,
    assert_close,
    feeds,
    openvino_ir,
    recurrent_model,
    recurrent_node,
    run_onnxruntime,
    run_openvino,
    tensor_iterator_ir,
)

ov = pytest.importorskip("openvino")


def test_explicit_lengths_and_states_are_kept(tmp_path):
    src = recurrent_model("GRU", direction="bidirectional", sequence_lens=True, initial_h=True, lbr=1)
    xml = openvino_ir(src, tmp_path / "m.xml")
    model, node, _ = recurrent_node(from_openvino(xml, tmp_path / "back.onnx").report.output)
    assert [i.name for i in model.graph.input] == ["X", "sequence_lens", "initial_h"]
    assert node.input[4] and node.input[5]
    inputs = feeds(src)
    assert_close(run_onnxruntime(src, inputs), run_onnxruntime(model, inputs), OUTPUTS["GRU"])


@pytest.mark.parametrize("kind,lbr", [("GRU", 1), ("LSTM", 0)])
def test_weights_computed_at_run_time(tmp_path, kind, lbr):
    """W, R, B fed as inputs: OpenVINO reorders them with graph ops; they come back reordered and B split by
    graph ops (Split, Concat, ConstantOfShape) in front of the ONNX node."""
    src = recurrent_model(kind, direction="bidirectional", lbr=lbr, weights_as_inputs=True)
    xml = openvino_ir(src, tmp_path / "m.xml")
    model, node, attrs = recurrent_node(from_openvino(xml, tmp_path / "back.onnx").report.output)
    assert attrs.get("linear_before_reset", 0) == lbr
    inputs = feeds(src)
    assert_close(run_onnxruntime(src, inputs), run_onnxruntime(model, inputs), OUTPUTS[kind])


TI_CASES = [("LSTM", {}), ("LSTM", dict(reverse=True, time_axis=0, clip=1.0)), ("GRU", dict(lbr=True)),
            ("GRU", dict(reverse=True, zero_state=True)), ("RNN", dict(time_axis=0))]


@pytest.mark.parametrize("kind,kw", TI_CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(TI_CASES)])
def test_tensor_iterator_one_cell(tmp_path, kind, kw):
    xml = tmp_path / "ti.xml"
    ov.save_model(tensor_iterator_ir(kind, **kw), str(xml))
    result = from_openvino(xml, tmp_path / "back.onnx")
    assert result.report.ok
    model, node, attrs = recurrent_node(tmp_path / "back.onnx")
    assert attrs.get("direction", b"forward") == (b"reverse" if kw.get("reverse") else b"forward")
    assert (len(node.input) <= 5) == bool(kw.get("zero_state"))
    rng = np.random.default_rng(3)
    inputs = {i.name: rng.uniform(-1, 1, [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
              for i in model.graph.input}
    assert_close(run_openvino(xml, inputs, reshape=True), run_onnxruntime(model, inputs), OUTPUTS[kind])


def test_tensor_iterator_with_more_than_a_cell_is_an_onnx_loop(tmp_path):
    """(test_control_flow.py checks its numbers.)"""
    xml = tmp_path / "ti.xml"
    ov.save_model(tensor_iterator_ir("LSTM", extra_op=True), str(xml))
    model = from_openvino(xml, tmp_path / "back.onnx", verify="none").model
    assert [n.op_type for n in model.graph if n.op_type in ("Loop", "LSTM")] == ["Loop"]


def test_unsupported_layers_are_listed(tmp_path):
    import openvino.opset13 as ops

    x = ops.parameter([2, 3], np.float32, name="x")
    y = ops.bucketize(ops.roll(x, ops.constant(np.array([1], np.int64)), ops.constant(np.array([1], np.int64))),
                      ops.constant(np.array([0.0, 0.5], np.float32)))
    y.output(0).get_tensor().set_names({"y"})
    ov.save_model(ov.Model([ops.result(y)], [x], "m"), str(tmp_path / "m.xml"))
    with pytest.raises(Unsupported) as err:
        from_openvino(tmp_path / "m.xml", tmp_path / "m.onnx")
    assert "Roll-opset7" in str(err.value) and "Bucketize-opset3" in str(err.value)
    assert "layer type Roll-opset7 has no ONNX mapping: no ONNX operator computes it" in str(err.value)
    assert not (tmp_path / "m.onnx").exists()


def test_ir_version_10_names(tmp_path):
    """IR 10 has no tensor names on ports: outputs are named as OpenVINO names them (layer name, ".<index>")."""
    xml = tmp_path / "ti.xml"
    ov.save_model(tensor_iterator_ir("GRU", lbr=True), str(xml))
    text = re.sub(r' (output_)?names="[^"]*"', "", xml.read_text()).replace('version="11"', 'version="10"', 1)
    xml.write_text(text)
    model = from_openvino(xml, tmp_path / "back.onnx").model
    ov_model = ov.Core().read_model(str(xml))
    assert [o.name for o in model.graph.outputs] == [o.get_any_name() for o in ov_model.outputs]
    assert [i.name for i in model.graph.inputs] == [i.get_any_name() for i in ov_model.inputs]
