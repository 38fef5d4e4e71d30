"""`upgrade`: move a model, recurrent nodes included, to a newer opset, verified."""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from rnnconv import conversion, schemas
from rnnconv.engine.onnxruntime_runtime import newest_common_opset
from rnnconv.errors import ContradictedOutputs, UsageError, VerificationFailed
from rnnconv.passes.opset import OpsetPass
from rnnconv.verification.options import CheckOptions


def translator(target: int, notes: list = (), external_data: Optional[bool] = None, correct: bool = True
               ) -> conversion.Passes:
    """OpsetPass(target), refused when the model is above `target`; `notes` come first in the report; `correct`:
    an output shape the model declares and the target's shape inference refutes is corrected (and said), else
    ContradictedOutputs."""
    def plan(model: ir.Model, report) -> list:
        current = conversion.source_opset(model)
        if target < current:
            raise UsageError(f"the model is at opset {current}, above {target}: that is a downgrade")
        report.notes[:0] = notes
        return [OpsetPass(target)]

    return conversion.Passes("upgrade", plan, external_data=external_data, correct=correct)


def upgrade(source, output=None, *, opset: Optional[int] = None, verify: str = "full", force: bool = False,
            external_data: Optional[bool] = None, progress=None, options: Optional[CheckOptions] = None,
            **check) -> conversion.Result:
    """Move `source` to `opset` (default: the newest opset both onnx and onnxruntime support, below the first op
    version of the model onnxruntime has no kernel for, found by the whole-model check, and below the first op
    version whose shape inference refutes an output shape the model declares); never down.

    `options` (or its keywords `check`: seed, runs, dims, ranges, inputs, atol, rtol): how rewrites are verified
    (see CheckOptions)."""
    target = newest_common_opset() if opset is None else opset
    conversion.check_opset(target)
    options = CheckOptions.given(options, check)
    notes: list[str] = []
    refuted: list = []  # the first opset refused for a declared output shape, and the note saying so
    correct = opset is not None
    while True:
        try:
            # By default, below the op version that refutes a declared output shape; an opset asked for: there,
            # the declaration corrected.
            return conversion.run(source, translator(target, notes, external_data, correct), options,
                                  output=output,
                                  verify=verify, force=force, progress=progress)
        except ContradictedOutputs as err:
            # An older schema let the model declare a shape its nodes do not compute: below the version that checks.
            since = schemas.schema_since_version(err.op, target) if err.op and opset is None else None
            if since is None or since - 1 <= conversion.source_opset(source):
                if correct:
                    raise
                correct = True  # no opset below it is newer than the source's: there, the declaration corrected
                continue
            first = refuted[0] if refuted else target
            note = (f"not opset {first}: {err.op}-{since} and later refute an output shape the model declares "
                    f"(onnx's shape inference), so the model goes to opset {since - 1}")
            notes[:] = [n for n in notes if n not in refuted[1:]] + [note]
            refuted[:] = [first, note]
            target = since - 1
        except VerificationFailed as err:
            # onnxruntime declares an opset before it has a kernel for every op version in it (1.32 at opset 28
            # has no DequantizeLinear-28): one opset lower, below the op version it lacks.
            missing = None if opset is not None or isinstance(source, ir.Model) or err.report is None else next(
                (c.no_kernel for c in err.report.checks if c.no_kernel is not None), None)
            if missing is None or missing[1] - 1 < conversion.source_opset(source):
                raise
            op, version = missing
            notes.append(f"not opset {target}: onnxruntime has no kernel for {op}-{version}, so the model goes to "
                         f"opset {version - 1}")
            target = version - 1
