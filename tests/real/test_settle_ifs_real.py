"""Issue 21: the three If-bearing silero-vad 6.2.3 models (silero_vad, silero_vad_16k_op15, silero_vad_half), which
OpenVINO's own ONNX import refuses, go through `to-openvino` with their interface unchanged: the Ifs their shapes
settle are replaced by the branch they take (SettleIfs), the one on `sr` stays as an OpenVINO If.

Held against onnxruntime on the source: the IR keeps every input and output name, element type and rank, every
input dim the source leaves open stays open, and so does every output dim that varies in the source's runs (the
batch); OpenVINO's runtime (CPU, f32, in a process of its own, compiled once with its dynamic shapes) equals
onnxruntime within 1e-4 over 3 chunks with the state fed back, batch 1 and 3, at 576 and 512 samples (16 kHz) and
288 and 256 (8 kHz, silero_vad only: the others are 16 kHz models); a 1536-sample chunk the source refuses is
refused by the IR too; `from-openvino` brings the IR back into ONNX that onnxruntime runs equal to the source
(1e-5) on the same chunks.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import onnx
import pytest

from tests.real.conftest import TIMEOUT, rnnconv_cli

pytestmark = pytest.mark.real

SETTLED = ["silero_vad", "silero_vad_16k_op15", "silero_vad_half"]
TOL = 1e-4  # OpenVINO (CPU, f32) against onnxruntime
BACK_TOL = 1e-5  # onnxruntime on from-openvino's ONNX against onnxruntime on the source
ELEMENT = {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.INT64: "i64"}

# Every run of one model in one OpenVINO process: the IR compiled once, with its dynamic shapes.
_RUNS = """
import pickle, sys
import numpy as np
import openvino as ov
job = pickle.load(sys.stdin.buffer)
model = ov.Core().read_model(job["xml"])
ports = [(sorted(p.get_names()), p.get_element_type().get_type_name(), str(p.get_partial_shape()),
          [d.is_dynamic for d in p.get_partial_shape()]) for p in [*model.inputs, *model.outputs]]
compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
answers = []
for feeds in job["runs"]:
    try:
        result = compiled(feeds)
        answers.append({n: np.asarray(result[p]) for p in compiled.outputs for n in p.get_names()})
    except Exception as err:
        answers.append("refused: " + str(err).splitlines()[0])
sys.stdout.buffer.write(pickle.dumps((ports, answers)))
"""


def _openvino(xml, runs):
    proc = subprocess.run([sys.executable, "-c", _RUNS], input=pickle.dumps({"xml": str(xml), "runs": runs}),
                          capture_output=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"OpenVINO's process ended with {proc.returncode}:\n{proc.stderr.decode()[-2000:]}"
    return pickle.loads(proc.stdout)


def _cases(name: str) -> list[tuple[int, int, int]]:
    """(sample rate, samples, batch) of each sequence of 3 chunks."""
    rates = [(16000, 576), (16000, 512)] + ([(8000, 288), (8000, 256)] if name == "silero_vad" else [])
    return [(sr, n, batch) for sr, n in rates for batch in (1, 3)]


def _chunks(sr: int, n: int, batch: int, has_sr: bool, k: int) -> dict:
    rng = np.random.default_rng([sr, n, batch, k])
    feeds = {"input": rng.uniform(-0.5, 0.5, (batch, n)).astype(np.float32)}
    return {**feeds, "sr": np.array(sr, np.int64)} if has_sr else feeds


def _onnxruntime(path, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    try:
        return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    except Exception as err:
        return f"refused: {type(err).__name__}"


def _sequence(run, name, sr, n, batch, has_sr) -> list[dict]:
    """3 chunks through `run(feeds) -> outputs`, the state fed back; each chunk's outputs."""
    state, outs = np.zeros((2, batch, 128), np.float32), []
    for k in range(3):
        got = run({**_chunks(sr, n, batch, has_sr, k), "state": state})
        assert not isinstance(got, str), f"{name} at {sr} Hz, {n} samples, batch {batch}: {got}"
        outs.append(got)
        state = got["stateN"]
    return outs


@pytest.mark.parametrize("real_model", SETTLED, indirect=True)
def test_settled_silero_models_run_in_openvino_with_their_interface(real_model, tmp_path):
    source = onnx.load(str(real_model.path))
    has_sr = any(i.name == "sr" for i in source.graph.input)
    xml, back = tmp_path / "m.xml", tmp_path / "back.onnx"
    sizes = ["--dim", "input:1=512", *(["--range", "sr:16000,16000"] if has_sr else [])]
    run = rnnconv_cli("to-openvino", real_model.path, "-o", xml, *sizes)
    assert run.code == 0, run.stdout + run.stderr
    assert "then_branch kept (else_branch can never reach the outputs" in run.stdout

    # The sequences onnxruntime runs on the source; OpenVINO gets the same chunks with its own state fed back,
    # so that the 3 chunks of one sequence are 3 runs each on what it computed before.
    want = {(sr, n, b): _sequence(lambda f: _onnxruntime(real_model.path, f), real_model.name, sr, n, b, has_sr)
            for sr, n, b in _cases(real_model.name)}
    too_long = {**_chunks(16000, 1536, 1, has_sr, 0), "state": np.zeros((2, 1, 128), np.float32)}
    assert isinstance(_onnxruntime(real_model.path, too_long), str)  # the source refuses 1536 samples
    runs = []
    for (sr, n, b), outs in want.items():
        state = np.zeros((2, b, 128), np.float32)
        for k in range(3):
            runs.append({**_chunks(sr, n, b, has_sr, k), "state": state})
            state = outs[k]["stateN"]  # onnxruntime's state: each chunk is compared on the same inputs
    ports, answers = _openvino(xml, runs + [too_long])

    declared = [(v.name, v.type.tensor_type) for v in [*source.graph.input, *source.graph.output]]
    assert [p[0] for p in ports] == [[name] for name, _ in declared]
    seen = {name: {o[name].shape for seq in want.values() for o in seq} for name in want[next(iter(want))][0]}
    for (name, t), (_, element, shape, dynamic) in zip(declared, ports):
        assert element == ELEMENT[t.elem_type], (name, element)
        assert len(dynamic) == len(t.shape.dim), (name, shape)
        if name not in seen:  # an input: every dim the source leaves open stays open, the others stay fixed
            assert dynamic == [not d.HasField("dim_value") for d in t.shape.dim], f"{name}: {shape}, {t.shape}"
            continue
        # An output's dims are what the graph makes of the inputs: one that varies from run to run (the batch)
        # must stay open; one the IR fixes must be what the source gives in every run.
        for k, dyn in enumerate(dynamic):
            values = {s[k] for s in seen[name]}
            assert dyn or (len(values) == 1 and shape.strip("[]").split(",")[k] == str(*values)), (name, shape)
    assert isinstance(answers[-1], str), "OpenVINO ran the 1536-sample chunk the source refuses"
    worst = 0.0
    for k, ((sr, n, b), outs) in enumerate((key, o) for key, seq in want.items() for o in seq):
        got = answers[k]
        assert not isinstance(got, str), f"OpenVINO at {sr} Hz, {n} samples, batch {b}: {got}"
        for name, value in outs.items():
            diff = float(np.max(np.abs(got[name].astype(np.float64) - value)))
            worst = max(worst, diff)
            assert diff <= TOL, f"{name} at {sr} Hz, {n} samples, batch {b}: {diff}"
    print(f"{real_model.name}: OpenVINO vs onnxruntime, max |diff| {worst:.3g}")

    run = rnnconv_cli("from-openvino", xml, "-o", back, *sizes)
    assert run.code == 0, run.stdout + run.stderr
    for (sr, n, b), outs in want.items():
        got = _sequence(lambda f: _onnxruntime(back, f), "back", sr, n, b, has_sr)
        for g, w in zip(got, outs):
            for name in w:
                np.testing.assert_allclose(g[name], w[name], atol=BACK_TOL, rtol=BACK_TOL)
    assert isinstance(_onnxruntime(back, too_long), str)
