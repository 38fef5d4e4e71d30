from __future__ import annotations

import functools

import click

from rnnconv.cli.batch import converting
from rnnconv.cli.options import option
from rnnconv.dialects.onnx_versions import LAYOUT_SINCE


@converting("layout", progress=True)
@option("--to", "to", type=click.Choice(["0", "1"]), required=True,
        help=f"Target layout: 0 sequence-major (X [T,N,I]), 1 batch-major (X [N,T,I], opset >= {LAYOUT_SINCE}).")
@option("--node", "nodes", multiple=True, metavar="NAME", help="Only this recurrent node (repeatable; default: all).")
@option("--opset", type=int, default=None,
        help=f"Also move the model to this opset (layout 1 needs {LAYOUT_SINCE} or higher).")
@option("--external-data", is_flag=True, help="Keep the weights in OUT.data beside OUT (the default when the "
                                              "source has external data or its weights pass 1.8 GB).")
def command(to, nodes, opset, external_data):
    """Give each MODEL's GRU/LSTM/RNN nodes layout 0 or 1, fold the Transposes that cancel, and verify.

    A batch-first export (Transpose -> layout-0 node -> Transpose) becomes one layout-1 node with --to 1;
    --to 0 gives onnxruntime and OpenVINO a layout they run. Inputs and outputs keep their names and shapes.
    Several models or directories with --out-dir DIR run in batch mode (see --jobs, --report).

    \b
    Example: rnnconv layout fixtures/lstm14_layout1_all_features.onnx -o out/lstm_layout0.onnx --to 0
    """
    from rnnconv.commands.layout import (
        convert_layout,  # on use: `rnnconv --help` stays light
    )

    return functools.partial(convert_layout, to=int(to), nodes=list(nodes) or None, opset=opset,
                             external_data=external_data or None)
