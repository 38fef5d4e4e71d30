"""`upgrade`: move a model, recurrent nodes included, to a newer opset, verified."""

from __future__ import annotations

import json
import re
from typing import Optional

import onnx_ir as ir

from rnnconv import conversion
from rnnconv.engine.onnxruntime_runtime import newest_common_opset
from rnnconv.errors import UsageError, VerificationFailed
from rnnconv.passes.opset import OpsetPass
from rnnconv.verification.checks import CheckOptions

# onnxruntime declares an opset before it has a kernel for every op version in it (1.32 at opset 28 has no
# DequantizeLinear-28): how its refusal names the op version it lacks.
_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\)")


def upgrade(source, output=None, *, opset: Optional[int] = None, verify: str = "full", force: bool = False,
            external_data: Optional[bool] = None, progress=None, **check) -> conversion.Result:
    """Move `source` to `opset` (default: the newest opset both onnx and onnxruntime support, and below the
    first op version of the model onnxruntime has no kernel for, found by the whole-model check); never down.

    `check`: how rewrites are verified (seed, runs, dims, ranges, inputs, atol, rtol: see CheckOptions)."""
    target = newest_common_opset() if opset is None else opset
    conversion.check_opset(target)
    model = conversion.load(source)
    current = conversion.source_opset(model)
    if target < current:
        raise UsageError(f"the model is at opset {current}, above {target}: that is a downgrade")
    notes = []
    while True:
        try:
            result = conversion.convert(source, output, command="upgrade", passes=[OpsetPass(target)],
                                        verify=verify, options=CheckOptions.of(**check), force=force,
                                        external_data=external_data, progress=progress, loaded=model)
        except VerificationFailed as err:
            missing = None if opset is not None or isinstance(source, ir.Model) else _no_kernel(err)
            if missing is None or missing[1] - 1 < current:
                raise
            op, version = missing
            notes.append(f"not opset {target}: onnxruntime has no kernel for {op}-{version}, so the model goes to "
                         f"opset {version - 1}")
            target, model = version - 1, conversion.load(source)
            continue
        result.report.notes[:0] = notes
        return result


def _no_kernel(err: VerificationFailed) -> Optional[tuple[str, int]]:
    """The op version onnxruntime refused for want of a kernel in the converted model, if that failed the check."""
    if err.report is None:
        return None
    found = _NO_KERNEL.search(json.dumps([c.as_dict() for c in err.report.checks]))
    return (found.group(1), int(found.group(2))) if found else None
