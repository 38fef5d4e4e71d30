"""The test oracle's re-expressions (tests/oracle.py) hold against onnxruntime on models it runs as they are and
against the ONNX backend test data, and the oracle never falls back to anything when onnxruntime fails."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.conftest import assert_close, feeds, recurrent_model
from tests.oracle import CannotReexpress, needs_reexpression, onnxruntime_form, reference, run_onnxruntime


def _backend_batchwise():
    from tests.engine.test_onnx_backend_cases import CASES

    return [c for c in CASES if "batchwise" in c.name]


@pytest.mark.parametrize("case", _backend_batchwise(), ids=lambda c: c.name)
def test_layout_1_matches_the_onnx_backend_data(case):
    assert needs_reexpression(case.model)
    for inputs, outputs in case.data_sets:
        names = [i for i in case.model.graph.input]
        got = reference(case.model, {vi.name: v for vi, v in zip(names, inputs)})
        for vi, want in zip(case.model.graph.output, outputs):
            np.testing.assert_allclose(got[vi.name], want, rtol=1e-5, atol=1e-6, err_msg=vi.name)


def _to_layout_0(inputs: dict) -> dict:
    out = dict(inputs)
    out["X"] = inputs["X"].transpose(1, 0, 2)
    for name in ("initial_h", "initial_c"):
        if name in inputs:
            out[name] = inputs[name].swapaxes(0, 1)
    return out


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_layout_1_is_the_layout_0_node_on_transposed_tensors(op, direction):
    kw = dict(direction=direction, sequence_lens=True, initial_h=True, initial_c=True, peepholes=True, T=4, N=3,
              lbr=int(op == "GRU"))
    layout_1 = recurrent_model(op, layout=1, **kw)
    layout_0 = recurrent_model(op, layout=0, **kw)
    inputs = feeds(layout_1)
    want = run_onnxruntime(layout_0, _to_layout_0(inputs))
    want = {k: v.transpose(2, 0, 1, 3) if k == "Y" else v.swapaxes(0, 1) for k, v in want.items()}
    assert_close(want, reference(layout_1, inputs), tol=1e-6)


@pytest.mark.parametrize("op,opset,lbr", [("LSTM", 1, 0), ("RNN", 1, 0), ("GRU", 1, 0), ("GRU", 3, 1)])
def test_below_7_is_version_7(op, opset, lbr):
    kw = dict(direction="bidirectional", sequence_lens=True, initial_h=True, lbr=lbr)
    old, new = recurrent_model(op, opset=opset, **kw), recurrent_model(op, opset=7, **kw)
    inputs = feeds(old)
    assert_close(run_onnxruntime(new, inputs), reference(old, inputs), tol=0)


def test_below_7_y_without_output_sequence_is_refused():
    model = recurrent_model("GRU", opset=3, attrs={"output_sequence": 0})
    with pytest.raises(CannotReexpress, match="output_sequence"):
        onnxruntime_form(model)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_float64_runs_in_float32(op):
    m64 = recurrent_model(op, dtype=np.float64, direction="bidirectional", initial_h=True, layout=1)
    m32 = recurrent_model(op, dtype=np.float32, direction="bidirectional", initial_h=True, layout=1)
    inputs = feeds(m64)
    got = reference(m64, inputs)
    assert all(v.dtype == np.float64 for v in got.values())
    assert_close(reference(m32, {k: v.astype(np.float32) for k, v in inputs.items()}), got, tol=1e-6)


def test_onnxruntime_errors_are_not_swallowed():
    model = recurrent_model("GRU")
    model.graph.node.append(helper.make_node("NoSuchOp", ["Y_h"], ["Z"]))
    model.graph.output.append(helper.make_tensor_value_info("Z", onnx.TensorProto.FLOAT, None))
    with pytest.raises(Exception, match="NoSuchOp"):
        reference(model, feeds(model))
