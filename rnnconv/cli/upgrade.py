from __future__ import annotations

import click

from rnnconv.cli.options import force_option, json_option, output_option, run_reported, verify_options


@click.command("upgrade")
@click.argument("model", type=click.Path(dir_okay=False))
@output_option
@click.option("--opset", type=int, default=None,
              help="Target opset (default: the newest that both onnx and onnxruntime support).")
@verify_options
@json_option
@force_option
def command(model, output, opset, no_verify, atol, rtol, seed, as_json, force):
    """Move MODEL to a newer opset, GRU/LSTM/RNN nodes included, and verify every rewrite.

    Example: rnnconv upgrade fixtures/gru1_forward.onnx -o gru.onnx
    """
    from rnnconv.opset import upgrade

    run_reported(lambda: upgrade(model, output, opset=opset, verify="none" if no_verify else "full", atol=atol,
                                 rtol=rtol, seed=seed, force=force), as_json)
