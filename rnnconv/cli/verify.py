from __future__ import annotations

import sys

import click

from rnnconv.cli.options import (
    check_options,
    check_values,
    emit_report,
    force_option,
    json_option,
    option,
)
from rnnconv.cli.helptext import filled
from rnnconv.engine import ENGINES, RNNCONV
from rnnconv.errors import EXIT_VERIFY

ENGINE_CHOICES = click.Choice([*ENGINES, "all"])


@click.command("verify")
@click.argument("reference", type=click.Path(dir_okay=False))
@click.argument("candidate", type=click.Path(dir_okay=False))
@option("--engine", type=ENGINE_CHOICES, default=RNNCONV, show_default=True,
        help="Engine for both models: rnnconv (spec-exact numpy, float64), onnxruntime, openvino (CPU, f32), "
             "or all (every engine that can run the model).")
@option("--ref-engine", "reference_engine", type=ENGINE_CHOICES, default=None,
        help="Engine for REFERENCE (overrides --engine).")
@option("--cand-engine", "candidate_engine", type=ENGINE_CHOICES, default=None,
        help="Engine for CANDIDATE (overrides --engine).")
@check_options
@option("--save-inputs", type=click.Path(dir_okay=False), default=None,
        help="Write the inputs used to an .npz (readable by --inputs).")
@option("--save-outputs", type=click.Path(dir_okay=False), default=None,
        help="Write every engine's outputs to an .npz (keys [runK/]SIDE.ENGINE/OUTPUT).")
@option("--plot", type=click.Path(dir_okay=False), default=None,
        help="Draw the error per time step of recurrent outputs to a PNG (needs matplotlib).")
@json_option
@force_option
@filled
def command(reference, candidate, engine, reference_engine, candidate_engine, save_inputs, save_outputs, plot,
            as_json, force, **values):
    """Run REFERENCE and CANDIDATE (ONNX .onnx or OpenVINO IR .xml) on the same inputs and compare every output.

    Outputs are matched by name and their shapes must match exactly. Every run is compared with the baseline:
    REFERENCE in its (first) engine. An element is bad when |cand - ref| > atol + rtol * |ref|; default
    tolerances by dtype: {TOLERANCE_DEFAULTS}. A comparison that fails names the first node where the two runs
    part and why (the node computes differently given identical inputs, or its inputs already differed); one that
    differs only by run-time rounding of the reference's quantizers passes with a warning.

    Exit {EXIT_OK} when they agree, {EXIT_VERIFY} when they do not, {EXIT_USAGE} on a usage error,
    {EXIT_UNSUPPORTED} when an engine asked for by name cannot run a model (see `rnnconv check`),
    {EXIT_BAD_INPUT} on a bad model or inputs file.

    \b
    Example: rnnconv verify fixtures/torch/lstm_batch_first_legacy14.onnx fixtures/openvino/lstm_batch_first_legacy14.xml --engine all
    """
    from rnnconv.commands.verify import (
        compare_models,  # on use: `rnnconv --help` stays light
    )

    report = compare_models(reference, candidate, engine=engine, reference_engine=reference_engine,
                            candidate_engine=candidate_engine, save_inputs=save_inputs, save_outputs=save_outputs,
                            plot=plot, force=force, options=check_values(values))
    emit_report(report, as_json)
    if not report.ok:
        sys.exit(EXIT_VERIFY)  # click's non-standalone main swallows click's own Exit
