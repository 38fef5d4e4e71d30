"""rnnconv's own engine (spec-exact numpy kernels for GRU/LSTM/RNN, onnxruntime's DynamicQuantizeLSTM to the bit,
an ONNX graph executor, an OpenVINO IR interpreter) and the adapters that run the real runtimes (onnxruntime,
OpenVINO) beside it."""
