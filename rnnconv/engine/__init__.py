"""rnnconv's own engine (spec-exact numpy kernels for GRU/LSTM/RNN, an ONNX graph runner, an OpenVINO IR
interpreter) and the adapters that run the real runtimes (onnxruntime, OpenVINO) beside it."""
