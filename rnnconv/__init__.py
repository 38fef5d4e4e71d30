"""rnnconv: move recurrent layers (ONNX GRU, LSTM, RNN) between conventions, and prove the numbers were kept."""

__version__ = "0.1.0"
