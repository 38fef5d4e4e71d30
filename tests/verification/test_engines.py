"""The engines verification runs (verification/engines.py over engine/): values cross each runtime's API intact."""

from __future__ import annotations

import pytest

import rnnconv
from rnnconv.verification import tolerance as vtol
from tests.conftest import FIXTURES


def test_openvino_bfloat16_inputs_and_outputs_keep_their_bits():
    """OpenVINO's Python API types bf16 tensors as float16 arrays: values must be moved as bits."""
    pytest.importorskip("openvino")
    path = str(FIXTURES / "gru22_bfloat16.onnx")
    report = rnnconv.verify(path, path, candidate_engine="openvino")
    assert report.ok, report.lines()
    assert report.checks[0].outputs[0].tolerance.startswith("bfloat16 default")
