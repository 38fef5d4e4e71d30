"""rnnconv's engine on whole models (partitioned: onnxruntime runs what it runs as the spec says, rnnconv's kernels
the recurrent nodes onnxruntime refuses) on the ops of real models that onnx's ReferenceEvaluator gets wrong or
cannot run: BatchNormalization-9 with momentum (computed with batch statistics), InstanceNormalization + LRN
(4.6e-5 off), grouped ConvTranspose and STFT (not run at all). Each model, built here around a recurrent node,
must give onnxruntime's numbers in the engine, agree with itself in `verify --engine all`, and come out of
`upgrade` equal to the source in onnxruntime. Oracles: onnxruntime, and for a layout-1 node the layout-0 model
written here by hand (Transposes around a layout-0 node, which onnxruntime runs)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.engine.onnx_graph import run_onnx
from tests.conftest import run_cli, run_onnxruntime

RNG = np.random.default_rng(7)
H, C = 6, 4


def _init(name, shape, scale=0.5):
    return numpy_helper.from_array((scale * RNG.standard_normal(shape)).astype(np.float32), name)


def _lstm(x: str, I: int, *, layout: int = 0, prefix: str = "") -> tuple[list, list]:
    """An LSTM on `x` ([T, N, I], or [N, T, I] with layout 1) giving `{prefix}Y_h` [1, N, H]."""
    inits = [_init(f"{prefix}W", [1, 4 * H, I]), _init(f"{prefix}R", [1, 4 * H, H]), _init(f"{prefix}B", [1, 8 * H])]
    node = helper.make_node("LSTM", [x, f"{prefix}W", f"{prefix}R", f"{prefix}B"], ["", f"{prefix}Y_h"],
                            hidden_size=H, name=f"{prefix}lstm", **({"layout": 1} if layout else {}))
    return [node], inits


def _front(kind: str) -> tuple[list, list, list, int]:
    """(nodes, initializers, inputs, opset) of a front end giving `feat` [N, C, T] from input `x`."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", C, "T"])
    if kind == "batchnorm9":
        nodes = [helper.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1], kernel_shape=[3]),
                 helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["feat"], momentum=0.9,
                                  epsilon=1e-5)]
        inits = [_init("cw", [C, C, 3]), _init("g", [C]), _init("b", [C]), _init("m", [C]),
                 numpy_helper.from_array(RNG.uniform(0.5, 2, C).astype(np.float32), "v")]
        return nodes, inits, [x], 9
    if kind == "instancenorm_lrn":
        nodes = [helper.make_node("InstanceNormalization", ["x", "g", "b"], ["n"], epsilon=1e-5),
                 helper.make_node("Unsqueeze", ["n", "axis3"], ["n4"]),
                 helper.make_node("LRN", ["n4"], ["l4"], size=3, alpha=1e-2, beta=0.75, bias=1.0),
                 helper.make_node("Squeeze", ["l4", "axis3"], ["feat"])]
        inits = [_init("g", [C]), _init("b", [C]), numpy_helper.from_array(np.array([3], np.int64), "axis3")]
        return nodes, inits, [x], 13
    if kind == "convtranspose_group2":
        nodes = [helper.make_node("ConvTranspose", ["x", "tw"], ["t"], group=2, kernel_shape=[2], strides=[1],
                                  pads=[0, 1]),
                 helper.make_node("Relu", ["t"], ["feat"])]
        return nodes, [_init("tw", [C, C // 2, 2])], [x], 13
    if kind == "stft":
        signal = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S"])
        # frames of 8 samples every 4, one-sided: [N, frames, 5, 2] -> magnitudes [N, 5, frames] -> C = 5 rows
        nodes = [helper.make_node("Unsqueeze", ["x", "axis2"], ["s3"]),
                 helper.make_node("STFT", ["s3", "step", "window", ""], ["spec"], onesided=1),
                 helper.make_node("ReduceL2", ["spec", "axis3"], ["mag"], keepdims=0),
                 helper.make_node("Transpose", ["mag"], ["feat"], perm=[0, 2, 1])]
        inits = [numpy_helper.from_array(np.array([2], np.int64), "axis2"),
                 numpy_helper.from_array(np.array([3], np.int64), "axis3"),
                 numpy_helper.from_array(np.array(4, np.int64), "step"),
                 numpy_helper.from_array(np.hanning(8).astype(np.float32), "window")]
        return nodes, inits, [signal], 18
    raise ValueError(kind)


def real_like(kind: str, *, layout: int = 0) -> onnx.ModelProto:
    """A front end of `kind`, an LSTM over its frames (layout 0 or 1), a Gemm head on the last state."""
    nodes, inits, inputs, opset = _front(kind)
    I = 5 if kind == "stft" else C
    if layout == 0:
        nodes.append(helper.make_node("Transpose", ["feat"], ["seq"], perm=[2, 0, 1]))
    else:
        nodes.append(helper.make_node("Transpose", ["feat"], ["seq"], perm=[0, 2, 1]))
    rec, rec_inits = _lstm("seq", I, layout=layout)
    nodes += rec
    inits += rec_inits
    nodes.append(helper.make_node("Reshape", ["Y_h", "rows"], ["h"]))  # [1, N, H] or [N, 1, H] -> [N, H]
    inits.append(numpy_helper.from_array(np.array([-1, H], np.int64), "rows"))
    nodes.append(helper.make_node("Gemm", ["h", "hw", "hb"], ["logits"], transB=1))
    inits += [_init("hw", [3, H]), _init("hb", [3])]
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3])
    graph = helper.make_graph(nodes, kind, inputs, [logits], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(opset, 14 if layout else opset))])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


KINDS = ["batchnorm9", "instancenorm_lrn", "convtranspose_group2", "stft"]


def feeds_for(kind: str, N: int = 2) -> dict:
    shape = (N, 40) if kind == "stft" else (N, C, 7)
    return {"x": RNG.uniform(-1, 1, shape).astype(np.float32)}


@pytest.mark.parametrize("kind", KINDS)
def test_engine_gives_onnxruntime_numbers(kind):
    model = real_like(kind)
    feeds = feeds_for(kind)
    placements: dict = {}
    got = run_onnx(_ir(model), feeds, placements=placements, partitioned=True)
    want = run_onnxruntime(model, feeds)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-6, atol=1e-6)
    assert all(set(where) == {"onnxruntime"} for where in placements.values()), placements


def _ir(model: onnx.ModelProto):
    import onnx_ir as ir

    return ir.serde.deserialize_model(model)


def test_layout_1_node_in_rnnconv_between_onnxruntime_segments():
    """The same model with a layout-1 LSTM (onnxruntime refuses it): the LSTM runs in rnnconv's kernel, the front
    end and the head in onnxruntime; the oracle is onnxruntime on the layout-0 model with the same weights."""
    RNG_STATE = RNG.bit_generator.state
    batch_major = real_like("batchnorm9", layout=1)
    RNG.bit_generator.state = RNG_STATE
    seq_major = real_like("batchnorm9", layout=0)
    feeds = feeds_for("batchnorm9", N=3)
    placements: dict = {}
    got = run_onnx(_ir(batch_major), feeds, placements=placements, partitioned=True)
    np.testing.assert_allclose(got["logits"], run_onnxruntime(seq_major, feeds)["logits"], rtol=1e-5, atol=1e-6)
    assert placements["LSTM"] == {"rnnconv": 1}
    assert placements["Conv"] == placements["Gemm"] == {"onnxruntime": 1}


@pytest.mark.parametrize("kind", KINDS)
def test_verify_all_engines_agrees_on_an_unchanged_model(kind, tmp_path):
    path = tmp_path / f"{kind}.onnx"
    onnx.save(real_like(kind), str(path))
    dims = ["--dim", "x:1=40"] if kind == "stft" else ["--dim", "x:2=7"]
    code, text, err = run_cli(["verify", path, path, "--engine", "all", *dims, "--json"])
    assert code == 0, text + err
    assert json.loads(text)["ok"]


@pytest.mark.parametrize("kind", KINDS)
def test_upgrade_writes_a_model_equal_to_the_source_in_onnxruntime(kind, tmp_path):
    source, out = tmp_path / f"{kind}.onnx", tmp_path / "out.onnx"
    model = real_like(kind)
    onnx.save(model, str(source))
    dims = ["--dim", "x:1=40"] if kind == "stft" else ["--dim", "x:2=7"]
    code, text, err = run_cli(["upgrade", source, "-o", out, *dims])
    assert code == 0, text + err
    feeds = feeds_for(kind, N=3)
    np.testing.assert_allclose(run_onnxruntime(onnx.load(str(out)), feeds)["logits"],
                               run_onnxruntime(model, feeds)["logits"], rtol=1e-5, atol=1e-6)


def test_if_body_with_a_layout_1_lstm_is_partitioned_in_turn():
    """An If whose then-branch holds a layout-1 LSTM: the If runs in rnnconv, its branch split again (the
    Transpose before the LSTM in onnxruntime); the else-branch (no recurrent node) taken, all onnxruntime inside."""
    I = 3
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", "T", I])
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    rec, inits = _lstm("Xn", I, layout=1)
    then = helper.make_graph([helper.make_node("Neg", ["X"], ["Xn"])] + rec
                             + [helper.make_node("Identity", ["Y_h"], ["t_out"])], "then", [],
                             [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("ReduceMean", ["X"], ["e_out"], axes=[1], keepdims=1)], "else", [],
                              [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, None)])
    graph = helper.make_graph([helper.make_node("If", ["cond"], ["out"], then_branch=then, else_branch=other)],
                              "if", [cond, x], [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    X = RNG.uniform(-1, 1, (2, 4, I)).astype(np.float32)
    placements: dict = {}
    got = run_onnx(_ir(model), {"cond": np.array(True), "X": X}, placements=placements, partitioned=True)
    assert placements == {"If": {"rnnconv": 1}, "Neg": {"onnxruntime": 1}, "LSTM": {"rnnconv": 1},
                          "Identity": {"onnxruntime": 1}}
    # the oracle: onnxruntime on the layout-0 LSTM with the same weights, written by hand
    w = {t.name: numpy_helper.to_array(t) for t in inits}
    lstm0 = helper.make_graph([helper.make_node("LSTM", ["X0", "W", "R", "B"], ["", "Y_h"], hidden_size=H)], "l0",
                              [helper.make_tensor_value_info("X0", TensorProto.FLOAT, [4, 2, I])],
                              [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in w.items()])
    m0 = helper.make_model(lstm0, opset_imports=[helper.make_opsetid("", 14)])
    m0.ir_version = 8
    want = run_onnxruntime(m0, {"X0": np.ascontiguousarray((-X).transpose(1, 0, 2))})["Y_h"]
    np.testing.assert_allclose(got["out"], want.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
    placements = {}
    got = run_onnx(_ir(model), {"cond": np.array(False), "X": X}, placements=placements, partitioned=True)
    np.testing.assert_allclose(got["out"], X.mean(axis=1, keepdims=True), rtol=1e-6, atol=1e-6)


def test_verify_all_engines_on_a_dynamic_quantize_lstm_over_24_steps(tmp_path):
    """quantize_dynamic's DynamicQuantizeLSTM (an OCR-like bidirectional layer, T = 24): rnnconv's engine runs it in
    onnxruntime, whose op it is; OpenVINO's own import approximates it, which the report says and holds to the
    'dequantized' tolerance instead of calling it a disagreement."""
    from tests.quantized_models import float_lstm, quantize

    path = quantize(float_lstm("bidirectional", I=32, H=24, head=True), tmp_path, "ocr")
    code, text, err = run_cli(["verify", path, path, "--engine", "all", "--dim", "T=24", "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    assert report["placements"]["reference"]["com.microsoft::DynamicQuantizeLSTM"] == {"onnxruntime": 1}
    if any(c["subject"] == "reference[openvino]" for c in report["checks"]):
        assert any("held to the 'dequantized' tolerance" in n for n in report["notes"]), report["notes"]


def _layout0_twin(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model with every layout-1 LSTM written as Transpose -> layout-0 LSTM -> Transpose, by hand (the
    oracle's model: onnxruntime runs it), recursing into Loop bodies."""
    def graph(g: onnx.GraphProto) -> None:
        nodes = []
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)
            layout = [a for a in node.attribute if a.name == "layout"]
            if node.op_type != "LSTM" or not layout or layout[0].i != 1:
                nodes.append(node)
                continue
            node.attribute.remove(layout[0])
            x, y_h = node.input[0], node.output[1]
            nodes.append(helper.make_node("Transpose", [x], [x + "_t"], perm=[1, 0, 2]))
            node.input[0], node.output[1] = x + "_t", y_h + "_t"
            nodes.append(node)
            nodes.append(helper.make_node("Transpose", [y_h + "_t"], [y_h], perm=[1, 0, 2]))
        del g.node[:]
        g.node.extend(nodes)

    twin = onnx.ModelProto()
    twin.CopyFrom(model)
    graph(twin.graph)
    return twin


def test_diamond_and_loop_body_around_layout_1_lstms():
    """x -> Relu -> layout-1 LSTM -> Y_h, and x -> ReduceMean on a path of its own that meets Y_h in an Add after
    the LSTM; then a Loop whose body runs another layout-1 LSTM on the carried state each iteration. The segments
    must keep every value's producer before its readers; the numbers are onnxruntime's on the layout-0 twin."""
    I = H
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", I])
    rec, inits = _lstm("r", I, layout=1)
    body_rec, body_inits = _lstm("state_in", H, layout=1, prefix="b_")
    body = helper.make_graph(
        body_rec + [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                    helper.make_node("Tanh", ["b_Y_h"], ["state_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("state_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("state_out", TensorProto.FLOAT, None)], body_inits)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), *rec,
             helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
             helper.make_node("Add", ["Y_h", "m"], ["s"]),
             helper.make_node("Loop", ["trips", ""], ["out"], body=body)]
    nodes[-1].input[1] = ""
    nodes[-1].input.append("s")
    inits += [numpy_helper.from_array(np.array(3, np.int64), "trips")]
    graph = helper.make_graph(nodes, "diamond", [x], [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    feeds = {"x": RNG.uniform(-1, 1, (2, 5, I)).astype(np.float32)}
    placements: dict = {}
    got = run_onnx(_ir(model), feeds, placements=placements, partitioned=True)
    want = run_onnxruntime(_layout0_twin(model), feeds)
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5, atol=1e-6)
    assert placements["LSTM"] == {"rnnconv": 2} and placements["Loop"] == {"rnnconv": 1}
    assert placements["ReduceMean"] == placements["Add"] == placements["Tanh"] == {"onnxruntime": 1}


def test_segments_are_the_levels_of_a_known_graph():
    """The partition itself, written out for one graph (the numbers cannot show it: a node placed in the wrong
    segment falls back to running alone, with the same result, only slower). x -> Relu -> layout-1 LSTM ->
    Tanh, and x -> ReduceMean on a path of its own; both meet in an Add, read by a second layout-1 LSTM, then a
    Sigmoid. onnxruntime refuses layout 1: five levels, onnxruntime's and rnnconv's in turn, each as wide as the
    graph allows."""
    from rnnconv.engine import partition

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", H])
    first, inits = _lstm("r", H, layout=1)
    second, more = _lstm("s", H, layout=1, prefix="b_")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), *first,
             helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1, name="mean"),
             helper.make_node("Tanh", ["Y_h"], ["t"], name="tanh"),
             helper.make_node("Add", ["t", "m"], ["s"], name="add"), *second,
             helper.make_node("Sigmoid", ["b_Y_h"], ["out"], name="head")]
    graph = helper.make_graph(nodes, "levels", [x], [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              inits + more)
    model = _ir(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8))
    segments = partition.split(model.graph, model.opset_imports, {})
    assert [(s.place, [n.name for n in s.nodes]) for s in segments] == [
        ("onnxruntime", ["relu", "mean"]), ("rnnconv", ["lstm"]), ("onnxruntime", ["tanh", "add"]),
        ("rnnconv", ["b_lstm"]), ("onnxruntime", ["head"])]
    assert [v.name for v in segments[2].inputs] == ["Y_h", "m"] and [v.name for v in segments[2].outputs] == ["s"]


@pytest.mark.parametrize("op", ["GRU", "LSTM", "RNN"])
def test_rnnconv_runs_exactly_the_recurrent_versions_onnxruntime_refuses(op):
    """Each version of each op, as onnxruntime itself answers: a session it creates means its kernel runs the node
    (rnnconv leaves it to onnxruntime), a refusal means rnnconv's kernel runs it."""
    import onnxruntime as ort

    from rnnconv.engine import partition
    from tests.conftest import recurrent_model

    for opset in (1, 3, 6, 7, 13, 14, 22):
        model = recurrent_model(op, opset=opset)
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            runs = True
        except Exception:  # onnxruntime raises its own exception types
            runs = False
        node = next(iter(_ir(model).graph))
        reason = partition.rnnconv_reason(node, {"": opset}, {})
        assert (reason is None) == runs, (op, opset, reason)
