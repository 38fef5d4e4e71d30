"""from-openvino: IR written by OpenVINO itself (ov.convert_model + ov.save_model, fp16-compressed or not) and by
rnnconv's to-openvino comes back as ONNX that passes the full checker, runs in onnxruntime and matches the
OpenVINO runtime on the IR (1e-5; 2e-3 against the source model when the IR holds fp16 weights)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.commands.from_openvino import from_openvino

ov = pytest.importorskip("openvino")
ort = pytest.importorskip("onnxruntime")

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
H, I, T, N = 5, 3, 4, 2


def source_model(kind, *, direction="forward", lbr=0, clip=None, dynamic=False, seq_lens=False, initial_h=False,
                 layout=0, activations=None, bias=True, weights_as_inputs=False, seed=0):
    """One ONNX GRU/LSTM/RNN node (opset 14) built with onnx.helper."""
    rng = np.random.default_rng(seed)
    D, G = (2 if direction == "bidirectional" else 1), GATES[kind]
    t, n = ("T", "N") if dynamic else (T, N)
    inits = [numpy_helper.from_array(rng.uniform(-.5, .5, (D, G * H, I)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-.5, .5, (D, G * H, H)).astype(np.float32), "R")]
    if bias:
        inits.append(numpy_helper.from_array(rng.uniform(-.5, .5, (D, 2 * G * H)).astype(np.float32), "B"))
    state = [n, D, H] if layout else [D, n, H]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [n, t, I] if layout else [t, n, I])]
    names = ["X", "W", "R", "B" if bias else "", "sequence_lens" if seq_lens else "", "initial_h" if initial_h else ""]
    if seq_lens:
        inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [n]))
    if initial_h:
        inputs.append(helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, state))
    while names[-1] == "":
        names.pop()
    if weights_as_inputs:
        inputs += [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims)) for t in inits]
        inits = []
    attrs = {"hidden_size": H, "direction": direction}
    if lbr:
        attrs["linear_before_reset"] = 1
    if clip is not None:
        attrs["clip"] = clip
    if layout:
        attrs["layout"] = 1
    if activations:
        attrs["activations"] = activations
    node = helper.make_node(kind, names, OUTPUTS[kind], name=f"{kind.lower()}0", **attrs)
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [n, t, D, H] if layout else [t, D, n, H])]
    outputs += [helper.make_tensor_value_info(o, TensorProto.FLOAT, state) for o in OUTPUTS[kind][1:]]
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def feeds_for(model, seed=1, **sizes):
    sizes = {"T": T, "N": N, **sizes}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else sizes[d.dim_param] for d in
                vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.INT32:
            feeds[vi.name] = rng.integers(1, sizes["T"] + 1, size=dims).astype(np.int32)
        else:
            feeds[vi.name] = rng.uniform(-1, 1, size=dims).astype(np.float32)
    return feeds


def ort_run(model, feeds):
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})))


def ov_run(xml, feeds):
    core = ov.Core()
    model = core.read_model(str(xml))
    model.reshape({p: ov.PartialShape(list(feeds[p.get_any_name()].shape)) for p in model.inputs})
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1})
    res = compiled.create_infer_request().infer({p: feeds[p.get_any_name()] for p in compiled.inputs})
    return {n: np.asarray(res[p]) for p in compiled.outputs for n in p.get_names()}


def save_ir(model, tmp_path, name="m", compress=False) -> Path:
    src = tmp_path / f"{name}.onnx"
    onnx.save(model, src)
    xml = tmp_path / f"{name}.xml"
    ov.save_model(ov.convert_model(str(src)), str(xml), compress_to_fp16=compress)
    return xml


def assert_close(ref, got, names, tol):
    for n in names:
        np.testing.assert_allclose(got[n], ref[n], atol=tol, rtol=tol, err_msg=n)


def recurrent_node(path):
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    nodes = [n for n in model.graph.node if n.op_type in GATES]
    assert len(nodes) == 1, [n.op_type for n in model.graph.node]
    return model, nodes[0], {a.name: helper.get_attribute_value(a) for a in nodes[0].attribute}


# -- IR written by OpenVINO --------------------------------------------------------------------------------
CASES = [(k, d, dyn, comp) for k, d, dyn, comp in itertools.product(("GRU", "LSTM", "RNN"),
                                                                     ("forward", "reverse", "bidirectional"),
                                                                     (False, True), (False, True))]


@pytest.mark.parametrize("kind,direction,dynamic,compress", CASES,
                         ids=[f"{k}-{d}-{'dyn' if y else 'static'}-{'fp16' if c else 'fp32'}" for k, d, y, c in CASES])
def test_openvino_ir_converts(tmp_path, kind, direction, dynamic, compress):
    clip = 1.5 if dynamic != compress else None
    lbr = int(kind == "GRU" and (direction != "forward") != dynamic)
    src = source_model(kind, direction=direction, lbr=lbr, clip=clip, dynamic=dynamic)
    xml = save_ir(src, tmp_path, compress=compress)
    out = tmp_path / "back.onnx"
    result = from_openvino(xml, out)
    assert result.report.ok and out.exists()
    model, node, attrs = recurrent_node(out)
    # Synthesized zero states and full lengths come back absent; clip and linear_before_reset survive.
    assert list(node.input)[4:] == [] and attrs.get("clip") == clip and attrs.get("linear_before_reset", 0) == lbr
    assert attrs.get("direction", b"forward").decode() == direction
    feeds = feeds_for(src)
    got = ort_run(model, feeds)
    assert_close(ov_run(xml, feeds), got, OUTPUTS[kind], 1e-5)
    assert_close(ort_run(src, feeds), got, OUTPUTS[kind], 2e-3 if compress else 1e-5)
    if dynamic:
        feeds = feeds_for(src, T=7, N=1)
        assert_close(ort_run(src, feeds), ort_run(model, feeds), OUTPUTS[kind], 2e-3 if compress else 1e-5)


def test_explicit_lengths_and_states_are_kept(tmp_path):
    src = source_model("GRU", direction="bidirectional", seq_lens=True, initial_h=True, lbr=1)
    xml = save_ir(src, tmp_path)
    model, node, _ = recurrent_node(from_openvino(xml, tmp_path / "back.onnx").report.output)
    assert [i.name for i in model.graph.input] == ["X", "sequence_lens", "initial_h"]
    assert node.input[4] and node.input[5]
    feeds = feeds_for(src)
    assert_close(ort_run(src, feeds), ort_run(model, feeds), OUTPUTS["GRU"], 1e-5)


@pytest.mark.parametrize("kind,lbr", [("GRU", 1), ("LSTM", 0)])
def test_weights_computed_at_run_time(tmp_path, kind, lbr):
    """W, R, B fed as inputs: OpenVINO reorders them with graph ops; they come back reordered and B split by
    graph ops (Split, Concat, ConstantOfShape) in front of the ONNX node."""
    src = source_model(kind, direction="bidirectional", lbr=lbr, weights_as_inputs=True)
    xml = save_ir(src, tmp_path)
    model, node, attrs = recurrent_node(from_openvino(xml, tmp_path / "back.onnx").report.output)
    assert attrs.get("linear_before_reset", 0) == lbr
    feeds = feeds_for(src)
    assert_close(ort_run(src, feeds), ort_run(model, feeds), OUTPUTS[kind], 1e-5)


def test_layout_1(tmp_path):
    from rnnconv.engine.onnx_graph import run_onnx
    from rnnconv.io import load

    src = source_model("LSTM", direction="bidirectional", dynamic=True, clip=2.0)
    xml = save_ir(src, tmp_path)
    result = from_openvino(xml, tmp_path / "back.onnx", layout=1)
    _, node, attrs = recurrent_node(tmp_path / "back.onnx")
    assert attrs["layout"] == 1
    feeds = feeds_for(src)
    got = run_onnx(load(str(tmp_path / "back.onnx")), feeds, precision="float32")
    assert_close(ort_run(src, feeds), got, OUTPUTS["LSTM"], 1e-5)
    assert any("OpenVINO runtime" in c.engines for c in result.report.checks)


@pytest.mark.parametrize("opset", [7, 13])
def test_older_opsets(tmp_path, opset):
    src = source_model("GRU", direction="reverse", dynamic=True, lbr=1)
    xml = save_ir(src, tmp_path)
    model = from_openvino(xml, tmp_path / "back.onnx", opset=opset).model
    assert model.opset_imports[""] == opset


# -- round trips through rnnconv's own to-openvino ---------------------------------------------------------
ROUND = [("GRU", dict(direction="bidirectional", lbr=1, clip=3.0)),
         ("GRU", dict(direction="reverse", activations=["Relu", "Tanh"], bias=False)),
         ("LSTM", dict(direction="bidirectional", initial_h=True)),
         ("LSTM", dict(direction="forward", dynamic=True, clip=0.5)),
         ("RNN", dict(direction="reverse", activations=["Relu"])),
         ("RNN", dict(direction="bidirectional", seq_lens=True, initial_h=True)),
         ("LSTM", dict(direction="bidirectional", layout=1, dynamic=True))]


@pytest.mark.parametrize("kind,kw", ROUND, ids=[f"{k}-{i}" for i, (k, _) in enumerate(ROUND)])
def test_round_trip_through_to_openvino(tmp_path, kind, kw):
    from rnnconv.commands.to_openvino import to_openvino
    from rnnconv.engine.onnx_graph import run_onnx
    from rnnconv.io import load

    src = source_model(kind, **kw)
    onnx.save(src, tmp_path / "src.onnx")
    to_openvino(str(tmp_path / "src.onnx"), tmp_path / "ir.xml")
    layout = kw.get("layout", 0)
    from_openvino(tmp_path / "ir.xml", tmp_path / "back.onnx", layout=layout)
    model, node, attrs = recurrent_node(tmp_path / "back.onnx")
    orig = {a.name: helper.get_attribute_value(a) for a in src.graph.node[0].attribute}
    orig.setdefault("direction", b"forward")
    attrs.setdefault("direction", b"forward")
    assert attrs == orig
    # Weights: W and R exact; B exact in the sum Wb + Rb per gate (GRU lbr keeps Rbh apart); absent B stays absent.
    before = {t.name: numpy_helper.to_array(t) for t in src.graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    np.testing.assert_array_equal(after[node.input[1]], before["W"])
    np.testing.assert_array_equal(after[node.input[2]], before["R"])
    if "B" not in before:
        assert len(node.input) < 4 or node.input[3] == ""
    else:
        G = GATES[kind]
        wb, rb = np.split(before["B"], 2, axis=1)
        wb2, rb2 = np.split(after[node.input[3]], 2, axis=1)
        if kind == "GRU" and kw.get("lbr"):
            np.testing.assert_array_equal(wb2[:, :2 * H] + rb2[:, :2 * H], (wb + rb)[:, :2 * H])
            np.testing.assert_array_equal(wb2[:, 2 * H:], wb[:, 2 * H:])
            np.testing.assert_array_equal(rb2[:, 2 * H:], rb[:, 2 * H:])
        else:
            np.testing.assert_array_equal(wb2 + rb2, (wb + rb).astype(np.float32))
            assert not np.any(rb2) and G
    feeds = feeds_for(src)
    if layout:
        assert_close(run_onnx(load(src), feeds), run_onnx(load(model), feeds), OUTPUTS[kind], 1e-5)
    else:
        assert_close(ort_run(src, feeds), ort_run(model, feeds), OUTPUTS[kind], 1e-5)


# -- PyTorch fixtures as OpenVINO serializes them ---------------------------------------------------------
TORCH = sorted(p.stem for p in (FIXTURES / "torch").glob("*.onnx"))


@pytest.mark.parametrize("name", TORCH)
def test_torch_fixture_ir(tmp_path, name):
    xml = tmp_path / f"{name}.xml"
    ov.save_model(ov.convert_model(str(FIXTURES / "torch" / f"{name}.onnx")), str(xml))
    result = from_openvino(xml, tmp_path / "back.onnx")
    assert result.report.ok
    onnx.checker.check_model(onnx.load(str(tmp_path / "back.onnx")), full_check=True)
    data = np.load(FIXTURES / "torch" / f"{name}.npz")
    model = onnx.load(str(tmp_path / "back.onnx"))
    feeds = {i.name: data[i.name] for i in model.graph.input}
    got = ort_run(model, feeds)
    for name_ in got:
        if name_ in data:
            np.testing.assert_allclose(got[name_], data[name_], atol=2e-3, rtol=2e-3, err_msg=name_)


# -- TensorIterator over one cell step ---------------------------------------------------------------------
def ti_model(kind, *, reverse=False, time_axis=1, lbr=False, clip=0.0, zero_state=False, extra_op=False, seed=0):
    """A TensorIterator whose body is one LSTMCell / GRUCell / RNNCell step (what Model Optimizer emitted)."""
    import openvino.opset8 as op8
    import openvino.opset13 as ops

    rng = np.random.default_rng(seed)
    G = GATES[kind]
    x_shape = [N, T, I] if time_axis == 1 else [T, N, I]
    X = ops.parameter(x_shape, np.float32, name="X")
    params = [X]
    states = []
    for s in (["H0", "C0"] if kind == "LSTM" else ["H0"]):
        if zero_state:
            states.append(ops.constant(np.zeros((N, H), np.float32)))
        else:
            p = ops.parameter([N, H], np.float32, name=s)
            params.append(p)
            states.append(p)
    slice_shape = list(x_shape)
    slice_shape[time_axis] = 1
    xi = ops.parameter(slice_shape, np.float32, name="xi")
    inner = [ops.parameter([N, H], np.float32, name=f"s{k}") for k in range(len(states))]
    x2 = ops.squeeze(xi, ops.constant(np.array([time_axis], np.int64)))
    if extra_op:
        x2 = ops.multiply(x2, ops.constant(np.float32(2.0)))
    W = ops.constant(rng.uniform(-.5, .5, (G * H, I)).astype(np.float32))
    R = ops.constant(rng.uniform(-.5, .5, (G * H, H)).astype(np.float32))
    B = ops.constant(rng.uniform(-.5, .5, ((4 if lbr else G) * H,)).astype(np.float32))
    if kind == "LSTM":
        cell = ops.lstm_cell(x2, inner[0], inner[1], W, R, B, H, clip=clip)
    elif kind == "GRU":
        cell = ops.gru_cell(x2, inner[0], W, R, B, H, clip=clip, linear_before_reset=lbr)
    else:
        cell = ops.rnn_cell(x2, inner[0], W, R, B, H, ["tanh"], [], [], clip)
    new = [cell.output(k) for k in range(len(states))]
    y = ops.unsqueeze(new[0], ops.constant(np.array([time_axis], np.int64)))
    results = [ops.result(v) for v in new] + [ops.result(y)]
    body = ov.Model(results, [xi, *inner], "body")
    ti = op8.tensor_iterator()
    ti.set_body(body)
    if reverse:
        ti.set_sliced_input(xi, X.output(0), -1, -1, 1, 0, time_axis)
    else:
        ti.set_sliced_input(xi, X.output(0), 0, 1, 1, -1, time_axis)
    for p, s, r in zip(inner, states, results):
        ti.set_merged_input(p, s.output(0), r.output(0))
    # (start, stride, part_size, end, axis), as OpenVINO's Python API orders them.
    outs = [ti.get_concatenated_slices(results[-1].output(0), *((-1, -1, 1, 0) if reverse else (0, 1, 1, -1)),
                                       time_axis)]
    outs += [ti.get_iter_value(r.output(0), -1) for r in results[:-1]]
    res = []
    for o, name in zip(outs, OUTPUTS[kind]):
        o.get_tensor().set_names({name})
        res.append(ops.result(o))
    return ov.Model(res, params, "ti")


TI_CASES = [("LSTM", {}), ("LSTM", dict(reverse=True, time_axis=0, clip=1.0)), ("GRU", dict(lbr=True)),
            ("GRU", dict(reverse=True, zero_state=True)), ("RNN", dict(time_axis=0))]


@pytest.mark.parametrize("kind,kw", TI_CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(TI_CASES)])
def test_tensor_iterator_one_cell(tmp_path, kind, kw):
    xml = tmp_path / "ti.xml"
    ov.save_model(ti_model(kind, **kw), str(xml))
    result = from_openvino(xml, tmp_path / "back.onnx")
    assert result.report.ok
    model, node, attrs = recurrent_node(tmp_path / "back.onnx")
    assert attrs.get("direction", b"forward") == (b"reverse" if kw.get("reverse") else b"forward")
    assert (len(node.input) <= 5) == bool(kw.get("zero_state"))
    rng = np.random.default_rng(3)
    feeds = {i.name: rng.uniform(-1, 1, [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    assert_close(ov_run(xml, feeds), ort_run(model, feeds), OUTPUTS[kind], 1e-5)


@pytest.mark.parametrize("kind,kw", [("LSTM", {}), ("GRU", dict(lbr=True, clip=1.0)), ("RNN", dict(reverse=True))])
def test_verify_runs_tensor_iterator_without_from_openvino(tmp_path, kind, kw):
    """`rnnconv verify` runs a TensorIterator of cells in rnnconv's IR interpreter (against the OpenVINO runtime)
    in a fresh process that never imports the IR -> ONNX conversion."""
    import subprocess
    import sys

    xml = tmp_path / "ti.xml"
    ov.save_model(ti_model(kind, **kw), str(xml))
    code = ("import sys\n"
            "from rnnconv.cli import main\n"
            "try:\n"
            "    main(sys.argv[1:])\n"
            "finally:\n"
            "    print(sorted({'rnnconv.commands.from_openvino', 'rnnconv.dialects.openvino.to_onnx'} & set(sys.modules)),\n"
            "          file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, "verify", str(xml), str(xml), "--ref-engine", "openvino",
                           "--cand-engine", "rnnconv", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1:] == ["[]"], proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and [c["engines"] for c in report["checks"]] == ["candidate[rnnconv] vs reference[openvino]"]


def test_tensor_iterator_with_more_than_a_cell_is_an_onnx_loop(tmp_path):
    """(tests/openvino/test_ir_control_flow.py checks its numbers.)"""
    xml = tmp_path / "ti.xml"
    ov.save_model(ti_model("LSTM", extra_op=True), str(xml))
    model = from_openvino(xml, tmp_path / "back.onnx", verify="none").model
    assert [n.op_type for n in model.graph if n.op_type in ("Loop", "LSTM")] == ["Loop"]


# -- refusals and failures ---------------------------------------------------------------------------------
def test_unsupported_layers_are_listed(tmp_path):
    import openvino.opset13 as ops

    from rnnconv.errors import Unsupported

    x = ops.parameter([2, 3], np.float32, name="x")
    y = ops.bucketize(ops.reduce_l2(x, ops.constant(np.array([1], np.int64)), True),
                      ops.constant(np.array([0.0, 0.5], np.float32)))
    y.output(0).get_tensor().set_names({"y"})
    ov.save_model(ov.Model([ops.result(y)], [x], "m"), str(tmp_path / "m.xml"))
    with pytest.raises(Unsupported) as err:
        from_openvino(tmp_path / "m.xml", tmp_path / "m.onnx")
    assert "ReduceL2-opset4" in str(err.value) and "Bucketize-opset3" in str(err.value)
    assert not (tmp_path / "m.onnx").exists()


# -- the other op layers, through the shared table's reverse half ------------------------------------------
def _layer_ir(tmp_path, build, x_shape=(2, 3, 4)):
    """IR of y = build(x) (openvino.opset13 node factories), written by ov.save_model."""
    import openvino.opset13 as ops

    x = ops.parameter(list(x_shape), np.float32, name="x")
    y = build(ops, x)
    y.output(0).get_tensor().set_names({"y"})
    xml = tmp_path / "op.xml"
    ov.save_model(ov.Model([ops.result(y)], [x], "m"), str(xml), compress_to_fp16=False)
    return xml


def _i64(ops, v):
    return ops.constant(np.array(v, np.int64))


# name: (IR builder, the ONNX op types the result holds, input shape)
OP_LAYERS = {
    "PRelu-scalar": (lambda ops, x: ops.prelu(x, ops.constant(np.array([0.25], np.float32))), {"LeakyRelu"},
                     (2, 3, 4)),
    "PRelu-per-channel": (lambda ops, x: ops.prelu(x, ops.constant(np.array([.1, .2, .3], np.float32))), {"PRelu"},
                          (2, 3, 4)),
    "PRelu-last-axis": (lambda ops, x: ops.prelu(x, ops.constant(np.array([.1, .2, .3, .4], np.float32))),
                        {"PRelu"}, (2, 3, 4)),
    "PRelu-computed-slope": (lambda ops, x: ops.prelu(x, ops.reduce_mean(ops.abs(x), _i64(ops, [0, 2]), False)),
                             {"PRelu"}, (2, 3, 4)),
    "SoftPlus": (lambda ops, x: ops.softplus(ops.multiply(x, ops.constant(np.float32(30)))), {"Softplus"},
                 (2, 3, 4)),
    "Tile": (lambda ops, x: ops.tile(x, _i64(ops, [1, 2, 3])), {"Tile"}, (2, 3, 4)),
    "Tile-short-repeats": (lambda ops, x: ops.tile(x, _i64(ops, [2, 3])), {"Tile"}, (2, 3, 4)),
    "Tile-long-repeats": (lambda ops, x: ops.tile(x, _i64(ops, [2, 1, 1, 3])), {"Tile"}, (2, 3, 4)),
    "Tile-computed-short-repeats": (lambda ops, x: ops.tile(x, ops.shape_of(ops.reduce_sum(x, _i64(ops, [0]),
                                                                                             False))),
                                    {"Tile"}, (2, 3, 2)),
    "Range-f32": (lambda ops, x: ops.add(x, ops.range(ops.constant(np.float32(.5)), ops.add(ops.convert(
        ops.gather(ops.shape_of(x), _i64(ops, 2), _i64(ops, 0)), "f32"), ops.constant(np.float32(.5))),
        ops.constant(np.float32(1)), "f32")), {"Range"}, (2, 3, -1)),
    "Range-i64-to-f32": (lambda ops, x: ops.multiply(x, ops.range(
        _i64(ops, 0), ops.gather(ops.shape_of(x), _i64(ops, 2), _i64(ops, 0)), _i64(ops, 1), "f32")), {"Range"},
                         (2, 3, -1)),
}


@pytest.mark.parametrize("name", sorted(OP_LAYERS))
def test_op_layers_map_back(tmp_path, name):
    """PRelu, SoftPlus, Tile and Range layers come back as ONNX ops that match the OpenVINO runtime (the
    conversion verifies against it) and onnxruntime runs."""
    build, want_ops, x_shape = OP_LAYERS[name]
    xml = _layer_ir(tmp_path, build, x_shape)
    result = from_openvino(xml, tmp_path / "op.onnx", opset=17)
    assert result.report.ok
    assert {c.engines for c in result.report.checks} == {"IR interpreter vs engine",
                                                         "OpenVINO runtime (CPU, f32) vs onnxruntime"}
    model = onnx.load(str(tmp_path / "op.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert want_ops <= {n.op_type for n in model.graph.node}, [n.op_type for n in model.graph.node]
    x = np.random.default_rng(0).uniform(-1, 1, [d if d > 0 else 5 for d in x_shape]).astype(np.float32)
    assert_close(ov_run(xml, {"x": x}), ort_run(model, {"x": x}), ["y"], 1e-5)


def test_prelu_slope_that_may_be_per_channel_is_refused(tmp_path):
    """A 1-D slope on data whose axis 1 is dynamic: OpenVINO decides per channel or numpy at run time."""
    from rnnconv.errors import Unsupported

    xml = _layer_ir(tmp_path, lambda ops, x: ops.prelu(x, ops.constant(np.array([.1, .2, .3], np.float32))),
                    (2, -1, 3))
    with pytest.raises(Unsupported, match="per channel"):
        from_openvino(xml, tmp_path / "op.onnx")
    assert not (tmp_path / "op.onnx").exists()


def test_mismatch_writes_nothing(tmp_path, monkeypatch):
    from rnnconv.dialects.openvino import to_onnx as module
    from rnnconv.errors import VerificationFailed

    xml = save_ir(source_model("GRU"), tmp_path)
    real = module.onnx_recurrent.tensors

    def wrong(layer):
        out = real(layer)
        return {**out, "W": out["W"] * 1.01}

    monkeypatch.setattr(module.onnx_recurrent, "tensors", wrong)
    with pytest.raises(VerificationFailed):
        from_openvino(xml, tmp_path / "back.onnx")
    assert not (tmp_path / "back.onnx").exists()


def test_every_mapped_openvino_op_maps_back():
    """Adding an op to the shared table adds it both ways: each IR type the table emits has a reverse."""
    from rnnconv.dialects.openvino import ops

    missing = sorted(t for t in ops.reverse_index() if t not in ops.REVERSE and t != "Const")
    assert not missing


def test_cli(tmp_path):
    from click.testing import CliRunner

    from rnnconv.cli import cli

    xml = save_ir(source_model("LSTM", direction="bidirectional"), tmp_path, compress=True)
    moved = tmp_path / "weights.bin"
    (tmp_path / "m.bin").rename(moved)
    runner = CliRunner()
    res = runner.invoke(cli, ["from-openvino", str(xml), "-o", str(tmp_path / "out.onnx"), "--bin", str(moved),
                              "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["ok"] and report["output"] == str(tmp_path / "out.onnx")
    res = runner.invoke(cli, ["from-openvino", str(xml), "-o", str(tmp_path / "out.onnx"), "--bin", str(moved)])
    assert res.exit_code != 0 and "exists" in str(res.exception or res.output)


# -- broken IR: one clear error, nothing written -----------------------------------------------------------
def _bigger_offset(text):
    import re

    return re.sub(r'offset="(\d+)" size="(\d+)"', lambda m: f'offset="{10**9}" size="{m.group(2)}"', text, count=1)


BROKEN = {
    "bin offset outside the file": (_bigger_offset, "outside the .bin"),
    "DOCTYPE with an entity": (lambda t: t.replace('<?xml version="1.0"?>', '<?xml version="1.0"?>\n<!DOCTYPE net '
                                                   '[<!ENTITY a "aaaaaaaa">]>'), "DOCTYPE"),
    "truncated XML": (lambda t: t[: len(t) // 2], "not well-formed"),
    "no hidden_size": (lambda t: t.replace(' hidden_size="5"', ""), "hidden_size"),
    "edge to nowhere": (lambda t: t.replace("</edges>", '<edge from-layer="0" from-port="0" to-layer="999" '
                                                       'to-port="0" /></edges>'), "names no layer"),
    "no .bin": (None, r"m\.bin, which is missing"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_ir_is_refused(tmp_path, capsys, case):
    from rnnconv.cli import main
    from rnnconv.errors import BadInput

    xml = save_ir(source_model("GRU", direction="bidirectional", lbr=1), tmp_path)
    mutate, match = BROKEN[case]
    if mutate is None:
        (tmp_path / "m.bin").unlink()
    else:
        xml.write_text(mutate(xml.read_text()))
    with pytest.raises(BadInput, match=match):
        from_openvino(xml, tmp_path / "out.onnx")
    with pytest.raises(SystemExit) as exit_:
        main(["from-openvino", str(xml), "-o", str(tmp_path / "out.onnx")])
    assert exit_.value.code == 4
    assert capsys.readouterr().err.startswith("rnnconv: error: ")
    assert not (tmp_path / "out.onnx").exists()


def test_ir_version_10_names(tmp_path):
    """IR 10 has no tensor names on ports: outputs are named as OpenVINO names them (layer name, ".<index>")."""
    import re

    xml = tmp_path / "ti.xml"
    ov.save_model(ti_model("GRU", lbr=True), str(xml))
    text = re.sub(r' (output_)?names="[^"]*"', "", xml.read_text()).replace('version="11"', 'version="10"', 1)
    xml.write_text(text)
    model = from_openvino(xml, tmp_path / "back.onnx").model
    ov_model = ov.Core().read_model(str(xml))
    assert [o.name for o in model.graph.outputs] == [o.get_any_name() for o in ov_model.outputs]
    assert [i.name for i in model.graph.inputs] == [i.get_any_name() for i in ov_model.inputs]


def test_fuzz_mutated_ir(tmp_path):
    """Seeded mutations of IR written by OpenVINO (numbers, dropped attributes, cut text): every failure is one
    of rnnconv's errors, and nothing is written on one."""
    import random
    import re

    from rnnconv.errors import RnnconvError

    sources = [save_ir(source_model("GRU", direction="bidirectional", lbr=1, dynamic=True), tmp_path, "gru"),
               save_ir(source_model("LSTM", seq_lens=True, initial_h=True), tmp_path, "lstm", compress=True)]
    ov.save_model(ti_model("LSTM", reverse=True), str(tmp_path / "ti.xml"))
    sources.append(tmp_path / "ti.xml")
    rng = random.Random(0)
    outcomes = {}
    for i in range(150):
        src = rng.choice(sources)
        text = src.read_text()
        for _ in range(rng.randint(1, 3)):
            numbers = [m.span() for m in re.finditer(r'"-?\d+"', text)]
            attrs = [m.span() for m in re.finditer(r' [a-z_]+="[^"]*"', text)]
            r = rng.random()
            if r < 0.5:
                a, b = rng.choice(numbers)
                text = text[:a] + f'"{rng.choice(["0", "-1", "1", "2", "7", "99", "1099511627776", "x"])}"' + text[b:]
            elif r < 0.8:
                a, b = rng.choice(attrs)
                text = text[:a] + text[b:]
            else:
                k = rng.randrange(len(text))
                text = text[:k] + text[k + rng.randint(1, 40):]
        xml = tmp_path / f"case{i}.xml"
        xml.write_text(text)
        out = tmp_path / f"case{i}.onnx"
        try:
            with np.errstate(all="ignore"):
                from_openvino(xml, out, bin=src.with_suffix(".bin"), verify="full" if i % 5 == 0 else "none")
            outcome = "ok"
        except RnnconvError as err:
            outcome = type(err).__name__
            assert not out.exists()
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(f"from-openvino fuzz: {sum(outcomes.values())} cases: {outcomes}")
    assert outcomes.get("BadInput", 0) > 50
