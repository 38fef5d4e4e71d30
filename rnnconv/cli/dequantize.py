from __future__ import annotations

import functools

from rnnconv.cli.batch import converting
from rnnconv.cli.helptext import filled
from rnnconv.cli.options import option


@converting("dequantize", progress=True)
@option("--external-data", is_flag=True, help="Keep the weights in OUT.data beside OUT (the default when the "
                                              "source has external data or its weights pass 1.8 GB).")
@filled
def command(external_data):
    """Replace each com.microsoft DynamicQuantizeLSTM of MODEL by an ONNX LSTM with dequantized float32 weights,
    for runtimes without onnxruntime's quantized LSTM, and report the measured error against onnxruntime's
    quantized run. An approximation: exit {EXIT_OK} only within {DEQUANTIZED} (change it with --atol/--rtol).

    \b
    Example: rnnconv dequantize fixtures/quantized/lstm_int8.onnx -o out/lstm_float.onnx
    """
    from rnnconv.commands.dequantize import dequantize  # on use: `rnnconv --help` stays light

    return functools.partial(dequantize, external_data=external_data or None)
