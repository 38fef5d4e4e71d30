"""to-openvino's OpenVINO route: OpenVINO's ONNX import converts the graph, every GRU/LSTM/RNN node goes through
rnnconv's exact mapping, grafted. The written IR (checked port by port as it is saved, tests/conftest.py) runs in
OpenVINO's runtime (CPU, f32) within 1e-4 of onnxruntime (rnnconv's engine where onnxruntime refuses the model;
PyTorch's own outputs for its exports) on every fixture and PyTorch export, on convolutional front ends with an
LSTM that OpenVINO's own import gets wrong, and inside If bodies."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv import io
from rnnconv.commands import to_openvino as command
from rnnconv.commands.to_openvino import to_openvino
from rnnconv.dialects import onnx_recurrent
from rnnconv.errors import VerificationFailed
from tests.conftest import (
    FIXTURES,
    OPENVINO_TOL,
    assert_close,
    conv_lstm,
    fixture_cases,
    fixture_feeds,
    if_lstm,
    lstm_node,
    openvino_outputs,
    reference,
)

ov = pytest.importorskip("openvino")
MAPPED = "(rnnconv's mapping, inside OpenVINO's import)"


def plain_openvino(model: onnx.ModelProto, tmp_path, feeds) -> dict:
    """What OpenVINO's own import computes (the comparison that shows a test can fail)."""
    path = tmp_path / "plain.onnx"
    onnx.save(model, path)
    compiled = ov.Core().compile_model(ov.convert_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return {n: np.asarray(v) for p, v in compiled(feeds).items() for n in p.get_names()}


@pytest.mark.parametrize("name", fixture_cases())
def test_every_fixture_and_pytorch_export_through_openvinos_import(tmp_path, name):
    path = FIXTURES / name
    xml = tmp_path / "m.xml"
    report = to_openvino(path, xml, route="openvino", verify="node").report
    nodes = onnx_recurrent.find(io.load(path))
    assert report.ok and [c.subject for c in report.checks] == [f"node {rn.name}" for rn in nodes]
    assert {r["node"] for r in report.rewrites} == {rn.name for rn in nodes}
    assert all(r["what"].endswith(MAPPED) for r in report.rewrites)
    feeds = fixture_feeds(path)
    got = openvino_outputs(xml, feeds)
    names = [o.name for o in onnx.load(str(path), load_external_data=False).graph.output]
    assert_close(reference(path, feeds), got, names, OPENVINO_TOL)
    if name.startswith("torch/"):
        data = np.load(path.with_suffix(".npz"))
        assert_close({n: data[n] for n in names}, got, names, OPENVINO_TOL)


@pytest.mark.parametrize("conv", ["1d", "2d"])
def test_convolutional_front_end_keeps_the_lstm_exact(tmp_path, conv):
    """Conv + LSTM with peepholes and input_forget: rnnconv alone has no Conv; OpenVINO alone drops P and
    input_forget. The default route takes OpenVINO's import for the Conv and rnnconv's mapping for the LSTM."""
    model = conv_lstm(conv)
    xml = tmp_path / "m.xml"
    report = to_openvino(model, xml).report
    assert report.ok
    (rewrite,) = report.rewrites
    assert rewrite["node"] == "lstm" and "explicit recurrence" in rewrite["what"] and rewrite["what"].endswith(MAPPED)
    assert any("Conv 1" in n and "rnnconv mapped 1 recurrent node" in n for n in report.notes)
    assert any(c.subject == "model" and "OpenVINO runtime" in c.engines for c in report.checks)
    assert any(c.subject == "model" and "IR interpreter" in c.engines for c in report.checks)  # it runs MVN too
    x = model.graph.input[0]
    for n, length in ((2, 7), (1, 3)):
        shape = [n] + [d.dim_value for d in x.type.tensor_type.shape.dim[1:-1]] + [length]
        feeds = {x.name: np.random.default_rng(length).uniform(-1, 1, shape).astype(np.float32)}
        ref = reference(model, feeds)
        assert_close(ref, openvino_outputs(xml, feeds), ["logits", "Y_h"], OPENVINO_TOL)
        assert np.abs(plain_openvino(model, tmp_path, feeds)["logits"] - ref["logits"]).max() > 1e-3


def test_lstm_with_peepholes_in_an_if_body(tmp_path):
    model = if_lstm()
    xml = tmp_path / "m.xml"
    report = to_openvino(model, xml).report
    assert report.ok
    assert {r["node"] for r in report.rewrites} == {"if/then_branch/lstm_then", "if/else_branch/lstm_else"}
    assert [c.subject for c in report.checks[:2]] == ["node if/then_branch/lstm_then", "node if/else_branch/lstm_else"]
    x = np.random.default_rng(3).uniform(-1, 1, (5, 3, 4)).astype(np.float32)
    for cond in (True, False):
        feeds = {"X": x, "cond": np.array(cond)}
        ref = reference(model, feeds)
        assert_close(ref, openvino_outputs(xml, feeds), ["y"], OPENVINO_TOL)
        if cond:  # the peephole branch: OpenVINO's own import drops P and input_forget
            assert np.abs(plain_openvino(model, tmp_path, feeds)["y"] - ref["y"]).max() > 1e-3


def test_the_own_writers_refusal_falls_back_to_openvinos_import(tmp_path):
    """An LSTM with peepholes whose input size only shape inference of the Reshape before it knows: rnnconv's
    own writer cannot build the explicit recurrence; OpenVINO's import tells the hook the size."""
    rng = np.random.default_rng(0)
    node, inits = lstm_node(rng, "lstm", "x3", 8, 5, peepholes=True)
    inits.append(numpy_helper.from_array(np.array([0, 0, -1], np.int64), "shape"))
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["X", "shape"], ["x3"]), node], "reshape_lstm",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", 2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["T", 1, "N", 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    xml = tmp_path / "m.xml"
    report = to_openvino(model, xml).report
    assert report.ok and any("rnnconv's own writer cannot convert it alone" in n for n in report.notes)
    feeds = {"X": rng.uniform(-1, 1, (4, 3, 2, 4)).astype(np.float32)}
    assert_close(reference(model, feeds), openvino_outputs(xml, feeds), ["Y"], OPENVINO_TOL)


def test_report_says_what_rnnconv_mapped_and_what_openvino_imported(tmp_path):
    from click.testing import CliRunner

    from rnnconv.cli import cli

    path = tmp_path / "c.onnx"
    onnx.save(conv_lstm("1d"), path)
    res = CliRunner().invoke(cli, ["to-openvino", str(path), "-o", str(tmp_path / "c.xml"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert [r["node"] for r in data["rewrites"]] == ["lstm"] and data["rewrites"][0]["what"].endswith(MAPPED)
    assert any(n.startswith("OpenVINO's ONNX import converted the other 7 node(s)") for n in data["notes"])


def test_a_wrong_graft_fails_verification_and_writes_nothing(tmp_path, monkeypatch):
    """The checks on this route can fail: a recurrent weight off by 1% in what is grafted is caught by the node
    check and by the whole-model check in OpenVINO's runtime."""
    translate = command.onnx_to_ir

    def spoiled(model, *args, **kwargs):
        conversion = translate(model, *args, **kwargs)
        layer = max((la for la in conversion.graph.all_layers() if la.type == "Const"), key=lambda la: la.value.size)
        layer.value = np.asarray(layer.value) * 1.01
        return conversion

    monkeypatch.setattr(command, "onnx_to_ir", spoiled)
    with pytest.raises(VerificationFailed) as err:
        to_openvino(conv_lstm("1d", peepholes=False, input_forget=False), tmp_path / "m.xml")
    failed = [c.subject for c in err.value.report.checks if not c.ok]
    assert failed == ["node lstm", "model", "model"]  # the IR interpreter and the OpenVINO runtime
    assert list(tmp_path.iterdir()) == []
