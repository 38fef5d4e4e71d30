"""The fuse pass on Scan and Loop nodes whose body is one cell step (written here with onnx.helper): the node becomes
one recurrent node, held against onnxruntime on the source; a body with more than the step is left alone and
reported."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import run_onnxruntime

T, N, I, H = 5, 2, 3, 4


def scan_model(op: str = "RNN", *, reverse: bool = False, extra: bool = False, seed: int = 0,
               loop: bool = False, trips: int = T) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    G = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]

    def w(name, shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    weights = [w("wi", (G * H, I)), w("wh", (G * H, H)), w("bi", (G * H,)), w("bh", (G * H,))]
    mk = helper.make_node
    nodes = [mk("Gemm", ["x_t", "wi", "bi"], ["gx"], transB=1), mk("Gemm", ["h", "wh", "bh"], ["gh"], transB=1)]
    states = ["h", "c"] if op == "LSTM" else ["h"]
    if op == "RNN":
        nodes += [mk("Add", ["gh", "gx"], ["a"]), mk("Tanh", ["a"], ["h_new"])]
    elif op == "GRU":
        nodes += [mk("Split", ["gx"], ["xr", "xz", "xn"], axis=1, num_outputs=3),
                  mk("Split", ["gh"], ["hr", "hz", "hn"], axis=1, num_outputs=3),
                  mk("Add", ["hr", "xr"], ["ar"]), mk("Sigmoid", ["ar"], ["r"]),
                  mk("Add", ["hz", "xz"], ["az"]), mk("Sigmoid", ["az"], ["z"]),
                  mk("Mul", ["hn", "r"], ["rn"]), mk("Add", ["xn", "rn"], ["an"]), mk("Tanh", ["an"], ["n"]),
                  mk("Sub", ["h", "n"], ["d"]), mk("Mul", ["d", "z"], ["dz"]), mk("Add", ["dz", "n"], ["h_new"])]
    else:
        nodes += [mk("Add", ["gh", "gx"], ["a"]), mk("Split", ["a"], ["gi", "gf", "gg", "go"], axis=1, num_outputs=4),
                  mk("Sigmoid", ["gi"], ["si"]), mk("Sigmoid", ["gf"], ["sf"]), mk("Tanh", ["gg"], ["tg"]),
                  mk("Sigmoid", ["go"], ["so"]), mk("Mul", ["sf", "c"], ["fc"]), mk("Mul", ["si", "tg"], ["ig"]),
                  mk("Add", ["fc", "ig"], ["c_new"]), mk("Tanh", ["c_new"], ["tc"]), mk("Mul", ["so", "tc"], ["h_new"])]
    y = "y_t"
    nodes.append(mk("Identity", ["h_new"], ["y_t"]) if not extra else mk("Relu", ["h_new"], ["y_t"]))
    state_outs = ["h_new", "c_new"] if op == "LSTM" else ["h_new"]
    value = helper.make_tensor_value_info
    body_in = [value(s, TensorProto.FLOAT, [N, H]) for s in states]
    body_out = [value(s, TensorProto.FLOAT, [N, H]) for s in state_outs] + [value(y, TensorProto.FLOAT, [N, H])]
    extra_inits = []
    if loop:  # x_t = Gather(x, iteration number); the condition passed through
        nodes = [mk("Gather", ["x", "i"], ["x_t"], axis=0), mk("Identity", ["cond"], ["cond_out"]), *nodes]
        body_in = [value("i", TensorProto.INT64, []), value("cond", TensorProto.BOOL, []), *body_in]
        body_out = [value("cond_out", TensorProto.BOOL, []), *body_out]
        extra_inits = [numpy_helper.from_array(np.array(trips, np.int64), "trips")]
    else:
        body_in.append(value("x_t", TensorProto.FLOAT, [N, I]))
    body = helper.make_graph(nodes, "body", body_in, body_out)
    outs = [f"{s}_last" for s in states] + ["y"]
    if loop:
        scan = mk("Loop", ["trips", ""] + [f"{s}0" for s in states], outs, body=body)
    else:
        scan = mk("Scan", [f"{s}0" for s in states] + ["x"], outs, body=body, num_scan_inputs=1,
                  scan_input_directions=[int(reverse)], scan_output_directions=[int(reverse)])
    graph = helper.make_graph(
        [scan], "scan_cell", [helper.make_tensor_value_info(f"{s}0", TensorProto.FLOAT, [N, H]) for s in states]
        + [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, N, I])],
        [helper.make_tensor_value_info(f"{s}_last", TensorProto.FLOAT, [N, H]) for s in states]
        + [helper.make_tensor_value_info("y", TensorProto.FLOAT, [trips, N, H])], initializer=weights + extra_inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def feeds(op):
    rng = np.random.default_rng(3)
    out = {"x": rng.standard_normal((T, N, I)).astype(np.float32), "h0": rng.standard_normal((N, H)).astype(np.float32)}
    if op == "LSTM":
        out["c0"] = rng.standard_normal((N, H)).astype(np.float32)
    return out


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_scan_of_one_step_becomes_a_recurrent_node(op, reverse):
    import rnnconv
    from rnnconv import io

    source = scan_model(op, reverse=reverse)
    result = rnnconv.fuse(source)
    fused = io.to_proto(result.model)
    ops = Counter(n.op_type for n in fused.graph.node)
    assert ops[op] == 1 and ops["Scan"] == 0, ops
    want, got = run_onnxruntime(source, feeds(op)), run_onnxruntime(fused, feeds(op))
    assert want.keys() == got.keys()
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=1e-5, rtol=1e-5, err_msg=name)


def test_a_body_with_more_than_the_step_is_left_alone_and_reported():
    import rnnconv
    from rnnconv.errors import Unsupported

    why = r"Scan h_last not fused: its scan outputs are not the step's hidden state"
    with pytest.raises(Unsupported, match=why):
        rnnconv.fuse(scan_model("RNN", extra=True))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_loop_of_one_step_over_a_sequence_becomes_a_recurrent_node(op):
    import rnnconv
    from rnnconv import io

    source = scan_model(op, loop=True)
    fused = io.to_proto(rnnconv.fuse(source).model)
    ops = Counter(n.op_type for n in fused.graph.node)
    assert ops[op] == 1 and ops["Loop"] == 0, ops
    want, got = run_onnxruntime(source, feeds(op)), run_onnxruntime(fused, feeds(op))
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=1e-5, rtol=1e-5, err_msg=name)


def test_a_loop_over_part_of_the_sequence_is_a_near_miss():
    import rnnconv
    from rnnconv.errors import Unsupported

    with pytest.raises(Unsupported, match=r"its trip count \(3\) is not the static length of the sequence it reads"):
        rnnconv.fuse(scan_model("GRU", loop=True, trips=3))
