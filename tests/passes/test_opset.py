"""The opset pass: every GRU/LSTM/RNN version pair, checked by the full checker and onnxruntime on both sides (on
tests/oracle.py's re-expression for layout 1 and versions below 7); the moves onnx's
version converter cannot make; constructs an older opset cannot hold."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rnnconv
from rnnconv import io
from rnnconv.dialects.onnx_recurrent import VERSIONS
from rnnconv.errors import Unsupported
from tests.conftest import ALL_OPTIONAL, NO_OPTIONAL, feeds, recurrent_model, reference

onnx_converter = onnx.version_converter


def _convert(src: onnx.ModelProto, target: int, verify: str = "full"):
    source_opset = src.opset_import[0].version
    fn = rnnconv.upgrade if target >= source_opset else rnnconv.downgrade
    return io.to_proto(fn(src, opset=target, verify=verify).model)


CASES = [
    (op, frm, to, direction, layout, optional)
    for op, versions in VERSIONS.items()
    for frm, to in itertools.permutations(versions, 2)
    for direction in ("forward", "reverse", "bidirectional")
    for layout in ((0, 1) if frm >= 14 else (0,))
    for optional in (False, True)
]


@pytest.mark.parametrize("op,frm,to,direction,layout,optional", CASES,
                         ids=[f"{c[0]}{c[1]}-{c[2]}-{c[3][:3]}-L{c[4]}-{'opt' if c[5] else 'min'}" for c in CASES])
def test_version_matrix(op, frm, to, direction, layout, optional):
    lbr = int(op == "GRU" and frm >= 3 and to >= 3 and direction != "reverse")
    src = recurrent_model(op, opset=frm, direction=direction, layout=layout, lbr=lbr,
                          **(ALL_OPTIONAL if optional else NO_OPTIONAL))
    # rnnconv's node check kept; its whole-model checks, which on this one-node model repeat it and what this test
    # holds against onnxruntime on both sides below, left out (a third of the CPU of 384 cases)
    out = _convert(src, to, verify="node")
    onnx.checker.check_model(out, full_check=True)
    assert out.opset_import[0].version == to
    node = next(n for n in out.graph.node if n.op_type == op)
    assert not any(a.name == "layout" and a.i == 1 for a in node.attribute) or to >= 14
    inputs = feeds(src)
    # onnxruntime on both sides (tests/oracle.py re-expresses layout 1 and versions below 7 for it).
    expected = reference(src, inputs)
    got = reference(out, inputs)
    assert got.keys() == expected.keys()
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5, err_msg=name)


# Each case where onnx's own version converter fails, with the failure it reports.
CONVERTER_FAILURES = [
    ("GRU", 7, 6, "No Adapter From Version $7 for GRU"),
    ("LSTM", 7, 6, "No Adapter From Version $7 for LSTM"),
    ("RNN", 7, 6, "No Adapter From Version $7 for RNN"),
    ("GRU", 6, 7, "No Adapter From Version $6 for GRU"),
    ("LSTM", 6, 7, "No Adapter From Version $6 for LSTM"),
    ("RNN", 6, 7, "No Adapter From Version $6 for RNN"),
    ("GRU", 2, 3, "No Adapter From Version $2 for GRU"),
    ("GRU", 3, 6, None),
    ("LSTM", 14, 13, "Attribute layout must have value 0"),
    ("GRU", 14, 13, "Attribute layout must have value 0"),
    ("RNN", 14, 13, "Attribute layout must have value 0"),
]


@pytest.mark.parametrize("op,frm,to,message", CONVERTER_FAILURES)
def test_cases_onnx_converter_cannot_do(op, frm, to, message):
    layout = 1 if frm >= 14 else 0
    src = recurrent_model(op, opset=frm, layout=layout, direction="bidirectional", **ALL_OPTIONAL)
    if message is not None:
        with pytest.raises(Exception, match=message.replace("$", r"\$")):
            onnx_converter.convert_version(src, to)
    out = _convert(src, to)
    onnx.checker.check_model(out, full_check=True)
    inputs = feeds(src)
    expected = reference(src, inputs)
    got = reference(out, inputs)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)


def test_gru_linear_before_reset_below_3_names_node_and_opset():
    src = recurrent_model("GRU", opset=7, lbr=1, **ALL_OPTIONAL)
    with pytest.raises(Unsupported, match=r"'gru'.*linear_before_reset.*opset that can hold it is 3"):
        rnnconv.downgrade(src, opset=1)


def test_output_sequence_set_going_below_7_and_y_h_named():
    src = recurrent_model("LSTM", opset=14, **NO_OPTIONAL)
    out = _convert(src, 1)
    node = next(n for n in out.graph.node if n.op_type == "LSTM")
    assert {a.name: a.i for a in node.attribute}["output_sequence"] == 1
    unused_y = recurrent_model("GRU", opset=7, outputs=("Y_h",), **ALL_OPTIONAL)
    out = _convert(unused_y, 3)
    node = next(n for n in out.graph.node if n.op_type == "GRU")
    assert "output_sequence" not in {a.name for a in node.attribute}
    assert node.output[1]  # Y_h named (required in version 1/3)


def test_bfloat16_below_22_uses_casts_or_refuses():
    import ml_dtypes

    src = recurrent_model("LSTM", opset=22, dtype=ml_dtypes.bfloat16, **NO_OPTIONAL)
    out = _convert(src, 14)
    onnx.checker.check_model(out, full_check=True)
    ops = [n.op_type for n in out.graph.node]
    assert ops.count("Cast") >= 3 and "LSTM" in ops
    with pytest.raises(Unsupported, match="Cast holds bfloat16 only from opset 13"):
        _convert(src, 7)


def test_op_missing_at_target_is_named_with_its_first_opset():
    node = helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_me")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(Unsupported, match=r"Expand.*expand_me.*first exists at opset 8"):
        rnnconv.downgrade(model, opset=7)


def test_reshape_and_shape_adapters_onnx_lacks():
    """Reshape 14->13 (allowzero=0) and Shape 15->13 are plain schema widenings rnnconv supplies."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    with pytest.raises(Exception, match="No Adapter"):
        onnx_converter.convert_version(model, 13)
    out = _convert(model, 13)
    onnx.checker.check_model(out, full_check=True)
    assert out.opset_import[0].version == 13
