"""The patterns real models are built of, in small synthetic models: a recurrent node inside an If body, a state
input of fixed batch beside a dynamic X, a sequence length baked into a Reshape, an integer input compared with a
constant, a model no drawn input can run. Every command handles them; numbers are held against onnxruntime."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from tests.conftest import run_cli

T, N, I, H = 5, 2, 4, 6


def weights(prefix="", peepholes=True):
    rng = np.random.default_rng(0)
    w = [nh.from_array(rng.uniform(-1, 1, s).astype(np.float32), prefix + k)
         for k, s in (("W", (1, 4 * H, I)), ("R", (1, 4 * H, H)), ("B", (1, 8 * H)))]
    if peepholes:
        w.append(nh.from_array(rng.uniform(-1, 1, (1, 3 * H)).astype(np.float32), prefix + "P"))
    return w


def lstm_in_if(path):
    """out = If(sr == 16000) then Squeeze(LSTM(X).Y_h) else zeros: the LSTM (with peepholes) lives in a body and
    reads X and its weights from the outer graph."""
    lstm = h.make_node("LSTM", ["X", "W", "R", "B", "", "", "", "P"], ["Y", "Y_h"], name="lstm", hidden_size=H)
    axes = h.make_node("Constant", [], ["axes"], value=nh.from_array(np.array([0], np.int64)))
    sq = h.make_node("Squeeze", ["Y_h", "axes"], ["then_out"])
    then_g = h.make_graph([axes, lstm, sq], "then", [], [h.make_tensor_value_info("then_out", TP.FLOAT, None)])
    shape = h.make_node("Constant", [], ["shape"], value=nh.from_array(np.array([N, H], np.int64)))
    zeros = h.make_node("ConstantOfShape", ["shape"], ["else_out"], value=nh.from_array(np.zeros(1, np.float32)))
    else_g = h.make_graph([shape, zeros], "else", [], [h.make_tensor_value_info("else_out", TP.FLOAT, None)])
    k = h.make_node("Constant", [], ["k"], value=nh.from_array(np.array(16000, np.int64)))
    eq = h.make_node("Equal", ["sr", "k"], ["is16k"])
    iff = h.make_node("If", ["is16k"], ["out"], name="If_0", then_branch=then_g, else_branch=else_g)
    g = h.make_graph([k, eq, iff], "g", [h.make_tensor_value_info("X", TP.FLOAT, [T, N, I]),
                                         h.make_tensor_value_info("sr", TP.INT64, [])],
                     [h.make_tensor_value_info("out", TP.FLOAT, [N, H])], initializer=weights())
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 15)]), path)
    return path


def fixed_batch_state(path):
    """X [T, batch, I] with batch dynamic, initial_h [1, 1, H] static: the batch can only be 1."""
    lstm = h.make_node("LSTM", ["X", "W", "R", "B", "", "h0"], ["Y", "Y_h"], name="lstm", hidden_size=H)
    g = h.make_graph([lstm], "g", [h.make_tensor_value_info("X", TP.FLOAT, ["T", "batch", I]),
                                   h.make_tensor_value_info("h0", TP.FLOAT, [1, 1, H])],
                     [h.make_tensor_value_info("Y_h", TP.FLOAT, [1, "batch", H])],
                     initializer=weights(peepholes=False))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), path)
    return path


def baked_reshape(path):
    """X [T, N, I] with T dynamic, but a Reshape to [7, -1, H] after the LSTM: T can only be 7."""
    lstm = h.make_node("LSTM", ["X", "W", "R", "B"], ["Y"], name="lstm", hidden_size=H)
    shape = h.make_node("Constant", [], ["shape"], value=nh.from_array(np.array([7, -1, H], np.int64)))
    reshape = h.make_node("Reshape", ["Y", "shape"], ["out"])
    g = h.make_graph([lstm, shape, reshape], "g", [h.make_tensor_value_info("X", TP.FLOAT, ["T", N, I])],
                     [h.make_tensor_value_info("out", TP.FLOAT, [7, N, H])], initializer=weights(peepholes=False))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), path)
    return path


def ort_run(path, feeds):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {i.name: feeds[i.name] for i in s.get_inputs()})


def test_recurrent_node_in_an_if_body(tmp_path):
    src = lstm_in_if(tmp_path / "if.onnx")
    code, out, err = run_cli(["inspect", src, "--json"])
    assert code == 0 and [n["name"] for n in json.loads(out)["nodes"]] == ["If_0/then_branch/lstm"], err
    code, out, _ = run_cli(["check", src, "--target", "openvino"])
    assert code == 1 and "If_0/then_branch/lstm (LSTM-14): silently wrong: peepholes" in out
    feeds = {"X": np.random.default_rng(1).uniform(-1, 1, (T, N, I)).astype(np.float32),
             "sr": np.array(16000, np.int64)}
    up, l1, l0 = tmp_path / "up.onnx", tmp_path / "l1.onnx", tmp_path / "l0.onnx"
    code, out, err = run_cli(["upgrade", src, "-o", up])
    assert code == 0 and "ok   node If_0/then_branch/lstm [engine]" in out, out + err
    # sr was drawn as the 16000 it is compared with: the If ran the LSTM's branch, no note but where nodes ran
    assert all(n.strip().startswith("note: engine") for n in out.splitlines() if "note: " in n), out
    code, out, err = run_cli(["layout", src, "-o", l1, "--to", "1", "--node", "If_0/then_branch/lstm"])
    assert code == 0, out + err
    body = next(a.g for a in onnx.load(l1).graph.node[-1].attribute if a.name == "then_branch")
    assert [a.i for n in body.node if n.op_type == "LSTM" for a in n.attribute if a.name == "layout"] == [1]
    assert run_cli(["layout", l1, "-o", l0, "--to", "0"])[0] == 0
    for converted in (up, l0):
        np.testing.assert_allclose(ort_run(converted, feeds)[0], ort_run(src, feeds)[0], rtol=1e-5, atol=1e-6)


def test_fixed_batch_state_sets_the_batch(tmp_path):
    src = fixed_batch_state(tmp_path / "m.onnx")
    code, out, err = run_cli(["upgrade", src, "-o", tmp_path / "up.onnx", "--json"])
    assert code == 0, err
    shapes = {o["name"]: o["shape"] for c in json.loads(out)["checks"] for o in c["outputs"]}
    assert shapes["Y_h"] == [1, 1, H]  # the batch the state declares, not the default 3


def test_size_baked_into_a_reshape_is_tried(tmp_path):
    src = baked_reshape(tmp_path / "m.onnx")
    code, out, err = run_cli(["upgrade", src, "-o", tmp_path / "up.onnx"])
    assert code == 0, out + err
    assert "note: inputs drawn with dynamic dims at 7, a size a Reshape in the model states" in out


def test_model_no_drawn_input_runs_is_exit_4_in_one_line(tmp_path):
    src = baked_reshape(tmp_path / "m.onnx")
    m = onnx.load(src)
    m.graph.node[1].attribute[0].t.CopyFrom(nh.from_array(np.array([7, 3, H + 1], np.int64)))  # never fits
    for d, name in zip(m.graph.output[0].type.tensor_type.shape.dim, "abc"):
        d.dim_param = name
    onnx.save(m, src)
    code, out, err = run_cli(["upgrade", src, "-o", tmp_path / "up.onnx"])
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("rnnconv: error: the model does not run on the inputs drawn for it (X float32[")
    assert "(try --dim, or --range, or --inputs, or --verify node)" in err
    assert run_cli(["upgrade", src, "-o", tmp_path / "up.onnx", "--verify", "node"])[0] == 0


@pytest.mark.parametrize("builder", [lstm_in_if, fixed_batch_state, baked_reshape])
def test_verify_uses_the_same_drawing(builder, tmp_path):
    src = builder(tmp_path / "m.onnx")
    assert run_cli(["upgrade", src, "-o", tmp_path / "up.onnx", "--no-verify"])[0] == 0
    code, out, err = run_cli(["verify", src, tmp_path / "up.onnx", "--engine", "onnxruntime"])
    assert code == 0, out + err
