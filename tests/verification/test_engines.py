"""The engines verification runs (verification/engines.py over engine/): values cross each runtime's API intact."""

from __future__ import annotations

import pytest

import rnnconv
from tests.conftest import FIXTURES, assert_close, fixture_feeds, openvino_outputs, reference

BF16_TOL = 2e-2  # bfloat16 keeps 8 bits of mantissa: a few units of its last place after a few steps


def test_openvino_bfloat16_inputs_and_outputs_keep_their_bits():
    """OpenVINO's Python API types bf16 tensors as float16 arrays: values must be moved as bits."""
    pytest.importorskip("openvino")
    path = FIXTURES / "gru22_bfloat16.onnx"
    report = rnnconv.verify(str(path), str(path), candidate_engine="openvino", atol=BF16_TOL, rtol=BF16_TOL)
    assert report.ok, report.lines()
    assert [o.atol for o in report.checks[0].outputs] == [BF16_TOL] * len(report.checks[0].outputs)
    # and against onnxruntime (the bfloat16 node in float32, tests/oracle.py), through the same runner
    feeds = fixture_feeds(path)
    got = openvino_outputs(path, feeds)
    assert all(v.dtype.name == "bfloat16" for v in got.values()), {k: v.dtype for k, v in got.items()}
    assert_close(reference(path, feeds), got, tol=BF16_TOL)
