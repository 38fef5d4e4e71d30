from __future__ import annotations

import click

from rnnconv.cli.options import force_option, json_option, output_option, run_reported, verify_options


@click.command("layout")
@click.argument("model", type=click.Path(dir_okay=False))
@output_option
@click.option("--to", "to", type=click.Choice(["0", "1"]), required=True,
              help="Target layout: 0 sequence-major (X [T,N,I]), 1 batch-major (X [N,T,I], opset >= 14).")
@click.option("--node", "nodes", multiple=True, metavar="NAME",
              help="Only this recurrent node (repeatable; default: all).")
@click.option("--opset", type=int, default=None,
              help="Also move the model to this opset (layout 1 needs 14 or higher).")
@verify_options
@json_option
@force_option
def command(model, output, to, nodes, opset, no_verify, atol, rtol, seed, as_json, force):
    """Give MODEL's GRU/LSTM/RNN nodes layout 0 or 1, fold the Transposes that cancel, and verify.

    A batch-first export (Transpose -> layout-0 node -> Transpose) becomes one layout-1 node with --to 1;
    --to 0 gives onnxruntime and OpenVINO a layout they run. Inputs and outputs keep their names and shapes.

    Example: rnnconv layout fixtures/lstm14_layout1.onnx -o lstm_layout0.onnx --to 0
    """
    from rnnconv.layout import convert_layout

    run_reported(lambda: convert_layout(model, output, to=int(to), nodes=list(nodes) or None, opset=opset,
                                        verify="none" if no_verify else "full", atol=atol, rtol=rtol, seed=seed,
                                        force=force), as_json)
