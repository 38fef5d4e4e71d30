from __future__ import annotations

import functools

import click

from rnnconv.cli.batch import converting
from rnnconv.cli.helptext import filled
from rnnconv.cli.options import option
from rnnconv.dialects.onnx_versions import LAYOUT_SINCE, MODERN_SINCE


@converting("from-openvino", reads=".xml", writes=".onnx")
@option("--bin", "bin", type=click.Path(dir_okay=False), default=None,
        help="The weights file (default: MODEL with the suffix .bin; one MODEL only).")
@option("--opset", type=int, default=None,
        help="Default-domain opset of the ONNX model (default: the newest that both onnx and onnxruntime support; "
             f"at least {MODERN_SINCE}, at least {LAYOUT_SINCE} with --layout 1).")
@option("--layout", type=click.Choice(["0", "1"]), default="0", show_default=True,
        help="0: time-major recurrent nodes with Transposes around them (onnxruntime runs these); 1: batch-major, "
             f"as OpenVINO holds them (opset >= {LAYOUT_SINCE}; onnxruntime's CPU kernels refuse it).")
@filled
def command(bin, opset, layout):
    """Convert each OpenVINO IR MODEL (MODEL.xml + .bin, IR version 10 or 11) to ONNX, GRUSequence /
    LSTMSequence / RNNSequence as ONNX GRU / LSTM / RNN, and verify the result against the IR.

    Weights stored as fp16 come back decompressed; zero initial states and sequence lengths that OpenVINO
    synthesized from shapes come back absent; a TensorIterator whose body is one LSTMCell / GRUCell / RNNCell step
    becomes the ONNX sequence op, other If / Loop / TensorIterator bodies ONNX If and Loop; convolutions, pooling,
    normalization, attention, STFT and the other layers real models hold map through the op table to-openvino
    shares. The IR runs in rnnconv's IR interpreter and in the OpenVINO runtime (CPU, f32, when installed) against
    the ONNX model in rnnconv's engine and onnxruntime, after each recurrent layer alone (--verify node: the layers
    only): nothing is written on a mismatch (exit {EXIT_VERIFY}), and layers without an ONNX mapping are all
    listed, a layer that needs a newer opset with that opset (exit {EXIT_UNSUPPORTED}). Several models or
    directories with --out-dir DIR run in batch mode (see --jobs, --report).

    \b
    Example: rnnconv from-openvino fixtures/openvino/lstm_batch_first_legacy14.xml -o out/lstm_from_ir.onnx
    """
    from rnnconv.commands.from_openvino import (
        from_openvino,  # on use: `rnnconv --help` stays light
    )

    return functools.partial(from_openvino, bin=bin, opset=opset, layout=int(layout))
