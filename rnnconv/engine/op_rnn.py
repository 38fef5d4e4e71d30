"""ONNX RNN (versions 1, 7, 14, 22): https://onnx.ai/onnx/operators/onnx__RNN.html

Ht = f(Xt*(Wi^T) + Ht-1*(Ri^T) + Wbi + Rbi); the loop is `recurrence._rnn_loop`.
"""

from __future__ import annotations

import numpy as np

from rnnconv.engine.recurrence import run_onnx_node


def rnn(
    X, W, R, B=None, sequence_lens=None, initial_h=None,
    *,
    hidden_size=None,
    direction="forward",
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    layout=0,
    output_sequence=0,
    dtype=np.float64,
):
    """(Y, Y_h) in X's dtype, computed in `dtype`. `output_sequence` (version 1) only says whether Y is
    an output: Y is always returned and the caller drops it."""
    Y, Y_h, _ = run_onnx_node(
        "RNN", X, W, R, B, sequence_lens, initial_h,
        hidden_size=hidden_size, direction=direction, activations=activations,
        activation_alpha=activation_alpha, activation_beta=activation_beta, clip=clip, layout=layout, dtype=dtype,
    )
    return Y, Y_h
