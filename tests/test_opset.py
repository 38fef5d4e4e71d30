"""upgrade / downgrade: every GRU/LSTM/RNN version pair, checked by the full checker and onnxruntime."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import rnnconv
from rnnconv import io
from rnnconv.cli import main
from rnnconv.dialects.onnx_recurrent import VERSIONS
from rnnconv.engine.onnx_graph import run_onnx
from rnnconv.errors import Unsupported
from tests.opset_models import feeds_for, recurrent_model

onnx_converter = onnx.version_converter


def _ort(model: onnx.ModelProto, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def _convert(src: onnx.ModelProto, target: int):
    source_opset = src.opset_import[0].version
    fn = rnnconv.upgrade if target >= source_opset else rnnconv.downgrade
    return io.to_proto(fn(src, opset=target).model)


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
    src = recurrent_model(op, frm, direction=direction, layout=layout, optional=optional, lbr=lbr)
    out = _convert(src, to)
    onnx.checker.check_model(out, full_check=True)
    assert out.opset_import[0].version == to
    node = next(n for n in out.graph.node if n.op_type == op)
    assert not any(a.name == "layout" and a.i == 1 for a in node.attribute) or to >= 14
    feeds = feeds_for(src)
    expected = run_onnx(io.load(src), feeds)
    got = run_onnx(io.load(out), feeds)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)
    if to >= 7 and not (layout and to >= 14):  # onnxruntime runs it: an independent check of the conversion
        for name, value in _ort(out, feeds).items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-5, err_msg=name)


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
    src = recurrent_model(op, frm, layout=layout, direction="bidirectional")
    if message is not None:
        with pytest.raises(Exception, match=message.replace("$", r"\$")):
            onnx_converter.convert_version(src, to)
    out = _convert(src, to)
    onnx.checker.check_model(out, full_check=True)
    feeds = feeds_for(src)
    expected = run_onnx(io.load(src), feeds)
    got = _ort(out, feeds) if to >= 7 else run_onnx(io.load(out), feeds)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)


def test_gru_linear_before_reset_below_3_names_node_and_opset():
    src = recurrent_model("GRU", 7, lbr=1)
    with pytest.raises(Unsupported, match=r"gru_node.*linear_before_reset.*opset that can hold it is 3"):
        rnnconv.downgrade(src, opset=1)


def test_output_sequence_set_going_below_7_and_y_h_named():
    src = recurrent_model("LSTM", 14, optional=False)
    out = _convert(src, 1)
    node = next(n for n in out.graph.node if n.op_type == "LSTM")
    assert {a.name: a.i for a in node.attribute}["output_sequence"] == 1
    unused_y = recurrent_model("GRU", 7, y_used=False)
    out = _convert(unused_y, 3)
    node = next(n for n in out.graph.node if n.op_type == "GRU")
    assert "output_sequence" not in {a.name for a in node.attribute}
    assert node.output[1]  # Y_h named (required in version 1/3)


def test_bfloat16_below_22_uses_casts_or_refuses():
    import ml_dtypes

    src = recurrent_model("LSTM", 22, dtype=ml_dtypes.bfloat16, optional=False)
    out = _convert(src, 14)
    onnx.checker.check_model(out, full_check=True)
    ops = [n.op_type for n in out.graph.node]
    assert ops.count("Cast") >= 3 and "LSTM" in ops
    with pytest.raises(Unsupported, match="Cast holds bfloat16 only from opset 13"):
        _convert(src, 7)


def test_op_missing_at_target_is_named_with_its_first_opset():
    from onnx import TensorProto, helper

    node = helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_me")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(Unsupported, match=r"Expand.*expand_me.*first exists at opset 8"):
        rnnconv.downgrade(model, opset=7)


def test_reshape_and_shape_adapters_onnx_lacks():
    """Reshape 14->13 (allowzero=0) and Shape 15->13 are plain schema widenings rnnconv supplies."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    with pytest.raises(Exception, match="No Adapter"):
        onnx_converter.convert_version(model, 13)
    out = _convert(model, 13)
    onnx.checker.check_model(out, full_check=True)
    assert out.opset_import[0].version == 13


def test_broken_adapter_is_caught_and_nothing_written(tmp_path, monkeypatch):
    """Verification catches a wrong rewrite: an adapter that swaps the i and f gates exits 1, writes nothing."""
    import onnx_ir as ir

    from rnnconv.passes import opset

    real_build = opset.build

    def swapped_gates(plan, names, target):
        rewrite = real_build(plan, names, target)
        node = next(n for n in rewrite.nodes if n.op_type == "LSTM")
        w = node.inputs[1].const_value.numpy().copy()
        h = w.shape[1] // 4
        w[:, 0:h], w[:, 2 * h:3 * h] = w[:, 2 * h:3 * h].copy(), w[:, 0:h].copy()
        bad = ir.Value(name=names("W_swapped"), const_value=ir.tensor(w, name="W_swapped"))
        bad.const_value.name = bad.name
        rewrite.new_initializers.append(bad)
        node.replace_input_with(1, bad)
        return rewrite

    monkeypatch.setattr(opset, "build", swapped_gates)
    src = tmp_path / "lstm.onnx"
    onnx.save(recurrent_model("LSTM", 7), src)
    out = tmp_path / "out.onnx"
    with pytest.raises(SystemExit) as exc:
        main(["upgrade", str(src), "-o", str(out), "--opset", "14"])
    assert exc.value.code == 1
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lstm.onnx"]


def test_cli_upgrade_writes_verified_model_and_refuses_overwrite(tmp_path, capsys):
    src = tmp_path / "gru1.onnx"
    onnx.save(recurrent_model("GRU", 1), src)
    out = tmp_path / "gru.onnx"
    with pytest.raises(SystemExit) as exc:
        main(["upgrade", str(src), "-o", str(out), "--json"])
    assert exc.value.code == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["rewrites"][0]["node"] == "gru_node"
    assert {c["engines"] for c in report["checks"]} >= {"engine"}
    with pytest.raises(SystemExit) as exc:
        main(["upgrade", str(src), "-o", str(out)])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["upgrade", str(src), "-o", str(src), "--force"])
    assert exc.value.code == 2


def test_converted_model_that_onnxruntime_refuses_fails_verification(monkeypatch):
    """onnxruntime ran the source, so the converted model must run there too: a refusal is a failed check."""
    from rnnconv.engine import onnxruntime_runtime
    from rnnconv.errors import VerificationFailed

    real = onnxruntime_runtime.Session
    calls = []

    def refuse_second(model, **kw):
        calls.append(model)
        if len(calls) == 2:
            raise RuntimeError("simulated: no kernel for this node")
        return real(model, **kw)

    monkeypatch.setattr(onnxruntime_runtime, "Session", refuse_second)
    with pytest.raises(VerificationFailed) as err:
        rnnconv.upgrade(recurrent_model("LSTM", 7), opset=14)
    problems = [o.problem for c in err.value.report.checks for o in c.outputs if o.problem]
    assert any("onnxruntime cannot run it: RuntimeError: simulated" in p for p in problems), problems
