from __future__ import annotations

import click

from rnnconv.cli.options import force_option, json_option, output_option, run_reported, verify_options


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

    What those ops cannot express (peepholes, input_forget, activations other than relu/sigmoid/tanh, clip 0,
    and sequence_lens with dynamic dims, which OpenVINO's CPU plugin ignores) becomes an explicit TensorIterator
    recurrence: never dropped. Every recurrent node is checked alone, then the whole model: the source in
    onnxruntime (rnnconv's engine where onnxruntime cannot run it) against the IR in rnnconv's IR interpreter
    and in the OpenVINO runtime (CPU, f32) when installed. Exit 1 and nothing written on a mismatch; exit 3
    listing every op type that has no OpenVINO mapping.
    """
    from rnnconv.to_openvino import to_openvino

    # The OpenVINO runtime check runs in a child process: a plugin crash fails the check, not the command.
    run_reported(lambda: to_openvino(model, output, fp16=fp16, verify=not no_verify, atol=atol, rtol=rtol,
                                     seed=seed, force=force, isolate=True), as_json)
