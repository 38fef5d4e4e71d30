"""The models onnxruntime does not run, re-expressed here (onnx.helper only, nothing of rnnconv's passes) as models
it runs with the same meaning, so every numeric expectation can come from onnxruntime:

- a layout-1 GRU/LSTM/RNN (onnxruntime: "Batchwise recurrent operations (layout == 1) are not supported") becomes
  the layout-0 node between Transposes: X and the initial states [N,T,I] / [N,D,H] -> [T,N,I] / [D,N,H] before,
  Y [T,D,N,H] -> [N,T,D,H] and Y_h / Y_c [D,N,H] -> [N,D,H] after (ONNX LSTM-14's `layout` attribute);
- versions below 7 (onnxruntime has no GRU-1/3, LSTM-1 or RNN-1 kernel) become version 7: the specs differ in
  `output_sequence` only (Y "optional if output_sequence is 0"; version 7 dropped it), and in GRU-1's lack of
  linear_before_reset (absent means 0 in both). A node whose Y is used must say output_sequence=1. Other ops
  only when opset 7 has the same schema version of them;
- float64 and bfloat16 recurrent nodes (no onnxruntime kernel) run in float32 between Casts; bfloat16 graph inputs
  and outputs (which onnxruntime's Python API cannot pass) are float32 at the boundary, Cast inside.

`reference(model, inputs)` is onnxruntime on the model or its re-expression. What cannot be re-expressed raises:
no error of onnxruntime is ever swallowed and nothing falls back to rnnconv's engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper

RECURRENT = ("GRU", "LSTM", "RNN")
STATES = ("initial_h", "initial_c")  # input names by position below
INPUT_NAMES = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
FLOAT_INPUTS = ("X", "W", "R", "B", "initial_h", "initial_c", "P")
ORT_FLOATS = (TensorProto.FLOAT, TensorProto.FLOAT16)


class CannotReexpress(Exception):
    """A model onnxruntime does not run and this module cannot turn into one it does."""


def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    types = {t.name: t.data_type for t in g.initializer}
    for vi in [*g.input, *g.value_info, *g.output]:
        types[vi.name] = vi.type.tensor_type.elem_type
    return types


def _recurrent_in_subgraphs(graph) -> bool:
    for node in graph.node:
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                if any(n.op_type in RECURRENT for n in sub.node) or _recurrent_in_subgraphs(sub):
                    return True
    return False


def _bfloat16_boundary(model: onnx.ModelProto) -> list:
    inits = {t.name for t in model.graph.initializer}
    return [vi for vi in [*model.graph.input, *model.graph.output]
            if vi.name not in inits and vi.type.tensor_type.elem_type == TensorProto.BFLOAT16]


def needs_reexpression(model: onnx.ModelProto) -> bool:
    recurrent = [n for n in model.graph.node if n.op_type in RECURRENT and n.domain in ("", "ai.onnx")]
    if not recurrent:
        return False
    if _opset(model) < 7 or any(_attr(n, "layout", 0) for n in recurrent) or _bfloat16_boundary(model):
        return True
    types = _elem_types(model)
    return any(types.get(n.input[0], TensorProto.FLOAT) not in ORT_FLOATS for n in recurrent)


def onnxruntime_form(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` as onnxruntime runs it (see the module docstring); `model` itself when it needs nothing."""
    if not needs_reexpression(model):
        return model
    if _recurrent_in_subgraphs(model.graph):
        raise CannotReexpress("recurrent nodes inside subgraphs")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    opset = _opset(out)
    types = _elem_types(model)
    if opset < 7:
        # Other ops only where opset 7 reads them with the same schema version (Transpose-1, Squeeze-1...).
        changed = sorted({n.op_type for n in out.graph.node if n.op_type not in RECURRENT
                          and onnx.defs.get_schema(n.op_type, 7).since_version
                          != onnx.defs.get_schema(n.op_type, opset).since_version})
        if changed:
            raise CannotReexpress(f"opset {opset} with {changed}: another schema version at opset 7")
        for o in out.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = 7
        out.ir_version = max(out.ir_version, 3)
    nodes = []
    for node in out.graph.node:
        if node.op_type not in RECURRENT:
            nodes.append(node)
            continue
        nodes.extend(_node_for_onnxruntime(node, opset, types))
    inputs = {vi.name for vi in out.graph.input}
    first, last = [], []
    for vi in _bfloat16_boundary(out):
        vi.type.tensor_type.elem_type = TensorProto.FLOAT
        inner = f"{vi.name}__ort_bfloat16"
        if vi.name in inputs:
            first.append(helper.make_node("Cast", [vi.name], [inner], to=TensorProto.BFLOAT16))
            for n in nodes:
                n.input[:] = [inner if i == vi.name else i for i in n.input]
        else:
            for n in nodes:
                n.output[:] = [inner if o == vi.name else o for o in n.output]
            last.append(helper.make_node("Cast", [inner], [vi.name], to=TensorProto.FLOAT))
    del out.graph.node[:]
    out.graph.node.extend([*first, *nodes, *last])
    return out


def _node_for_onnxruntime(node, opset: int, types: dict) -> list:
    before, after = [], []
    new = onnx.NodeProto()
    new.CopyFrom(node)
    if opset < 7:
        uses_y = len(node.output) > 0 and node.output[0] != ""
        if uses_y and not _attr(node, "output_sequence", 0):
            raise CannotReexpress(f"{node.name}: Y is used but output_sequence is 0 (Y undefined below opset 7)")
        _drop_attr(new, "output_sequence")
    elem = types.get(node.input[0], TensorProto.FLOAT)
    cast = elem not in ORT_FLOATS
    if cast and elem not in (TensorProto.DOUBLE, TensorProto.BFLOAT16):
        raise CannotReexpress(f"{node.name}: element type {elem}")
    layout = _attr(node, "layout", 0)
    if layout:
        _drop_attr(new, "layout")
    tag = f"__ort_{node.name or node.op_type}"
    for k, name in enumerate(node.input):
        if not name:
            continue
        role = INPUT_NAMES[k]
        value = name
        if cast and role in FLOAT_INPUTS:
            before.append(helper.make_node("Cast", [value], [f"{name}{tag}_{k}_f32"], to=TensorProto.FLOAT))
            value = f"{name}{tag}_{k}_f32"
        if layout and role in ("X", *STATES):
            before.append(helper.make_node("Transpose", [value], [f"{name}{tag}_{k}_t"], perm=[1, 0, 2]))
            value = f"{name}{tag}_{k}_t"
        new.input[k] = value
    for k, name in enumerate(node.output):
        if not name or not (layout or cast):
            continue
        steps = ([("Transpose", {"perm": [2, 0, 1, 3] if k == 0 else [1, 0, 2]})] if layout else []) + \
            ([("Cast", {"to": elem})] if cast else [])
        value = f"{name}{tag}_out"
        new.output[k] = value
        for i, (op, attrs) in enumerate(steps):
            result = name if i == len(steps) - 1 else f"{value}_{op}"
            after.append(helper.make_node(op, [value], [result], **attrs))
            value = result
    return [*before, new, *after]


def _drop_attr(node, name: str) -> None:
    keep = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(keep)


def run_onnxruntime(model, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime (CPU, one thread) on a ModelProto or a path: every output by name."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # its refusals are in the exception; no log on stderr
    options.intra_op_num_threads = 1
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, dict(inputs))))


def reference(model, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs for `model` (ModelProto or path), through `onnxruntime_form` where onnxruntime does
    not run it as it is. Raises what onnxruntime raises, and CannotReexpress."""
    if isinstance(model, (str, Path)):
        header = onnx.load(str(model), load_external_data=False)
        if not needs_reexpression(header):
            return run_onnxruntime(model, inputs)
        model = onnx.load(str(model))
    bf16 = {vi.name for vi in _bfloat16_boundary(model)}
    inputs = {k: np.asarray(v).astype(np.float32) if k in bf16 else v for k, v in inputs.items()}
    out = run_onnxruntime(onnxruntime_form(model), inputs)
    if bf16:  # back to the declared type (exact: the values were rounded to bfloat16 inside)
        import ml_dtypes

        out = {k: v.astype(ml_dtypes.bfloat16) if k in bf16 else v for k, v in out.items()}
    return out
