"""from-openvino on If-8, Loop-5 and TensorIterator-1 with general bodies (what OpenVINO's frontends write for
control flow and for recurrences that are not one cell step): ONNX If and Loop that onnxruntime runs as OpenVINO
runs the IR (1e-5), rnnconv's IR interpreter agreeing with OpenVINO, and the full verification passing where
rnnconv's ONNX engine can run ONNX Loop (`engine_gaps`)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rnnconv import io
from rnnconv.commands.from_openvino import from_openvino
from rnnconv.engine.ir_graph import run_ir
from tests.conftest import run_openvino
from tests.engine import engine_gaps

ov = pytest.importorskip("openvino")
ort = pytest.importorskip("onnxruntime")
import openvino.opset8 as o8  # noqa: E402
import openvino.opset13 as op  # noqa: E402

F32 = np.float32


def c(v, dtype=F32):
    return op.constant(np.asarray(v, dtype))


def named(node, name):
    node.output(0).get_tensor().set_names({name})
    return node


def save(tmp_path, outputs, params, fp16=False):
    xml = tmp_path / "m.xml"
    ov.save_model(ov.Model([op.result(o) for o in outputs], params, "m"), str(xml), compress_to_fp16=fp16)
    return xml


def check(tmp_path, xml, feed_sets, *, full=True):
    """Convert; onnx.checker; onnxruntime and rnnconv's IR interpreter against OpenVINO on every input set."""
    verify = "full" if full else "none"
    result = from_openvino(xml, tmp_path / "m.onnx", inputs=feed_sets[0], verify=verify)
    assert result.report.ok
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    for feeds in feed_sets:
        want = run_openvino(xml, feeds)
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        mine = run_ir(xml, feeds, "float32")
        for k in got:
            v = want[k]
            assert got[k].shape == v.shape and mine[k].shape == v.shape, k
            np.testing.assert_allclose(got[k], v, atol=1e-5, rtol=1e-5)
            np.testing.assert_allclose(mine[k], v, atol=1e-5, rtol=1e-5)
    return result.model


def _if_model():
    x = op.parameter([2, 3], F32, name="x")
    y = op.parameter([3], F32, name="y")
    flag = op.parameter([], F32, name="flag")
    cond = op.greater(flag, c(0.0))
    tx, ty = op.parameter([2, 3], F32, name="tx"), op.parameter([3], F32, name="ty")
    then = ov.Model([op.result(op.multiply(op.relu(tx), c(2.0))), op.result(op.add(tx, ty))], [tx, ty], "then")
    ex = op.parameter([2, 3], F32, name="ex")
    other = ov.Model([op.result(op.sigmoid(ex)), op.result(op.subtract(ex, c(1.0)))], [ex], "else")
    node = o8.if_op(cond.output(0))
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(x.output(0), tx, ex)
    node.set_input(y.output(0), ty, None)
    a = node.set_output(then.get_results()[0], other.get_results()[0])
    b = node.set_output(then.get_results()[1], other.get_results()[1])
    a.get_tensor().set_names({"a"})
    b.get_tensor().set_names({"b"})
    return [a, b], [x, y, flag]


def test_if_with_a_run_time_condition_is_an_onnx_if(tmp_path):
    outs, params = _if_model()
    xml = save(tmp_path, outs, params)
    rng = np.random.default_rng(0)
    base = {"x": rng.uniform(-1, 1, (2, 3)).astype(F32), "y": rng.uniform(-1, 1, 3).astype(F32)}
    model = check(tmp_path, xml, [{**base, "flag": np.array(1, F32)}, {**base, "flag": np.array(-1, F32)}])
    assert [n.op_type for n in model.graph if n.op_type == "If"] == ["If"]


def test_if_with_a_constant_condition_is_the_branch_it_selects(tmp_path):
    """OpenVINO's ONNX import leaves If on static shapes (silero_vad_op18_ifless: sr == 16000 is an input, but a
    condition on a static dim is constant): the selected branch is inlined."""
    x = op.parameter([2, 3], F32, name="x")
    cond = op.equal(op.gather(op.shape_of(x), c(1, np.int64), c(0, np.int64)), c(3, np.int64))
    tx, ex = op.parameter([2, 3], F32, name="tx"), op.parameter([2, 3], F32, name="ex")
    node = o8.if_op(cond.output(0))
    node.set_then_body(ov.Model([op.result(op.tanh(tx))], [tx], "then"))
    node.set_else_body(ov.Model([op.result(op.exp(ex))], [ex], "else"))
    node.set_input(x.output(0), tx, ex)
    out = node.set_output(node.get_then_body().get_results()[0], node.get_else_body().get_results()[0])
    out.get_tensor().set_names({"y"})
    xml = save(tmp_path, [out], [x])
    model = check(tmp_path, xml, [{"x": np.linspace(-1, 1, 6, dtype=F32).reshape(2, 3)}])
    assert [n.op_type for n in model.graph] == ["Tanh"]


def _loop_model(trip=5, stop_after=None):
    """A Loop-5: carried sum, a sliced input (axis 1), the iteration number, a condition from the body,
    concatenated and last-value outputs."""
    x = op.parameter([2, 6, 3], F32, name="x")
    acc0 = op.parameter([2, 3], F32, name="acc0")
    i = op.parameter([1], np.int64, name="i")
    acc = op.parameter([2, 3], F32, name="acc")
    piece = op.parameter([2, 1, 3], F32, name="piece")
    step = op.squeeze(piece, c([1], np.int64))
    new = op.add(op.multiply(acc, c(0.5)), op.multiply(step, op.convert(i, "f32")))
    keep = op.less(i, c([stop_after if stop_after is not None else 100], np.int64))
    cond = op.reshape(keep, c([], np.int64), False)
    body = ov.Model([op.result(cond), op.result(new), op.result(op.unsqueeze(op.tanh(new), c([1], np.int64))),
                     op.result(op.sigmoid(step))], [i, acc, piece], "body")
    loop = op.loop(c(trip, np.int64), c(True, bool))
    loop.set_function(body)
    loop.set_special_body_ports([0, 0])
    loop.set_merged_input(acc, acc0.output(0), body.get_results()[1].output(0))
    loop.set_sliced_input(piece, x.output(0), 0, 1, 1, -1, 1)
    outs = [loop.get_iter_value(body.get_results()[1].output(0), -1),
            loop.get_concatenated_slices(body.get_results()[2].output(0), 0, 1, 1, -1, 1),
            loop.get_iter_value(body.get_results()[3].output(0), -1)]
    for k, o in enumerate(outs):
        o.get_tensor().set_names({f"out{k}"})
    return outs, [x, acc0]


@pytest.mark.parametrize("trip, stop_after", [(5, None), (6, 2)])
def test_loop_is_an_onnx_loop(tmp_path, trip, stop_after):
    outs, params = _loop_model(trip, stop_after)
    xml = save(tmp_path, outs, params)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.uniform(-1, 1, (2, 6, 3)).astype(F32), "acc0": rng.uniform(-1, 1, (2, 3)).astype(F32)}
    model = check(tmp_path, xml, [feeds], full=engine_gaps.loop_scan_outputs())
    assert [n.op_type for n in model.graph if n.op_type == "Loop"] == ["Loop"]


def _tensor_iterator(reverse: bool):
    """A TensorIterator whose body is an explicit recurrence (MatMul, Add, Tanh), not a cell: what OpenVINO's
    TensorFlow frontend writes for Keras recurrent layers."""
    rng = np.random.default_rng(2)
    x = op.parameter([3, 4, 2], F32, name="x")  # [N, T, I]
    h0 = op.parameter([3, 5], F32, name="h0")
    xi, h = op.parameter([3, 1, 2], F32, name="xi"), op.parameter([3, 5], F32, name="h")
    w, r = c(rng.uniform(-.5, .5, (2, 5))), c(rng.uniform(-.5, .5, (5, 5)))
    new = op.tanh(op.add(op.matmul(op.squeeze(xi, c([1], np.int64)), w, False, False), op.matmul(h, r, False, False)))
    body = ov.Model([op.result(new), op.result(op.unsqueeze(new, c([1], np.int64)))], [xi, h], "body")
    ti = o8.tensor_iterator()
    ti.set_body(body)
    if reverse:
        ti.set_sliced_input(xi, x.output(0), -1, -1, 1, 0, 1)
    else:
        ti.set_sliced_input(xi, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(h, h0.output(0), body.get_results()[0].output(0))
    y = ti.get_concatenated_slices(body.get_results()[1].output(0), *((-1, -1, 1, 0) if reverse else (0, 1, 1, -1)),
                                   1)
    last = ti.get_iter_value(body.get_results()[0].output(0), -1)
    y.get_tensor().set_names({"y"})
    last.get_tensor().set_names({"h_n"})
    return [y, last], [x, h0]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("fp16", [False, True])
def test_tensor_iterator_with_a_general_body_is_an_onnx_loop(tmp_path, reverse, fp16):
    outs, params = _tensor_iterator(reverse)
    xml = save(tmp_path, outs, params, fp16)
    rng = np.random.default_rng(3)
    feeds = {"x": rng.uniform(-1, 1, (3, 4, 2)).astype(F32), "h0": rng.uniform(-1, 1, (3, 5)).astype(F32)}
    model = check(tmp_path, xml, [feeds], full=engine_gaps.loop_scan_outputs())
    assert [n.op_type for n in model.graph if n.op_type == "Loop"] == ["Loop"]


def _gru_cell_and_more():
    """A TensorIterator over [N, T, I] whose body is a GRUCell step after a Multiply."""
    rng = np.random.default_rng(6)
    x, h0 = op.parameter([2, 4, 3], F32, name="X"), op.parameter([2, 5], F32, name="H0")
    xi, h = op.parameter([2, 1, 3], F32, name="xi"), op.parameter([2, 5], F32, name="h")
    step = op.multiply(op.squeeze(xi, c([1], np.int64)), c(2.0))
    cell = op.gru_cell(step, h, c(rng.uniform(-.5, .5, (15, 3))), c(rng.uniform(-.5, .5, (15, 5))),
                       c(rng.uniform(-.5, .5, 15)), 5)
    body = ov.Model([op.result(cell), op.result(op.unsqueeze(cell, c([1], np.int64)))], [xi, h], "body")
    ti = o8.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(xi, x.output(0), 0, 1, 1, -1, 1)
    ti.set_merged_input(h, h0.output(0), body.get_results()[0].output(0))
    y = ti.get_concatenated_slices(body.get_results()[1].output(0), 0, 1, 1, -1, 1)
    y.get_tensor().set_names({"Y"})
    return ov.Model([op.result(y)], [x, h0], "m")


def test_a_tensor_iterator_over_a_cell_and_more_is_a_loop_around_the_onnx_sequence_op(tmp_path):
    """A TensorIterator whose body holds a cell step and other layers: an ONNX Loop whose body runs the cell as an
    ONNX GRU over one step."""
    xml = tmp_path / "m.xml"
    ov.save_model(_gru_cell_and_more(), str(xml))
    rng = np.random.default_rng(4)
    feeds = {"X": rng.uniform(-1, 1, (2, 4, 3)).astype(F32), "H0": rng.uniform(-1, 1, (2, 5)).astype(F32)}
    model = check(tmp_path, xml, [feeds], full=engine_gaps.loop_scan_outputs())
    body = next(n for n in model.graph if n.op_type == "Loop").attributes["body"].value
    assert "GRU" in [n.op_type for n in body]


def test_a_recurrent_layer_in_a_branch_is_checked_alone(tmp_path):
    """An LSTMSequence inside an If branch becomes an ONNX LSTM in the ONNX If; its node check runs it alone."""
    rng = np.random.default_rng(5)
    x = op.parameter([2, 3, 4], F32, name="x")  # [N, T, I]
    flag = op.parameter([], F32, name="flag")
    tx = op.parameter([2, 3, 4], F32, name="tx")
    H = 5
    zeros = op.broadcast(c(0.0), op.concat([op.gather(op.shape_of(tx), c([0], np.int64), c(0, np.int64)),
                                            c([1, H], np.int64)], 0))
    lens = op.broadcast(op.gather(op.shape_of(tx), c(1, np.int64), c(0, np.int64)),
                        op.gather(op.shape_of(tx), c([0], np.int64), c(0, np.int64)))
    seq = op.lstm_sequence(tx, zeros, zeros, lens, c(rng.uniform(-.5, .5, (1, 4 * H, 4))),
                           c(rng.uniform(-.5, .5, (1, 4 * H, H))), c(rng.uniform(-.5, .5, (1, 4 * H))), H, "forward")
    then = ov.Model([op.result(seq.output(1))], [tx], "then")
    ex = op.parameter([2, 3, 4], F32, name="ex")
    mean = op.reduce_mean(ex, c([1], np.int64), True)  # [2, 1, 4]
    other = ov.Model([op.result(op.concat([mean, op.slice(mean, c([0], np.int64), c([1], np.int64), c([1], np.int64),
                                                          c([2], np.int64))], 2))], [ex], "else")
    node = o8.if_op(op.greater(flag, c(0.0)).output(0))
    node.set_then_body(then)
    node.set_else_body(other)
    node.set_input(x.output(0), tx, ex)
    out = node.set_output(then.get_results()[0], other.get_results()[0])
    out.get_tensor().set_names({"h"})
    xml = save(tmp_path, [out], [x, flag])
    feeds = {"x": rng.uniform(-1, 1, (2, 3, 4)).astype(F32)}
    result = from_openvino(xml, None, inputs={**feeds, "flag": np.array(1, F32)}, verify="node")
    assert [c.subject for c in result.report.checks] == [f"node {node.get_friendly_name()}/then/"
                                                         f"{seq.get_friendly_name()}"]
    model = result.model
    sess = ort.InferenceSession(io.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"])
    for flag_value in (1, -1):
        f = {**feeds, "flag": np.array(flag_value, F32)}
        np.testing.assert_allclose(sess.run(None, f)[0], run_openvino(xml, f)["h"], atol=1e-5, rtol=1e-5)
