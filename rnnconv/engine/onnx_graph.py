"""Whole ONNX models in rnnconv's engine: its recurrent kernels, onnx's reference ops for everything else."""

from __future__ import annotations

import functools
from typing import Mapping

import numpy as np
import onnx_ir as ir

from rnnconv.engine import reference
from rnnconv.engine.op_gru import gru
from rnnconv.engine.op_lstm import lstm
from rnnconv.engine.op_rnn import rnn
from rnnconv.io.mapping import release_external

KERNELS = {"LSTM": lstm, "GRU": gru, "RNN": rnn}
PRECISIONS = {"float64": np.float64, "float32": np.float32}
# Attributes that are not kernel arguments: output_sequence (v1..6) only says whether Y is requested.
_NOT_KERNEL_ARGS = ("output_sequence",)


def _kernel(op_type: str, dtype, attrs: dict, *inputs):
    kwargs = {k: v for k, v in attrs.items() if k not in _NOT_KERNEL_ARGS}
    return KERNELS[op_type](*inputs, dtype=dtype, **kwargs)


def session(model: ir.Model, precision: str = "float64"):
    dtype = PRECISIONS[precision]
    return reference.reference_session(model, {op: functools.partial(_kernel, op, dtype) for op in KERNELS})


def run_onnx(model: ir.Model, feeds: Mapping[str, np.ndarray], precision: str = "float64") -> dict[str, np.ndarray]:
    """Run the whole model; returns every graph output by name. Memory-mapped weights it read leave the resident
    set afterwards."""
    try:
        sess = session(model, precision)
        names = [o.name for o in model.graph.outputs]
        return dict(zip(names, sess.run(None, dict(feeds))))
    finally:
        release_external(model)
