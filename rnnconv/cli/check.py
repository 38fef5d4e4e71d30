from __future__ import annotations

import sys

import click

from rnnconv.cli.helptext import filled
from rnnconv.cli.options import json_option, option
from rnnconv.engine import ONNX_REFERENCE, ONNXRUNTIME, OPENVINO
from rnnconv.errors import EXIT_VERIFY


@click.command("check")
@click.argument("model", type=click.Path(dir_okay=False))
@option("--target", "targets", multiple=True, required=True,
              type=click.Choice([ONNXRUNTIME, OPENVINO, ONNX_REFERENCE]),
              help="Runtime to check against (repeatable): onnxruntime, openvino (its ONNX import), or "
                   "onnx-reference (onnx's ReferenceEvaluator).")
@json_option
@filled
def command(model, targets, as_json):
    """List every recurrent node of MODEL that a runtime (--target) cannot run, or will run wrongly without saying
    so, each with the rnnconv command that fixes it. An OpenVINO IR MODEL (.xml): what from-openvino makes of each
    recurrent layer, and what each runtime refuses in the IR (openvino) or in the ONNX from-openvino writes. Exit
    {EXIT_VERIFY} when anything is found (for CI gates).

    \b
    Example: rnnconv check fixtures/lstm14_layout1_all_features.onnx --target openvino --target onnxruntime
    """
    from rnnconv.commands import check  # on use: `rnnconv --help` stays light

    report = check.check(model, list(dict.fromkeys(targets)))
    if as_json:
        click.echo(check.to_json(report))
    else:
        for line in check.lines(report):
            click.echo(line)
        n = len(report["findings"])
        click.echo(f"check: {n} finding(s)" if n else "check: nothing found")
    if report["findings"]:
        sys.exit(EXIT_VERIFY)  # click's non-standalone main swallows click's own Exit
