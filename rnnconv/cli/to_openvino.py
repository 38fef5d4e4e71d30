from __future__ import annotations

import click

from rnnconv.cli.options import force_option, json_option, output_option, verify_options


@click.command("to-openvino")
@click.argument("model", type=click.Path(dir_okay=False))
@output_option
@click.option("--fp16", is_flag=True, help="Store float weights as f16 (decompressed to f32 at load, as "
                                           "ov.save_model does); verified at 2e-3.")
@verify_options
@json_option
@force_option
def command(model, output, fp16, no_verify, atol, rtol, seed, as_json, force):
    """Write MODEL as OpenVINO IR v11 (OUT.xml + OUT.bin), GRU/LSTM/RNN as opset5 Sequence ops.

    Every recurrent node is checked alone, then the whole model: ONNX in rnnconv's engine against the IR in
    rnnconv's IR interpreter, and in the OpenVINO runtime (CPU, f32) when installed. Nothing is written on a
    mismatch (exit 1) or on a construct OpenVINO cannot express (exit 3: peepholes, input_forget, activations
    other than relu/sigmoid/tanh, clip 0), which is never dropped silently.
    """
    from rnnconv.to_openvino import to_openvino

    report = to_openvino(model, output, fp16=fp16, verify=not no_verify, atol=atol, rtol=rtol, seed=seed,
                         force=force)
    if as_json:
        click.echo(report.to_json())
        return
    click.echo(f"{model} -> {output}")
    for line in report.lines():
        click.echo(line)
    click.echo(report.verdict())
