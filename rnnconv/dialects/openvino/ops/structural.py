"""The IR types the table does not translate layer by layer, with where each part of their entry lives: the
graph's ends (Parameter, Const, Result), the recurrent layers (GRUSequence / LSTMSequence / RNNSequence-5, and the
Cells of TensorIterator bodies) and control flow (TensorIterator-1, Loop-5, If-8). Their kernels are the engine's
(`rnnconv.engine.ir_graph`): the recurrence core, and the interpreter run again on a body.
"""

from __future__ import annotations

from rnnconv.dialects.openvino.gates import CELLS, SEQUENCES
from rnnconv.dialects.openvino.registry import READ_ONLY, entry, shape, without
from rnnconv.layer import KINDS

_ENDS = ("Parameter", "Const", "Result")
without("to_onnx", "Parameter", why="to_onnx: a graph input")
without("to_onnx", "Const", why="to_onnx: an initializer, or folded into the nodes reading it (ir_facts)")
without("to_onnx", "Result", why="to_onnx: a graph output")
without("shape", *_ENDS, why="its port is given: IRGraph.parameter / const / result")
without("kernel", *_ENDS, why="the interpreter's loop itself: a Parameter is fed, a Const read, a Result returned")

for _t, _kind in SEQUENCES.items():
    entry(_t).onnx = (_kind,)
without("to_onnx", *SEQUENCES, why="to_onnx: the recurrent mapping (gate order and biases: `gates`)")
without("to_onnx", *CELLS, why="to_onnx: the TensorIterator over one cell step (`tensor_iterator`)")
without("shape", *CELLS, why=READ_ONLY)

entry("TensorIterator").onnx = KINDS
entry("Loop").onnx = ("Loop",)
entry("If").onnx = ("If",)
without("to_onnx", "TensorIterator", "Loop", "If",
        why="control_flow: ONNX If and Loop, each body converted alone")
without("shape", "TensorIterator", "Loop", "If",
        why="its ports are its body's, given when the layer is built (lowering)")


@shape(*SEQUENCES)
def _sequence_shape(layer, inputs, d, c, et):
    """GRUSequence-5 / LSTMSequence-5 / RNNSequence-5: Y [N, D, T, H], Ho [N, D, H] (, Co [N, D, H]), D from
    W's leading axis."""
    x, w = d[0], d[4 if SEQUENCES[layer.type] == "LSTM" else 3]
    n, tt = (x[0], x[1]) if x else (-1, -1)
    nd = w[0] if w else -1
    h = int(layer.attrs["hidden_size"])
    outs = [(et, [n, nd, tt, h]), (et, [n, nd, h])]
    if SEQUENCES[layer.type] == "LSTM":
        outs.append((et, [n, nd, h]))
    return outs

