"""`check`: every recurrent node of a model that a runtime cannot run, or will run wrongly without saying so,
with the rnnconv command that fixes each (the facts: `rnnconv.runtimes`). An OpenVINO IR model (.xml): what
from-openvino makes of each recurrent layer, what onnxruntime and onnx's reference would refuse in the ONNX it
writes, and what OpenVINO's CPU plugin refuses in the IR itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Optional

import numpy as np

from rnnconv import schemas
from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.dialects.openvino import survey as ir_survey
from rnnconv.engine import ONNXRUNTIME, OPENVINO
from rnnconv.engine.onnxruntime_runtime import newest_common_opset
from rnnconv.errors import UsageError
from rnnconv.passes import settle_ifs
from rnnconv.passes.fuse_cells import candidates
from rnnconv.runtimes import (
    REFUSES,
    TARGETS,
    Finding,
    ir_layer_findings,
    ir_model_findings,
    node_findings,
    quantized_findings,
)
from rnnconv.verification.model import load_input

def _label(model) -> str:
    return str(model) if isinstance(model, str) or hasattr(model, "__fspath__") else "MODEL"


def findings(model, targets: Iterable[str] = TARGETS) -> list[Finding]:
    """Every finding for every recurrent node of `model` (a path, ModelProto or onnx_ir Model) and target."""
    targets = _valid(targets)
    m = load_input(model)
    return _findings(m, onnx_recurrent.find(m), onnx_quantized.find(m), targets, _label(model))


def _valid(targets: Iterable[str]) -> list[str]:
    """The targets as the CLI takes them (--target, repeatable): one name, or several."""
    targets = list(dict.fromkeys([targets] if isinstance(targets, str) else targets))
    for t in targets:
        if t not in TARGETS:
            raise UsageError(f"unknown target {t!r}; expected one of {', '.join(TARGETS)}")
    if not targets:
        raise UsageError(f"no target: give one or more of {', '.join(TARGETS)}")
    return targets


def _findings(model, nodes, quantized, targets, label) -> list[Finding]:
    found = [f for rn in nodes for t in targets for f in node_findings(rn, t, label)]
    for q in quantized:
        for t in targets:
            measured, diff = measure_openvino(model, q) if t == OPENVINO else ("", None)
            found += quantized_findings(q, t, label, measured, diff)
    if OPENVINO in targets:
        found += rank_findings(model, label)
    return found


def rank_findings(model, label: str) -> list[Finding]:
    """The If nodes whose branches give values of two ranks, decided by shapes: OpenVINO's ONNX import gives such
    an If's outputs a dynamic rank, which the ops behind it that need a static one (Conv, ReduceMean, the
    recurrent ops) refuse. to-openvino settles those whose other branch provably fails (SettleIfs); the others
    are decided at run time."""
    settled = settle_ifs.settle(model)
    version = schemas.schema_since_version("If", onnx_recurrent.default_opset(model)) or 1
    problem = ("OpenVINO's ONNX import gives its output a dynamic rank (its branches give two ranks, chosen by a "
               "shape), which the ops behind it that need a static rank (Conv, ReduceMean, LSTM...) refuse")
    found = [Finding(OPENVINO, name, "If", version, REFUSES,
                     f"{problem}; its other branch fails on every input, so rnnconv keeps the one that runs",
                     f"rnnconv to-openvino {label} -o {Path(label).stem}.xml, or for OpenVINO's own conversion: "
                     f"rnnconv settle-ifs {label} -o {Path(label).stem}.settled.onnx")
             for name in settled.by_failure]
    for p in settled.polymorphic:
        found.append(Finding(OPENVINO, p.node, "If", version, REFUSES, f"{problem}; {p}",
                             "none in rnnconv: both branches can run; a model exported with static shapes for "
                             "what the condition reads would convert"))
    return found


def measure_openvino(model, q: onnx_quantized.QuantizedLSTM) -> tuple[str, Optional[float]]:
    """How far OpenVINO's import of a DynamicQuantizeLSTM is from onnxruntime's run, the node alone on random
    inputs (its real weights), and how far the IR `rnnconv to-openvino` writes for it runs in OpenVINO: the text for
    the finding, and the largest |difference| of OpenVINO's import over its outputs (None when not measured)."""
    from rnnconv.engine import openvino_runtime
    from rnnconv.verification import checks, extract
    from rnnconv.verification.model import onnx_model
    from rnnconv.verification.specs import input_specs

    if not openvino_runtime.available():
        return f"not measured: {openvino_runtime.NOT_INSTALLED}", None
    alone = onnx_model(extract.recurrent_node(q, dict(model.opset_imports), model.ir_version))
    sets = checks.input_sets(input_specs(alone), checks.CheckOptions())
    ort_run, ov_run = (checks.run_sets(alone, engine, sets, isolate=True) for engine in (ONNXRUNTIME, OPENVINO))
    if not (ort_run.ok and ov_run.ok):
        return f"not measured: {(ort_run.error or ov_run.error)}", None
    diff = _largest(ov_run, ort_run)
    ours = _rnnconv_ir(alone, q, sets, ort_run)
    return (f"measured on the node alone, random inputs {checks.describe_inputs(sets[0][1])}: max |diff| "
            f"{diff:.3g} from onnxruntime{ours}"), diff


def _largest(run, reference) -> float:
    return max(float(np.max(np.abs(np.asarray(run.outputs[0][k], np.float64) - reference.outputs[0][k]), initial=0))
               for k in reference.outputs[0] if k in run.outputs[0])


def _rnnconv_ir(alone, q: onnx_quantized.QuantizedLSTM, sets, ort_run) -> str:
    """"; rnnconv to-openvino's IR: max |diff| X" (the IR of dialects.openvino.quantized in OpenVINO's runtime), or
    why there is none."""
    import tempfile
    from pathlib import Path

    from rnnconv.dialects.openvino import from_onnx, quantized
    from rnnconv.dialects.openvino import writer as ov_writer
    from rnnconv.verification import checks
    from rnnconv.verification.model import ir_model

    why = quantized.lowerable(q)
    if why:
        return f"; rnnconv to-openvino refuses it ({'; '.join(why)})"
    with tempfile.TemporaryDirectory(prefix="rnnconv-check-") as folder:
        xml, bin_path = Path(folder) / "node.xml", Path(folder) / "node.bin"
        graph = from_onnx.to_ir_graph(alone.onnx).graph
        with open(bin_path, "wb") as f:
            xml.write_bytes(ov_writer.write_to(graph, f))
        run = checks.run_sets(ir_model(graph, "rnnconv's IR", xml, bin_path), OPENVINO, sets, isolate=True)
        if not run.ok:
            return f"; rnnconv to-openvino's IR not measured: {run.error}"
        return f"; rnnconv to-openvino's IR: max |diff| {_largest(run, ort_run):.3g}"


def check(model, targets: Iterable[str] = TARGETS) -> dict:
    """A JSON-ready report: the model, the targets, the number of recurrent nodes and every finding (a .xml path:
    OpenVINO IR, see `check_ir`)."""
    targets = _valid(targets)
    if ir_survey.is_ir(model):
        return check_ir(model, targets)
    m = load_input(model)
    nodes, quantized = onnx_recurrent.find(m), onnx_quantized.find(m)
    found = _findings(m, nodes, quantized, targets, _label(model))
    return {"model": _label(model), "targets": targets, "recurrent_nodes": len(nodes) + len(quantized),
            "ok": not found, "findings": [f.as_dict() for f in found], "unrolled": candidates(m)}


def check_ir(xml, targets: Iterable[str] = TARGETS, bin=None) -> dict:
    """`check` of an OpenVINO IR model: the report also says what from-openvino makes of each recurrent layer
    (`layers`) and the command the other runtimes read the model through (`via`)."""
    targets = _valid(targets)
    survey = ir_survey.survey(xml, bin, opset=newest_common_opset())
    label = _label(xml)
    found = []
    for t in targets:
        found += ir_model_findings(t, survey, label)
        for layer in survey.recurrent:
            found += ir_layer_findings(layer, t, label, survey.converted.get(layer.path))
    return {"model": label, "format": "openvino-ir", "targets": targets, "recurrent_nodes": len(survey.recurrent),
            "ok": not found, "findings": [f.as_dict() for f in found],
            "layers": [{"name": r.path, "type": r.type, "version": r.version, "from_openvino": r.from_openvino}
                       for r in survey.recurrent],
            "via": f"rnnconv from-openvino {label} -o {Path(label).stem}.onnx", "unrolled": []}


def lines(report: dict) -> list[str]:
    ir = report.get("format") == "openvino-ir"
    out = [f"from-openvino: {layer['name']} ({layer['type']}): {layer['from_openvino']}"
           for layer in report.get("layers", ())]
    for t in report["targets"]:
        mine = [f for f in report["findings"] if f["target"] == t]
        if not mine:
            if ir:
                via = "" if t == OPENVINO else f" after {report['via']}"
                out.append(f"{t}: runs all {report['recurrent_nodes']} recurrent layer(s){via}")
            else:
                out.append(f"{t}: runs all {report['recurrent_nodes']} recurrent node(s) as the spec says")
            continue
        out.append(f"{t}: {len(mine)} finding(s)")
        for f in mine:
            out.append(f"  {f['node']} ({f['op']}-{f['version']}): {f['effect']}: {f['problem']}")
            out.append(f"      fix: {f['fix']}")
    out.extend(f"unrolled: {line}" for line in report.get("unrolled", ()))
    return out


def to_json(report: dict) -> str:
    return json.dumps(report, indent=2)
