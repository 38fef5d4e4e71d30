"""The OpenVINO IR dialect: IR graph + reader/writer (`ir`), gate order and bias folding (`gates`), the ONNX <->
OpenVINO op table (`ops`), the ONNX -> IR conversion (`convert`) and the IR -> ONNX conversion (`to_onnx`, with
`ir_facts`, `ir_validate`, `onnx_builder` and `tensor_iterator`)."""
