"""The IR graph, reader and writer: structure equal to OpenVINO's own output, reader/writer round trip, malformed
XML and .bin refused."""

from __future__ import annotations

import numpy as np
import pytest

from rnnconv.commands.to_openvino import onnx_to_ir
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino import writer as ov_writer
from rnnconv.errors import BadInput
from rnnconv.io import load
from tests.conftest import openvino_ir, recurrent_model

ov = pytest.importorskip("openvino")

SEQUENCE = {"LSTM": "LSTMSequence", "GRU": "GRUSequence", "RNN": "RNNSequence"}


def _sequence_layer(graph):
    (layer,) = [layer for layer in graph.layers if layer.type.endswith("Sequence")]
    return layer


@pytest.mark.parametrize("kind,direction,lbr", [("LSTM", "forward", 0), ("LSTM", "bidirectional", 0),
                                                ("GRU", "forward", 0), ("GRU", "reverse", 1),
                                                ("GRU", "bidirectional", 1), ("RNN", "forward", 0),
                                                ("RNN", "bidirectional", 0)])
def test_sequence_layer_structure_equals_openvino_save_model(tmp_path, kind, direction, lbr):
    model = recurrent_model(kind, direction=direction, lbr=lbr, H=4, dynamic=True)
    openvino_ir(model, tmp_path / "theirs.xml")
    theirs = _sequence_layer(ov_reader.read(tmp_path / "theirs.xml"))
    ours_graph = onnx_to_ir(load(model)).graph
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
    graph = onnx_to_ir(load(recurrent_model("GRU", direction="bidirectional", lbr=1, H=4, dynamic=True))).graph
    xml, bin_ = ov_writer.serialize(graph)
    again = ov_reader.parse(xml, bin_)
    assert ov_writer.serialize(again) == (xml, bin_)


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
