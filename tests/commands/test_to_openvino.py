"""`rnnconv to-openvino`: every IR rnnconv writes is loaded by the real OpenVINO runtime (CPU, f32) and matches the
ONNX source run in onnxruntime (layout 1 through tests/oracle.py's re-expression) to 1e-5; the
fixtures and PyTorch exports; fp16 weights; a wrong conversion, an existing output and a crashing runtime write
nothing."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from onnx import helper, numpy_helper

from rnnconv.commands.to_openvino import to_openvino
from rnnconv.dialects.openvino import gates
from rnnconv.dialects.openvino import ops as ov_ops
from rnnconv.engine.ir_graph import run_ir
from rnnconv.errors import UsageError, VerificationFailed
from tests.conftest import (
    FIXTURES,
    OPENVINO_TOL,
    TORCH,
    assert_close,
    feeds,
    fixture_feeds,
    openvino_outputs,
    recurrent_cases,
    recurrent_model,
    reference,
    run_cli,
    run_onnxruntime,
    run_openvino,
    to_openvino_and_check,
)

try:  # without openvino the same conversions run, held against onnxruntime in rnnconv's IR interpreter only
    import openvino as ov
except ImportError:
    ov = None
needs_openvino = pytest.mark.skipif(ov is None, reason="needs the openvino package")


def runtimes(xml, inputs) -> dict:
    """The IR's outputs in rnnconv's IR interpreter and, when installed, in the OpenVINO runtime."""
    out = {"IR interpreter": run_ir(xml, inputs)}
    if ov is not None:
        out["OpenVINO runtime"] = openvino_outputs(xml, inputs)
    return out

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
    model = recurrent_model(kind, direction=direction, layout=layout, bias=optional, sequence_lens=optional,
                            initial_h=optional, initial_c=optional, dynamic=dynamic, **extra)
    shapes = ((4, 2), (7, 3), (1, 1)) if dynamic else ((4, 2),)
    to_openvino_and_check(tmp_path, model, shapes=shapes)


@pytest.mark.parametrize("seed", range(3))
def test_random_cases_run_in_openvino(tmp_path, seed):
    @settings(max_examples=5, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(recurrent_cases())
    def check(case):
        kind, kw, T, N = case
        kw["seed"] = kw["seed"] + seed
        model = recurrent_model(kind, T=T, N=N, **kw)
        assert to_openvino(model, tmp_path / "m.xml", force=True).report.ok  # includes the OpenVINO runtime check
        inputs = feeds(model, dims={"T": T, "N": N})
        want = reference(model, inputs)
        for runtime, got in runtimes(tmp_path / "m.xml", inputs).items():
            for name, value in want.items():
                # unbounded activations (Affine, Relu, Elu) grow: float32's error grows with the magnitude
                atol = OPENVINO_TOL * max(1.0, float(np.abs(value).max(initial=0)))
                np.testing.assert_allclose(got[name], value, rtol=OPENVINO_TOL, atol=atol, err_msg=f"{name} {runtime}")

    check()


@pytest.mark.parametrize("op,opset", [("Softmax", 13), ("LogSoftmax", 13), ("Softmax", 11)])
def test_lstm_then_softmax_without_axis(tmp_path, op, opset):
    """Softmax's axis left out on the LSTM's rank-4 Y [T, D, N, H]: -1 from opset 13, before it 1 over the input
    flattened to 2-D (the whole of D, N, H per step); H and D chosen so that every other axis gives other numbers."""
    model = recurrent_model("LSTM", opset=opset, direction="bidirectional", outputs=("Y",), H=3)
    model.graph.node[0].output[0] = "Y_raw"
    model.graph.node.append(helper.make_node(op, ["Y_raw"], ["Y"], name="softmax"))
    onnx.checker.check_model(model, full_check=True)
    to_openvino_and_check(tmp_path, model)


@needs_openvino
def test_ir_keeps_onnx_names_and_dynamic_dims(tmp_path):
    model = recurrent_model("LSTM", dynamic=True, sequence_lens=True, initial_h=True, initial_c=True)
    xml = tmp_path / "m.xml"
    to_openvino(model, xml)
    m = ov.Core().read_model(str(xml))
    assert [sorted(p.get_names()) for p in m.inputs] == [["X"], ["sequence_lens"], ["initial_h"], ["initial_c"]]
    assert [sorted(p.get_names()) for p in m.outputs] == [["Y"], ["Y_h"], ["Y_c"]]
    assert str(m.inputs[0].get_partial_shape()) == "[?,?,3]"
    assert m.inputs[1].get_element_type() == ov.Type.i32


def test_cli_writes_ir_and_json(tmp_path):
    path = tmp_path / "g.onnx"
    onnx.save(recurrent_model("GRU", lbr=1, direction="bidirectional"), path)
    code, stdout, stderr = run_cli(["to-openvino", path, "-o", tmp_path / "g.xml", "--json"])
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["ok"] and data["output"].endswith("g.xml")
    assert (tmp_path / "g.bin").exists()


def test_cli_unsupported_exit_3(tmp_path):
    model = recurrent_model("GRU", I=2)  # X [T, 2, 2]: Det of it is valid ONNX (square inner-most dims)
    model.graph.node.append(helper.make_node("Det", ["X"], ["c"]))
    model.graph.node.append(helper.make_node("NonMaxSuppression", ["X", "X"], ["n"]))
    path = tmp_path / "p.onnx"
    onnx.save(model, path)
    # --route rnnconv: the default would take OpenVINO's import for these ops (tests/dialects/openvino/test_frontend.py)
    res = subprocess.run([sys.executable, "-m", "rnnconv", "to-openvino", str(path), "-o", str(tmp_path / "p.xml"),
                          "--route", "rnnconv"], capture_output=True, text=True)
    assert res.returncode == 3, res.stderr
    assert "Det, NonMaxSuppression" in res.stderr
    assert not (tmp_path / "p.xml").exists()


def _fixture_cases():
    index = FIXTURES / "index.json"
    if not index.exists():
        return []
    return [f["file"] for f in json.loads(index.read_text())["fixtures"]]


@pytest.mark.parametrize("name", _fixture_cases())
def test_fixtures_convert_and_verify_in_openvino(tmp_path, name):
    """Every synthetic fixture (peepholes, input_forget, every activation, float16/float64/bfloat16, layout 1...)
    converts, verified per node and whole against onnxruntime/the engine and the OpenVINO runtime; the IR in the
    OpenVINO runtime gives onnxruntime's numbers for the fixture (tests/oracle.py)."""
    report = to_openvino(FIXTURES / name, tmp_path / "m.xml").report
    assert report.ok and (ov is None or any("OpenVINO runtime" in c.engines for c in report.checks))
    inputs = fixture_feeds(FIXTURES / name)
    want = reference(FIXTURES / name, inputs)
    for runtime, got in runtimes(tmp_path / "m.xml", inputs).items():
        assert_close(want, got, tol=OPENVINO_TOL)


def _torch_cases():
    return sorted(p.name for p in TORCH.glob("*.onnx")) if TORCH.exists() else []


@pytest.mark.parametrize("name", _torch_cases())
def test_pytorch_exports_run_in_openvino_with_torch_numbers(tmp_path, name):
    path = TORCH / name
    xml = tmp_path / "m.xml"
    report = to_openvino(path, xml).report
    assert report.ok
    data = np.load(path.with_suffix(".npz"))
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    inputs = {i.name: data[i.name] for i in model.graph.input if i.name not in inits}
    for runtime, got in runtimes(xml, inputs).items():
        assert_close({o.name: data[o.name] for o in model.graph.output}, got)


def test_fp16_weights_are_stored_half_and_decompressed(tmp_path):
    model = recurrent_model("LSTM", direction="bidirectional", H=16, I=8)
    xml = tmp_path / "h.xml"
    report = to_openvino(model, xml, fp16=True).report
    assert report.ok
    text = xml.read_text()
    assert 'element_type="f16"' in text and 'destination_type="f32"' in text
    full = tmp_path / "f.xml"
    to_openvino(model, full)
    assert xml.with_suffix(".bin").stat().st_size < 0.6 * full.with_suffix(".bin").stat().st_size
    inputs = feeds(model)
    for runtime, got in runtimes(xml, inputs).items():
        assert_close(run_onnxruntime(model, inputs), got, ["Y", "Y_h", "Y_c"], tol=2e-3)


def test_mismatch_raises_and_writes_nothing(tmp_path, monkeypatch):
    """A wrong gate order (simulated) is caught per node; no .xml, .bin or temporary file is left behind."""
    monkeypatch.setitem(gates.ORDER, "LSTM", ("i", "o", "f", "c"))
    with pytest.raises(VerificationFailed) as err:
        to_openvino(recurrent_model("LSTM"), tmp_path / "m.xml")
    assert "node lstm" in str(err.value) and not err.value.report.ok
    assert list(tmp_path.iterdir()) == []


def test_existing_output_needs_force(tmp_path):
    model = recurrent_model("RNN")
    xml = tmp_path / "m.xml"
    to_openvino(model, xml)
    with pytest.raises(UsageError):
        to_openvino(model, xml)
    assert to_openvino(model, xml, force=True).report.ok


def test_verification_without_openvino_runtime(tmp_path):
    report = to_openvino(recurrent_model("GRU", lbr=1), tmp_path / "g.xml", runtime=False).report
    assert report.ok and all("OpenVINO runtime" not in c.engines for c in report.checks)
    assert len(report.checks) == 2  # the node alone, then the whole model in the IR interpreter


@needs_openvino
@pytest.mark.parametrize("crash", ["child aborts", "Split-1"])
def test_openvino_crash_is_a_failed_check_when_isolated(tmp_path, monkeypatch, crash):
    """The isolated runtime check fails cleanly when the runtime's process dies: VerificationFailed naming the
    runtime, nothing written, this process alive. On every version with a child that aborts once given its job;
    on OpenVINO 2026.4 also with Split-1 forced back in (what that version's CPU plugin aborts on, measured)."""
    from rnnconv.engine import openvino_runtime

    def split_1(ctx, node):
        x = ctx.inp(node, 0)
        return ctx.g.add("Split", [x, ctx.i64(int(node.attributes["axis"].value))], {"num_splits": 2})

    if crash == "child aborts":
        monkeypatch.setattr(openvino_runtime, "CHILD",
                            [sys.executable, "-c", "import os, sys; sys.stdin.buffer.read(1); os.abort()"])
    elif ov.__version__.startswith("2026.4"):
        monkeypatch.setitem(ov_ops.TABLE, "Split", dataclasses.replace(ov_ops.TABLE["Split"], to_openvino=split_1))
    else:
        pytest.skip("the Split-1 crash was measured with OpenVINO 2026.4")
    base = recurrent_model("LSTM", direction="bidirectional")
    base.opset_import[0].version = 18
    g = base.graph
    g.node.extend([helper.make_node("Split", ["Y"], ["Yf", "Yb"], axis=1, num_outputs=2),
                   helper.make_node("Squeeze", ["Yf", "ax"], ["Sf"]), helper.make_node("Squeeze", ["Yb", "ax"], ["Sb"]),
                   helper.make_node("Concat", ["Sf", "Sb"], ["out"], axis=-1)])
    g.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "ax"))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, [4, 2, 10]))
    with pytest.raises(VerificationFailed) as err:
        to_openvino(base, tmp_path / "c.xml", isolate=True)
    assert any("OpenVINO runtime failed" in o.problem for c in err.value.report.checks for o in c.outputs)
    assert list(tmp_path.iterdir()) == []



def test_an_axisless_squeeze_of_a_dynamic_dim_is_said_to_need_static_shapes(tmp_path):
    """PyTorch's `x.squeeze()` of a dynamic dim (speechmos' PLCMOS model): OpenVINO's CPU plugin refuses the IR
    as written (a dynamic rank) and compiles it once reshaped, which the report says."""
    ov = pytest.importorskip("openvino")
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.uniform(-1, 1, s).astype(np.float32), n) for n, s in (("W", (1, 3, 2)),
                                                                                   ("R", (1, 3, 1)))]
    nodes = [h.make_node("GRU", ["x", "W", "R"], ["", "h"], hidden_size=1, name="gru"),
             h.make_node("Squeeze", ["h"], ["y"], name="squeeze_all")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [3, "n", 2])],
                         [h.make_tensor_value_info("y", TP.FLOAT, ["n"])], initializer=inits)
    source, xml = tmp_path / "m.onnx", tmp_path / "m.xml"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 11)]), source)
    code, out, err = run_cli(["to-openvino", source, "-o", xml])
    assert code == 0, err
    assert "compiles this IR only at static input shapes" in out + err and "'squeeze_all'" in out + err
    core = ov.Core()
    with pytest.raises(RuntimeError, match="dynamic rank"):
        core.compile_model(str(xml), "CPU")
    model = core.read_model(str(xml))
    model.reshape({model.inputs[0]: [3, 2, 2]})
    core.compile_model(model, "CPU")
