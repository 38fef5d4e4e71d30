"""What each runtime does with each recurrent construct: refuses it, or runs it wrongly without saying so, and
the rnnconv command that fixes it. `check` lists these facts per node, `inspect` summarizes them, and the
verification pipeline knows which refusals to expect.

Every fact here was measured (../shared/spec/README.md, "Runtime facts") and is proven again by
tests/commands/test_check.py, which runs the real runtime on a small model and observes the refusal or the wrong
number.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import numpy as np

from rnnconv import activations as act
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino.gates import ACTIVATIONS as OPENVINO_ACTIVATIONS
from rnnconv.engine import ONNX_REFERENCE, ONNXRUNTIME, OPENVINO
from rnnconv.engine.partition import onnxruntime_refusals
from rnnconv.errors import UsageError

TARGETS = (ONNXRUNTIME, OPENVINO, ONNX_REFERENCE)

REFUSES = "refuses"  # the runtime raises: loud, but the model does not run
WRONG = "silently wrong"  # the runtime runs and returns other numbers (or shapes) than the spec's
DIFFERS = "computes differently"  # the runtime runs an approximation of its own (quantized ops)


@dataclasses.dataclass
class Finding:
    target: str
    node: str
    op: str
    version: int
    effect: str  # REFUSES or WRONG
    problem: str
    fix: str  # the rnnconv command (with MODEL / OUT placeholders filled in) that removes the problem
    max_abs_diff: Optional[float] = None  # DIFFERS, measured: the largest |target - defining runtime| of a run

    def as_dict(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "max_abs_diff" or v is not None}


def _fixes(model: str) -> dict[str, str]:
    stem = Path(model).stem  # outputs go to the working directory, named after the model
    return {
        "upgrade": f"rnnconv upgrade {model} -o {stem}.upgraded.onnx",
        "layout0": f"rnnconv layout {model} --to 0 -o {stem}.layout0.onnx",
        "downgrade-bf16": f"rnnconv downgrade {model} --opset 21 -o {stem}.opset21.onnx",
        "to-openvino": f"rnnconv to-openvino {model} -o {stem}.xml",
        "engine": "rnnconv verify REFERENCE CANDIDATE --engine rnnconv (rnnconv's engine runs it as the spec says)",
        "dequantize": f"rnnconv dequantize {model} -o {stem}.float.onnx (a float LSTM every runtime runs alike; "
                      f"its error against onnxruntime's quantized run is measured and reported)",
    }


def _has_nonzero_peepholes(rn: onnx_recurrent.RecurrentNode) -> bool:
    layer = rn.layer
    if not layer.has_peepholes:
        return False
    if not layer.weights_constant:
        return True  # P given at run time: it may be anything
    return any(np.any(np.asarray(p) != 0) for c in layer.cells for p in c.P.values())


def _default_activations(rn) -> bool:
    defaults = act.DEFAULTS[rn.op]
    return all(tuple(a.name for a in c.activations) == defaults for c in rn.layer.cells)


def node_findings(rn: onnx_recurrent.RecurrentNode, target: str, model: str = "MODEL") -> list[Finding]:
    """What `target` does wrong with this node; an empty list when it runs it as the spec says."""
    layer = rn.layer
    fix = _fixes(model)
    out: list[Finding] = []

    def add(effect, problem, how):
        out.append(Finding(target, rn.name, rn.op, rn.version, effect, problem, how))

    dtype = getattr(layer.dtype, "name", str(layer.dtype))
    if target == ONNXRUNTIME:
        fixes = {"version": fix["upgrade"], "layout": fix["layout0"], "bfloat16": fix["downgrade-bf16"],
                 "float64": "none yet (export the model in float32); to run it: " + fix["engine"]}
        for cause, problem in onnxruntime_refusals(rn.op, rn.version, layer.layout, dtype).items():
            add(REFUSES, problem, fixes[cause])
    elif target == OPENVINO:
        if _has_nonzero_peepholes(rn):
            add(WRONG, "peepholes (P) are dropped by OpenVINO's ONNX import: it runs the node as if P = 0",
                fix["to-openvino"])
        if layer.input_forget:
            add(WRONG, "input_forget is dropped by OpenVINO's ONNX import: it runs the node as if input_forget = 0",
                fix["to-openvino"])
        if layer.layout == 1:
            add(WRONG, "layout=1 is not read by OpenVINO's ONNX import: outputs come out in layout-0 shapes, "
                       "no error", f"{fix['to-openvino']}, or {fix['layout0']}")
        # OpenVINO takes the first direction's activation list for both directions (measured).
        lists = [tuple(a.name for a in c.activations) for c in layer.cells]
        names = set(lists[0]) - set(OPENVINO_ACTIVATIONS)
        if names:
            add(REFUSES, f"activations {sorted(names)} are imported but the CPU plugin fails to compile them "
                         f"(OpenVINO runs relu, sigmoid, tanh only)", fix["to-openvino"])
        if len(set(lists)) > 1:
            add(WRONG, f"different activations per direction ({' | '.join(','.join(x) for x in lists)}): OpenVINO "
                       f"runs the first direction's list for both directions, no error", fix["to-openvino"])
    elif target == ONNX_REFERENCE:
        if not _default_activations(rn):
            names = [[a.name for a in c.activations] for c in layer.cells]
            add(WRONG if rn.op != "RNN" else REFUSES,
                f"activations {names} are not the defaults: onnx's ReferenceEvaluator "
                + ("runs the default activations instead" if rn.op != "RNN" else
                   "knows only Tanh (and Affine) for RNN and raises on the others"), fix["engine"])
        if layer.clip is not None:
            add(WRONG, f"clip={layer.clip:g} is ignored by onnx's ReferenceEvaluator", fix["engine"])
        if layer.input_forget:
            add(WRONG, "input_forget is ignored by onnx's ReferenceEvaluator", fix["engine"])
        if rn.inputs.get("sequence_lens") is not None:
            add(WRONG, "sequence_lens is ignored by onnx's ReferenceEvaluator (every sequence runs T steps)",
                fix["engine"])
    else:
        raise UsageError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    return out




def quantized_findings(q, target: str, model: str = "MODEL", measured: str = "",
                       max_abs_diff: Optional[float] = None) -> list[Finding]:
    """What `target` does with a com.microsoft DynamicQuantizeLSTM (dialects/onnx_quantized.QuantizedLSTM), whose
    definition is onnxruntime's kernel; `measured`, `max_abs_diff`: what a run of the node alone found (check adds
    them)."""
    fix = _fixes(model)
    if target == ONNXRUNTIME:
        return []  # its own op, as its CPU kernel defines it
    if target == OPENVINO:
        problem = ("OpenVINO's ONNX import runs it, computed otherwise than onnxruntime's kernel (which defines "
                   "the op): other numbers, no error")
        return [Finding(target, q.name, q.op, q.version, DIFFERS, problem + (f" ({measured})" if measured else ""),
                        f"{fix['to-openvino']} (its IR computes onnxruntime's run-time quantization, constant "
                        f"weights); or {fix['dequantize']}", max_abs_diff)]
    if target == ONNX_REFERENCE:
        return [Finding(target, q.name, q.op, q.version, REFUSES, "onnx's ReferenceEvaluator has no com.microsoft "
                        "ops", f"{fix['dequantize']}; or {fix['engine']}")]
    raise UsageError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")


# -- OpenVINO IR ------------------------------------------------------------------------------------------------

def ir_model_findings(target: str, survey, model: str = "MODEL") -> list[Finding]:
    """What `target` does with an IR model as a whole (`survey`: dialects.openvino.survey.Survey): onnxruntime
    and onnx's reference run it only as ONNX, after from-openvino, which may refuse it; OpenVINO's CPU plugin may
    need static input shapes."""
    if target == OPENVINO:
        if survey.dynamic_rank is None:
            return []
        return [Finding(target, "(model)", "IR", survey.ir_version, REFUSES,
                        f"OpenVINO's CPU plugin compiles it only at static input shapes ({survey.dynamic_rank}, a "
                        f"dynamic rank at compile time)", "none needed in rnnconv: reshape the model to your input "
                                                          "sizes (ov.Model.reshape) before compile_model")]
    if target not in TARGETS:
        raise UsageError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if survey.refusal is None:
        return []
    return [Finding(target, "(model)", "IR", survey.ir_version, REFUSES,
                    f"{target} reads ONNX, and from-openvino cannot convert this IR: {survey.refusal}",
                    "none in rnnconv: keep the model in OpenVINO, or export its source to ONNX")]


def ir_layer_findings(layer, target: str, model: str = "MODEL",
                      converted: Optional[onnx_recurrent.RecurrentNode] = None) -> list[Finding]:
    """What `target` does with one recurrent IR layer (dialects.openvino.survey.RecurrentLayer): OpenVINO runs the
    IR itself (its CPU plugin compiles relu, sigmoid and tanh only); the others run `converted`, the ONNX node
    from-openvino makes of it, whose findings are `node_findings`' with from-openvino's command first."""
    version = int("".join(ch for ch in layer.version if ch.isdigit()) or 0)
    if target == OPENVINO:
        names = [a for a in layer.attributes.get("activations", ()) if a.lower() not in OPENVINO_ACTIVATIONS.values()]
        if not names:
            return []
        return [Finding(target, layer.path, layer.type, version, REFUSES,
                        f"activations {names}: the CPU plugin fails to compile them (it runs relu, sigmoid, tanh "
                        f"only)", "rnnconv to-openvino on the ONNX source (an explicit recurrence computes them)")]
    if target not in TARGETS:
        raise UsageError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if converted is None:
        return []
    stem = Path(model).stem
    first = f"rnnconv from-openvino {model} -o {stem}.onnx, then "
    return [dataclasses.replace(f, node=layer.path, op=layer.type, version=version, fix=first + f.fix,
                                problem=f"after from-openvino (ONNX {converted.op}-{converted.version}): {f.problem}")
            for f in node_findings(converted, target, f"{stem}.onnx")]
