"""The IR layer: structure equal to OpenVINO's own output, reader/writer round trip, hostile XML and .bin."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.commands.to_openvino import translate
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino import writer as ov_writer
from rnnconv.engine.ir_graph import run_ir
from rnnconv.errors import BadInput
from rnnconv.io import load

ov = pytest.importorskip("openvino")

SEQUENCE = {"LSTM": "LSTMSequence", "GRU": "GRUSequence", "RNN": "RNNSequence"}


def default_model(kind, direction="forward", lbr=0, H=4, I=3):
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    D = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(0)
    W, R, B = (rng.standard_normal(s).astype(np.float32) for s in ((D, G * H, I), (D, G * H, H), (D, 2 * G * H)))
    outs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    shapes = {"Y": ["T", D, "N", H], "Y_h": [D, "N", H], "Y_c": [D, "N", H]}
    attrs = {"hidden_size": H, "direction": direction}
    if lbr:
        attrs["linear_before_reset"] = 1
    node = helper.make_node(kind, ["X", "W", "R", "B"], outs, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", I])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outs],
                              initializer=[numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (B, "B"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def _sequence_layer(graph):
    (layer,) = [layer for layer in graph.layers if layer.type.endswith("Sequence")]
    return layer


@pytest.mark.parametrize("kind,direction,lbr", [("LSTM", "forward", 0), ("LSTM", "bidirectional", 0),
                                                ("GRU", "forward", 0), ("GRU", "reverse", 1),
                                                ("GRU", "bidirectional", 1), ("RNN", "forward", 0),
                                                ("RNN", "bidirectional", 0)])
def test_sequence_layer_structure_equals_openvino_save_model(tmp_path, kind, direction, lbr):
    model = default_model(kind, direction, lbr)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    ov.save_model(ov.convert_model(str(path)), str(tmp_path / "theirs.xml"), compress_to_fp16=False)
    theirs = _sequence_layer(ov_reader.read(tmp_path / "theirs.xml"))
    ours_graph = translate(load(model)).graph
    ov_writer.write(ours_graph, tmp_path / "ours.xml")
    ours = _sequence_layer(ov_reader.read(tmp_path / "ours.xml"))
    assert (ours.type, ours.version) == (theirs.type, theirs.version) == (SEQUENCE[kind], "opset5")
    assert ours.attrs == theirs.attrs
    assert [(p.id, p.element_type, p.dims) for p in ours.inputs] == [(p.id, p.element_type, p.dims)
                                                                     for p in theirs.inputs]
    assert [(p.id, p.element_type, p.dims) for p in ours.outputs] == [(p.id, p.element_type, p.dims)
                                                                      for p in theirs.outputs]
    # Same weights too: OpenVINO's W/R/B constants (after its own reorder and fold) equal ours.
    def weights(graph, layer):
        prod = graph.producers()
        by_id = graph.by_id()
        first_w = 4 if kind == "LSTM" else 3
        return [by_id[prod[(layer.id, p)][0]].value for p in range(first_w, first_w + 3)]

    g_theirs = ov_reader.read(tmp_path / "theirs.xml")
    g_ours = ov_reader.read(tmp_path / "ours.xml")
    for a, b in zip(weights(g_ours, _sequence_layer(g_ours)), weights(g_theirs, _sequence_layer(g_theirs))):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_writer_reader_round_trip_is_byte_exact(tmp_path):
    graph = translate(load(default_model("GRU", "bidirectional", 1))).graph
    xml, bin_ = ov_writer.serialize(graph)
    again = ov_reader.parse(xml, bin_)
    assert ov_writer.serialize(again) == (xml, bin_)


def test_interpreter_runs_ir_written_by_openvino(tmp_path):
    """The IR interpreter follows OpenVINO semantics on OpenVINO's own IR (Reshape special_zero, Gather-8...)."""
    import onnxruntime as ort

    model = default_model("LSTM", "bidirectional")
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    ov.save_model(ov.convert_model(str(path)), str(tmp_path / "theirs.xml"), compress_to_fp16=True)
    x = np.random.default_rng(1).uniform(-1, 1, (5, 2, 3)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})
    got = run_ir(tmp_path / "theirs.xml", {"X": x})
    for name, want in zip(["Y", "Y_h", "Y_c"], ref):
        np.testing.assert_allclose(got[name], want, atol=2e-3, rtol=2e-3)  # fp16-compressed weights


def test_cell_kernels_register_with_the_interpreter():
    """LSTMCell / GRUCell / RNNCell (TensorIterator bodies) are kernels from the import of the interpreter on,
    in a fresh process that imports nothing else of rnnconv's."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from rnnconv.engine.ir_graph import KERNELS\n"
            "print(sorted({'LSTMCell', 'GRUCell', 'RNNCell'} - set(KERNELS)))\n"
            "print(sorted({'rnnconv.commands.from_openvino', 'rnnconv.dialects.openvino.to_onnx'} & set(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "[]"]


def test_xml_with_doctype_or_entities_is_refused(tmp_path):
    bomb = (b'<?xml version="1.0"?><!DOCTYPE net [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>'
            b'<net name="&b;" version="11"><layers/><edges/></net>')
    with pytest.raises(BadInput, match="DOCTYPE"):
        ov_reader.parse(bomb)
    external = (b'<?xml version="1.0"?><!DOCTYPE net [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                b'<net name="&x;" version="11"><layers/><edges/></net>')
    with pytest.raises(BadInput, match="DOCTYPE"):
        ov_reader.parse(external)


def test_const_outside_bin_or_wrong_size_is_refused():
    xml = (b'<?xml version="1.0"?><net name="m" version="11"><layers>'
           b'<layer id="0" name="c" type="Const" version="opset1"><data element_type="f32" shape="4" offset="{o}"'
           b' size="{s}"/><output><port id="0" precision="FP32"><dim>4</dim></port></output></layer>'
           b'</layers><edges/></net>')
    with pytest.raises(BadInput, match="outside the .bin"):
        ov_reader.parse(xml.replace(b"{o}", b"8").replace(b"{s}", b"16"), bytes(16))
    with pytest.raises(BadInput, match="does not match shape"):
        ov_reader.parse(xml.replace(b"{o}", b"0").replace(b"{s}", b"12"), bytes(16))
    g = ov_reader.parse(xml.replace(b"{o}", b"0").replace(b"{s}", b"16"), np.arange(4, dtype=np.float32).tobytes())
    np.testing.assert_array_equal(g.layers[0].value, [0, 1, 2, 3])


def test_unsupported_ir_version_and_malformed_xml():
    with pytest.raises(BadInput, match="IR version"):
        ov_reader.parse(b'<net name="m" version="7"><layers/><edges/></net>')
    with pytest.raises(BadInput, match="not well-formed"):
        ov_reader.parse(b'<net name="m" version="11"><layers>')


def test_tensor_names_with_commas_survive(tmp_path):
    g = ovir.IRGraph("m")
    p = g.parameter("a,b", "f32", [2])
    out = g.op("Relu", p)
    out.port.names.append("y,z")
    g.result(out)
    xml, bin_ = ov_writer.serialize(g)
    again = ov_reader.parse(xml, bin_)
    assert again.layers[0].outputs[0].names == ["a,b"]
    assert again.output_names() == ["y,z"]
    ov_writer.write(g, tmp_path / "c.xml")
    m = ov.Core().read_model(str(tmp_path / "c.xml"))
    assert m.inputs[0].get_names() == {"a,b"} and m.outputs[0].get_names() == {"y,z"}
