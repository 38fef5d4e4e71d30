from __future__ import annotations

import functools

from rnnconv.cli.batch import converting
from rnnconv.cli.helptext import filled
from rnnconv.cli.options import option


@converting("fuse", progress=True)
@option("--external-data", is_flag=True, help="Keep the weights in OUT.data beside OUT (the default when the "
                                              "source has external data or its weights pass 1.8 GB).")
@option("--free-sequence", is_flag=True, help="Also make the sequence length the export froze symbolic (an "
                                              "interface change, stated in the report; forward recurrences over "
                                              "graph inputs only, checked on a longer sequence).")
@option("--bidirectional", is_flag=True, help="Write a forward and a reverse recurrence over one sequence as one "
                                              "bidirectional node (default: one node per direction; OpenVINO "
                                              "2026.4's ONNX import computes that form wrongly at batch above "
                                              "1, the report says so).")
@filled
def command(external_data, free_sequence, bidirectional):
    """Turn each recurrence MODEL writes out as primitive ops back into one ONNX RNN/GRU/LSTM node: nn.LSTMCell,
    nn.GRUCell and nn.RNNCell applied step by step (both PyTorch exporters), dynamo's unrolled nn.RNN, Scan and
    Loop bodies of one cell step (tf2onnx's Loops of Keras LSTM, GRU and SimpleRNN layers, float16 included), a
    cell per If branch. A chain is fused only when the match proves the cell (shared weights, activations, gate
    roles; for a Loop, that it runs the T steps of its sequence); near-misses are left alone and reported. Exit
    {EXIT_UNSUPPORTED} when there is nothing to fuse.

    \b
    Example: rnnconv fuse fixtures/fuse/lstm_cell_dynamo.onnx -o out/lstm_fused.onnx
    """
    from rnnconv.commands.fuse import fuse  # on use: `rnnconv --help` stays light

    return functools.partial(fuse, external_data=external_data or None, free_sequence=free_sequence,
                             bidirectional=bidirectional)
