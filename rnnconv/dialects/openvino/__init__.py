"""The OpenVINO IR dialect: the IR graph (`graph`, port shapes by `shapes`), its reader and writer (`reader`,
`writer`, `validate`), gate order and bias folding (`gates`), one entry per IR operation type (`registry`: mapping,
shape rule, kernel) filled by the ONNX <-> OpenVINO op table (`ops`), the ONNX -> IR conversion (`from_onnx`, with
`lowering`, `quantized`, `extract`, `exact`), the IR -> ONNX conversion (`to_onnx`, with `ir_facts`, `fold`,
`onnx_builder`, `tensor_iterator`, `control_flow`), OpenVINO's own ONNX import with rnnconv's recurrent mapping
grafted in (`frontend`) and the table of what from-openvino reads (`coverage`).

Importing the dialect loads the op table, so every entry is complete before any graph infers a shape.
"""

from rnnconv.dialects.openvino import ops  # noqa: F401  (fills registry.IR_OPS)
