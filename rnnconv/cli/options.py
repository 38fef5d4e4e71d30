"""Options shared by every command (one place, as Polygraphy's argument groups)."""

from __future__ import annotations

import click

json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (for CI).")
output_option = click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
                             help="Where to write the converted model.")
force_option = click.option("--force", is_flag=True, help="Overwrite an existing output file.")


def verify_options(f):
    """--no-verify, --atol, --rtol, --seed: the verification contract of every rewriting command."""
    f = click.option("--seed", type=int, default=0, show_default=True, help="Seed for random inputs.")(f)
    f = click.option("--rtol", type=float, default=None, help="Relative tolerance (default by dtype).")(f)
    f = click.option("--atol", type=float, default=None, help="Absolute tolerance (default by dtype).")(f)
    f = click.option("--no-verify", is_flag=True, help="Skip verification (not recommended).")(f)
    return f


def emit_report(report, as_json: bool, *, err: bool = False) -> None:
    """Print a verification report: a summary (or JSON) then the one-line verdict."""
    if as_json:
        click.echo(report.to_json())
        return
    for line in report.lines():
        click.echo(line, err=err)
    where = f"; wrote {report.output}" if report.output else ""
    click.echo(f"{report.command}: {report.verdict()}{where}", err=err)


def run_reported(fn, as_json: bool):
    """Run a rewriting API call; print the report, also when verification fails (then exit 1)."""
    from rnnconv.errors import VerificationFailed

    try:
        result = fn()
    except VerificationFailed as failure:
        if failure.report is not None:
            emit_report(failure.report, as_json, err=not as_json)
        raise
    emit_report(getattr(result, "report", result), as_json)  # a Result, or a bare Report
    return result
