"""Spec-exact numpy kernels for the ONNX recurrent ops, named and shaped as the spec names them."""

from rnnconv.engine.op_gru import gru
from rnnconv.engine.op_lstm import lstm
from rnnconv.engine.op_rnn import rnn

KERNELS = {"LSTM": lstm, "GRU": gru, "RNN": rnn}

__all__ = ["KERNELS", "gru", "lstm", "rnn"]
