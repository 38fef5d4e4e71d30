"""Round trips ONNX -> to-openvino -> from-openvino for every fixture and PyTorch export, and from-openvino on the
IR OpenVINO's PyTorch frontend writes (fixtures/openvino/pytorch_frontend, made by
fixtures/make_openvino_frontend_fixtures.py). Each back-converted model passes onnx.checker's full check and
from-openvino's own verification (each recurrent layer alone, then the whole model in rnnconv's engines and in
onnxruntime / the OpenVINO runtime); it then equals the source in onnxruntime (tests/oracle.py), and PyTorch's own
numbers in onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from rnnconv.commands.from_openvino import from_openvino
from rnnconv.commands.to_openvino import to_openvino
from tests.conftest import FIXTURES, assert_close, fixture_feeds, reference, run_openvino
from tests.engine import engine_gaps

ov = pytest.importorskip("openvino")
ort = pytest.importorskip("onnxruntime")
FRONTEND = FIXTURES / "openvino" / "pytorch_frontend"


def _fixtures():
    index = FIXTURES / "index.json"
    return [f["file"] for f in json.loads(index.read_text())["fixtures"]] if index.exists() else []


def _torch():
    return sorted(p.name for p in (FIXTURES / "torch").glob("*.onnx"))


def _round_trip(tmp_path, source: Path):
    """to-openvino then from-openvino. IR holding a TensorIterator (the explicit recurrence to-openvino writes for
    peepholes, other activations...) comes back as an ONNX Loop, which rnnconv's engine runs wrongly for now
    (`engine_gaps`): then from-openvino checks the nodes and the test holds onnxruntime against OpenVINO."""
    xml, back = tmp_path / "m.xml", tmp_path / "back.onnx"
    assert to_openvino(source, xml, verify="none").report.ok
    looped = 'type="TensorIterator"' in xml.read_text()
    if looped and "bfloat16" in source.name:
        pytest.skip("onnxruntime has no bfloat16 MatMul for the Loop body (nor a bfloat16 LSTM for the source)")
    full = engine_gaps.loop_scan_outputs() or not looped
    result = from_openvino(xml, back, verify="full" if full else "node")
    assert result.report.ok
    onnx.checker.check_model(str(back), full_check=True)
    if not full:
        model = onnx.load(str(back))
        rng = np.random.default_rng(0)
        feeds = {}
        for i in model.graph.input:
            dims = [d.dim_value or 3 for d in i.type.tensor_type.shape.dim]
            dtype = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
            feeds[i.name] = (np.full(dims, 2, dtype) if dtype.kind in "iu" else
                             rng.uniform(-1, 1, dims).astype(dtype))
        want = run_openvino(xml, feeds)
        sess = ort.InferenceSession(str(back), providers=["CPUExecutionProvider"])
        tol = 2e-3 if "float16" in source.name else 1e-4
        for o, got in zip(sess.get_outputs(), sess.run(None, feeds)):
            np.testing.assert_allclose(got.astype(np.float64), want[o.name].astype(np.float64), atol=tol, rtol=tol)
    return back, full


@pytest.mark.parametrize("name", _fixtures())
def test_fixture_round_trip(tmp_path, name):
    source = FIXTURES / name
    back, _ = _round_trip(tmp_path, source)
    feeds = fixture_feeds(source)  # the source against what came back, in onnxruntime (tests/oracle.py)
    assert_close(reference(source, feeds), reference(back, feeds), tol=1e-4)


@pytest.mark.parametrize("name", _torch())
def test_pytorch_export_round_trip_keeps_torch_numbers(tmp_path, name):
    source = FIXTURES / "torch" / name
    back, _ = _round_trip(tmp_path, source)
    data = np.load(source.with_suffix(".npz"))
    model = onnx.load(str(source))
    inits = {i.name for i in model.graph.initializer}
    feeds = {i.name: data[i.name] for i in model.graph.input if i.name not in inits}
    sess = ort.InferenceSession(str(back), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    for out in model.graph.output:
        np.testing.assert_allclose(got[out.name], data[out.name], atol=1e-5, rtol=1e-4)


def _frontend():
    return sorted(p.name for p in FRONTEND.glob("*.xml"))


@pytest.mark.parametrize("name", _frontend())
def test_pytorch_frontend_ir_comes_back(tmp_path, name):
    """IR from ov.convert_model(torch_module): embedding + LSTM, a streaming LSTM with states, stacked
    bidirectional GRUs, a convolution / attention front end, an STFT front end, scatter and NonZero."""
    xml = FRONTEND / name
    data = np.load(FRONTEND / (name.split(".")[0] + ".npz"))
    # The .npz is keyed by one of each input port's tensor names; the ONNX input is named by the Parameter's own
    # name where the port lists it (the name the source gave it).
    renamed = {}
    for port in ov.Core().read_model(str(xml)).inputs:
        names, own = port.get_names(), port.get_node().get_friendly_name()
        key = next(k for k in data.files if k in names)
        renamed[own if own in names else key] = data[key]
    feeds = renamed
    result = from_openvino(xml, tmp_path / "back.onnx", inputs=feeds)
    assert result.report.ok
    onnx.checker.check_model(str(tmp_path / "back.onnx"), full_check=True)
    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    res = compiled(feeds)
    sess = ort.InferenceSession(str(tmp_path / "back.onnx"), providers=["CPUExecutionProvider"])
    tol = 2e-3 if ".fp16." in name else 1e-5
    for port, got in zip(compiled.outputs, sess.run(None, feeds)):  # outputs in the Results' order
        np.testing.assert_allclose(got.astype(np.float64), np.asarray(res[port]).astype(np.float64), atol=tol,
                                   rtol=tol)


def test_every_frontend_fixture_is_here():
    assert len(_frontend()) == 12
