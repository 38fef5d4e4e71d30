"""The OpenVINO IR dialect: IR graph + reader/writer (`ir`), gate order and bias folding (`gates`), the ONNX <->
OpenVINO op table (`ops`) and the ONNX -> IR conversion (`convert`)."""
