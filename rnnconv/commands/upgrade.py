"""`upgrade`: move a model, recurrent nodes included, to a newer opset, verified."""

from __future__ import annotations

from typing import Optional

from rnnconv import conversion
from rnnconv.engine.onnxruntime_runtime import newest_common_opset
from rnnconv.errors import UsageError
from rnnconv.passes.opset import OpsetPass
from rnnconv.verification.checks import CheckOptions


def upgrade(source, output=None, *, opset: Optional[int] = None, verify: str = "full", force: bool = False,
            external_data: Optional[bool] = None, progress=None, **check) -> conversion.Result:
    """Move `source` to `opset` (default: the newest opset both onnx and onnxruntime support); never down.

    `check`: how rewrites are verified (seed, runs, dims, ranges, inputs, atol, rtol: see CheckOptions)."""
    target = newest_common_opset() if opset is None else opset
    conversion.check_opset(target)
    model = conversion.load(source)
    current = conversion.source_opset(model)
    if target < current:
        raise UsageError(f"the model is at opset {current}, above {target}: that is a downgrade")
    return conversion.convert(source, output, command="upgrade", passes=[OpsetPass(target)], verify=verify,
                              options=CheckOptions.of(**check), force=force, external_data=external_data,
                              progress=progress, loaded=model)
