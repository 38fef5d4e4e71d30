from __future__ import annotations

import click

from rnnconv.cli.options import force_option, json_option, output_option, run_reported, verify_options


@click.command("downgrade")
@click.argument("model", type=click.Path(dir_okay=False))
@output_option
@click.option("--opset", type=int, required=True, help="Target opset.")
@verify_options
@json_option
@force_option
def command(model, output, opset, no_verify, atol, rtol, seed, as_json, force):
    """Move MODEL to an older opset, GRU/LSTM/RNN nodes included, and verify every rewrite.

    Example: rnnconv downgrade fixtures/lstm14_forward.onnx -o lstm7.onnx --opset 7
    """
    from rnnconv.opset import downgrade

    run_reported(lambda: downgrade(model, output, opset=opset, verify="none" if no_verify else "full", atol=atol,
                                   rtol=rtol, seed=seed, force=force), as_json)
