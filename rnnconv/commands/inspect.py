"""`inspect`: the model's opsets and one row per recurrent node, with the runtimes that can run it as is. An
OpenVINO IR model (.xml): its layers by type and one row per recurrent layer (Sequence and Cell ops, TensorIterator
and Loop recurrences), with what from-openvino makes of each and the runtimes that can run it."""

from __future__ import annotations

from rnnconv import io
from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.dialects.openvino import survey as ir_survey
from rnnconv.engine import ONNXRUNTIME, OPENVINO
from rnnconv.engine.onnxruntime_runtime import newest_common_opset
from rnnconv.passes.fuse_cells import candidates
from rnnconv.runtimes import ir_layer_findings, ir_model_findings, node_findings, quantized_findings
from rnnconv.verification.model import load_input


def runtimes(rn) -> dict[str, list[str]]:
    """For each runtime, the reasons it cannot run this node as is (empty list: it can)."""
    findings = quantized_findings if isinstance(rn, onnx_quantized.QuantizedLSTM) else node_findings
    return {rt: [f.problem for f in findings(rn, rt)] for rt in (ONNXRUNTIME, OPENVINO)}


def describe(rn) -> dict:
    """A RecurrentNode's or a QuantizedLSTM's row (the quantized one also says how its weights are stored)."""
    layer = rn.layer
    present = [k for k in ("B", "sequence_lens", "initial_h", "initial_c", "P") if rn.inputs.get(k) is not None]
    return {
        "name": rn.name,
        "op": rn.op,
        "version": rn.version,
        "direction": layer.direction,
        "input_size": layer.input_size,
        "hidden_size": layer.hidden_size,
        "layout": layer.layout,
        "activations": [[a.name for a in c.activations] for c in layer.cells],
        "activation_params": [[[a.alpha, a.beta] for a in c.activations] for c in layer.cells],
        "clip": layer.clip,
        "linear_before_reset": int(layer.linear_before_reset),
        "input_forget": int(layer.input_forget),
        "peepholes": layer.has_peepholes,
        "optional_inputs": present,
        "outputs": [k for k, v in rn.outputs.items() if v is not None],
        "weights_constant": layer.weights_constant,
        "dtype": getattr(layer.dtype, "name", None if layer.dtype is None else str(layer.dtype)),
        "runs_in": {rt: not why for rt, why in runtimes(rn).items()},
        "why_not": {rt: why for rt, why in runtimes(rn).items() if why},
        **({"domain": onnx_quantized.DOMAIN, "weights": rn.weight_type, "per_channel": rn.per_channel}
           if isinstance(rn, onnx_quantized.QuantizedLSTM) else {}),
    }


def inspect_ir(xml, bin=None) -> dict:
    """Describe an OpenVINO IR model as a JSON-ready dict: its layers, and each recurrent layer with what
    from-openvino makes of it and whether each runtime runs it (onnxruntime: as the ONNX from-openvino writes)."""
    survey = ir_survey.survey(xml, bin, opset=newest_common_opset())
    label = str(xml)
    nodes = []
    for layer in survey.recurrent:
        why = {}
        for rt in (ONNXRUNTIME, OPENVINO):
            found = [f.problem for f in (*ir_model_findings(rt, survey, label),
                                         *ir_layer_findings(layer, rt, label, survey.converted.get(layer.path)))]
            if found:
                why[rt] = found
        nodes.append({**layer.as_dict(), "runs_in": {rt: rt not in why for rt in (ONNXRUNTIME, OPENVINO)},
                      "why_not": why})
    return {
        "format": "openvino-ir",
        "ir_version": survey.ir_version,
        "layers": survey.layers,
        "from_openvino": "converts" if survey.refusal is None else f"refuses: {survey.refusal}",
        "nodes": nodes,
    }


def inspect(model) -> dict:
    """Describe a model (path, ModelProto or onnx_ir Model; a .xml path: OpenVINO IR, see `inspect_ir`) as a
    JSON-ready dict."""
    if ir_survey.is_ir(model):
        return inspect_ir(model)
    m = load_input(model)
    return {
        "format": "onnx",
        "ir_version": m.ir_version,
        "opset_import": dict(m.opset_imports),
        "nodes": [describe(rn) for rn in [*onnx_recurrent.find(m, io.source_name(model)), *onnx_quantized.find(m)]],
        "unrolled": candidates(m),  # recurrences written out as primitive ops
    }
