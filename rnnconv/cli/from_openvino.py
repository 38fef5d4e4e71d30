from __future__ import annotations

import click

from rnnconv.cli.options import force_option, json_option, output_option, run_reported, verify_options


@click.command("from-openvino")
@click.argument("model", type=click.Path(dir_okay=False))
@output_option
@click.option("--bin", "bin_path", type=click.Path(dir_okay=False), default=None,
              help="The weights file (default: MODEL with the suffix .bin).")
@click.option("--opset", type=int, default=None,
              help="Default-domain opset of the ONNX model (default: the newest that both onnx and onnxruntime "
                   "support; at least 7, at least 14 with --layout 1).")
@click.option("--layout", type=click.Choice(["0", "1"]), default="0", show_default=True,
              help="0: time-major recurrent nodes with Transposes around them (onnxruntime runs these); "
                   "1: batch-major, as OpenVINO holds them (opset >= 14; onnxruntime's CPU kernels refuse it).")
@verify_options
@json_option
@force_option
def command(model, output, bin_path, opset, layout, no_verify, atol, rtol, seed, as_json, force):
    """Convert OpenVINO IR (MODEL.xml + .bin, IR version 10 or 11) to ONNX, GRUSequence / LSTMSequence /
    RNNSequence as ONNX GRU / LSTM / RNN, and verify the result against the IR.

    Weights stored as fp16 come back decompressed; zero initial states and sequence lengths that OpenVINO
    synthesized from shapes come back absent; a TensorIterator whose body is one LSTMCell / GRUCell / RNNCell step
    becomes the ONNX sequence op. The IR runs in rnnconv's IR interpreter and in the OpenVINO runtime (CPU, f32,
    when installed) against the ONNX model in rnnconv's engine and onnxruntime: nothing is written on a mismatch
    (exit 1), and layers without an ONNX mapping are all listed (exit 3).

    Example: rnnconv from-openvino model.xml -o model.onnx
    """
    from rnnconv.from_openvino import from_openvino

    run_reported(lambda: from_openvino(model, output, bin=bin_path, opset=opset, layout=int(layout),
                                       verify="none" if no_verify else "full", atol=atol, rtol=rtol, seed=seed,
                                       force=force), as_json)
