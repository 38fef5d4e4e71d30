from __future__ import annotations

import functools

import click

from rnnconv.cli.batch import converting
from rnnconv.cli.helptext import filled
from rnnconv.cli.options import option
from rnnconv.engine import AUTO, ROUTES


@converting("to-openvino", writes=".xml")
@option("--fp16", is_flag=True, help="Store float weights as f16 (decompressed to f32 at load, as ov.save_model "
                                     "does); verified at float16's default tolerance (docs/verification.md).")
@option("--route", type=click.Choice(ROUTES), default=AUTO, show_default=True,
        help="auto: rnnconv's own writer when every op is in its table (no openvino package needed; streams big "
             "models), else OpenVINO's ONNX import with every GRU/LSTM/RNN still mapped by rnnconv. rnnconv or "
             "openvino: that route only.")
@filled
def command(fp16, route):
    """Write each MODEL as OpenVINO IR v11 (OUT.xml + OUT.bin), GRU/LSTM/RNN as opset5 Sequence ops.

    What those ops cannot express (peepholes, input_forget, activations other than relu/sigmoid/tanh, clip 0,
    and sequence_lens with dynamic dims, which OpenVINO's CPU plugin ignores) becomes an explicit TensorIterator
    recurrence: never dropped. Every recurrent node is checked alone, then the whole model: the source in
    onnxruntime (rnnconv's engine where onnxruntime cannot run it) against the IR in rnnconv's IR interpreter
    and in the OpenVINO runtime (CPU, f32) when installed. Exit {EXIT_VERIFY} and nothing written on a mismatch.

    Models with ops outside rnnconv's own table (InstanceNormalization, If bodies...) go through OpenVINO's
    ONNX import when the openvino package is installed, each recurrent node still mapped by rnnconv (the report
    says which nodes rnnconv mapped and what OpenVINO imported); without it, exit {EXIT_UNSUPPORTED} listing the op
    types.
    com.microsoft DynamicQuantizeLSTM becomes onnxruntime's run-time quantization in OpenVINO ops (with
    computed weights: exit {EXIT_UNSUPPORTED}, dequantize first). Several models or directories with --out-dir
    DIR run in batch mode (see --jobs, --report).

    \b
    Example: rnnconv to-openvino fixtures/lstm.onnx -o out/lstm.xml
    """
    return functools.partial(convert, fp16=fp16, route=route)


def convert(source, output, **kwargs):
    from rnnconv.commands.to_openvino import (
        to_openvino,  # on use: `rnnconv --help` stays light
    )

    # The OpenVINO runtime check runs in a child process: a plugin crash fails the check, not the command.
    return to_openvino(source, output, isolate=True, **kwargs)
