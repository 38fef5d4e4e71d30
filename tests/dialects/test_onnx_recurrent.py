"""The ONNX recurrent dialect (dialects/onnx_recurrent.py): weights are scanned for NaN/Inf once per tensor, and
the chunked scan counts exactly."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

from rnnconv import io
from rnnconv.dialects import onnx_recurrent
from tests.conftest import lstm_file


def test_weights_are_scanned_for_nan_once_per_tensor(monkeypatch, tmp_path):
    model = io.load(lstm_file(tmp_path / "m.onnx"))
    scans = []
    real = onnx_recurrent._count_nonfinite
    monkeypatch.setattr(onnx_recurrent, "_count_nonfinite",
                        lambda a, *k: (a is not None and scans.append(a.shape)) or real(a, *k))
    onnx_recurrent.find(model)
    first = len(scans)
    onnx_recurrent.find(model)
    assert first == 3 and len(scans) == first  # W, R, B; the second reading scans nothing
    w = model.graph.initializers["W"]
    bad = w.const_value.numpy().copy()
    bad[0, 0, 0] = np.nan
    w.const_value = ir.tensor(bad, name="W")  # a new tensor in the value is scanned anew
    with pytest.warns(Warning, match="1 non-finite"):
        onnx_recurrent.find(model)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nonfinite_count_is_exact(dtype):
    from rnnconv.dialects.onnx_recurrent import _count_nonfinite

    a = np.random.default_rng(0).uniform(-1, 1, 5_000_000).astype(dtype)
    assert _count_nonfinite(a, chunk=1 << 20) == 0
    a[[3, 1_500_000, 4_999_999]] = [np.nan, np.inf, -np.inf]
    assert _count_nonfinite(a, chunk=1 << 20) == 3
    big = np.full(1 << 20, np.finfo(dtype).max / 2, dtype)  # x.x overflows, yet every x is finite
    assert _count_nonfinite(big) == 0
