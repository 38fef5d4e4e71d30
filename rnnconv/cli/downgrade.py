from __future__ import annotations

import functools

from rnnconv.cli.batch import converting
from rnnconv.cli.options import option


@converting("downgrade", progress=True)
@option("--opset", type=int, required=True, help="Target opset (older than the model's).")
@option("--external-data", is_flag=True, help="Keep the weights in OUT.data beside OUT (the default when the "
                                              "source has external data or its weights pass 1.8 GB).")
def command(opset, external_data):
    """Move each MODEL to an older opset, GRU/LSTM/RNN nodes included, and verify every rewrite.

    Several models or directories with --out-dir DIR run in batch mode (see --jobs, --report).

    \b
    Example: rnnconv downgrade fixtures/lstm14_layout1_all_features.onnx -o out/lstm7.onnx --opset 7
    """
    from rnnconv.commands.downgrade import (
        downgrade,  # on use: `rnnconv --help` stays light
    )

    return functools.partial(downgrade, opset=opset, external_data=external_data or None)
