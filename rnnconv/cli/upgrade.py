from __future__ import annotations

import functools

import click

from rnnconv.cli.options import converting


@converting("upgrade", progress=True)
@click.option("--opset", type=int, default=None,
              help="Target opset (default: the newest that both onnx and onnxruntime support).")
@click.option("--external-data", is_flag=True, help="Keep the weights in OUT.data beside OUT (the default when "
                                                    "the source has external data or its weights pass 1.8 GB).")
def command(opset, external_data):
    """Move MODEL to a newer opset, GRU/LSTM/RNN nodes included, and verify every rewrite.

    Several models or directories with --out-dir DIR run in batch mode (see --jobs, --report).

    Example: rnnconv upgrade fixtures/gru1_forward.onnx -o gru.onnx
    """
    from rnnconv.opset import upgrade

    return functools.partial(upgrade, opset=opset, external_data=external_data or None)
