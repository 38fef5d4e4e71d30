"""A forward and a reverse cell loop over one sequence (written here with onnx.helper, as PyTorch writes a cell
applied step by step) fuse into two nodes, or on request into one bidirectional node, held against onnxruntime on
the unrolled source; when the two directions differ in more than their direction, or one reads what the other
computes, they stay two nodes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import run_onnxruntime

T, N, I, H = 4, 2, 3, 5
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def cell(op: str, p: str, x: str, h: str, c: str, w: tuple, act: str = "Tanh") -> tuple[list, str, str]:
    """One step of nn.RNNCell / nn.GRUCell / nn.LSTMCell as PyTorch's exporters write it: (nodes, h', c')."""
    mk = helper.make_node
    nodes = [mk("Gemm", [x, w[0], w[2]], [p + "gx"], transB=1), mk("Gemm", [h, w[1], w[3]], [p + "gh"], transB=1)]
    if op == "RNN":
        return nodes + [mk("Add", [p + "gh", p + "gx"], [p + "a"]), mk(act, [p + "a"], [p + "h"])], p + "h", c
    if op == "LSTM":
        g = [p + k for k in "ifgo"]
        return nodes + [mk("Add", [p + "gh", p + "gx"], [p + "a"]), mk("Split", [p + "a"], g, axis=1, num_outputs=4),
                        mk("Sigmoid", [g[0]], [p + "si"]), mk("Sigmoid", [g[1]], [p + "sf"]),
                        mk("Tanh", [g[2]], [p + "tg"]), mk("Sigmoid", [g[3]], [p + "so"]),
                        mk("Mul", [p + "sf", c], [p + "fc"]), mk("Mul", [p + "si", p + "tg"], [p + "ig"]),
                        mk("Add", [p + "fc", p + "ig"], [p + "c"]), mk("Tanh", [p + "c"], [p + "tc"]),
                        mk("Mul", [p + "so", p + "tc"], [p + "h"])], p + "h", p + "c"
    gx, gh = [p + f"x{k}" for k in "rzn"], [p + f"h{k}" for k in "rzn"]
    return nodes + [mk("Split", [p + "gx"], gx, axis=1, num_outputs=3),
                    mk("Split", [p + "gh"], gh, axis=1, num_outputs=3),
                    mk("Add", [gh[0], gx[0]], [p + "ar"]), mk("Sigmoid", [p + "ar"], [p + "r"]),
                    mk("Add", [gh[1], gx[1]], [p + "az"]), mk("Sigmoid", [p + "az"], [p + "z"]),
                    mk("Mul", [gh[2], p + "r"], [p + "rn"]), mk("Add", [gx[2], p + "rn"], [p + "an"]),
                    mk("Tanh", [p + "an"], [p + "n"]), mk("Sub", [h, p + "n"], [p + "d"]),
                    mk("Mul", [p + "d", p + "z"], [p + "dz"]), mk("Add", [p + "dz", p + "n"], [p + "h"])], p + "h", c


def two_directions(op: str, act: str = "Tanh", reverse_state: str = "input") -> onnx.ModelProto:
    """A forward loop and a reverse loop over x, each with its own weights; outputs: each direction's steps stacked
    in time order, and its last state. `reverse_state`: the reverse loop's initial state is a graph input
    ("input"), zeros left out ("none"), or computed from the forward loop's last state ("forward": its negation,
    so that the two loops are two recurrences, not one chain)."""
    rng = np.random.default_rng(3)
    G, inits, nodes, outputs = GATES[op], [], [], []
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, N, I])]
    for t in range(T):
        inits.append(numpy_helper.from_array(np.array(t, np.int64), f"t{t}"))
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "ax0"))
    last = {}
    for d, name in enumerate(("fw", "rv")):
        w = tuple(f"{name}_{k}" for k in ("w_ih", "w_hh", "b_ih", "b_hh"))
        for k, shape in zip(w, ((G * H, I), (G * H, H), (G * H,), (G * H,))):
            inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), k))
        states = ["h", "c"] if op == "LSTM" else ["h"]
        if d == 1 and reverse_state == "forward":
            nodes += [helper.make_node("Neg", [last[s]], [f"{name}_{s}0"]) for s in states]
            h, c = f"{name}_h0", f"{name}_c0"
        elif d == 1 and reverse_state == "none":
            for s in states:
                inits.append(numpy_helper.from_array(np.zeros((N, H), np.float32), f"{name}_{s}0"))
            h, c = f"{name}_h0", f"{name}_c0"
        else:
            inputs += [helper.make_tensor_value_info(f"{name}_{s}0", TensorProto.FLOAT, [N, H]) for s in states]
            h, c = f"{name}_h0", f"{name}_c0"
        per_step = {}
        for k in range(T):
            t = k if d == 0 else T - 1 - k
            p = f"{name}{k}_"
            nodes.append(helper.make_node("Gather", ["x", f"t{t}"], [p + "x"], axis=0))
            more, h, c = cell(op, p, p + "x", h, c, w, act)
            nodes += more + [helper.make_node("Unsqueeze", [h, "ax0"], [p + "u"])]
            per_step[t] = p + "u"
        last = {"h": h, "c": c}
        nodes.append(helper.make_node("Concat", [per_step[t] for t in range(T)], [f"{name}_y"], axis=0))
        outputs += [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [T, N, H]),
                    helper.make_tensor_value_info(h, TensorProto.FLOAT, [N, H])]
    graph = helper.make_graph(nodes, f"{op}_two_directions", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def fused_and_checked(source: onnx.ModelProto, bidirectional: bool = True) -> Counter:
    import rnnconv
    from rnnconv import io

    fused = io.to_proto(rnnconv.fuse(source, bidirectional=bidirectional).model)
    rng = np.random.default_rng(5)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in source.graph.input}
    want, got = run_onnxruntime(source, feeds), run_onnxruntime(fused, feeds)
    assert list(got) == list(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=1e-5, rtol=1e-5, err_msg=name)
    return Counter((n.op_type, next((a.s.decode() for a in n.attribute if a.name == "direction"), "forward"))
                   for n in fused.graph.node if n.op_type in GATES)


@pytest.mark.parametrize("op,act", [("RNN", "Tanh"), ("RNN", "Relu"), ("GRU", "Tanh"), ("LSTM", "Tanh")])
def test_a_forward_and_a_reverse_loop_become_one_bidirectional_node(op, act):
    assert fused_and_checked(two_directions(op, act)) == {(op, "bidirectional"): 1}


def test_by_default_each_direction_is_its_own_node():
    assert fused_and_checked(two_directions("GRU"), bidirectional=False) == {("GRU", "forward"): 1,
                                                                             ("GRU", "reverse"): 1}


def test_directions_that_differ_in_their_initial_state_stay_two_nodes():
    assert fused_and_checked(two_directions("LSTM", reverse_state="none")) == {("LSTM", "forward"): 1,
                                                                                ("LSTM", "reverse"): 1}


def test_a_reverse_loop_that_reads_the_forward_result_stays_two_nodes():
    assert fused_and_checked(two_directions("GRU", reverse_state="forward")) == {("GRU", "forward"): 1,
                                                                                 ("GRU", "reverse"): 1}


def test_the_shipped_two_layer_bidirectional_export_fuses_into_a_node_per_layer():
    """dynamo's 2-layer bidirectional nn.RNN (fixtures/fuse), against the outputs torch computed."""
    import json

    import rnnconv
    from rnnconv import io
    from tests.conftest import FIXTURES

    name = "rnn_two_layers_bidirectional_batch_first_initial_state_dynamo.onnx"
    entry = next(e for e in json.loads((FIXTURES / "fuse" / "index.json").read_text())["fixtures"]
                 if e["file"] == name)
    fused = io.to_proto(rnnconv.fuse(FIXTURES / "fuse" / name, bidirectional=True).model)
    assert Counter(n.op_type for n in fused.graph.node if n.op_type in GATES) == {"RNN": 2}
    assert all(a.s == b"bidirectional" for n in fused.graph.node if n.op_type == "RNN" for a in n.attribute
               if a.name == "direction")
    data = np.load(FIXTURES / "fuse" / name.replace(".onnx", ".npz"))
    got = run_onnxruntime(fused, {k: data[k] for k in entry["inputs"]})
    for out in entry["outputs"]:
        np.testing.assert_allclose(got[out], data[out], atol=1e-5, rtol=1e-5, err_msg=out)


def test_the_command_line_flag_writes_one_bidirectional_node_per_layer(tmp_path):
    """`rnnconv fuse --bidirectional` on the same export: two RNN nodes, where the default writes four."""
    import onnx

    from tests.conftest import FIXTURES, run_cli

    source = FIXTURES / "fuse" / "rnn_two_layers_bidirectional_batch_first_initial_state_dynamo.onnx"
    counts = {}
    for flags in ((), ("--bidirectional",)):
        out = tmp_path / f"fused{len(flags)}.onnx"
        code, _, err = run_cli(["fuse", str(source), "-o", str(out), *flags])
        assert code == 0, err
        counts[flags] = sum(n.op_type == "RNN" for n in onnx.load(str(out)).graph.node)
    assert counts == {(): 4, ("--bidirectional",): 2}
