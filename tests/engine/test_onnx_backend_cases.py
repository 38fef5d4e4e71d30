"""The engine reproduces the GRU, LSTM and RNN cases of the ONNX backend node tests.

The cases are built at test time (recent onnx wheels ship the generators, not the data).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import helper, numpy_helper

from rnnconv.engine.onnx_graph import KERNELS
from tests.conftest import INPUTS

EXPECTED_CASES = 18
PREFIXES = ("test_gru_", "test_lstm_", "test_rnn_", "test_simple_rnn_")


def _cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # other ops' generators warn about overflow
        cases = collect_testcases()
    return [c for c in cases if c.name.startswith(PREFIXES)]


CASES = _cases()


def _decoded(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


def test_found_every_case():
    assert len(CASES) == EXPECTED_CASES, [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case(case):
    (node,) = case.model.graph.node
    attributes = {a.name: _decoded(helper.get_attribute_value(a)) for a in node.attribute}
    graph_inputs = [i.name for i in case.model.graph.input]
    assert len(case.data_sets) >= 1
    for inputs, outputs in case.data_sets:
        feeds = dict(zip(graph_inputs, (t if isinstance(t, np.ndarray) else numpy_helper.to_array(t) for t in inputs)))
        args = {INPUTS[k]: feeds[name] for k, name in enumerate(node.input) if name}
        got = KERNELS[node.op_type](**args, **attributes)
        produced = [(name, value) for name, value in zip(node.output, got) if name]
        assert len(produced) == len(outputs)
        for (name, value), expected in zip(produced, outputs):
            assert value.dtype == expected.dtype
            np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5, err_msg=f"{case.name}: {name}")
