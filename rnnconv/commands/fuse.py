"""`fuse`: recurrences written out as primitive ops (cells applied in a Python loop, dynamo's unrolled nn.RNN)
come back as ONNX RNN / GRU / LSTM nodes, checked like every rewrite: the matched nodes against the new node and
its glue, then the whole model (rnnconv.passes.fuse_cells says what is matched and what is left alone)."""

from __future__ import annotations

from typing import Optional

from rnnconv import conversion
from rnnconv.errors import Unsupported
from rnnconv.passes.fuse_cells import FusePass, survey
from rnnconv.verification.checks import CheckOptions

# Measured at T = 100, batch 32, 256 -> 256, one thread (benchmarks/fuse.py): onnxruntime's RNN kernel runs the
# recurrence slower than the unrolled MatMul chain it replaces; OpenVINO runs and compiles the RNN node faster.
ORT_RNN_NOTE = ("onnxruntime runs a fused RNN node slower than the unrolled steps (its RNN kernel: about 2x at "
                "T=100, batch 32, hidden 256), though it loads the model much faster; OpenVINO runs and compiles it "
                "faster")


def fuse(source, output=None, *, verify: str = "full", force: bool = False, external_data: Optional[bool] = None,
         progress=None, **check) -> conversion.Result:
    """Replace each chain of unrolled recurrent steps of `source` by one ONNX RNN/GRU/LSTM node (and the glue that
    keeps the interface); Unsupported when there is none to fuse, with the near-misses and why.

    `check`: how rewrites are verified (seed, runs, dims, ranges, inputs, atol, rtol: see CheckOptions)."""
    model = conversion.load(source)
    fusions, misses = survey(model)
    if not fusions:
        why = "; ".join(str(m) for m in misses)
        raise Unsupported("nothing to fuse: " + (why if why else "the model holds no unrolled RNN, GRU or LSTM step "
                                                 "that fuse recognizes (cells applied step by step, dynamo's "
                                                 "unrolled nn.RNN)"))
    result = conversion.convert(source, output, command="fuse", passes=[FusePass()], verify=verify,
                                options=CheckOptions.of(**check), force=force, external_data=external_data,
                                progress=progress, loaded=model)
    if any(f.op == "RNN" for f in fusions):
        result.report.notes.append(ORT_RNN_NOTE)
    return result
