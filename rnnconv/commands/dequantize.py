"""`dequantize`: com.microsoft DynamicQuantizeLSTM nodes become ONNX LSTM nodes with float32 weights, for runtimes
without onnxruntime's quantized LSTM (OpenVINO's own import computes it otherwise, onnx's reference not at all).

An approximation by nature: onnxruntime's kernel also quantizes X and each step's hidden state at run time, the
float LSTM does not. Every node and the whole model are checked as in every converting command, against the
"dequantized" tolerance (verification/tolerance.py) unless --atol/--rtol say otherwise; the report's onnxruntime
row is the measured error against onnxruntime's quantized run.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv import conversion
from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.engine.op_dynamic_quantize_lstm import mlas_saturates
from rnnconv.errors import Unsupported
from rnnconv.passes.dequantize import DequantizePass
from rnnconv.verification.options import CheckOptions
from rnnconv.verification.tolerance import DEQUANTIZED_ATOL, DEQUANTIZED_RTOL

SATURATION = ("{} hold(s) full-range 8-bit weights, and onnxruntime's integer GEMM on this CPU (x86 with AVX2, "
              "without VNNI) saturates pairs of products to int16, which alone can move outputs by 0.1 or more "
              "(weights quantized with reduce_range=True avoid it)")

NOTE = (f"{onnx_quantized.OP} -> LSTM is an approximation: onnxruntime's kernel also quantizes X and each step's "
        f"hidden state to uint8; the checks hold the float LSTM to atol {DEQUANTIZED_ATOL:g} + rtol "
        f"{DEQUANTIZED_RTOL:g} unless a tolerance is given")


def plan(model, report) -> list:
    """DequantizePass; Unsupported when the model holds no DynamicQuantizeLSTM. Why the checks may fail is said
    first (in a failure's report most of all)."""
    if not onnx_quantized.holds(model):
        floats = ", ".join(f"{rn.name} ({rn.op})" for rn in onnx_recurrent.find(model))
        raise Unsupported(f"the model holds no {onnx_quantized.DOMAIN} {onnx_quantized.OP} node: nothing to "
                          f"dequantize; " + (f"its recurrent nodes {floats} compute in float already: use the model "
                                             f"as it is (`rnnconv check` lists what each runtime does with them)"
                                             if floats else "it holds no recurrent node (dequantize replaces "
                                             f"{onnx_quantized.OP} only; other quantized ops stay as they are)"))
    saturating = [q.name for q in onnx_quantized.find(model) if _full_range(q)] if mlas_saturates() else []
    report.notes[:0] = [NOTE] + ([SATURATION.format(", ".join(saturating))] if saturating else [])
    return [DequantizePass()]


def dequantize(source, output=None, *, verify: str = "full", force: bool = False,
               external_data: Optional[bool] = None, progress=None, options: Optional[CheckOptions] = None,
               **check) -> conversion.Result:
    """Replace every DynamicQuantizeLSTM of `source` by a float32 ONNX LSTM; Unsupported when there is none.

    `options` (or its keywords `check`: seed, runs, dims, ranges, inputs, atol, rtol): how rewrites are verified
    (see CheckOptions); the default tolerance is the "dequantized" one."""
    translator = conversion.Passes("dequantize", plan, external_data=external_data,
                                   tolerances={"dequantized": True})
    return conversion.run(source, translator, CheckOptions.given(options, check), output=output, verify=verify,
                          force=force, progress=progress)


def _full_range(q: onnx_quantized.QuantizedLSTM) -> bool:
    """Whether the weights use more than 7 bits (quantize_dynamic without reduce_range)."""
    arrays = [onnx_quantized.constant_array(q.inputs[k]) for k in ("W", "W_zero_point", "R", "R_zero_point")]
    if any(a is None for a in arrays):
        return False
    W, zw, R, zr = (np.asarray(a, np.int32) for a in arrays)
    return max(np.abs(W - zw.reshape(-1)[0]).max(initial=0), np.abs(R - zr.reshape(-1)[0]).max(initial=0)) > 64
