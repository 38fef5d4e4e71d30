"""`rnnconv from-openvino`: IR written by OpenVINO itself (ov.convert_model + ov.save_model, fp16-compressed or not)
and by rnnconv's to-openvino comes back as ONNX that passes the full checker, runs in onnxruntime and matches the
OpenVINO runtime on the IR (1e-5; 2e-3 against the source model when the IR holds fp16 weights), at any opset it
is asked for; broken IR and a wrong conversion write nothing."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from rnnconv.commands.from_openvino import from_openvino
from rnnconv.commands.to_openvino import to_openvino
from rnnconv.dialects.openvino import to_onnx as to_onnx_module
from rnnconv.errors import BadInput, VerificationFailed
from tests.conftest import (
    GATES,
    OUTPUTS,
    TORCH,
    assert_close,
    feeds,
    openvino_ir,
    recurrent_model,
    recurrent_node,
    reference,
    run_cli,
    run_onnxruntime,
    run_openvino,
)

ov = pytest.importorskip("openvino")
H = 5  # recurrent_model's hidden size

# -- IR written by OpenVINO --------------------------------------------------------------------------------
CASES = [(k, d, dyn, comp) for k, d, dyn, comp in itertools.product(("GRU", "LSTM", "RNN"),
                                                                     ("forward", "reverse", "bidirectional"),
                                                                     (False, True), (False, True))]


@pytest.mark.parametrize("kind,direction,dynamic,compress", CASES,
                         ids=[f"{k}-{d}-{'dyn' if y else 'static'}-{'fp16' if c else 'fp32'}" for k, d, y, c in CASES])
def test_openvino_ir_converts(tmp_path, kind, direction, dynamic, compress):
    clip = 1.5 if dynamic != compress else None
    lbr = int(kind == "GRU" and (direction != "forward") != dynamic)
    src = recurrent_model(kind, direction=direction, lbr=lbr, clip=clip, dynamic=dynamic)
    xml = openvino_ir(src, tmp_path / "m.xml", compress=compress)
    out = tmp_path / "back.onnx"
    result = from_openvino(xml, out)
    assert result.report.ok and out.exists()
    model, node, attrs = recurrent_node(out)
    # Synthesized zero states and full lengths come back absent; clip and linear_before_reset survive.
    assert list(node.input)[4:] == [] and attrs.get("clip") == clip and attrs.get("linear_before_reset", 0) == lbr
    assert attrs.get("direction", b"forward").decode() == direction
    inputs = feeds(src)
    got = run_onnxruntime(model, inputs)
    assert_close(run_openvino(xml, inputs, reshape=True), got, OUTPUTS[kind])
    assert_close(run_onnxruntime(src, inputs), got, OUTPUTS[kind], 2e-3 if compress else 1e-5)
    if dynamic:
        inputs = feeds(src, dims={"T": 7, "N": 1})
        assert_close(run_onnxruntime(src, inputs), run_onnxruntime(model, inputs), OUTPUTS[kind],
                     2e-3 if compress else 1e-5)


def test_layout_1(tmp_path):
    src = recurrent_model("LSTM", direction="bidirectional", dynamic=True, clip=2.0)
    xml = openvino_ir(src, tmp_path / "m.xml")
    result = from_openvino(xml, tmp_path / "back.onnx", layout=1)
    _, node, attrs = recurrent_node(tmp_path / "back.onnx")
    assert attrs["layout"] == 1
    inputs = feeds(src)
    assert_close(run_onnxruntime(src, inputs), reference(tmp_path / "back.onnx", inputs), OUTPUTS["LSTM"])
    assert any("OpenVINO runtime" in c.engines for c in result.report.checks)


@pytest.mark.parametrize("opset", [7, 13])
def test_older_opsets(tmp_path, opset):
    """The ONNX written at an older opset is a model of that opset that onnxruntime runs, giving the numbers the
    OpenVINO runtime (f32) gives on the IR, at several sizes of its dynamic dims."""
    src = recurrent_model("GRU", direction="reverse", dynamic=True, lbr=1)
    xml = openvino_ir(src, tmp_path / "m.xml")
    out = tmp_path / "back.onnx"
    result = from_openvino(xml, out, opset=opset)
    assert result.report.ok and result.model.opset_imports[""] == opset
    model, node, attrs = recurrent_node(out)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", opset)]
    assert attrs.get("linear_before_reset") == 1 and attrs.get("direction") == b"reverse"
    for t, n in ((4, 2), (7, 1), (1, 3)):
        inputs = feeds(src, dims={"T": t, "N": n})
        assert_close(run_openvino(xml, inputs, reshape=True), run_onnxruntime(out, inputs), OUTPUTS["GRU"])


# -- round trips through rnnconv's own to-openvino ---------------------------------------------------------
ROUND = [("GRU", dict(direction="bidirectional", lbr=1, clip=3.0)),
         ("GRU", dict(direction="reverse", activations=["Relu", "Tanh"], bias=False)),
         ("LSTM", dict(direction="bidirectional", initial_h=True)),
         ("LSTM", dict(direction="forward", dynamic=True, clip=0.5)),
         ("RNN", dict(direction="reverse", activations=["Relu"])),
         ("RNN", dict(direction="bidirectional", sequence_lens=True, initial_h=True)),
         ("LSTM", dict(direction="bidirectional", layout=1, dynamic=True))]


@pytest.mark.parametrize("kind,kw", ROUND, ids=[f"{k}-{i}" for i, (k, _) in enumerate(ROUND)])
def test_round_trip_through_to_openvino(tmp_path, kind, kw):
    src = recurrent_model(kind, **kw)
    onnx.save(src, tmp_path / "src.onnx")
    to_openvino(str(tmp_path / "src.onnx"), tmp_path / "ir.xml")
    layout = kw.get("layout", 0)
    from_openvino(tmp_path / "ir.xml", tmp_path / "back.onnx", layout=layout)
    model, node, attrs = recurrent_node(tmp_path / "back.onnx")
    orig = {a.name: helper.get_attribute_value(a) for a in src.graph.node[0].attribute}
    orig.setdefault("direction", b"forward")
    attrs.setdefault("direction", b"forward")
    assert attrs == orig
    # Weights: W and R exact; B exact in the sum Wb + Rb per gate (GRU lbr keeps Rbh apart); absent B stays absent.
    before = {t.name: numpy_helper.to_array(t) for t in src.graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    np.testing.assert_array_equal(after[node.input[1]], before["W"])
    np.testing.assert_array_equal(after[node.input[2]], before["R"])
    if "B" not in before:
        assert len(node.input) < 4 or node.input[3] == ""
    else:
        G = GATES[kind]
        wb, rb = np.split(before["B"], 2, axis=1)
        wb2, rb2 = np.split(after[node.input[3]], 2, axis=1)
        if kind == "GRU" and kw.get("lbr"):
            np.testing.assert_array_equal(wb2[:, :2 * H] + rb2[:, :2 * H], (wb + rb)[:, :2 * H])
            np.testing.assert_array_equal(wb2[:, 2 * H:], wb[:, 2 * H:])
            np.testing.assert_array_equal(rb2[:, 2 * H:], rb[:, 2 * H:])
        else:
            np.testing.assert_array_equal(wb2 + rb2, (wb + rb).astype(np.float32))
            assert not np.any(rb2) and G
    inputs = feeds(src)  # onnxruntime on both (layout 1 through the oracle's re-expression)
    assert_close(reference(src, inputs), reference(model, inputs), OUTPUTS[kind])


# -- PyTorch fixtures as OpenVINO serializes them ---------------------------------------------------------
TORCH_EXPORTS = sorted(p.stem for p in TORCH.glob("*.onnx"))


@pytest.mark.parametrize("name", TORCH_EXPORTS)
def test_torch_fixture_ir(tmp_path, name):
    xml = openvino_ir(TORCH / f"{name}.onnx", tmp_path / f"{name}.xml")
    result = from_openvino(xml, tmp_path / "back.onnx")
    assert result.report.ok
    onnx.checker.check_model(onnx.load(str(tmp_path / "back.onnx")), full_check=True)
    data = np.load(TORCH / f"{name}.npz")
    model = onnx.load(str(tmp_path / "back.onnx"))
    inputs = {i.name: data[i.name] for i in model.graph.input}
    got = run_onnxruntime(model, inputs)
    for name_ in got:
        if name_ in data:
            np.testing.assert_allclose(got[name_], data[name_], atol=2e-3, rtol=2e-3, err_msg=name_)


# -- names: the source's, not another tensor's the port also lists -------------------------------------------
def _identity_wrapped(name_in: str, name_copy: str, name_out: str) -> onnx.ModelProto:
    """X feeds an Identity A_copy (OpenVINO lists the Parameter's port as "A_copy,X", sorted); Y_h reaches the
    output through an Identity too."""
    rng = np.random.default_rng(0)
    w = lambda name, shape: numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)  # noqa
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", [name_in], [name_copy], name=name_copy),
         helper.make_node("GRU", [name_copy, "W", "R"], ["Y", "Y_h"], hidden_size=3, name="gru"),
         helper.make_node("Identity", ["Y_h"], [name_out], name=name_out)], "g",
        [value(name_in, onnx.TensorProto.FLOAT, [4, 2, 3])],
        [value("Y", onnx.TensorProto.FLOAT, [4, 1, 2, 3]), value(name_out, onnx.TensorProto.FLOAT, [1, 2, 3])],
        [w("W", (1, 9, 3)), w("R", (1, 9, 3))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("names", [("X", "A_copy", "out"), ("input", "g_input", "a_output")])
def test_an_input_read_by_an_identity_keeps_its_name(tmp_path, names):
    source = _identity_wrapped(*names)
    xml = openvino_ir(source, tmp_path / "m.xml")
    param_port = re.search(r'type="Parameter".*?names="([^"]*)"', xml.read_text(), re.S).group(1)
    assert param_port.split(",")[0] != names[0]  # the case: another tensor's name comes first on the port
    from_openvino(xml, tmp_path / "back.onnx")
    back = onnx.load(str(tmp_path / "back.onnx"))
    assert [v.name for v in back.graph.input] == [names[0]]
    assert [v.name for v in back.graph.output] == ["Y", names[2]]
    x = {names[0]: np.random.default_rng(1).standard_normal((4, 2, 3)).astype(np.float32)}
    assert_close(run_onnxruntime(source, x), run_onnxruntime(back, x))


# -- failures ----------------------------------------------------------------------------------------------
def test_mismatch_writes_nothing(tmp_path, monkeypatch):
    xml = openvino_ir(recurrent_model("GRU"), tmp_path / "m.xml")
    real = to_onnx_module.onnx_recurrent.tensors

    def wrong(layer):
        out = real(layer)
        return {**out, "W": out["W"] * 1.01}

    monkeypatch.setattr(to_onnx_module.onnx_recurrent, "tensors", wrong)
    with pytest.raises(VerificationFailed):
        from_openvino(xml, tmp_path / "back.onnx")
    assert not (tmp_path / "back.onnx").exists()


def test_cli(tmp_path):
    xml = openvino_ir(recurrent_model("LSTM", direction="bidirectional"), tmp_path / "m.xml", compress=True)
    moved = tmp_path / "weights.bin"
    (tmp_path / "m.bin").rename(moved)
    code, stdout, stderr = run_cli(["from-openvino", xml, "-o", tmp_path / "out.onnx", "--bin", moved, "--json"])
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["ok"] and report["output"] == str(tmp_path / "out.onnx")
    code, stdout, stderr = run_cli(["from-openvino", xml, "-o", tmp_path / "out.onnx", "--bin", moved])
    assert code != 0 and "exists" in stderr


# -- broken IR: one clear error, nothing written -----------------------------------------------------------
def _bigger_offset(text):
    return re.sub(r'offset="(\d+)" size="(\d+)"', lambda m: f'offset="{10**9}" size="{m.group(2)}"', text, count=1)


BROKEN = {
    "bin offset outside the file": (_bigger_offset, "outside the .bin"),
    "DOCTYPE with an entity": (lambda t: t.replace('<?xml version="1.0"?>', '<?xml version="1.0"?>\n<!DOCTYPE net '
                                                   '[<!ENTITY a "aaaaaaaa">]>'), "DOCTYPE"),
    "truncated XML": (lambda t: t[: len(t) // 2], "not well-formed"),
    "no hidden_size": (lambda t: t.replace(' hidden_size="5"', ""), "hidden_size"),
    "edge to nowhere": (lambda t: t.replace("</edges>", '<edge from-layer="0" from-port="0" to-layer="999" '
                                                       'to-port="0" /></edges>'), "names no layer"),
    "no .bin": (None, r"m\.bin, which is missing"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_ir_is_refused(tmp_path, case):
    xml = openvino_ir(recurrent_model("GRU", direction="bidirectional", lbr=1), tmp_path / "m.xml")
    mutate, match = BROKEN[case]
    if mutate is None:
        (tmp_path / "m.bin").unlink()
    else:
        xml.write_text(mutate(xml.read_text()))
    with pytest.raises(BadInput, match=match):
        from_openvino(xml, tmp_path / "out.onnx")
    code, _, stderr = run_cli(["from-openvino", xml, "-o", tmp_path / "out.onnx"])
    assert code == 4
    assert stderr.startswith("rnnconv: error: ")
    assert not (tmp_path / "out.onnx").exists()
