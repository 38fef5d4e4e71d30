"""Whole-graph execution of ONNX models: our recurrent kernels, onnx's reference ops for everything else."""

from __future__ import annotations

import functools
from typing import Mapping

import numpy as np
import onnx_ir as ir

from rnnconv import io

PRECISIONS = {"float64": np.float64, "float32": np.float32}
# Attributes that are not kernel arguments: output_sequence (v1..6) only says whether Y is requested.
_NOT_KERNEL_ARGS = ("output_sequence",)


def _kernel(op_type: str, dtype, attrs: dict, *inputs):
    from rnnconv.engine import KERNELS

    kwargs = {k: v for k, v in attrs.items() if k not in _NOT_KERNEL_ARGS}
    return KERNELS[op_type](*inputs, dtype=dtype, **kwargs)


def session(model: ir.Model, precision: str = "float64"):
    dtype = PRECISIONS[precision]
    kernels = {op: functools.partial(_kernel, op, dtype) for op in ("GRU", "LSTM", "RNN")}
    return io.reference_session(model, kernels)


def run_onnx(model: ir.Model, feeds: Mapping[str, np.ndarray], precision: str = "float64") -> dict[str, np.ndarray]:
    """Run the whole model; returns every graph output by name."""
    sess = session(model, precision)
    names = [o.name for o in model.graph.outputs]
    results = sess.run(None, dict(feeds))
    return dict(zip(names, results))
