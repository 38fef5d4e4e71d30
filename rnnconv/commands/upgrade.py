"""`upgrade`: move a model, recurrent nodes included, to a newer opset, verified.

Without --opset the target is the newest opset both onnx and onnxruntime support, and the conversion steps down
(each step a value: `Attempt`) while onnxruntime cannot take the model there: below the op version it has no
kernel for (found by the whole-model check), below the first op version whose shape inference refutes an output
shape the model declares (at the target, the declaration corrected, where no opset below is newer than the
source's), and below the newest op version of the model when onnxruntime, loading the written file
with its default session options, refuses it (its graph optimizations can refuse a model its basic ones run).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import onnx_ir as ir

from rnnconv import conversion, schemas
from rnnconv.dialects import onnx_recurrent
from rnnconv.engine.onnxruntime_runtime import newest_common_opset
from rnnconv.errors import ContradictedOutputs, UsageError, VerificationFailed
from rnnconv.passes.opset import OpsetPass
from rnnconv.verification.options import CheckOptions, check_keywords


def translator(target: int, notes: tuple = (), external_data: Optional[bool] = None, correct: bool = True
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


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One try of the default upgrade: its target opset, and why it is not a higher one (`notes`, first in the
    report). `refuted`, `refused`: the first opset refused for a declared output shape, or by onnxruntime's
    default session options, and the note saying so (one note for the opsets refused alike)."""

    target: int
    notes: tuple[str, ...] = ()
    refuted: Optional[tuple[int, str]] = None
    refused: Optional[tuple[int, str]] = None
    correct: bool = False  # a declared output shape the target refutes is corrected there (else: an opset below)

    def lower(self, target: int, note: str) -> "Attempt":
        return dataclasses.replace(self, target=target, notes=(*self.notes, note))


@check_keywords
def upgrade(source, output=None, *, opset: Optional[int] = None, verify: str = "full", force: bool = False,
            external_data: Optional[bool] = None, progress=None, options: Optional[CheckOptions] = None
            ) -> conversion.Result:
    """Move `source` to `opset` (default: the newest opset both onnx and onnxruntime support, stepping down as
    the module says); never down.

    `options` (or the check options by name: seed, runs, dims...): how rewrites are verified (see CheckOptions)."""
    # By default, below the op version that refutes a declared output shape; an opset asked for: there, the
    # declaration corrected.
    attempt = Attempt(newest_common_opset() if opset is None else conversion.opset_number(opset),
                      correct=opset is not None)
    conversion.check_opset(attempt.target)
    while True:
        try:
            return conversion.run_conversion(
                source, translator(attempt.target, attempt.notes, external_data, attempt.correct), options,
                output=output, verify=verify, force=force, progress=progress)
        except ContradictedOutputs as err:
            if attempt.correct:
                raise
            # No opset below the refuting version is newer than the source's: there, the declaration corrected.
            attempt = _below_refuted(attempt, err, source) or dataclasses.replace(attempt, correct=True)
        except VerificationFailed as err:
            attempt = _below_refusal(attempt, err, source) if opset is None else None
            if attempt is None:
                raise


def _below_refuted(attempt: Attempt, err: ContradictedOutputs, source) -> Optional[Attempt]:
    """An older schema let the model declare a shape its nodes do not compute: below the version that checks."""
    since = schemas.schema_since_version(err.op, attempt.target) if err.op else None
    if since is None or since - 1 <= conversion.source_opset(source):
        return None
    first = attempt.refuted[0] if attempt.refuted else attempt.target
    note = (f"not opset {first}: {err.op}-{since} and later refute an output shape the model declares "
            f"(onnx's shape inference), so the model goes to opset {since - 1}")
    kept = tuple(n for n in attempt.notes if attempt.refuted is None or n != attempt.refuted[1])
    return dataclasses.replace(attempt, target=since - 1, notes=(*kept, note), refuted=(first, note))


def _below_refusal(attempt: Attempt, err: VerificationFailed, source) -> Optional[Attempt]:
    """Where onnxruntime cannot take the model at the target: onnxruntime declares an opset before it has a kernel
    for every op version in it (1.32 at opset 28 has no DequantizeLinear-28): below the op version it lacks. Where
    its default session options refuse the written model (its graph optimizations, 1.32, rewrite DequantizeLinear
    -> Transpose -> DynamicQuantizeLinear at opset 21 and later into a QuantizeLinear that fails its own type
    check): below the newest op version of the model, the next opset where the model differs."""
    checks = err.report.checks if err.report is not None else []
    missing = next((c.no_kernel for c in checks if c.no_kernel is not None), None)
    refusal = next((c.refusal for c in checks if c.refusal is not None), None)
    lowest = conversion.source_opset(source)
    if missing is not None:
        op, version = missing
        target = version - 1
        note = (f"not opset {attempt.target}: onnxruntime has no kernel for {op}-{version}, so the model goes to "
                f"opset {target}")
    elif refusal is not None:
        target = _newest_version(conversion.load(source), attempt.target) - 1
        first = attempt.refused[0] if attempt.refused else attempt.target
        which = f"opset {first}" if first == attempt.target else f"opsets {attempt.target}-{first}"
        note = (f"not {which}: onnxruntime refuses the written model at its default session options ({refusal}), "
                f"so the model goes to opset {target}")
        kept = tuple(n for n in attempt.notes if attempt.refused is None or n != attempt.refused[1])
        lowered = dataclasses.replace(attempt, target=target, notes=(*kept, note), refused=(first, note))
        return lowered if target >= lowest else None
    else:
        return None
    return attempt.lower(target, note) if target >= lowest else None


def _newest_version(model: ir.Model, opset: int) -> int:
    """The newest version, at `opset`, of the default-domain ops `model` holds: below it the model is the same
    model up to that opset."""
    ops = {n.op_type for n, _, _ in onnx_recurrent.walk(model) if n.domain in ("", "ai.onnx")}
    versions = [schemas.schema_since_version(op, opset) for op in ops]
    return max((v for v in versions if v is not None), default=opset)
