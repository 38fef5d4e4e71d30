from __future__ import annotations

import sys

import click

from rnnconv.cli.options import emit_report, force_option, json_option
from rnnconv.errors import EXIT_VERIFY

ENGINE_CHOICES = click.Choice(["rnnconv", "onnxruntime", "openvino", "all"])


@click.command("verify")
@click.argument("reference", type=click.Path(dir_okay=False))
@click.argument("candidate", type=click.Path(dir_okay=False))
@click.option("--engine", type=ENGINE_CHOICES, default="rnnconv", show_default=True,
              help="Engine for both models: rnnconv (spec-exact numpy, float64), onnxruntime, openvino (CPU, f32), "
                   "or all (every engine that can run the model).")
@click.option("--ref-engine", type=ENGINE_CHOICES, default=None, help="Engine for REFERENCE (overrides --engine).")
@click.option("--cand-engine", type=ENGINE_CHOICES, default=None, help="Engine for CANDIDATE (overrides --engine).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for random inputs.")
@click.option("--range", "ranges", multiple=True, metavar="NAME:LO,HI",
              help="Value range of one input (inclusive for integers). Repeatable.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=N|INPUT:AXIS=N",
              help="Size of a dynamic dim: a symbolic name, batch or seq, or one input's axis. Repeatable.")
@click.option("--inputs", "inputs", type=click.Path(dir_okay=False), default=None,
              help="Inputs from an .npz (keys NAME, or runK/NAME for several sets); missing inputs are drawn.")
@click.option("--runs", type=int, default=None, help="Number of random input sets (default 1).")
@click.option("--save-inputs", type=click.Path(dir_okay=False), default=None,
              help="Write the inputs used to an .npz (readable by --inputs).")
@click.option("--save-outputs", type=click.Path(dir_okay=False), default=None,
              help="Write every engine's outputs to an .npz (keys [runK/]SIDE.ENGINE/OUTPUT).")
@click.option("--atol", multiple=True, metavar="X|NAME=X",
              help="Absolute tolerance, for every output or one output. Repeatable. Default by dtype.")
@click.option("--rtol", multiple=True, metavar="X|NAME=X",
              help="Relative tolerance, for every output or one output. Repeatable. Default by dtype.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Draw the error per time step of recurrent outputs to a PNG (needs matplotlib).")
@json_option
@force_option
def command(reference, candidate, engine, ref_engine, cand_engine, seed, ranges, dims, inputs, runs, save_inputs,
            save_outputs, atol, rtol, plot, as_json, force):
    """Run REFERENCE and CANDIDATE (ONNX .onnx or OpenVINO IR .xml) on the same inputs and compare every output.

    Outputs are matched by name and their shapes must match exactly. Every run is compared with the baseline:
    REFERENCE in its (first) engine. An element is bad when |cand - ref| > atol + rtol * |ref|; default
    tolerances by dtype: float64 1e-7, float32 1e-5, float16 2e-3, bfloat16 2e-2 (atol and rtol alike).

    Exit 0 when they agree, 1 when they do not, 2 on a usage error, 3 when an engine asked for by name cannot
    run a model (see `rnnconv check`), 4 on a bad model or inputs file.

    Example: rnnconv verify fixtures/lstm7_peepholes.onnx lstm.xml --engine all
    """
    from rnnconv import verify

    a_glob, a_per = verify.parse_tolerances(atol, "--atol")
    r_glob, r_per = verify.parse_tolerances(rtol, "--rtol")
    report = verify.compare_models(
        reference, candidate, engine=engine, reference_engine=ref_engine, candidate_engine=cand_engine, seed=seed,
        ranges=verify.parse_ranges(ranges), dims=verify.parse_dims(dims), inputs=inputs, runs=runs,
        atol=_tolerances(a_glob, a_per), rtol=_tolerances(r_glob, r_per), save_inputs=save_inputs,
        save_outputs=save_outputs, plot=plot, force=force)
    emit_report(report, as_json)
    if not report.ok:
        sys.exit(EXIT_VERIFY)  # click's non-standalone main swallows click's own Exit


def _tolerances(glob, per):
    if not per:
        return glob
    return {**per, **({"*": glob} if glob is not None else {})}
