"""rnnconv's IR interpreter, held against independent runtimes: random recurrent nodes translated to IR give
onnxruntime's numbers for the ONNX node, and OpenVINO's own IR gives onnxruntime's numbers too."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from rnnconv import io
from rnnconv.commands.to_openvino import onnx_to_ir
from rnnconv.engine.ir_graph import run_ir
from tests.conftest import feeds, openvino_ir, recurrent_cases, recurrent_model, run_onnxruntime


def _to_layout_0(inputs: dict) -> dict:
    """Inputs of a layout-1 node, transposed to feed the same node at layout 0."""
    out = dict(inputs)
    out["X"] = inputs["X"].transpose(1, 0, 2)
    for name in ("initial_h", "initial_c"):
        if name in inputs:
            out[name] = inputs[name].swapaxes(0, 1)
    return out


def _to_layout_1(outputs: dict) -> dict:
    """Outputs of a layout-0 node, transposed to what the same node at layout 1 gives."""
    return {k: v.transpose(2, 0, 1, 3) if k == "Y" else v.swapaxes(0, 1) for k, v in outputs.items()}


def _check_against_onnxruntime(op: str, kw: dict, T: int, N: int, finite=assume) -> None:
    """The IR that to-openvino's translation writes for the node, run in the IR interpreter, gives the numbers
    onnxruntime computes for the ONNX node. onnxruntime refuses layout 1: there it runs the same node at layout 0
    (same seed, so the same weights) on inputs transposed here, and its outputs are transposed back."""
    model = recurrent_model(op, T=T, N=N, **kw)
    inputs = feeds(model, dims={"T": T, "N": N})
    if kw.get("layout"):
        layout_0 = recurrent_model(op, T=T, N=N, **{**kw, "layout": 0})
        want = _to_layout_1(run_onnxruntime(layout_0, _to_layout_0(inputs)))
    else:
        want = run_onnxruntime(model, inputs)
    # Unbounded activations (Affine, Relu, Elu) can grow states until float32 says nothing: no comparison there.
    finite(all(np.isfinite(v).all() and np.abs(v).max(initial=0) < 1e6 for v in want.values()))
    got = run_ir(onnx_to_ir(io.load(model)).graph, inputs)
    assert got.keys() == want.keys()
    for name, value in want.items():
        # onnxruntime computes in float32 (about 1e-6 of the largest magnitude), the interpreter in float64.
        atol = 1e-5 * max(1.0, float(np.abs(value).max(initial=0)))
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=atol, err_msg=name)


# Every op, direction and layout as a plain node (GRU with and without linear_before_reset), with constant weights
# and with weights as graph inputs (the two ways the translation writes W, R, B): drawn every run, not by chance.
PLAIN = [(op, dict(direction=d, layout=layout, lbr=lbr, weights_as_inputs=wi, initial_h=True, seed=5))
         for op in ("LSTM", "GRU", "RNN") for d in ("forward", "reverse", "bidirectional") for layout in (0, 1)
         for lbr in ((0, 1) if op == "GRU" else (0,)) for wi in (False, True)]


@pytest.mark.parametrize("op,kw", PLAIN, ids=lambda v: v if isinstance(v, str) else "-".join(
    f"{k}{int(x) if isinstance(x, bool) else x}" for k, x in v.items() if k != "seed"))
def test_interpreter_agrees_with_onnxruntime_on_plain_nodes(op, kw):
    def finite(condition):
        assert condition

    _check_against_onnxruntime(op, {k: v for k, v in kw.items() if op == "GRU" or k != "lbr"}, 3, 2, finite)


@pytest.mark.parametrize("op,lbr", [("LSTM", 0), ("GRU", 0), ("GRU", 1), ("RNN", 0)])
@pytest.mark.parametrize("H", [4, 40])
def test_ir_written_to_disk_runs_as_onnxruntime_runs_the_model(op, lbr, H, tmp_path):
    """to-openvino's IR as written (.xml and .bin), read back and run in the IR interpreter, gives onnxruntime's
    numbers: constants of equal size (I == H: W and R) keep their own bytes, big ones (H=40: page-aligned in the
    .bin) theirs. Needs no openvino."""
    from rnnconv.commands.to_openvino import to_openvino

    model = recurrent_model(op, direction="bidirectional", lbr=lbr, I=H, H=H, initial_h=True, seed=4)
    to_openvino(model, tmp_path / "m.xml", verify="none")
    inputs = feeds(model)
    want = run_onnxruntime(model, inputs)
    got = run_ir(tmp_path / "m.xml", inputs)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)


# derandomize: the same 60 configurations every run (a failure replays); PLAIN above covers each op, direction
# and layout whatever this draws.
@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(recurrent_cases())
def test_interpreter_agrees_with_onnxruntime(case):
    """Random nodes: every optional input, clip, activations, peepholes, input_forget, dynamic dims."""
    _check_against_onnxruntime(*case)


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
