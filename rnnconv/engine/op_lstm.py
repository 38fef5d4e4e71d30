"""ONNX LSTM (versions 1, 7, 14, 22): https://onnx.ai/onnx/operators/onnx__LSTM.html

it = f(Xt*(Wi^T) + Ht-1*(Ri^T) + Pi (.) Ct-1 + Wbi + Rbi)
ft = f(Xt*(Wf^T) + Ht-1*(Rf^T) + Pf (.) Ct-1 + Wbf + Rbf)      input_forget: ft = 1 - it
ct = g(Xt*(Wc^T) + Ht-1*(Rc^T) + Wbc + Rbc)
Ct = ft (.) Ct-1 + it (.) ct
ot = f(Xt*(Wo^T) + Ht-1*(Ro^T) + Po (.) Ct + Wbo + Rbo)
Ht = ot (.) h(Ct)
The loop is `recurrence._lstm_loop`.
"""

from __future__ import annotations

import numpy as np

from rnnconv.engine.recurrence import run_onnx_node


def lstm(
    X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
    *,
    hidden_size=None,
    direction="forward",
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    input_forget=0,
    layout=0,
    output_sequence=0,
    dtype=np.float64,
):
    """(Y, Y_h, Y_c) in X's dtype, computed in `dtype`. `output_sequence` (version 1) only says whether Y
    is an output: Y is always returned and the caller drops it."""
    return run_onnx_node(
        "LSTM", X, W, R, B, sequence_lens, initial_h, initial_c, P,
        hidden_size=hidden_size, direction=direction, activations=activations,
        activation_alpha=activation_alpha, activation_beta=activation_beta, clip=clip,
        input_forget=input_forget, layout=layout, dtype=dtype,
    )
