"""Which version of ONNX's GRU / LSTM / RNN has what: numbers only, so that the command-line help can quote them
without loading numpy or onnx_ir (the readers and writers are in `onnx_recurrent`)."""

LINEAR_BEFORE_RESET_SINCE = 3  # GRU's linear_before_reset attribute
# Version 7 dropped output_sequence (Y always available, Y_h optional); onnxruntime has kernels from it on, and it
# is the oldest version rnnconv writes when it builds recurrent nodes (from-openvino, dequantize).
MODERN_SINCE = 7
LAYOUT_SINCE = 14  # the opset whose GRU/LSTM/RNN versions have the `layout` attribute
BFLOAT16_SINCE = 22  # the versions whose type list holds bfloat16 (the newest)
VERSIONS = {
    "GRU": (1, LINEAR_BEFORE_RESET_SINCE, MODERN_SINCE, LAYOUT_SINCE, BFLOAT16_SINCE),
    "LSTM": (1, MODERN_SINCE, LAYOUT_SINCE, BFLOAT16_SINCE),
    "RNN": (1, MODERN_SINCE, LAYOUT_SINCE, BFLOAT16_SINCE),
}
CAST_BFLOAT16_SINCE = 13  # Cast's type list holds bfloat16 from this opset on
