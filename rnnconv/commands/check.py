"""`check`: every recurrent node of a model that a runtime cannot run, or will run wrongly without saying so,
with the rnnconv command that fixes each (the facts: `rnnconv.runtimes`)."""

from __future__ import annotations

import json
from typing import Iterable

from rnnconv import io
from rnnconv.dialects import onnx_recurrent
from rnnconv.errors import UsageError
from rnnconv.runtimes import TARGETS, Finding, node_findings


def _label(model) -> str:
    return str(model) if isinstance(model, str) or hasattr(model, "__fspath__") else "MODEL"


def findings(model, targets: Iterable[str] = TARGETS) -> list[Finding]:
    """Every finding for every recurrent node of `model` (a path, ModelProto or onnx_ir Model) and target."""
    targets = _valid(targets)
    return _findings(onnx_recurrent.find(io.load(model)), targets, _label(model))


def _valid(targets: Iterable[str]) -> list[str]:
    targets = list(targets)
    for t in targets:
        if t not in TARGETS:
            raise UsageError(f"unknown target {t!r}; expected one of {', '.join(TARGETS)}")
    return targets


def _findings(nodes, targets, label) -> list[Finding]:
    return [f for rn in nodes for t in targets for f in node_findings(rn, t, label)]


def check(model, targets: Iterable[str] = TARGETS) -> dict:
    """A JSON-ready report: the model, the targets, the number of recurrent nodes and every finding."""
    targets = _valid(targets)
    nodes = onnx_recurrent.find(io.load(model))
    found = _findings(nodes, targets, _label(model))
    return {"model": _label(model), "targets": targets, "recurrent_nodes": len(nodes), "ok": not found,
            "findings": [f.as_dict() for f in found]}


def lines(report: dict) -> list[str]:
    out = []
    for t in report["targets"]:
        mine = [f for f in report["findings"] if f["target"] == t]
        if not mine:
            out.append(f"{t}: runs all {report['recurrent_nodes']} recurrent node(s) as the spec says")
            continue
        out.append(f"{t}: {len(mine)} finding(s)")
        for f in mine:
            out.append(f"  {f['node']} ({f['op']}-{f['version']}): {f['effect']}: {f['problem']}")
            out.append(f"      fix: {f['fix']}")
    return out


def to_json(report: dict) -> str:
    return json.dumps(report, indent=2)
