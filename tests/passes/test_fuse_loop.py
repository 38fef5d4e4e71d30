"""What `fuse` proves of a Loop before it reads it as a recurrence (passes/fuse_loop.py): the real tf2onnx export of
a Keras Bidirectional(SimpleRNN) (fixtures/tf2onnx) with one fact of its forward Loop changed, so that the Loop no
longer runs the T steps of a recurrence over its sequence: each such Loop is left as it is, named with the reason,
while the backward one still fuses; the result equals onnxruntime on the source. A cell written once per branch of
an If (silero-vad's LSTMCell per sample rate, rebuilt with onnx.helper) becomes a one-step LSTM in each branch."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import FIXTURES, run_cli, run_onnxruntime

SOURCE = FIXTURES / "tf2onnx" / "keras_bisimplernn_float32.onnx"
X = {"x": np.random.default_rng(2).standard_normal((2, 5, 3)).astype(np.float32)}


def _forward_loop(m: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in m.graph.node if n.op_type == "Loop" and "forward" in n.name)


def _constant(m: onnx.ModelProto, name: str, value) -> str:
    m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    return name


def trip_count_4(m):
    _forward_loop(m).input[0] = _constant(m, "four", np.array(4, np.int64))


def condition_stops_early(m):
    body = _forward_loop(m).attribute[0].g
    for t in body.initializer:  # the bounds of counter + 1 < 5 and i < 5
        if t.data_type == TensorProto.FLOAT and numpy_helper.to_array(t).size == 1:
            t.CopyFrom(numpy_helper.from_array(np.array(3.0, np.float32), t.name))


def counter_starts_at_1(m):
    _forward_loop(m).input[2] = _constant(m, "one_int32", np.array(1, np.int32))


def scan_output_through_relu(m):
    body = _forward_loop(m).attribute[0].g
    last = body.output[-1]
    body.node.append(helper.make_node("Relu", [last.name], ["relu_out"]))
    last.name = "relu_out"


REFUSED = {
    trip_count_4: r"its trip count \(4\) is not the static length of the sequence it reads \(5\)",
    condition_stops_early: "its condition is not proven to hold until the trip count ends the loop",
    counter_starts_at_1: "its body reads the sequence at an index that is not the iteration",
    scan_output_through_relu: "its scan outputs are not the step's hidden state",
}


@pytest.mark.parametrize("change", list(REFUSED), ids=[f.__name__ for f in REFUSED])
def test_a_loop_that_is_not_the_recurrence_is_named(tmp_path, change):
    import re

    m = onnx.load(str(SOURCE))
    change(m)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    code, said, err = run_cli(["inspect", path])
    assert code == 0, err + said
    assert re.search(r"unrolled: Loop k_1/b_1/forward_r_1/while_loop not fused: " + REFUSED[change], said), said
    assert "unrolled: a Loop of one RNN step at k_1/b_1/backward_r_1/while_loop; try rnnconv fuse" in said


def test_the_other_loop_still_fuses(tmp_path):
    m = onnx.load(str(SOURCE))
    scan_output_through_relu(m)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    code, said, err = run_cli(["fuse", path, "-o", tmp_path / "o.onnx"])
    assert code == 0, err + said
    assert "not fused: Loop k_1/b_1/forward_r_1/while_loop not fused: its scan outputs" in said
    fused = onnx.load(str(tmp_path / "o.onnx"))
    ops = Counter(n.op_type for n in fused.graph.node)
    assert ops["Loop"] == 1 and ops["RNN"] == 1, ops
    np.testing.assert_allclose(run_onnxruntime(fused, X)["y"], run_onnxruntime(m, X)["y"], atol=1e-5, rtol=0)


def test_reversed_lengths_that_are_not_all_t_keep_the_reversal(tmp_path):
    """ReverseSequence of lengths [5, 2]: not the whole sequence reversed, so the backward Loop runs forward over
    the reversed input, as it is."""
    m = onnx.load(str(SOURCE))
    first = next(n for n in m.graph.node if n.op_type == "ReverseSequence")
    first.input[1] = _constant(m, "lengths", np.array([5, 2], np.int64))
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    code, said, err = run_cli(["fuse", path, "-o", tmp_path / "o.onnx", "--dim", "x:0=2"])
    assert code == 0, err + said
    fused = onnx.load(str(tmp_path / "o.onnx"))
    directions = [a.s for n in fused.graph.node if n.op_type == "RNN" for a in n.attribute if a.name == "direction"]
    assert directions == [b"forward", b"forward"]
    np.testing.assert_allclose(run_onnxruntime(fused, X)["y"], run_onnxruntime(m, X)["y"], atol=1e-5, rtol=0)


# -- a cell per If branch ----------------------------------------------------------------------------------------

def if_lstm_cells(H: int = 4, N: int = 2) -> onnx.ModelProto:
    """silero-vad 6's decoder cell: per branch, h and c are Gathers of one state input, x = Gather(features, 0,
    axis 2), Add(Gemm(h), Gemm(x)) split into four gates; the new state is Concat(h', c'). x and h have one size,
    so which is the input is read from the state, not from the weights' shapes."""
    rng = np.random.default_rng(0)
    mk, value = helper.make_node, helper.make_tensor_value_info

    def branch(tag: str) -> onnx.GraphProto:
        w = lambda name, shape: numpy_helper.from_array(  # noqa: E731
            rng.uniform(-0.5, 0.5, shape).astype(np.float32), f"{tag}_{name}")
        inits = [w("w_ih", (4 * H, H)), w("w_hh", (4 * H, H)), w("b_ih", (4 * H,)), w("b_hh", (4 * H,)),
                 *(numpy_helper.from_array(np.array(k, np.int64), f"{tag}_{k}") for k in (0, 1)),
                 numpy_helper.from_array(np.array([0], np.int64), f"{tag}_axis0")]
        t = lambda s: f"{tag}_{s}"  # noqa: E731
        nodes = [mk("Gather", ["features", t(0)], [t("x")], axis=2), mk("Gather", ["state", t(0)], [t("h")], axis=0),
                 mk("Gather", ["state", t(1)], [t("c")], axis=0),
                 mk("Gemm", [t("h"), t("w_hh"), t("b_hh")], [t("gh")], transB=1),
                 mk("Gemm", [t("x"), t("w_ih"), t("b_ih")], [t("gx")], transB=1),
                 mk("Add", [t("gh"), t("gx")], [t("gates")]),
                 mk("Split", [t("gates")], [t("i"), t("f"), t("g"), t("o")], axis=1, num_outputs=4),
                 mk("Sigmoid", [t("i")], [t("si")]), mk("Sigmoid", [t("f")], [t("sf")]),
                 mk("Tanh", [t("g")], [t("tg")]),
                 mk("Sigmoid", [t("o")], [t("so")]), mk("Mul", [t("sf"), t("c")], [t("fc")]),
                 mk("Mul", [t("si"), t("tg")], [t("ig")]), mk("Add", [t("fc"), t("ig")], [t("c_new")]),
                 mk("Tanh", [t("c_new")], [t("tc")]), mk("Mul", [t("so"), t("tc")], [t("h_new")]),
                 mk("Unsqueeze", [t("h_new"), t("axis0")], [t("hu")]),
                 mk("Unsqueeze", [t("c_new"), t("axis0")], [t("cu")]),
                 mk("Concat", [t("hu"), t("cu")], [t("state_out")], axis=0), mk("Relu", [t("h_new")], [t("out")])]
        return helper.make_graph(nodes, tag, [], [value(t("out"), TensorProto.FLOAT, [N, H]),
                                                  value(t("state_out"), TensorProto.FLOAT, [2, N, H])], inits)

    node = helper.make_node("If", ["fast"], ["out", "state_out"], then_branch=branch("then"),
                            else_branch=branch("else"))
    graph = helper.make_graph(
        [node], "cells", [value("fast", TensorProto.BOOL, []), value("features", TensorProto.FLOAT, [N, H, 1]),
                          value("state", TensorProto.FLOAT, [2, N, H])],
        [value("out", TensorProto.FLOAT, [N, H]), value("state_out", TensorProto.FLOAT, [2, N, H])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def test_a_cell_in_each_if_branch_becomes_a_one_step_lstm(tmp_path):
    source = if_lstm_cells()
    path = tmp_path / "m.onnx"
    onnx.save(source, str(path))
    code, said, err = run_cli(["fuse", path, "-o", tmp_path / "o.onnx"])
    assert code == 0, err + said
    fused = onnx.load(str(tmp_path / "o.onnx"))
    onnx.checker.check_model(fused, full_check=True)
    branches = [a.g for a in fused.graph.node[0].attribute]
    for g in branches:
        ops = Counter(n.op_type for n in g.node)
        assert ops["LSTM"] == 1 and ops["Gemm"] == 0 and ops["Split"] == 0, ops
        lstm = next(n for n in g.node if n.op_type == "LSTM")
        W = numpy_helper.to_array(next(t for t in g.initializer if t.name == lstm.input[1]))
        src_w = numpy_helper.to_array(next(t for a in source.graph.node[0].attribute for t in a.g.initializer
                                           if t.name == f"{g.name}_w_ih"))
        np.testing.assert_array_equal(W[0][:4], src_w[:4])  # gate i of W is w_ih's, not w_hh's
    rng = np.random.default_rng(1)
    for fast in (True, False):
        feeds = {"fast": np.array(fast), "features": rng.standard_normal((2, 4, 1)).astype(np.float32),
                 "state": rng.standard_normal((2, 2, 4)).astype(np.float32)}
        want, got = run_onnxruntime(source, feeds), run_onnxruntime(fused, feeds)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], atol=1e-6, rtol=1e-5, err_msg=f"{name} fast={fast}")
