"""ONNX GRU (versions 1, 3, 7, 14, 22): https://onnx.ai/onnx/operators/onnx__GRU.html

zt = f(Xt*(Wz^T) + Ht-1*(Rz^T) + Wbz + Rbz)
rt = f(Xt*(Wr^T) + Ht-1*(Rr^T) + Wbr + Rbr)
ht = g(Xt*(Wh^T) + (rt (.) Ht-1)*(Rh^T) + Rbh + Wbh)      linear_before_reset = 0
ht = g(Xt*(Wh^T) + (rt (.) (Ht-1*(Rh^T) + Rbh)) + Wbh)    linear_before_reset != 0
Ht = (1 - zt) (.) ht + zt (.) Ht-1
The loop is `recurrence._gru_loop`.
"""

from __future__ import annotations

import numpy as np

from rnnconv.engine.recurrence import run_onnx_node


def gru(
    X, W, R, B=None, sequence_lens=None, initial_h=None,
    *,
    hidden_size=None,
    direction="forward",
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    linear_before_reset=0,
    layout=0,
    output_sequence=0,
    dtype=np.float64,
):
    """(Y, Y_h) in X's dtype, computed in `dtype`. `output_sequence` (version 1, 3) only says whether Y is
    an output: Y is always returned and the caller drops it."""
    if direction == "foward":
        # GRU-1's schema default is spelled this way; it means forward.
        direction = "forward"
    Y, Y_h, _ = run_onnx_node(
        "GRU", X, W, R, B, sequence_lens, initial_h,
        hidden_size=hidden_size, direction=direction, activations=activations,
        activation_alpha=activation_alpha, activation_beta=activation_beta, clip=clip,
        linear_before_reset=linear_before_reset, layout=layout, dtype=dtype,
    )
    return Y, Y_h
