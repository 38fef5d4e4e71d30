"""onnx's ReferenceEvaluator for the ops rnnconv has no kernel for, with rnnconv's kernels for the others.

Weights are fed as (memory-mapped) arrays at each run, never copied into protobuf, so models over 2 GB run.
"""

from __future__ import annotations

from typing import Callable

import onnx
import onnx_ir as ir

from rnnconv.io.reading import weights_as_inputs


def reference_session(model: ir.Model | "onnx.ModelProto", kernels: dict[str, Callable]):
    """onnx's ReferenceEvaluator for the non-recurrent ops, with our kernels for the ops in `kernels`.

    A kernel is called as kernel(node_attributes: dict, *inputs) and returns a tuple of outputs.
    onnx's own GRU/LSTM/RNN are never used: they ignore activations, clip, input_forget and sequence_lens.
    """
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun

    def make(op_type: str, kernel: Callable):
        def _run(self, *inputs, **_):
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in self.onnx_node.attribute}
            attrs = {k: (v.decode() if isinstance(v, bytes) else
                         [x.decode() if isinstance(x, bytes) else x for x in v] if isinstance(v, list) else v)
                     for k, v in attrs.items()}
            n_out = len(self.onnx_node.output)
            return tuple(kernel(attrs, *inputs))[:n_out]

        return type(op_type, (OpRun,), {"op_domain": "", "_run": _run})

    if isinstance(model, onnx.ModelProto):
        model = ir.serde.deserialize_model(model)
    from onnx.reference.ops.op_scatter_elements import ScatterElements

    # Scatter-9/10 is ScatterElements under its older name, which onnx's reference ops lack.
    scatter = type("Scatter", (ScatterElements,), {"op_domain": ""})
    proto, weights = weights_as_inputs(model)
    evaluator = ReferenceEvaluator(proto, new_ops=[scatter, *(make(op, k) for op, k in kernels.items())])
    return _WithWeights(evaluator, weights)


class _WithWeights:
    """A ReferenceEvaluator whose initializers are fed as (memory-mapped) arrays at each run."""

    def __init__(self, evaluator, weights: dict):
        self.evaluator, self.weights = evaluator, weights

    def run(self, output_names, feeds: dict):
        return self.evaluator.run(output_names, {**self.weights, **feeds})
