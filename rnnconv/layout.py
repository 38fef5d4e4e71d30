"""`layout`: give GRU/LSTM/RNN nodes ONNX layout 0 (sequence-major) or 1 (batch-major), verified.

Spec: onnx Operators.md GRU/LSTM/RNN-14 `layout`. Each selected node is rewritten as Transposes -> the node in the
target layout -> Transposes back (passes/layout.py), then FoldTransposes cancels the pairs that meet, the
exporter's included: a batch-first export (Transpose -> layout-0 node -> Transpose) converted with `to=1` keeps no
Transpose on the X -> Y path.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Optional, Sequence

import onnx_ir as ir

from rnnconv import convert, io, opset as opset_cmd
from rnnconv import verify as verify_mod
from rnnconv.dialects import onnx_recurrent
from rnnconv.errors import Unsupported, UsageError
from rnnconv.passes import layout as layout_pass
from rnnconv.passes import transpose_fold
from rnnconv.passes.rewrite import Names, NodeRewrite

LAYOUT_SINCE = 14  # the opset whose GRU/LSTM/RNN versions have the `layout` attribute


def _selected(model: ir.Model, nodes: Optional[Sequence[str]]) -> list[onnx_recurrent.RecurrentNode]:
    found = onnx_recurrent.find(model)
    if nodes is None:
        return found
    by_name = {rn.name: rn for rn in found}
    unknown = [n for n in nodes if n not in by_name]
    if unknown:
        listed = ", ".join(f"{rn.name} ({rn.op})" for rn in found) or "none"
        raise UsageError(f"--node {', '.join(map(repr, unknown))}: no such recurrent node; the model has: {listed}")
    return [by_name[n] for n in dict.fromkeys(nodes)]


def _plan(to: int, nodes: Optional[Sequence[str]], created: list, model: ir.Model, names: Names
          ) -> list[NodeRewrite]:
    rewrites = [layout_pass.relayout(rn, to, names) for rn in _selected(model, nodes) if rn.layer.layout != to]
    created.extend(n for r in rewrites for n in r.nodes)
    return rewrites


def _fold(created: list, model: ir.Model) -> None:
    # Scoped to the rewrites' Transposes (and the exporter's they meet): the rest of the model is not ours to edit.
    transpose_fold.FoldTransposes(scope=created)(model)


def convert_layout(source, output=None, *, to: int, nodes: Optional[Sequence[str]] = None,
                   opset: Optional[int] = None, verify: str = "full", atol: Optional[float] = None,
                   rtol: Optional[float] = None, seed: int = 0, force: bool = False,
                   external_data: Optional[bool] = None, progress=None) -> convert.Result:
    """Give the recurrent nodes (all, or those named in `nodes`) layout `to`; `opset` also moves the model there.

    Layout 1 exists from opset 14: below it, raise Unsupported unless `opset` (>= 14) is given. Transposes that
    cancel are folded away; the interface (names, dtypes, shapes) is kept and every rewrite verified.
    """
    if to not in (0, 1):
        raise UsageError(f"--to {to}: layout must be 0 (sequence-major) or 1 (batch-major)")
    if output is not None and isinstance(source, (str, os.PathLike)):
        io.guard_output(Path(output), force=force, inputs=(source,))
    model = source if isinstance(source, ir.Model) else io.load(source)  # the checker speaks first, as elsewhere
    current = onnx_recurrent.default_opset(model)
    target = current if opset is None else opset
    if to == 1 and target < LAYOUT_SINCE:
        how = f"pass --opset {LAYOUT_SINCE} (or higher) to upgrade in the same command, or run `rnnconv upgrade " \
              f"--opset {LAYOUT_SINCE}` first" if opset is None else f"use --opset {LAYOUT_SINCE} or higher"
        raise Unsupported(f"layout 1 needs opset {LAYOUT_SINCE} or higher (GRU/LSTM/RNN-14); the model is at opset "
                          f"{target}: {how}")
    common = dict(verify=verify, atol=atol, rtol=rtol, seed=seed, progress=progress)
    steps = []  # (result, whether it is an opset step)
    if target > current:  # upgrade first, so the nodes can hold `layout`
        _selected(model, nodes)  # unknown node names fail before the upgrade (else when the layout step plans)
        steps.append((opset_cmd.convert_opset(source, None, opset=target, command="upgrade", **common), True))
        source = steps[-1][0].model
    created: list = []
    steps.append((convert.rewrite_model(
        source, None if target < current else output, command="layout",
        plan=functools.partial(_plan, to, nodes, created), graph_pass=functools.partial(_fold, created),
        verify_mode=verify, atol=atol, rtol=rtol, seed=seed, force=force, external_data=external_data,
        progress=progress), False))
    if target < current:  # layout first, then down (downgrade itself only ever takes layout 1 to 0)
        steps.append((opset_cmd.convert_opset(steps[-1][0].model, output, opset=target, command="downgrade",
                                              force=force, external_data=external_data, **common), True))
    result = steps[-1][0]
    report = verify_mod.Report("layout", verified=verify, output=result.report.output)
    for step, is_opset in steps:  # one report; the opset step's checks carry its name
        for check in step.report.checks:
            if is_opset:
                check.subject = f"{step.report.command}: {check.subject}"
            report.checks.append(check)
        report.rewrites.extend(step.report.rewrites)
    result.report = report
    return result


__all__ = ["convert_layout", "LAYOUT_SINCE"]
