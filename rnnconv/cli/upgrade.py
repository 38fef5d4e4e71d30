from __future__ import annotations

import functools

from rnnconv.cli.batch import converting
from rnnconv.cli.options import option


@converting("upgrade", progress=True)
@option("--opset", type=int, default=None,
        help="Target opset (default: the newest that both onnx and onnxruntime support).")
@option("--external-data", is_flag=True, help="Keep the weights in OUT.data beside OUT (the default when the "
                                              "source has external data or its weights pass 1.8 GB).")
def command(opset, external_data):
    """Move each MODEL to a newer opset, GRU/LSTM/RNN nodes included, and verify every rewrite.

    Several models or directories with --out-dir DIR run in batch mode (see --jobs, --report).

    \b
    Example: rnnconv upgrade fixtures/gru1_forward.onnx -o out/gru.onnx
    """
    from rnnconv.commands.upgrade import upgrade  # on use: `rnnconv --help` stays light

    return functools.partial(upgrade, opset=opset, external_data=external_data or None)
