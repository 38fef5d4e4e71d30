"""`settle-ifs`: the If nodes whose branch the model's shapes decide, replaced by that branch
(`rnnconv.passes.settle_ifs`: the step to-openvino takes first), as an ONNX -> ONNX step with the interface
unchanged, verified like every converting command (the whole model before against after). For OpenVINO's own
conversion (`ov.convert_model(io.BytesIO(settle_ifs(path).SerializeToString()), extension=openvino_extensions())`)
and any runtime that needs every value's rank static.

Ifs on values (silero-vad's `sr == 16000`) stay, and the report says so. An If on shapes whose branches give two
ranks and both run to the end (its rank is decided at run time) is refused (Unsupported), naming it and the input
its condition reads: no runtime that needs static ranks takes the model. A model with no If to settle is written
unchanged.
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from rnnconv import conversion, io
from rnnconv.dialects.onnx_recurrent import node_label
from rnnconv.errors import Unsupported, UsageError
from rnnconv.passes.base import PassResult
from rnnconv.passes.settle_ifs import SettleIfs, Settled, ifs
from rnnconv.verification.options import CheckOptions


class _Settle(SettleIfs):
    """SettleIfs, each If settled a rewrite of the report (which branch, and why), the Ifs left named, and a rank
    decided at run time refused."""

    def __init__(self, report):
        super().__init__()
        self.report = report

    def call(self, model: ir.Model) -> PassResult:
        result = super().call(model)
        refusal = Settled(model, [], self.by_failure, self.polymorphic).refusal()
        if refusal:
            raise Unsupported(f"cannot settle the model's Ifs for a runtime that needs static ranks: {refusal}")
        self.report.rewrites.extend({"node": name, "op": "If", "what": what} for name, what in self.settled)
        changes = []
        left = [node_label(n) for n in ifs(model)]
        if left:
            changes.append(f"If node(s) {', '.join(repr(n) for n in left)} stay: their conditions are decided at "
                           f"run time (by values, or by shapes with one rank either way)")
        if not result.modified:
            changes.append("nothing to settle: no If whose branch the shapes decide; the model is written unchanged")
        return PassResult(model, result.modified, changes=changes)


def _plan(model: ir.Model, report) -> list:
    return [_Settle(report)]


def settle(source, output=None, *, verify: str = "full", force: bool = False,
           external_data: Optional[bool] = None, progress=None, options: Optional[CheckOptions] = None,
           **check) -> conversion.Result:
    """Settle `source`'s Ifs, verify (`verify`: "full", the whole model before against after, or "none"), write
    `output` when given: a Result (the settled onnx_ir Model, and the report: each If settled, which branch and
    why, in its rewrites). `source` (a path, ModelProto or onnx_ir Model) is never modified. `options` (or its
    keywords `check`: seed, runs, dims, ranges, inputs, atol, rtol): how the model is verified (see
    CheckOptions)."""
    if verify == "node":
        raise UsageError("verify='node' checks each rewritten recurrent node alone, and settle-ifs rewrites none: "
                         "verify='full' (the whole model) or 'none'", fixes=("verify=full",))
    if isinstance(source, ir.Model):
        source = source.clone()  # the pipeline works on the model it loads, which for an onnx_ir Model is itself
    translator = conversion.Passes("settle-ifs", _plan, external_data=external_data)
    return conversion.run(source, translator, CheckOptions.given(options, check), output=output, verify=verify,
                          force=force, progress=progress)


def settle_ifs(model, output=None, **kwargs):
    """The model (a path, ModelProto or onnx_ir Model; never modified) with the Ifs its shapes decide replaced by
    their branches, verified (see `settle` for the keywords): an onnx.ModelProto, also written to `output` when
    given. Raises VerificationFailed (with its `.report`) on a mismatch, Unsupported for an If whose rank is
    decided at run time."""
    return io.to_proto(settle(model, output, **kwargs).model)
