"""The dequantize pass: com.microsoft DynamicQuantizeLSTM -> ONNX LSTM with its weights dequantized.

Case 1: a DynamicQuantizeLSTM with constant weights becomes an LSTM of the graph's default-domain opset, W and R
    float32 ((q - zero_point) * scale, transposed to ONNX's [D, 4H, I]), every other input and attribute as it was.
Case 2: one whose weights are computed at run time, or in a graph below opset 7 (no LSTM-7), is refused, every
    such node named, before anything changes.
The quantized weights no other node reads are dropped, and the com.microsoft opset when nothing uses it any more.

This is an approximation by nature: onnxruntime's kernel also quantizes X and each step's hidden state to uint8
at run time (dialects/onnx_quantized.py); the float LSTM does not. The conversion pipeline measures the difference.
"""

from __future__ import annotations

import onnx_ir as ir

from rnnconv.dialects import onnx_quantized
from rnnconv.dialects.onnx_recurrent import INPUTS, MODERN_SINCE, walk
from rnnconv.passes.base import PassResult, Rewrite, RewritePass, refuse
from rnnconv.passes.edit import Names

LSTM_SINCE = MODERN_SINCE  # LSTM-7: no output_sequence, the inputs and outputs DynamicQuantizeLSTM copies


class DequantizePass(RewritePass):
    """Every DynamicQuantizeLSTM of the model (bodies and functions included) as a float ONNX LSTM."""

    def plan(self, model: ir.Model) -> list[Rewrite]:
        found = onnx_quantized.find(model)
        refusals = [f"{q.name!r}: its weights are computed at run time (only constant weights can be dequantized)"
                    for q in found if not q.layer.weights_constant]
        refusals += [f"{q.name!r}: its graph is at opset {q.opset}, below LSTM-{LSTM_SINCE} (upgrade the model first)"
                     for q in found if q.layer.weights_constant and (q.opset or 0) < LSTM_SINCE]
        refuse(f"cannot dequantize {onnx_quantized.OP}", refusals)
        names = Names(model.graph)
        return [self._rewrite(q, names) for q in found]

    def _rewrite(self, q: onnx_quantized.QuantizedLSTM, names: Names) -> Rewrite:
        node = q.node
        arrays = {k: onnx_quantized.constant_array(q.inputs[k]) for k in ("W", "R") + onnx_quantized.QUANTIZATION}
        W, R = onnx_quantized.dequantize(arrays["W"], arrays["R"], *(arrays[k] for k in onnx_quantized.QUANTIZATION))
        in_function = q.scope.startswith("function ")  # walk's scope of a function's nodes
        constants, new_initializers, weights = [], [], []
        for key, array in (("W", W), ("R", R)):
            stem = q.inputs[key].name.removesuffix("_quantized")  # quantize_dynamic's suffix: the float name back
            name = names(stem if stem != q.inputs[key].name else f"{stem}_dequantized")
            value = ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(array.shape),
                             const_value=None if in_function else ir.tensor(array))
            if in_function:  # a function holds no initializers
                constants.append(ir.Node("", "Constant", inputs=[], outputs=[value], name=names(f"{value.name}_node"),
                                         attributes=[ir.AttrTensor("value", ir.tensor(array))]))
            else:
                new_initializers.append(value)
            weights.append(value)
        inputs = [q.inputs[k] for k in INPUTS["LSTM"]]
        inputs[1], inputs[2] = weights
        while inputs and inputs[-1] is None:
            inputs.pop()
        attributes = [a for k, a in node.attributes.items() if k != "layout"]  # layout=0 that old tools copied
        outputs = [ir.Value(name=names(f"{o.name}_float")) if o is not None and o.name else ir.Value(name="")
                   for o in node.outputs]
        lstm = ir.Node("", "LSTM", inputs=inputs, outputs=outputs, name=node.name, attributes=attributes)
        replaced = {k: v for k, v in zip(onnx_quantized.OUTPUTS, outputs) if q.outputs.get(k) is not None}
        what = (f"{onnx_quantized.OP} ({q.weight_type}, per {'gate row' if q.per_channel else 'direction'}) -> "
                f"LSTM with float32 weights")
        return Rewrite(q, [*constants, lstm], replaced, [what], new_initializers)

    def call(self, model: ir.Model) -> PassResult:
        result = super().call(model)
        if result.rewrites:
            result.changes.extend(_drop_unused(model, [r.original for r in result.rewrites]))
        return result


def _drop_unused(model: ir.Model, replaced: list) -> list[str]:
    """Drop the quantized weights and scales no node reads any more, and the com.microsoft opset when no node
    uses it; one line per change."""
    changes = []
    for q in replaced:
        for key in ("W", "R") + onnx_quantized.QUANTIZATION:
            value = q.inputs[key]
            if value is None or value.uses():
                continue
            graph = value.graph
            if value.producer() is not None and value.producer().op_type == "Constant" and not any(
                    v.uses() for v in value.producer().outputs):
                value.producer().graph.remove(value.producer(), safe=True)
            elif (graph is not None and value.name in graph.initializers
                  and value not in (*graph.inputs, *graph.outputs)):
                graph.initializers.pop(value.name)
    domain = onnx_quantized.DOMAIN
    if domain in model.opset_imports and not any(node.domain == domain for node, _, _ in walk(model)):
        del model.opset_imports[domain]
        changes.append(f"opset {domain} dropped: no node uses it any more")
    for function in model.functions.values():
        if domain in function.opset_imports and not any(node.domain == domain for node in function):
            del function.opset_imports[domain]
    return changes

