"""`downgrade`: move a model, recurrent nodes included, to an older opset, verified."""

from __future__ import annotations

from typing import Optional

from rnnconv import conversion
from rnnconv.errors import UsageError
from rnnconv.passes.opset import OpsetPass
from rnnconv.verification.options import CheckOptions, check_keywords


def translator(opset: int, external_data: Optional[bool] = None) -> conversion.Passes:
    """OpsetPass(opset), refused when the model is below `opset`."""
    conversion.check_opset(opset)

    def plan(model, report) -> list:
        current = conversion.source_opset(model)
        if opset > current:
            raise UsageError(f"the model is at opset {current}, below {opset}: that is an upgrade")
        return [OpsetPass(opset)]

    return conversion.Passes("downgrade", plan, external_data=external_data)


@check_keywords
def downgrade(source, output=None, *, opset: int, verify: str = "full", force: bool = False,
              external_data: Optional[bool] = None, progress=None, options: Optional[CheckOptions] = None
              ) -> conversion.Result:
    """Move `source` to the older `opset`. `options` (or the check options by name: seed, runs, dims...): how
    rewrites are verified (see CheckOptions)."""
    return conversion.run_conversion(source, translator(opset, external_data), options, output=output,
                                     verify=verify, force=force, progress=progress)
