"""rnnconv's IR interpreter: random recurrent nodes translated to IR agree with the ONNX engine; OpenVINO's own IR
gives onnxruntime's numbers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from rnnconv import io
from rnnconv.commands.to_openvino import translate
from rnnconv.engine.ir_graph import run_ir
from tests.conftest import feeds, openvino_ir, recurrent_cases, recurrent_model, run_engine, run_onnxruntime


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recurrent_cases())
def test_interpreter_agrees_with_onnx_engine(case):
    op, kw, T, N = case
    model = recurrent_model(op, T=T, N=N, **kw)
    m = io.load(model)
    graph = translate(m).graph
    inputs = feeds(model, dims={"T": T, "N": N})
    ref = run_engine(m, inputs)
    got = run_ir(graph, inputs)
    for name, want in ref.items():
        np.testing.assert_allclose(got[name], want, atol=1e-6, rtol=1e-6, err_msg=name)


def test_interpreter_runs_ir_written_by_openvino(tmp_path):
    """The IR interpreter follows OpenVINO semantics on OpenVINO's own IR (Reshape special_zero, Gather-8...)."""
    pytest.importorskip("openvino")
    model = recurrent_model("LSTM", direction="bidirectional", dynamic=True, H=4)
    xml = openvino_ir(model, tmp_path / "theirs.xml", compress=True)
    x = np.random.default_rng(1).uniform(-1, 1, (5, 2, 3)).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})
    got = run_ir(xml, {"X": x})
    for name in ("Y", "Y_h", "Y_c"):
        np.testing.assert_allclose(got[name], want[name], atol=2e-3, rtol=2e-3)  # fp16-compressed weights


def test_cell_kernels_register_with_the_interpreter():
    """LSTMCell / GRUCell / RNNCell (TensorIterator bodies) are kernels from the import of the interpreter on,
    in a fresh process that imports nothing else of rnnconv's."""
    code = ("import sys\n"
            "from rnnconv.engine.ir_graph import KERNELS\n"
            "print(sorted({'LSTMCell', 'GRUCell', 'RNNCell'} - set(KERNELS)))\n"
            "print(sorted({'rnnconv.commands.from_openvino', 'rnnconv.dialects.openvino.to_onnx'} & set(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "[]"]
