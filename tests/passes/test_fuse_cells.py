"""The fuse pass on unrolled steps written here with onnx.helper (never with rnnconv's writers): what a match
proves (gate roles read from where each gate flows, not from its position), what it refuses and says why, and the
result against onnxruntime on the unrolled source."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import run_onnxruntime

T, N, I, H = 4, 2, 3, 5


def lstm_steps(split_order="ifgo", *, own_weights_at=None, own_bias_at=None, c_out_used=False,
               seed=0) -> onnx.ModelProto:
    """T LSTMCell steps; `split_order`: which gate each Split output is (PyTorch's is i, f, g, o). The step
    `own_weights_at` has its own input weights, `own_bias_at` its own input bias (all else shared)."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def w(name, shape):
        inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name))
        return name

    wi, wh, bi, bh = w("wi", (4 * H, I)), w("wh", (4 * H, H)), w("bi", (4 * H,)), w("bh", (4 * H,))
    h, c = "h", "c"
    outs = []
    for t in range(T):
        p = f"s{t}_"
        ws = (w(p + "wi", (4 * H, I)), wh) if t == own_weights_at else (wi, wh)
        b = w(p + "bi", (4 * H,)) if t == own_bias_at else bi
        inits.append(numpy_helper.from_array(np.array(t, np.int64), p + "t"))
        g = {k: p + k for k in split_order}
        nodes += [helper.make_node("Gather", ["x", p + "t"], [p + "x"], axis=0),
                  helper.make_node("Gemm", [p + "x", ws[0], b], [p + "gx"], transB=1),
                  helper.make_node("Gemm", [h, ws[1], bh], [p + "gh"], transB=1),
                  helper.make_node("Add", [p + "gx", p + "gh"], [p + "a"]),
                  helper.make_node("Split", [p + "a"], [g[k] for k in split_order], axis=1, num_outputs=4),
                  helper.make_node("Sigmoid", [g["i"]], [p + "si"]), helper.make_node("Sigmoid", [g["f"]], [p + "sf"]),
                  helper.make_node("Tanh", [g["g"]], [p + "tg"]), helper.make_node("Sigmoid", [g["o"]], [p + "so"]),
                  helper.make_node("Mul", [c, p + "sf"], [p + "fc"]),
                  helper.make_node("Mul", [p + "tg", p + "si"], [p + "ig"]),
                  helper.make_node("Add", [p + "ig", p + "fc"], [p + "c"]),
                  helper.make_node("Tanh", [p + "c"], [p + "tc"]),
                  helper.make_node("Mul", [p + "tc", p + "so"], [p + "h"])]
        h, c = p + "h", p + "c"
        outs.append(h)
    graph_outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [N, H]) for o in outs]
    graph_outputs.append(helper.make_tensor_value_info("s1_c" if c_out_used else c, TensorProto.FLOAT, [N, H]))
    graph = helper.make_graph(nodes, "lstm_steps",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, N, I]),
                               helper.make_tensor_value_info("h", TensorProto.FLOAT, [N, H]),
                               helper.make_tensor_value_info("c", TensorProto.FLOAT, [N, H])],
                              graph_outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def fuse(model: onnx.ModelProto):
    import rnnconv

    return rnnconv.fuse(model)


def feeds():
    rng = np.random.default_rng(5)
    return {"x": rng.standard_normal((T, N, I)).astype(np.float32),
            "h": rng.standard_normal((N, H)).astype(np.float32), "c": rng.standard_normal((N, H)).astype(np.float32)}


@pytest.mark.parametrize("order", ["ifgo", "gofi", "oigf"])
def test_gate_roles_come_from_the_flow_not_the_split_position(order):
    from rnnconv import io

    source = lstm_steps(order)
    result = fuse(source)
    fused = io.to_proto(result.model)
    ops = Counter(n.op_type for n in fused.graph.node)
    assert ops["LSTM"] == 1 and ops["Gemm"] == 0
    want, got = run_onnxruntime(source, feeds()), run_onnxruntime(fused, feeds())
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=1e-5, rtol=1e-5)


def test_a_step_with_its_own_weights_is_a_near_miss_with_the_reason():
    from rnnconv.errors import Unsupported

    with pytest.raises(Unsupported, match=r"4 LSTM step\(s\) at .* not fused: step 2's W differs from step 0's"):
        fuse(lstm_steps(own_weights_at=2))


def test_steps_differing_only_in_a_bias_are_not_fused(tmp_path):
    """A recurrence shares its biases as its weights: a step with its own input bias is a near miss naming it
    (exit 3), not a fusion the node check then refuses (exit 1)."""
    from rnnconv.errors import Unsupported
    from tests.conftest import run_cli

    source = lstm_steps(own_bias_at=2)
    with pytest.raises(Unsupported, match=r"not fused: step 2's Wb differs from step 0's"):
        fuse(source)
    onnx.save(source, str(tmp_path / "steps.onnx"))
    code, out, err = run_cli(["fuse", tmp_path / "steps.onnx", "-o", tmp_path / "fused.onnx"])
    assert code == 3 and "step 2's Wb differs" in err, out + err
    assert not (tmp_path / "fused.onnx").exists()


def test_a_cell_state_read_between_steps_is_a_near_miss():
    from rnnconv import io
    from rnnconv.passes.fuse_cells import survey

    fusions, misses = survey(io.load(lstm_steps(c_out_used=True)))
    assert not fusions
    assert [str(m) for m in misses] == [f"{T} LSTM step(s) at s0_h..s3_h not fused: the cell state 's1_c' is read "
                                        "outside the recurrence between steps (a recurrent node gives only the last "
                                        "one)"]


def test_survey_counts_steps_without_changing_the_model():
    from rnnconv import io
    from rnnconv.passes.fuse_cells import survey

    model = io.load(lstm_steps())
    before = len(list(model.graph))
    fusions, misses = survey(model)
    assert [(f.op, f.steps) for f in fusions] == [("LSTM", T)] and not misses
    assert len(list(model.graph)) == before


def test_one_tanh_of_two_products_that_reads_no_sequence_is_not_an_rnn():
    from rnnconv import io
    from rnnconv.passes.fuse_cells import survey

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((H, H)).astype(np.float32), n) for n in ("wa", "wb")]
    nodes = [helper.make_node("Gemm", ["a", "wa"], ["pa"], transB=1), helper.make_node("Gemm", ["b", "wb"], ["pb"]),
             helper.make_node("Add", ["pa", "pb"], ["s"]), helper.make_node("Tanh", ["s"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [N, H])
                                             for n in ("a", "b")],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, H])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    assert survey(io.load(model)) == ([], [])


def test_an_lstm_like_step_with_other_activations_is_reported():
    from rnnconv import io
    from rnnconv.passes.fuse_cells import survey

    model = lstm_steps()
    for node in model.graph.node:
        if node.op_type == "Tanh" and node.input[0].endswith("_g"):
            node.op_type = "Relu"  # the candidate gate: not LSTM's default g
    fusions, misses = survey(io.load(model))
    assert not fusions and len(misses) == 1
    assert str(misses[0]).startswith(f"{T} LSTM step(s) at ")
    assert "its four gates go to Relu, Sigmoid, Sigmoid, Sigmoid" in str(misses[0])
