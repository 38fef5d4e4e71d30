"""rnnconv's graph executor against onnxruntime: every fixture and PyTorch export, If / Loop / Scan bodies and
model-local functions holding recurrent nodes, contrib ops run per node by onnxruntime, the ops routed away from
onnx's reference, and NodeFailed naming the node that cannot run."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from rnnconv import io
from rnnconv.engine import reference
from rnnconv.engine.onnx_graph import Executor, run_onnx
from rnnconv.engine.onnxruntime_runtime import NODE_CONSTANT_BYTES, NodeSession
from rnnconv.engine.op_dynamic_quantize_lstm import mlas_saturates
from rnnconv.errors import EXIT_BAD_INPUT, BadInput, NodeFailed
from tests.conftest import FIXTURES
from tests.oracle import reference as oracle

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def ort_run(model, feeds, threads=1):
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def engine_run(model, feeds, **kwargs):
    return run_onnx(io.load(model), feeds, **kwargs)


def assert_close(got, want, atol=1e-5, rtol=1e-5):
    assert set(got) == set(want)
    for name, w in want.items():
        g = np.asarray(got[name])
        assert g.shape == w.shape, (name, g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), np.asarray(w).astype(np.float64), atol=atol, rtol=rtol,
                                   err_msg=name)


def make_model(nodes, inputs, outputs, initializers=(), opset=17, functions=(), domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8, functions=list(functions))


def value(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def weights(name, *shape):
    return numpy_helper.from_array((0.5 * RNG.standard_normal(shape)).astype(np.float32), name)


# -- every fixture and PyTorch export --------------------------------------------------------------------------

SYNTHETIC = json.loads((FIXTURES / "index.json").read_text())["fixtures"]
TORCH = json.loads((FIXTURES / "torch" / "index.json").read_text())["fixtures"]


def _fixture_feeds(model_path, samples):
    model = io.load(model_path)
    data = np.load(samples)
    feeds = {}
    for v in model.graph.inputs:
        if v.name in data.files:
            a = data[v.name]
            feeds[v.name] = a.view(ml_dtypes.bfloat16) if v.dtype is not None and v.dtype.name == "BFLOAT16" else a
    return model, feeds


# This test's own tolerances by the outputs' type: onnxruntime computes in the model's float type (float64 and
# bfloat16 recurrent nodes in float32, tests/oracle.py), the engine in float64 rounded to it.
FIXTURE_TOL = {"float32": 1e-5, "float64": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}


@pytest.mark.parametrize("entry", SYNTHETIC, ids=lambda e: e["file"])
def test_fixture_matches_onnxruntime(entry):
    """Every fixture: onnxruntime on it, or on its re-expression where onnxruntime does not run it as it is
    (layout 1, versions below 7, float64, bfloat16)."""
    model, feeds = _fixture_feeds(FIXTURES / entry["file"], FIXTURES / entry["samples"])
    want = oracle(FIXTURES / entry["file"], feeds)
    got = run_onnx(model, feeds)
    tol = FIXTURE_TOL[np.asarray(next(iter(got.values()))).dtype.name]
    assert_close(got, want, tol, tol)


@pytest.mark.parametrize("entry", [e for e in TORCH if e["onnxruntime"]], ids=lambda e: e["file"])
def test_torch_export_matches_onnxruntime(entry):
    model, feeds = _fixture_feeds(FIXTURES / "torch" / entry["file"], FIXTURES / "torch" / entry["data"])
    session = ort.InferenceSession(str(FIXTURES / "torch" / entry["file"]), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    placements = {}
    assert_close(run_onnx(model, feeds, placements=placements), want)
    # (the dynamo exporter unrolls nn.RNN into MatMul / Tanh: no recurrent node at all)
    assert placements.get(entry["op"], {}) == ({"rnnconv": len(entry["recurrent_nodes"])} if entry["recurrent_nodes"]
                                               else {})


def test_float32_precision_matches_onnxruntime():
    model, feeds = _fixture_feeds(FIXTURES / "lstm7_bidirectional_peepholes_input_forget_seq_lens_initial_states.onnx",
                                  FIXTURES / "lstm7_bidirectional_peepholes_input_forget_seq_lens_initial_states.npz")
    want = ort_run(io.to_proto(model), feeds)
    assert_close(run_onnx(model, feeds, precision="float32"), want)


# -- control flow: recurrent nodes inside If / Loop / Scan bodies, outer-scope values ---------------------------

T, N, I, H = 5, 3, 4, 6


def lstm_in_body(name, x, h0=None, attrs=None, outputs=("Y", "Y_h")):
    """An LSTM whose X (and W, R, B from the main graph's initializers) are outer-scope values of its body."""
    ins = [x, "W", "R", "B"] + (["", h0] if h0 else [])
    return helper.make_node("LSTM", ins, [f"{name}_{o}" for o in outputs], name=name, hidden_size=H,
                            **(attrs or {}))


LSTM_WEIGHTS = [weights("W", 1, 4 * H, I), weights("R", 1, 4 * H, H), weights("B", 1, 8 * H)]


def if_model():
    # then: an LSTM with clip and non-default activations (onnx's own LSTM ignores both); else: another LSTM
    then_branch = helper.make_graph(
        [lstm_in_body("lstm_then", "X", attrs={"clip": 0.5, "activations": ["HardSigmoid", "Softsign", "Relu"]}),
         helper.make_node("Identity", ["lstm_then_Y_h"], ["then_out"])], "then", [], [value("then_out", [1, N, H])])
    else_branch = helper.make_graph(
        [lstm_in_body("lstm_else", "X", attrs={"direction": "reverse"}),
         helper.make_node("Identity", ["lstm_else_Y_h"], ["else_out"])], "else", [], [value("else_out", [1, N, H])])
    node = helper.make_node("If", ["cond"], ["out"], name="If_0", then_branch=then_branch, else_branch=else_branch)
    return make_model([node], [value("cond", [], TensorProto.BOOL), value("X", [T, N, I])],
                      [value("out", [1, N, H])], LSTM_WEIGHTS)


@pytest.mark.parametrize("cond", [True, False])
def test_if_bodies_run_rnnconv_kernels(cond):
    model = if_model()
    feeds = {"cond": np.array(cond), "X": RNG.standard_normal((T, N, I)).astype(np.float32)}
    placements = {}
    assert_close(engine_run(model, feeds, placements=placements), ort_run(model, feeds))
    assert placements["If"] == {"rnnconv": 1} and placements["LSTM"] == {"rnnconv": 1}  # the branch taken only


def loop_model(trip_count=3, with_cond=False):
    """Loop carrying h [1, N, H] through an LSTM over the outer X; scan output: each iteration's Y_h; with_cond:
    the body stops after two iterations whatever the trip count."""
    nodes = [lstm_in_body("lstm", "X", "h_in"), helper.make_node("Identity", ["lstm_Y_h"], ["h_out"]),
             helper.make_node("Identity", ["lstm_Y_h"], ["scan_out"])]
    if with_cond:
        nodes += [helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1, np.int64))),
                  helper.make_node("Less", ["i", "one"], ["cond_out"])]
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(nodes, "body",
                             [value("i", [], TensorProto.INT64), value("cond_in", [], TensorProto.BOOL),
                              value("h_in", [1, N, H])],
                             [value("cond_out", [], TensorProto.BOOL), value("h_out", [1, N, H]),
                              value("scan_out", [1, N, H])])
    inits = LSTM_WEIGHTS + [numpy_helper.from_array(np.array(trip_count, np.int64), "M"),
                            numpy_helper.from_array(np.array(True), "c0")]
    loop = helper.make_node("Loop", ["M", "c0" if with_cond else "", "h0"], ["h_final", "h_all"], name="Loop_0",
                            body=body)
    return make_model([loop], [value("X", [T, N, I]), value("h0", [1, N, H])],
                      [value("h_final", [1, N, H]), value("h_all", [None, 1, N, H])], inits)


@pytest.mark.parametrize("trip_count,with_cond", [(3, False), (0, False), (5, True)])
def test_loop_carries_state_through_an_lstm(trip_count, with_cond):
    model = loop_model(trip_count, with_cond)
    feeds = {"X": RNG.standard_normal((T, N, I)).astype(np.float32),
             "h0": RNG.standard_normal((1, N, H)).astype(np.float32)}
    placements = {}
    assert_close(engine_run(model, feeds, placements=placements), ort_run(model, feeds))
    if trip_count:
        assert placements["LSTM"] == {"rnnconv": 1}  # counted once, however many iterations ran it


def scan_model(directions=(0, 1), output_axis=1):
    """Scan over X's time axis (forward and reversed copies), one GRU step per element with a carried state."""
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([0], np.int64))),
         helper.make_node("Unsqueeze", ["x_t", "axes"], ["x_step"]),
         helper.make_node("GRU", ["x_step", "GW", "GR", "", "", "h_in"], ["", "h_next"], name="gru", hidden_size=H,
                          linear_before_reset=1),
         helper.make_node("MatMul", ["x_r", "P"], ["x_r_proj"]),
         helper.make_node("Add", ["h_next", "x_r_proj"], ["h_out"]),
         helper.make_node("Identity", ["h_next"], ["y_t"])],
        "body", [value("h_in", [1, N, H]), value("x_t", [N, I]), value("x_r", [N, I])],
        [value("h_out", [1, N, H]), value("y_t", [1, N, H])])
    scan = helper.make_node("Scan", ["h0", "X", "X"], ["h_last", "Ys"], name="Scan_0", body=body, num_scan_inputs=2,
                            scan_input_directions=list(directions), scan_output_axes=[output_axis])
    inits = [weights("GW", 1, 3 * H, I), weights("GR", 1, 3 * H, H), weights("P", I, H)]
    return make_model([scan], [value("X", [T, N, I]), value("h0", [1, N, H])],
                      [value("h_last", [1, N, H]), value("Ys", [None] * 4)],
                      inits)


@pytest.mark.parametrize("directions,output_axis", [((0, 1), 1), ((1, 0), -1), ((0, 0), 0)])
def test_scan_runs_a_gru_per_step(directions, output_axis):
    model = scan_model(directions, output_axis)
    feeds = {"X": RNG.standard_normal((T, N, I)).astype(np.float32),
             "h0": RNG.standard_normal((1, N, H)).astype(np.float32)}
    assert_close(engine_run(model, feeds), ort_run(model, feeds))


def test_scan_8_batch_major_with_sequence_lens():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x"], ["s_out"]),
                              helper.make_node("Mul", ["s_out", "x"], ["y"])], "body",
                             [value("s_in", [2]), value("x", [2])], [value("s_out", [2]), value("y", [2])])
    scan = helper.make_node("Scan", ["lens", "s0", "X"], ["s", "Y"], body=body, num_scan_inputs=1, directions=[1])
    model = make_model([scan], [value("lens", [3], TensorProto.INT64), value("s0", [3, 2]), value("X", [3, 4, 2])],
                       [value("s", [3, 2]), value("Y", [3, 4, 2])], opset=8)
    feeds = {"lens": np.array([4, 2, 3], np.int64), "s0": RNG.standard_normal((3, 2)).astype(np.float32),
             "X": RNG.standard_normal((3, 4, 2)).astype(np.float32)}
    assert_close(engine_run(model, feeds), ort_run(model, feeds))


def test_function_with_an_lstm_and_an_attribute_reference():
    body_node = helper.make_node("LSTM", ["x", "w", "r"], ["y", "y_h"], hidden_size=H)
    body_node.attribute.append(helper.make_attribute_ref("clip", AttributeProto.FLOAT))
    function = helper.make_function("local", "ClippedLSTM", ["x", "w", "r"], ["y_h"], [body_node],
                                    [helper.make_opsetid("", 17)], attributes=["clip"])
    call = helper.make_node("ClippedLSTM", ["X", "W", "R"], ["out"], name="call", domain="local", clip=0.25)
    model = make_model([call], [value("X", [T, N, I])], [value("out", [1, N, H])], LSTM_WEIGHTS[:2],
                       functions=[function],
                       domains=["local"])
    feeds = {"X": (3 * RNG.standard_normal((T, N, I))).astype(np.float32)}
    placements = {}
    got = engine_run(model, feeds, placements=placements)
    assert_close(got, ort_run(model, feeds))
    assert placements == {"local::ClippedLSTM": {"rnnconv": 1}, "LSTM": {"rnnconv": 1}}
    unclipped = engine_run(make_model([helper.make_node("LSTM", ["X", "W", "R"], ["", "out"], hidden_size=H)],
                                      [value("X", [T, N, I])], [value("out", [1, N, H])], LSTM_WEIGHTS[:2]), feeds)
    assert np.abs(got["out"] - unclipped["out"]).max() > 1e-3  # the reference to clip was resolved, not dropped


# -- ops outside onnx's reference: other domains, dropped versions ----------------------------------------------

def test_contrib_op_runs_per_node_in_onnxruntime():
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    node = helper.make_node("FusedMatMul", ["A", "B"], ["Y"], domain="com.microsoft", alpha=0.5, transB=1)
    relu = helper.make_node("Relu", ["Y"], ["Z"])
    model = make_model([node, relu], [value("A", [2, 3, 4])], [value("Z", [2, 3, 5])], [weights("B", 5, 4)],
                       domains=["com.microsoft"])
    placements = {}
    got = engine_run(model, {"A": a}, placements=placements)
    b = numpy_helper.to_array(model.graph.initializer[0])
    np.testing.assert_allclose(got["Z"], np.maximum(0.5 * a @ b.T, 0), rtol=1e-6, atol=1e-6)
    assert placements == {"com.microsoft::FusedMatMul": {"onnxruntime": 1}, "Relu": {"onnxruntime": 1}}


def test_quantize_dynamic_matmul_model_matches_onnxruntime(tmp_path):
    from onnxruntime.quantization import quantize_dynamic

    float_model = make_model([helper.make_node("MatMul", ["X", "Wm"], ["M"]), helper.make_node("Relu", ["M"], ["Y"])],
                             [value("X", [8, 64])], [value("Y", [8, 32])], [weights("Wm", 64, 32)], opset=13)
    src, dst = tmp_path / "float.onnx", tmp_path / "quant.onnx"
    src.write_bytes(float_model.SerializeToString())
    quantize_dynamic(str(src), str(dst))
    feeds = {"X": (4 * RNG.standard_normal((8, 64))).astype(np.float32)}
    placements = {}
    got = run_onnx(io.load(dst), feeds, placements=placements)
    # every op of quantize_dynamic's output as onnxruntime computes it, to the bit
    np.testing.assert_array_equal(got["Y"], ort_run(io.to_proto(io.load(dst)), feeds)["Y"])
    assert placements["MatMulInteger"] == {"onnxruntime": 1}
    assert placements["DynamicQuantizeLinear"] == {"onnxruntime": 1}


def test_version_missing_from_the_reference_runs_in_onnxruntime():
    # onnx's reference keeps DequantizeLinear from version 19 on only
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
             numpy_helper.from_array(np.array(3, np.uint8), "z")]
    model = make_model([node], [value("q", [4], TensorProto.UINT8)], [value("y", [4])], inits, opset=13)
    with pytest.raises(reference.NoReference):
        reference.op("DequantizeLinear", 13, [], 3, 1, {"": 13})
    placements = {}
    got = engine_run(model, {"q": np.array([0, 3, 4, 255], np.uint8)}, placements=placements)
    np.testing.assert_array_equal(got["y"], np.array([-1.5, 0, 0.5, 126], np.float32))
    assert placements == {"DequantizeLinear": {"onnxruntime": 1}}


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_family_before_13_runs_in_onnxruntime(op):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=1)], [value("x", [2, 3, 4])],
                       [value("y", [2, 3, 4])], opset=11)
    want = ort_run(model, {"x": x})
    placements = {}
    assert_close(engine_run(model, {"x": x}, placements=placements), want, 1e-6, 1e-6)
    assert placements == {op: {"onnxruntime": 1}}
    # onnx's reference normalizes over axis 1 alone, not over the 2-D flattening [2, 12] of opsets before 13
    ref = reference.op(op, 11, [ir.AttrInt64("axis", 1)], 1, 1, {"": 11})(x)[0]
    assert np.abs(ref - want["y"]).max() > 1e-2


def test_matmul_integer_runs_as_onnxruntime_computes_it():
    a = RNG.integers(128, 256, (4, 64)).astype(np.uint8)
    b = RNG.integers(-127, 128, (64, 8)).astype(np.int8)
    model = make_model([helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
                       [value("a", [4, 64], TensorProto.UINT8), value("b", [64, 8], TensorProto.INT8)],
                       [value("y", [4, 8], TensorProto.INT32)], opset=13)
    want = ort_run(model, {"a": a, "b": b})["y"]
    np.testing.assert_array_equal(engine_run(model, {"a": a, "b": b})["y"], want)
    exact = a.astype(np.int32) @ b.astype(np.int32)
    if mlas_saturates():  # AVX2 without VNNI: onnxruntime's pairs saturate to int16, the exact product differs
        assert not np.array_equal(want, exact)
    else:
        np.testing.assert_array_equal(want, exact)


@pytest.mark.parametrize("op", ["QLinearMatMul", "QLinearConv"])
def test_qlinear_ops_run_as_onnxruntime_computes_them(op):
    if op == "QLinearMatMul":
        x, w = RNG.integers(128, 256, (4, 64)).astype(np.uint8), RNG.integers(-127, 128, (64, 8)).astype(np.int8)
    else:
        x, w = (RNG.integers(128, 256, (1, 8, 6, 6)).astype(np.uint8),
                RNG.integers(-127, 128, (4, 8, 3, 3)).astype(np.int8))
    scalars = {"xs": np.array(0.05, np.float32), "xz": np.array(0, np.uint8), "ws": np.array(0.05, np.float32),
               "wz": np.array(0, np.int8), "ys": np.array(50.0, np.float32), "yz": np.array(0, np.uint8)}
    node = helper.make_node(op, ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"])
    model = make_model([node], [value("x", list(x.shape), TensorProto.UINT8),
                                value("w", list(w.shape), TensorProto.INT8)],
                       [value("y", [1, 4, 4, 4] if op == "QLinearConv" else [4, 8], TensorProto.UINT8)],
                       [numpy_helper.from_array(v, k) for k, v in scalars.items()], opset=13)
    want = ort_run(model, {"x": x, "w": w})["y"]
    placements = {}
    np.testing.assert_array_equal(engine_run(model, {"x": x, "w": w}, placements=placements)["y"], want)
    assert placements == {op: {"onnxruntime": 1}}
    exact = reference.op(op, 13, [], 8, 1, {"": 13})(x, scalars["xs"], scalars["xz"], w, scalars["ws"],
                                                            scalars["wz"], scalars["ys"], scalars["yz"])[0]
    assert np.array_equal(exact, want) != mlas_saturates()  # int16 pair saturation on AVX2 without VNNI


def test_node_session_feeds_big_constants_and_embeds_small_ones():
    big = np.zeros(NODE_CONSTANT_BYTES // 4 + 1, np.float32)
    small = np.ones(1, np.float32)
    session = NodeSession("", "Add", [], [big, small], [True], {"": 17}, {0: big, 1: small})
    assert list(session.fed) == [0]  # the big one is fed at each run, never copied into the model
    np.testing.assert_array_equal(session.run(big, small)[0], big + 1)


# -- a model that cannot run: NodeFailed names the node ---------------------------------------------------------

def reshape_model():
    shape = numpy_helper.from_array(np.array([T, -1, I], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["X"], name="reshape"),
             helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y"], name="lstm", hidden_size=H)]
    return make_model(nodes, [value("x", [None, None])], [value("Y", [T, 1, None, H])], LSTM_WEIGHTS + [shape])


def test_wrong_shaped_input_names_the_failing_node():
    model = io.load(reshape_model())
    run_onnx(model, {"x": np.zeros((T * 2, I), np.float32)})  # fits the baked reshape
    with pytest.raises(NodeFailed) as info:
        run_onnx(model, {"x": np.zeros((7, 3), np.float32)})
    err = info.value
    assert (err.node, err.op, err.inputs) == ("reshape", "Reshape", ("float32[7,3]", "int64[3]"))
    assert isinstance(err, BadInput) and err.exit_code == EXIT_BAD_INPUT
    assert "cannot be reshaped" in err.reason and "\n" not in str(err) and "'reshape' (Reshape)" in str(err)


def test_failure_inside_a_body_names_its_path():
    model = if_model()
    with pytest.raises(NodeFailed) as info:
        engine_run(model, {"cond": np.array(True), "X": np.zeros((T, N, I + 1), np.float32)})
    assert info.value.node == "If_0/then_branch/lstm_then" and info.value.op == "LSTM"
    assert info.value.inputs[0] == f"float32[{T},{N},{I + 1}]"


def test_failure_in_onnxruntime_node_is_one_clean_line():
    node = helper.make_node("FusedMatMul", ["A", "B"], ["Y"], name="fused", domain="com.microsoft")
    model = make_model([node], [value("A", [None, None])], [value("Y", [None, None])], [weights("B", 5, 4)],
                       domains=["com.microsoft"])
    with pytest.raises(NodeFailed) as info:
        engine_run(model, {"A": np.zeros((2, 3), np.float32)})
    assert info.value.node == "fused" and info.value.op == "com.microsoft::FusedMatMul"
    assert "onnxruntime_src" not in info.value.reason and "\n" not in str(info.value)


def test_kernel_refusal_is_a_node_failure():
    model = make_model([helper.make_node("LSTM", ["X", "W", "R", "B", "lens"], ["Y"], name="lstm", hidden_size=H)],
                       [value("X", [T, N, I]), value("lens", [N], TensorProto.INT32)], [value("Y", [T, 1, N, H])],
                       LSTM_WEIGHTS)
    with pytest.raises(NodeFailed) as info:
        engine_run(model, {"X": np.zeros((T, N, I), np.float32), "lens": np.array([1, 9, 2], np.int32)})
    assert info.value.node == "lstm" and "sequence_lens" in info.value.reason


def test_missing_input_is_bad_input():
    with pytest.raises(BadInput, match="'x' is not given"):
        Executor(io.load(reshape_model())).run({})
