"""`downgrade`: move a model, recurrent nodes included, to an older opset, verified."""

from __future__ import annotations

from typing import Optional

from rnnconv import conversion
from rnnconv.errors import UsageError
from rnnconv.passes.opset import OpsetPass
from rnnconv.verification.checks import CheckOptions


def downgrade(source, output=None, *, opset: int, verify: str = "full", force: bool = False,
              external_data: Optional[bool] = None, progress=None, **check) -> conversion.Result:
    """Move `source` to the older `opset`. `check`: how rewrites are verified (see CheckOptions)."""
    conversion.check_opset(opset)
    model = conversion.load(source)
    current = conversion.source_opset(model)
    if opset > current:
        raise UsageError(f"the model is at opset {current}, below {opset}: that is an upgrade")
    return conversion.convert(source, output, command="downgrade", passes=[OpsetPass(opset)], verify=verify,
                              options=CheckOptions.of(**check), force=force, external_data=external_data,
                              progress=progress, loaded=model)
