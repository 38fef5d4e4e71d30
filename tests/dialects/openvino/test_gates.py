"""Gate order and bias folding between ONNX layers and OpenVINO Sequence tensors (dialects/openvino/gates.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rnnconv.dialects.onnx_recurrent import find
from rnnconv.dialects.openvino import gates
from rnnconv.io import load
from tests.conftest import recurrent_model


@pytest.mark.parametrize("kind,lbr", [("LSTM", 0), ("GRU", 0), ("GRU", 1), ("RNN", 0)])
def test_gates_round_trip_for_the_reverse_direction(kind, lbr):
    """OpenVINO tensors back to a Layer (issue 6 uses this): W/R exact, biases exact in sum (Rb folded into Wb)."""
    (rn,) = find(load(recurrent_model(kind, direction="bidirectional", lbr=lbr)))
    t = gates.sequence_tensors(rn.layer)
    back = gates.layer_from_sequence(kind, gates.attributes(rn.layer), t["W"], t["R"], t["B"])
    for a, b in zip(rn.layer.cells, back.cells):
        for g in a.W:
            np.testing.assert_array_equal(a.W[g], b.W[g])
            np.testing.assert_array_equal(a.R[g], b.R[g])
            np.testing.assert_allclose(a.Wb[g] + a.Rb[g], b.Wb[g] + b.Rb[g], rtol=1e-6, atol=1e-7)
        if kind == "GRU" and lbr:
            np.testing.assert_array_equal(a.Rb["h"], b.Rb["h"])  # kept apart: it sits under r
