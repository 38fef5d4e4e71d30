"""`downgrade`: move a model, recurrent nodes included, to an older opset, verified."""

from __future__ import annotations

from typing import Optional

from rnnconv import conversion
from rnnconv.errors import UsageError
from rnnconv.passes.opset import OpsetPass
from rnnconv.verification.options import CheckOptions


def translator(opset: int, external_data: Optional[bool] = None) -> conversion.Passes:
    """OpsetPass(opset), refused when the model is below `opset`."""
    conversion.check_opset(opset)

    def plan(model, report) -> list:
        current = conversion.source_opset(model)
        if opset > current:
            raise UsageError(f"the model is at opset {current}, below {opset}: that is an upgrade")
        return [OpsetPass(opset)]

    return conversion.Passes("downgrade", plan, external_data=external_data)


def downgrade(source, output=None, *, opset: int, verify: str = "full", force: bool = False,
              external_data: Optional[bool] = None, progress=None, options: Optional[CheckOptions] = None,
              **check) -> conversion.Result:
    """Move `source` to the older `opset`. `options` (or its keywords `check`): how rewrites are verified (see
    CheckOptions)."""
    return conversion.run(source, translator(opset, external_data), CheckOptions.given(options, check),
                          output=output, verify=verify, force=force, progress=progress)
