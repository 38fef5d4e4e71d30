"""rnnconv's engine on every op, version, direction and layout as a plain node (all optional inputs, GRU with and
without linear_before_reset), against onnxruntime (tests/oracle.py re-expresses layout 1 and versions below 7
for it): drawn every run, beside the random configurations of test_kernels_vs_onnxruntime.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import ALL_OPTIONAL, feeds, recurrent_model, reference, run_engine

VERSIONS = {"GRU": (1, 3, 7, 14, 22), "LSTM": (1, 7, 14, 22), "RNN": (1, 7, 14, 22)}
CASES = [(op, v, d, layout, lbr) for op, versions in VERSIONS.items() for v in versions
         for d in ("forward", "reverse", "bidirectional") for layout in ((0, 1) if v >= 14 else (0,))
         for lbr in ((0, 1) if op == "GRU" and v >= 3 else (0,))]


@pytest.mark.parametrize("op,version,direction,layout,lbr", CASES,
                         ids=[f"{c[0]}{c[1]}-{c[2][:3]}-L{c[3]}-lbr{c[4]}" for c in CASES])
def test_engine_agrees_with_onnxruntime(op, version, direction, layout, lbr):
    model = recurrent_model(op, opset=version, direction=direction, layout=layout, lbr=lbr, T=4, N=3, seed=11,
                            **ALL_OPTIONAL)
    inputs = feeds(model)
    want = reference(model, inputs)
    for precision in ("float64", "float32"):
        got = run_engine(model, inputs, precision)
        assert got.keys() == want.keys()
        for name, value in want.items():
            # onnxruntime computes in float32
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=f"{name} ({precision})")
