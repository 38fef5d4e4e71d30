"""The IR reader and the IR -> ONNX translation's building blocks: type spellings in any letter case, If branches
with their port maps, rank-0 scalars, IR 10, the one op table's registration."""

from __future__ import annotations

import numpy as np
import pytest

from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import ops, reader
from rnnconv.dialects.openvino.onnx_builder import Builder
from rnnconv.dialects.openvino.validate import STRUCTURAL


def _net(version: int, layer_type: str) -> bytes:
    return f"""<?xml version="1.0"?>
<net name="m" version="{version}">
  <layers>
    <layer id="0" name="x" type="Parameter" version="opset1">
      <data shape="2,3" element_type="f32"/>
      <output><port id="0" precision="FP32" names="x"><dim>2</dim><dim>3</dim></port></output>
    </layer>
    <layer id="1" name="act" type="{layer_type}" version="opset1">
      <input><port id="0" precision="FP32"><dim>2</dim><dim>3</dim></port></input>
      <output><port id="1" precision="FP32" names="y"><dim>2</dim><dim>3</dim></port></output>
    </layer>
    <layer id="2" name="out" type="Result" version="opset1">
      <input><port id="0" precision="FP32"><dim>2</dim><dim>3</dim></port></input>
    </layer>
  </layers>
  <edges>
    <edge from-layer="0" from-port="0" to-layer="1" to-port="0"/>
    <edge from-layer="1" from-port="1" to-layer="2" to-port="0"/>
  </edges>
</net>""".encode()


@pytest.mark.parametrize("spelled, canonical", [("ReLU", "Relu"), ("RELU", "Relu"), ("relu", "Relu"),
                                                ("PReLU", "PRelu"), ("softmax", "SoftMax"), ("Softplus", "SoftPlus"),
                                                ("tensoriterator", "TensorIterator"), ("NoSuchOp", "NoSuchOp")])
def test_types_are_read_in_one_spelling(spelled, canonical):
    assert ovir.canonical_type(spelled) == canonical
    graph = reader.parse(_net(11, spelled))
    assert [layer.type for layer in graph.layers][1] == canonical


def test_every_reverse_type_has_one_spelling():
    lower = [t.lower() for t in [*ops.REVERSE, *STRUCTURAL]]
    assert len(lower) == len(set(lower))
    for t in [*ops.REVERSE, *STRUCTURAL]:
        assert ovir.canonical_type(t.upper()) == t


@pytest.mark.parametrize("version", [10, 11])
def test_ir_10_and_11_translate_alike(version):
    from rnnconv.dialects.openvino.to_onnx import Converter

    model = Converter(reader.parse(_net(version, "Sin")), 17, 0).run()
    assert [n.op_type for n in model.graph] == ["Sin"]
    assert [v.name for v in model.graph.outputs] == ["y"]


def test_if_branches_and_port_maps_are_read():
    ov = pytest.importorskip("openvino")
    import openvino.opset8 as o8
    import openvino.opset13 as op

    x = op.parameter([2], np.float32, name="x")
    tx, ex = op.parameter([2], np.float32, name="tx"), op.parameter([2], np.float32, name="ex")
    node = o8.if_op(op.greater(op.reduce_sum(x, op.constant(np.array([0]))), op.constant(np.float32(0))).output(0))
    node.set_then_body(ov.Model([op.result(op.relu(tx))], [tx], "then"))
    node.set_else_body(ov.Model([op.result(op.exp(ex))], [ex], "else"))
    node.set_input(x.output(0), tx, ex)
    out = node.set_output(node.get_then_body().get_results()[0], node.get_else_body().get_results()[0])
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        ov.save_model(ov.Model([op.result(out)], [x], "m"), str(Path(tmp) / "m.xml"))
        graph = reader.read(Path(tmp) / "m.xml")
    [layer] = [la for la in graph.layers if la.type == "If"]
    assert set(layer.branches) == {"then", "else"}
    then_body, then_map = layer.branches["then"]
    assert [la.type for la in then_body.layers] == ["Parameter", "Relu", "Result"]
    assert {kind for kind, _ in then_map} == {"input", "output"}
    assert len(list(graph.all_layers())) == len(graph.layers) + 6


def test_scalar_constants_stay_rank_0():
    b = Builder(17, set())
    v = b.const(np.array(3, np.int64), "k")
    assert v.shape.dims == () and v.const_value.numpy().shape == ()


def test_child_builders_share_names_and_initializers():
    b = Builder(17, {"x"})
    sub = b.child()
    a, c = b.name("v"), sub.name("v")
    assert a != c and "x" not in (a, c)
    sub.const(np.zeros(2, np.float32), "w")
    assert "w" in b.initializers and sub.nodes is not b.nodes
