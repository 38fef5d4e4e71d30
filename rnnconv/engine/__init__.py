"""rnnconv's own engine (spec-exact numpy kernels for GRU/LSTM/RNN, onnxruntime's DynamicQuantizeLSTM to the bit,
an ONNX graph executor, an OpenVINO IR interpreter) and the adapters that run the real runtimes (onnxruntime,
OpenVINO) beside it."""

# The engines a model runs in, by the names options, reports and the Python API use: rnnconv's own engine and the
# two runtimes. onnx's ReferenceEvaluator is one more runtime `check` knows facts of.
RNNCONV, ONNXRUNTIME, OPENVINO = "rnnconv", "onnxruntime", "openvino"
ENGINES = (RNNCONV, ONNXRUNTIME, OPENVINO)
ONNX_REFERENCE = "onnx-reference"
# to-openvino's routes: which one writes the IR, rnnconv's own writer or OpenVINO's ONNX import; auto: rnnconv's
# when every op is in its table, else OpenVINO's.
AUTO = "auto"
ROUTES = (AUTO, RNNCONV, OPENVINO)
