"""The OpenVINO user's route for silero-vad 6.2.3's three If models (issue 30): `rnnconv.settle_ifs(path)`, then
OpenVINO's own `ov.convert_model(io.BytesIO(m.SerializeToString()), extension=rnnconv.openvino_extensions())`.

Held against onnxruntime on the source: the settled ONNX keeps every input and output (name, element type, declared
dims) and runs in onnxruntime as the source does (1e-5); the openvino.Model keeps the names, element types, ranks
and open input dims, compiles on CPU (f32) with its dynamic shapes, and equals onnxruntime on the source within
1e-4 over 3 chunks of 512 samples at 16 kHz, batch 1 and 3, the state fed back. OpenVINO runs in a process of its
own (tests/real/conftest.py says why).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import onnx
import pytest

import rnnconv
from tests.conftest import REPO
from tests.real.conftest import TIMEOUT

pytestmark = pytest.mark.real

SETTLED = ["silero_vad", "silero_vad_16k_op15", "silero_vad_half"]
TOL, ONNX_TOL = 1e-4, 1e-5
ELEMENT = {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.INT64: "i64"}

_CHILD = """
import io, pickle, sys
import numpy as np
import openvino as ov
import rnnconv

job = pickle.load(sys.stdin.buffer)
model = ov.convert_model(io.BytesIO(job["onnx"]), extension=rnnconv.openvino_extensions())
ports = [(sorted(p.get_names()), p.get_element_type().get_type_name(), [d.is_dynamic for d in p.get_partial_shape()])
         for p in [*model.inputs, *model.outputs]]
compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
answers = []
for feeds in job["runs"]:
    result = compiled(feeds)
    answers.append({n: np.asarray(result[p]) for p in compiled.outputs for n in p.get_names()})
sys.stdout.buffer.write(pickle.dumps((ports, answers)))
"""


def _openvino(proto: onnx.ModelProto, runs: list) -> tuple:
    job = pickle.dumps({"onnx": proto.SerializeToString(), "runs": runs})
    proc = subprocess.run([sys.executable, "-c", _CHILD], input=job, capture_output=True, timeout=TIMEOUT,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, f"OpenVINO's process ended with {proc.returncode}:\n{proc.stderr.decode()[-3000:]}"
    return pickle.loads(proc.stdout)


def _ifs(graph) -> int:
    """If nodes in the graph and its bodies."""
    return sum((n.op_type == "If") + sum(_ifs(a.g) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
               for n in graph.node)


def _session(model):
    import onnxruntime as ort

    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def _chunk(batch: int, k: int, has_sr: bool) -> dict:
    rng = np.random.default_rng([batch, k])
    feeds = {"input": rng.uniform(-0.5, 0.5, (batch, 512)).astype(np.float32)}
    return {**feeds, "sr": np.array(16000, np.int64)} if has_sr else feeds


def _sequence(session, batch: int, has_sr: bool) -> tuple[list, list]:
    """3 chunks through onnxruntime, its state fed back: each chunk's inputs and outputs."""
    names = [o.name for o in session.get_outputs()]
    state, feeds, outs = np.zeros((2, batch, 128), np.float32), [], []
    for k in range(3):
        f = {**_chunk(batch, k, has_sr), "state": state}
        out = dict(zip(names, session.run(None, f)))
        feeds.append(f)
        outs.append(out)
        state = out["stateN"]
    return feeds, outs


@pytest.mark.parametrize("real_model", SETTLED, indirect=True)
def test_settle_then_openvino_with_the_extensions(real_model):
    source = onnx.load(str(real_model.path))
    has_sr = any(i.name == "sr" for i in source.graph.input)
    settled = rnnconv.settle_ifs(real_model.path, dims={"input:1": 512},
                                 ranges={"sr": (16000, 16000)} if has_sr else {})
    assert isinstance(settled, onnx.ModelProto)
    interface = [(v.name, v.type) for v in [*source.graph.input, *source.graph.output]]
    assert [(v.name, v.type) for v in [*settled.graph.input, *settled.graph.output]] == interface
    # what stays: at most the If on sr, in the main graph (the ones inside its branches are settled)
    top = [n for n in settled.graph.node if n.op_type == "If"]
    assert len(top) <= has_sr and _ifs(settled.graph) == len(top), (len(top), _ifs(settled.graph))

    want_session, settled_session = _session(real_model.path), _session(settled)
    runs, want = [], []
    for batch in (1, 3):
        feeds, outs = _sequence(want_session, batch, has_sr)
        for f, w in zip(feeds, outs):
            got = dict(zip([o.name for o in settled_session.get_outputs()], settled_session.run(None, f)))
            for name in w:
                np.testing.assert_allclose(got[name], w[name], atol=ONNX_TOL, rtol=ONNX_TOL, err_msg=name)
        runs += feeds
        want += outs

    ports, answers = _openvino(settled, runs)
    assert [p[0] for p in ports] == [[name] for name, _ in interface]
    for (name, t), (_, element, dynamic) in zip(interface, ports):
        assert element == ELEMENT[t.tensor_type.elem_type], (name, element)
        assert len(dynamic) == len(t.tensor_type.shape.dim), (name, dynamic)
        if name in {i.name for i in source.graph.input}:  # compiled with the source's open dims
            assert dynamic == [not d.HasField("dim_value") for d in t.tensor_type.shape.dim], (name, dynamic)
    worst = 0.0
    for k, (got, w) in enumerate(zip(answers, want)):
        for name in w:
            diff = float(np.max(np.abs(got[name].astype(np.float64) - w[name])))
            worst = max(worst, diff)
            assert diff <= TOL, f"{name}, run {k}: {diff}"
    print(f"{real_model.name}: OpenVINO with rnnconv's extensions vs onnxruntime, max |diff| {worst:.3g}")
