"""`check`: every recurrent node of a model that a runtime cannot run, or will run wrongly without saying so,
with the rnnconv command that fixes each (the facts: `rnnconv.runtimes`)."""

from __future__ import annotations

import json
from typing import Iterable, Optional

import numpy as np

from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.errors import UsageError
from rnnconv.runtimes import TARGETS, Finding, node_findings, quantized_findings
from rnnconv.verification.model import load_input


def _label(model) -> str:
    return str(model) if isinstance(model, str) or hasattr(model, "__fspath__") else "MODEL"


def findings(model, targets: Iterable[str] = TARGETS) -> list[Finding]:
    """Every finding for every recurrent node of `model` (a path, ModelProto or onnx_ir Model) and target."""
    targets = _valid(targets)
    m = load_input(model)
    return _findings(m, onnx_recurrent.find(m), onnx_quantized.find(m), targets, _label(model))


def _valid(targets: Iterable[str]) -> list[str]:
    targets = list(targets)
    for t in targets:
        if t not in TARGETS:
            raise UsageError(f"unknown target {t!r}; expected one of {', '.join(TARGETS)}")
    return targets


def _findings(model, nodes, quantized, targets, label) -> list[Finding]:
    found = [f for rn in nodes for t in targets for f in node_findings(rn, t, label)]
    for q in quantized:
        for t in targets:
            measured, diff = measure_openvino(model, q) if t == "openvino" else ("", None)
            found += quantized_findings(q, t, label, measured, diff)
    return found


def measure_openvino(model, q: onnx_quantized.QuantizedLSTM) -> tuple[str, Optional[float]]:
    """How far OpenVINO's import of a DynamicQuantizeLSTM is from onnxruntime's run, the node alone on random
    inputs (its real weights): the text for the finding, and the largest |difference| over its outputs (None when
    not measured)."""
    from rnnconv.engine import openvino_runtime
    from rnnconv.verification import checks, extract
    from rnnconv.verification.model import onnx_model
    from rnnconv.verification.specs import input_specs

    if not openvino_runtime.available():
        return f"not measured: {openvino_runtime.NOT_INSTALLED}", None
    alone = onnx_model(extract.recurrent_node(q, dict(model.opset_imports), model.ir_version))
    sets = checks.input_sets(input_specs(alone), checks.CheckOptions())
    ort_run, ov_run = (checks.run(alone, engine, sets, isolate=True) for engine in ("onnxruntime", "openvino"))
    if not (ort_run.ok and ov_run.ok):
        return f"not measured: {(ort_run.error or ov_run.error)}", None
    diff = max(float(np.max(np.abs(np.asarray(ov_run.outputs[0][k], np.float64) - ort_run.outputs[0][k]), initial=0))
               for k in ort_run.outputs[0] if k in ov_run.outputs[0])
    return (f"measured on the node alone, random inputs {checks.describe_inputs(sets[0][1])}: max |diff| "
            f"{diff:.3g} from onnxruntime"), diff


def check(model, targets: Iterable[str] = TARGETS) -> dict:
    """A JSON-ready report: the model, the targets, the number of recurrent nodes and every finding."""
    targets = _valid(targets)
    m = load_input(model)
    nodes, quantized = onnx_recurrent.find(m), onnx_quantized.find(m)
    found = _findings(m, nodes, quantized, targets, _label(model))
    return {"model": _label(model), "targets": targets, "recurrent_nodes": len(nodes) + len(quantized),
            "ok": not found, "findings": [f.as_dict() for f in found]}


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
