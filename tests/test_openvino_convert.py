"""to-openvino: every IR rnnconv writes is loaded by the real OpenVINO runtime (CPU, f32) and matches the ONNX
source run in onnxruntime (layout 0) or rnnconv's engine (layout 1, which onnxruntime rejects) to 1e-5."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv.commands.to_openvino import to_openvino
from rnnconv.engine.ir_graph import run_ir
from rnnconv.engine.onnx_graph import run_onnx
from rnnconv.io import load

ov = pytest.importorskip("openvino")

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}
TOL = 1e-5


def recurrent_model(kind, *, direction="forward", layout=0, bias=True, seq_lens=False, initial_h=False,
                    initial_c=False, lbr=0, clip=None, dynamic=False, weights_as_inputs=False, peepholes=False,
                    input_forget=0, activations=None, opset=14, H=5, I=3, T=4, N=2, seed=0):
    """One GRU/LSTM/RNN node as an ONNX model built with onnx.helper."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[kind]
    t_dim, n_dim = ("T", "N") if dynamic else (T, N)
    x_shape = [n_dim, t_dim, I] if layout else [t_dim, n_dim, I]
    state_shape = [n_dim, D, H] if layout else [D, n_dim, H]
    tensors = {"W": rng.uniform(-.5, .5, (D, G * H, I)), "R": rng.uniform(-.5, .5, (D, G * H, H))}
    if bias:
        tensors["B"] = rng.uniform(-.5, .5, (D, 2 * G * H))
    if peepholes:
        tensors["P"] = rng.uniform(-.5, .5, (D, 3 * H))
    tensors = {k: v.astype(np.float32) for k, v in tensors.items()}
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)]
    names = ["X", "W", "R", "B" if bias else "", "sequence_lens" if seq_lens else "",
             "initial_h" if initial_h else ""]
    if seq_lens:
        inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [n_dim]))
    if initial_h:
        inputs.append(helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, state_shape))
    if kind == "LSTM":
        names += ["initial_c" if initial_c else "", "P" if peepholes else ""]
        if initial_c:
            inputs.append(helper.make_tensor_value_info("initial_c", TensorProto.FLOAT, state_shape))
    while names and names[-1] == "":
        names.pop()
    inits = []
    for k, v in tensors.items():
        if weights_as_inputs:
            inputs.append(helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)))
        else:
            inits.append(numpy_helper.from_array(v, k))
    attrs = {"hidden_size": H, "direction": direction}
    if layout:
        attrs["layout"] = 1
    if lbr:
        attrs["linear_before_reset"] = 1
    if clip is not None:
        attrs["clip"] = clip
    if input_forget:
        attrs["input_forget"] = 1
    if activations:
        attrs["activations"] = activations
    outs = OUTPUTS[kind]
    node = helper.make_node(kind, names, outs, name=f"{kind.lower()}0", **attrs)
    y_shape = [n_dim, t_dim, D, H] if layout else [t_dim, D, n_dim, H]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)] + [
        helper.make_tensor_value_info(o, TensorProto.FLOAT, state_shape) for o in outs[1:]]
    graph = helper.make_graph([node], f"{kind.lower()}_test", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    feeds_extra = {k: v for k, v in tensors.items()} if weights_as_inputs else {}
    return model, feeds_extra


def feeds_for(model, *, T, N, seed=1, extra=None):
    rng = np.random.default_rng(seed)
    out = dict(extra or {})
    for vi in model.graph.input:
        if vi.name in out:
            continue
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            dims.append(d.dim_value if d.HasField("dim_value") else {"T": T, "N": N}[d.dim_param])
        if vi.type.tensor_type.elem_type == TensorProto.INT32:
            out[vi.name] = rng.integers(1, T + 1, size=dims).astype(np.int32)
        else:
            out[vi.name] = rng.uniform(-1, 1, size=dims).astype(np.float32)
    return out


_CORE = None


def ov_compile(xml):
    global _CORE
    _CORE = _CORE or ov.Core()
    return _CORE.compile_model(_CORE.read_model(str(xml)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})


def ov_infer(xml_or_compiled, feeds):
    compiled = ov_compile(xml_or_compiled) if not hasattr(xml_or_compiled, "inputs") else xml_or_compiled
    by_name = {n: p for p in compiled.inputs for n in p.get_names()}
    res = compiled.create_infer_request().infer({by_name[k]: v for k, v in feeds.items()})
    return {n: np.asarray(res[p]) for p in compiled.outputs for n in p.get_names()}


def reference(model, feeds, layout):
    if layout == 0:
        import onnxruntime as ort

        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    return run_onnx(load(model), feeds)


def assert_close(ref, got, names, tol=TOL):
    for n in names:
        assert got[n].shape == ref[n].shape, (n, got[n].shape, ref[n].shape)
        np.testing.assert_allclose(got[n].astype(np.float64), np.asarray(ref[n], np.float64), atol=tol, rtol=tol,
                                   err_msg=n)


def convert_and_check(tmp_path, model, layout, extra, *, T=4, N=2, shapes=((4, 2),), name="m"):
    xml = tmp_path / f"{name}.xml"
    report = to_openvino(model, xml).report
    assert report.ok and xml.exists() and xml.with_suffix(".bin").exists()
    assert any("OpenVINO runtime" in c.engines for c in report.checks)
    compiled = ov_compile(xml)
    for t, n in shapes:
        feeds = feeds_for(model, T=t, N=n, extra=extra)
        ref = reference(model, feeds, layout)
        names = [o.name for o in model.graph.output]
        assert_close(ref, ov_infer(compiled, feeds), names)
        assert_close(ref, run_ir(xml, feeds), names)
    return xml, report


CASES = []
for kind, direction, layout, optional, dynamic in itertools.product(
        ("GRU", "LSTM", "RNN"), ("forward", "reverse", "bidirectional"), (0, 1), (False, True), (False, True)):
    extra = {}
    i = len(CASES)
    if kind == "GRU":
        extra["lbr"] = i % 2
    extra["clip"] = 0.7 if i % 3 == 0 else None
    CASES.append((kind, direction, layout, optional, dynamic, extra))


@pytest.mark.parametrize("kind,direction,layout,optional,dynamic,extra", CASES,
                         ids=[f"{c[0]}-{c[1]}-layout{c[2]}-{'opt' if c[3] else 'noopt'}-{'dyn' if c[4] else 'static'}"
                              f"-{'-'.join(f'{k}{v}' for k, v in c[5].items())}" for c in CASES])
def test_matrix_runs_in_openvino(tmp_path, kind, direction, layout, optional, dynamic, extra):
    model, _ = recurrent_model(kind, direction=direction, layout=layout, bias=optional, seq_lens=optional,
                               initial_h=optional, initial_c=optional, dynamic=dynamic, **extra)
    shapes = ((4, 2), (7, 3), (1, 1)) if dynamic else ((4, 2),)
    convert_and_check(tmp_path, model, layout, {}, shapes=shapes)


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_weights_as_graph_inputs_become_ir_ops(tmp_path, kind, direction):
    model, extra = recurrent_model(kind, direction=direction, weights_as_inputs=True, lbr=int(kind == "GRU"),
                                   seq_lens=True, initial_h=True)
    xml, _ = convert_and_check(tmp_path, model, 0, extra)
    text = xml.read_text()
    # Reorder and fold are graph ops on Parameters, not folded numbers.
    for name in ("W", "R", "B"):
        assert f'names="{name}"' in text
    assert 'type="Split"' in text and 'type="Concat"' in text
    if kind == "LSTM":
        assert 'type="Add"' in text


def test_ir_keeps_onnx_names_and_dynamic_dims(tmp_path):
    model, _ = recurrent_model("LSTM", dynamic=True, seq_lens=True, initial_h=True, initial_c=True)
    xml = tmp_path / "m.xml"
    to_openvino(model, xml)
    m = ov.Core().read_model(str(xml))
    assert [sorted(p.get_names()) for p in m.inputs] == [["X"], ["sequence_lens"], ["initial_h"], ["initial_c"]]
    assert [sorted(p.get_names()) for p in m.outputs] == [["Y"], ["Y_h"], ["Y_c"]]
    assert str(m.inputs[0].get_partial_shape()) == "[?,?,3]"
    assert m.inputs[1].get_element_type() == ov.Type.i32


def test_layout1_shapes_and_numbers_where_openvino_import_is_wrong(tmp_path):
    model, _ = recurrent_model("LSTM", layout=1, direction="bidirectional", T=4, N=2)
    xml, _ = convert_and_check(tmp_path, model, 1, {})
    feeds = feeds_for(model, T=4, N=2)
    ref = run_onnx(load(model), feeds)
    assert ov_infer(xml, feeds)["Y"].shape == (2, 4, 2, 5) == ref["Y"].shape
    # OpenVINO's own import never reads layout: wrong shape or wrong numbers (or a failure).
    path = tmp_path / "l1.onnx"
    onnx.save(model, path)
    try:
        theirs = ov.Core().compile_model(ov.convert_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        out = theirs(feeds)[theirs.outputs[0]]
        assert out.shape != ref["Y"].shape or not np.allclose(out, ref["Y"], atol=1e-3)
    except Exception:
        pass


def test_per_direction_activations_split_into_two_sequences(tmp_path):
    model, _ = recurrent_model("GRU", direction="bidirectional", activations=["Sigmoid", "Tanh", "Sigmoid", "Relu"],
                               seq_lens=True, initial_h=True)
    xml, report = convert_and_check(tmp_path, model, 0, {})
    assert xml.read_text().count('type="GRUSequence"') == 2
    assert any("per direction" in r["what"] for r in report.rewrites)


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_dynamic_sequence_lens_lowered_because_openvino_ignores_them(tmp_path, kind, direction):
    """OpenVINO 2026.4 CPU ignores sequence_lengths in Sequence ops when shapes are dynamic; rnnconv writes an
    explicit TensorIterator recurrence instead, right for every batch and sequence size."""
    model, _ = recurrent_model(kind, direction=direction, seq_lens=True, initial_h=True, initial_c=True,
                               dynamic=True, lbr=int(kind == "GRU"))
    xml, report = convert_and_check(tmp_path, model, 0, {}, shapes=((4, 2), (7, 3), (2, 1)))
    assert 'type="TensorIterator"' in xml.read_text()
    assert any("TensorIterator" in r["what"] for r in report.rewrites)


LOWERED = [
    ("peepholes", "LSTM", {"peepholes": True}),
    ("input_forget", "LSTM", {"input_forget": 1}),
    ("peepholes+input_forget bidirectional", "LSTM", {"peepholes": True, "input_forget": 1,
                                                      "direction": "bidirectional", "seq_lens": True,
                                                      "initial_h": True, "initial_c": True}),
    ("HardSigmoid/Elu/ScaledTanh", "LSTM", {"activations": ["HardSigmoid", "Elu", "ScaledTanh"]}),
    ("LeakyRelu/Softsign reverse", "GRU", {"activations": ["LeakyRelu", "Softsign"], "direction": "reverse",
                                           "lbr": 1}),
    ("Softplus/Affine/ThresholdedRelu", "LSTM", {"activations": ["Softplus", "Affine", "ThresholdedRelu"]}),
    ("mixed per direction, not all OpenVINO", "RNN", {"activations": ["Tanh", "ScaledTanh"],
                                                      "direction": "bidirectional"}),
]


@pytest.mark.parametrize("what,kind,kwargs", LOWERED, ids=[c[0] for c in LOWERED])
@pytest.mark.parametrize("dynamic", [False, True])
def test_inexpressible_constructs_run_right_in_openvino(tmp_path, what, kind, kwargs, dynamic):
    model, _ = recurrent_model(kind, dynamic=dynamic, **kwargs)
    shapes = ((4, 2), (6, 3)) if dynamic else ((4, 2),)
    xml, report = convert_and_check(tmp_path, model, 0, {}, shapes=shapes)
    text = xml.read_text()
    assert 'type="TensorIterator"' in text
    assert f'type="{kind}Sequence"' not in text


def test_clip_zero_lowered_and_matches_onnxruntime(tmp_path):
    """ONNX clip=0 clips every gate to 0 (onnxruntime agrees); OpenVINO's clip 0 means no clip, so the recurrence
    is lowered. rnnconv's engine refuses clip 0 as invalid, so this is checked against onnxruntime directly."""
    model, _ = recurrent_model("RNN", clip=0.0, direction="bidirectional")
    xml = tmp_path / "c.xml"
    to_openvino(model, xml, verify=False)
    feeds = feeds_for(model, T=4, N=2)
    assert_close(reference(model, feeds, 0), ov_infer(xml, feeds), ["Y", "Y_h"])


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
def test_lowering_with_weights_as_graph_inputs(tmp_path, kind):
    """Weights fed at run time (ONNX backend-test style) enter the TensorIterator as invariant inputs."""
    kwargs = {"peepholes": True, "initial_c": True} if kind == "LSTM" else {"lbr": int(kind == "GRU")}
    model, extra = recurrent_model(kind, direction="bidirectional", weights_as_inputs=True, seq_lens=True,
                                   initial_h=True, dynamic=True, **kwargs)
    xml, _ = convert_and_check(tmp_path, model, 0, extra, shapes=((4, 2), (6, 3)))
    assert 'type="TensorIterator"' in xml.read_text()


@pytest.mark.parametrize("what,kwargs", [("peepholes", {"peepholes": True}), ("input_forget", {"input_forget": 1})])
def test_openvino_import_is_wrong_where_rnnconv_is_right(tmp_path, what, kwargs):
    """ov.convert_model runs these LSTMs as if P were 0 / input_forget 0; rnnconv's IR gives the ONNX numbers."""
    model, _ = recurrent_model("LSTM", T=4, N=2, **kwargs)
    path = tmp_path / "p.onnx"
    onnx.save(model, path)
    feeds = feeds_for(model, T=4, N=2)
    ref = reference(model, feeds, 0)
    theirs = ov.Core().compile_model(ov.convert_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    y = theirs(feeds)[theirs.outputs[0]]
    assert np.abs(y - ref["Y"]).max() > 1e-3  # silently wrong
    xml, _ = convert_and_check(tmp_path, model, 0, {})
    assert np.abs(ov_infer(xml, feeds)["Y"] - ref["Y"]).max() < TOL


def test_cli_writes_ir_and_json(tmp_path):
    from click.testing import CliRunner

    from rnnconv.cli import cli

    model, _ = recurrent_model("GRU", lbr=1, direction="bidirectional")
    path = tmp_path / "g.onnx"
    onnx.save(model, path)
    res = CliRunner().invoke(cli, ["to-openvino", str(path), "-o", str(tmp_path / "g.xml"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["ok"] and data["output"].endswith("g.xml")
    assert (tmp_path / "g.bin").exists()


def test_cli_unsupported_exit_3(tmp_path):
    import subprocess
    import sys

    model, _ = recurrent_model("GRU")
    model.graph.node.append(helper.make_node("Det", ["X"], ["c"]))
    model.graph.node.append(helper.make_node("NonMaxSuppression", ["X", "X"], ["n"]))
    path = tmp_path / "p.onnx"
    onnx.save(model, path)
    # --route rnnconv: the default would take OpenVINO's import for these ops (tests/openvino/)
    res = subprocess.run([sys.executable, "-m", "rnnconv", "to-openvino", str(path), "-o", str(tmp_path / "p.xml"),
                          "--route", "rnnconv"], capture_output=True, text=True)
    assert res.returncode == 3, res.stderr
    assert "Det, NonMaxSuppression" in res.stderr
    assert not (tmp_path / "p.xml").exists()


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _fixture_cases():
    index = FIXTURES / "index.json"
    if not index.exists():
        return []
    return [f["file"] for f in json.loads(index.read_text())["fixtures"]]


@pytest.mark.parametrize("name", _fixture_cases())
def test_fixtures_convert_and_verify_in_openvino(tmp_path, name):
    """Every synthetic fixture (peepholes, input_forget, every activation, float16/float64/bfloat16, layout 1...)
    converts, verified per node and whole against onnxruntime/the engine and the OpenVINO runtime."""
    report = to_openvino(FIXTURES / name, tmp_path / "m.xml").report
    assert report.ok and any("OpenVINO runtime" in c.engines for c in report.checks)


def _torch_cases():
    folder = FIXTURES / "torch"
    return sorted(p.name for p in folder.glob("*.onnx")) if folder.exists() else []


@pytest.mark.parametrize("name", _torch_cases())
def test_pytorch_exports_run_in_openvino_with_torch_numbers(tmp_path, name):
    path = FIXTURES / "torch" / name
    xml = tmp_path / "m.xml"
    report = to_openvino(path, xml).report
    assert report.ok
    data = np.load(path.with_suffix(".npz"))
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    feeds = {i.name: data[i.name] for i in model.graph.input if i.name not in inits}
    got = ov_infer(xml, feeds)
    assert_close({o.name: data[o.name] for o in model.graph.output}, got, [o.name for o in model.graph.output])


def test_fp16_weights_are_stored_half_and_decompressed(tmp_path):
    model, _ = recurrent_model("LSTM", direction="bidirectional", H=16, I=8)
    xml = tmp_path / "h.xml"
    report = to_openvino(model, xml, fp16=True).report
    assert report.ok
    text = xml.read_text()
    assert 'element_type="f16"' in text and 'destination_type="f32"' in text
    full = tmp_path / "f.xml"
    to_openvino(model, full)
    assert xml.with_suffix(".bin").stat().st_size < 0.6 * full.with_suffix(".bin").stat().st_size
    feeds = feeds_for(model, T=4, N=2)
    assert_close(reference(model, feeds, 0), ov_infer(xml, feeds), ["Y", "Y_h", "Y_c"], tol=2e-3)


def test_mismatch_raises_and_writes_nothing(tmp_path, monkeypatch):
    """A wrong gate order (simulated) is caught per node; no .xml, .bin or temporary file is left behind."""
    from rnnconv.dialects.openvino import gates
    from rnnconv.errors import VerificationFailed

    monkeypatch.setitem(gates.ORDER, "LSTM", ("i", "o", "f", "c"))
    model, _ = recurrent_model("LSTM")
    with pytest.raises(VerificationFailed) as err:
        to_openvino(model, tmp_path / "m.xml")
    assert "node lstm0" in str(err.value) and not err.value.report.ok
    assert list(tmp_path.iterdir()) == []


def test_existing_output_needs_force(tmp_path):
    from rnnconv.errors import UsageError

    model, _ = recurrent_model("RNN")
    xml = tmp_path / "m.xml"
    to_openvino(model, xml)
    with pytest.raises(UsageError):
        to_openvino(model, xml)
    assert to_openvino(model, xml, force=True).report.ok


def test_zero_peepholes_are_dropped_exactly(tmp_path):
    """Constant all-zero P changes nothing, so the node stays one LSTMSequence (verified)."""
    model, _ = recurrent_model("LSTM", peepholes=True)
    for init in model.graph.initializer:
        if init.name == "P":
            init.CopyFrom(numpy_helper.from_array(np.zeros((1, 15), np.float32), "P"))
    xml, _ = convert_and_check(tmp_path, model, 0, {})
    assert 'type="LSTMSequence"' in xml.read_text() and "TensorIterator" not in xml.read_text()


def test_verification_without_openvino_runtime(tmp_path):
    model, _ = recurrent_model("GRU", lbr=1)
    report = to_openvino(model, tmp_path / "g.xml", runtime=False).report
    assert report.ok and all("OpenVINO runtime" not in c.engines for c in report.checks)
    assert len(report.checks) == 2  # the node alone, then the whole model in the IR interpreter


@pytest.mark.parametrize("kind,lbr", [("LSTM", 0), ("GRU", 0), ("GRU", 1), ("RNN", 0)])
def test_gates_round_trip_for_the_reverse_direction(kind, lbr):
    """OpenVINO tensors back to a Layer (issue 6 uses this): W/R exact, biases exact in sum (Rb folded into Wb)."""
    from rnnconv.dialects.onnx_recurrent import find
    from rnnconv.dialects.openvino import gates

    model, _ = recurrent_model(kind, direction="bidirectional", lbr=lbr)
    (rn,) = find(load(model))
    t = gates.sequence_tensors(rn.layer)
    back = gates.layer_from_sequence(kind, gates.attributes(rn.layer), t["W"], t["R"], t["B"])
    for a, b in zip(rn.layer.cells, back.cells):
        for g in a.W:
            np.testing.assert_array_equal(a.W[g], b.W[g])
            np.testing.assert_array_equal(a.R[g], b.R[g])
            np.testing.assert_allclose(a.Wb[g] + a.Rb[g], b.Wb[g] + b.Rb[g], rtol=1e-6, atol=1e-7)
        if kind == "GRU" and lbr:
            np.testing.assert_array_equal(a.Rb["h"], b.Rb["h"])  # kept apart: it sits under r
