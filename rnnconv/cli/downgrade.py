from __future__ import annotations

import functools

import click

from rnnconv.cli.options import converting


@converting("downgrade", progress=True)
@click.option("--opset", type=int, required=True, help="Target opset.")
@click.option("--external-data", is_flag=True, help="Keep the weights in OUT.data beside OUT (the default when "
                                                    "the source has external data or its weights pass 1.8 GB).")
def command(opset, external_data):
    """Move MODEL to an older opset, GRU/LSTM/RNN nodes included, and verify every rewrite.

    Several models or directories with --out-dir DIR run in batch mode (see --jobs, --report).

    Example: rnnconv downgrade fixtures/lstm14_forward.onnx -o lstm7.onnx --opset 7
    """
    from rnnconv.opset import downgrade

    return functools.partial(downgrade, opset=opset, external_data=external_data or None)
