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

# Every onnx since 1.16 ships these; newer ones add the bidirectional and reverse cases (18 in all).
BASE_CASES = {"test_gru_batchwise", "test_gru_defaults", "test_gru_seq_length", "test_gru_with_initial_bias",
              "test_lstm_batchwise", "test_lstm_defaults", "test_lstm_with_initial_bias", "test_lstm_with_peepholes",
              "test_rnn_seq_length", "test_simple_rnn_batchwise", "test_simple_rnn_defaults",
              "test_simple_rnn_with_initial_bias"}
PREFIXES = ("test_gru_", "test_lstm_", "test_rnn_", "test_simple_rnn_")


def _cases():
    """Importing a module of onnx.backend.test.case.node runs its generators, which record their cases; only the
    three recurrent ops' modules are imported (collect_testcases imports every op's: seconds of CPU in every test
    process that collects this file)."""
    import importlib

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ("gru", "lstm", "rnn"):
            importlib.import_module(f"{node.__name__}.{op}")
    return [c for c in node._NodeTestCases if c.name.startswith(PREFIXES)]


CASES = _cases()


def _decoded(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


def test_found_every_case():
    names = {c.name for c in CASES}
    assert BASE_CASES <= names and len(names) in (12, 18), sorted(names)


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
