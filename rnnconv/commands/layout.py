"""`layout`: give GRU/LSTM/RNN nodes ONNX layout 0 (sequence-major) or 1 (batch-major), verified.

Spec: onnx Operators.md GRU/LSTM/RNN-14 `layout`. Each selected node is rewritten as Transposes -> the node in the
target layout -> Transposes back (passes/layout.py), then FoldTransposes cancels the pairs that meet, the
exporter's included: a batch-first export (Transpose -> layout-0 node -> Transpose) converted with `to=1` keeps no
Transpose on the X -> Y path. With `opset`, the same conversion also moves the model there (up first, so the
nodes can hold `layout`; or down last).
"""

from __future__ import annotations

from typing import Optional, Sequence

from rnnconv import conversion
from rnnconv.dialects.onnx_recurrent import LAYOUT_SINCE
from rnnconv.errors import Unsupported, UsageError
from rnnconv.passes.layout import LayoutPass, select
from rnnconv.passes.opset import OpsetPass
from rnnconv.verification.options import CheckOptions


def translator(to: int, nodes: Optional[Sequence[str]] = None, opset: Optional[int] = None,
               external_data: Optional[bool] = None) -> conversion.Passes:
    """LayoutPass(to, nodes), with the OpsetPass that moves the model to `opset` (up first, or down last).

    Layout 1 exists from opset 14: below it, Unsupported unless `opset` (>= 14) is given."""
    if to not in (0, 1):
        raise UsageError(f"layout must be 0 (sequence-major) or 1 (batch-major), got {to}")

    def plan(model, report) -> list:
        if opset is not None:
            conversion.check_opset(opset)
        current = conversion.source_opset(model)
        target = current if opset is None else opset
        if to == 1 and target < LAYOUT_SINCE:
            where = "is" if opset is None else "would be"
            raise Unsupported(f"layout 1 needs opset {LAYOUT_SINCE} or higher (GRU/LSTM/RNN-{LAYOUT_SINCE}); the "
                              f"model {where} at opset {target}", fixes=(f"opset={LAYOUT_SINCE}",))
        select(model, nodes, to)  # unknown node names and nodes that cannot move fail before anything runs
        passes = [LayoutPass(to, nodes)]
        if target > current:
            passes.insert(0, OpsetPass(target))
        elif target < current:
            passes.append(OpsetPass(target))
        return passes

    return conversion.Passes("layout", plan, external_data=external_data)


def convert_layout(source, output=None, *, to: int, nodes: Optional[Sequence[str]] = None,
                   opset: Optional[int] = None, verify: str = "full", force: bool = False,
                   external_data: Optional[bool] = None, progress=None, options: Optional[CheckOptions] = None,
                   **check) -> conversion.Result:
    """Give the recurrent nodes (all, or those named in `nodes`) layout `to`; `opset` also moves the model there.

    `options` (or its keywords `check`): how rewrites are verified (see CheckOptions)."""
    return conversion.run(source, translator(to, nodes, opset, external_data), CheckOptions.given(options, check),
                          output=output, verify=verify, force=force, progress=progress)
