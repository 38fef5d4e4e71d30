"""Options shared by the commands (one place, as Polygraphy's argument groups): how outputs are compared and inputs
made (`check_options`, the same for `verify` and every converting command), how much is verified
(`verify_options`), and how reports are printed. The command-line text is parsed into API values here, and only
here.
"""

from __future__ import annotations

from typing import Iterable

import click

from rnnconv.errors import UsageError, VerificationFailed
from rnnconv.verification import ALL_OUTPUTS, VERIFY_MODES

# API parameter -> the flag that sets it, filled by `option` as commands are defined: an error's fixes
# ("opset=14") are printed as flags (--opset 14).
FLAGS: dict[str, str] = {}


# Each entry is a module in rnnconv/cli/ defining `command` (rnnconv/cli/__init__.py adds them in this order);
# adding a command is one line here.
COMMANDS = ["inspect", "upgrade", "downgrade", "layout", "dequantize", "to_openvino", "from_openvino", "verify",
            "check", "fuse", "settle_ifs"]

def option(*decls, **kwargs):
    """click.option, remembering which flag sets which API parameter."""
    opt = click.Option(decls, **kwargs)
    longs = [d for d in opt.opts if d.startswith("--")]
    FLAGS.setdefault(opt.name, longs[0] if longs else opt.opts[0])
    return click.option(*decls, **kwargs)


def fix_text(fix: str) -> str:
    """An error's fix ("opset=14", "dims", "dequantize") as the command line spells it ("--opset 14", "--dim",
    "rnnconv dequantize": a fix that is another API call is that command)."""
    name, sep, value = fix.partition("=")
    flag = FLAGS.get(name)
    if flag is None:
        return f"rnnconv {name.replace('_', '-')}" if not sep and name in COMMANDS else fix
    if sep and FLAGS.get(name) and value.lower() == "true":
        return flag
    return f"{flag} {value}" if sep else flag


def error_text(message: str, fixes=()) -> str:
    """One line: the message, then what would fix it in command-line terms."""
    text = " ".join(str(message).split())
    return text + (f" (try {', or '.join(fix_text(f) for f in fixes)})" if fixes else "")


json_option = option("--json", "as_json", is_flag=True, help="Print the result as JSON (for CI).")
force_option = option("--force", is_flag=True, help="Overwrite an existing output file.")


def check_options(f):
    """--atol, --rtol, --seed, --runs, --dim, --range, --inputs: how inputs are made and outputs compared."""
    f = option("--inputs", "inputs", type=click.Path(dir_okay=False), default=None,
                     help="Inputs from an .npz (keys NAME, or runK/NAME for several sets); missing inputs are "
                          "drawn.")(f)
    f = option("--range", "ranges", multiple=True, metavar="NAME:LO,HI",
                     help="Value range of one input (inclusive for integers). Repeatable.")(f)
    f = option("--dim", "dims", multiple=True, metavar="NAME=N|INPUT:AXIS=N",
                     help="Size of a dynamic dim: a symbolic name, batch or seq, or one input's axis. "
                          "Repeatable.")(f)
    f = option("--runs", type=click.IntRange(min=1), default=None,
                     help="Number of random input sets (default 1).")(f)
    f = option("--seed", type=int, default=0, show_default=True, help="Seed for random inputs.")(f)
    f = option("--rtol", multiple=True, metavar="X|NAME=X",
                     help="Relative tolerance, for every output or one output. Repeatable. Default by dtype.")(f)
    f = option("--atol", multiple=True, metavar="X|NAME=X",
                     help="Absolute tolerance, for every output or one output. Repeatable. Default by dtype.")(f)
    return f


CHECK_OPTIONS = ("atol", "rtol", "seed", "runs", "dims", "ranges", "inputs")


def check_values(atol, rtol, seed, runs, dims, ranges, inputs):
    """The values of check_options as the API's CheckOptions, built once for every model a command converts."""
    from rnnconv.verification.options import CheckOptions  # on use: `rnnconv --help` stays light

    return CheckOptions.of(atol=parse_tolerance(atol, "--atol"), rtol=parse_tolerance(rtol, "--rtol"), seed=seed,
                           runs=runs, dims=parse_dims(dims), ranges=parse_ranges(ranges), inputs=inputs)


def verify_options(f, modes: tuple = VERIFY_MODES):
    """--verify, --no-verify: how much of a conversion is checked."""
    f = option("--no-verify", is_flag=True, help="Skip verification (same as --verify none; not "
                                                       "recommended).")(f)
    what = {"full": "each rewritten node, then the whole model before against after",
            "node": "each rewritten node alone, with its real weights and a small batch and sequence (for models "
                    "too large to run twice)",
            "none": "no check"}
    return option("--verify", "verify", type=click.Choice(list(modes)), default="full", show_default=True,
                        help="; ".join(f"{m}: {what[m]}" for m in modes) + ".")(f)


def parse_tolerance(items: Iterable[str], option: str):
    """`X` (every output) and `NAME=X` (one output): a float, a dict, or None when nothing was given."""
    glob, per = None, {}
    for item in items:
        name, sep, value = str(item).rpartition("=")
        try:
            x = float(value)
        except ValueError:
            raise UsageError(f"{option} {item!r}: expected X or NAME=X") from None
        if not x >= 0 or x == float("inf"):
            raise UsageError(f"{option} {item!r}: a tolerance must be a non-negative number")
        if sep:
            per[name] = x
        else:
            glob = x
    if not per:
        return glob
    return {**per, **({ALL_OUTPUTS: glob} if glob is not None else {})}


def parse_dims(items: Iterable[str]) -> dict[str, int]:
    """`NAME=N` (a symbolic dim, or batch / seq), or `INPUT:AXIS=N`."""
    out = {}
    for item in items:
        key, sep, value = str(item).rpartition("=")
        if not sep or not key:
            raise UsageError(f"--dim {item!r}: expected NAME=N or INPUT:AXIS=N")
        try:
            n = int(value)
        except ValueError:
            raise UsageError(f"--dim {item!r}: {value!r} is not an integer") from None
        if n <= 0:
            raise UsageError(f"--dim {item!r}: a size must be positive")
        out[key] = n
    return out


def parse_ranges(items: Iterable[str]) -> dict[str, tuple[float, float]]:
    """`NAME:LO,HI` (inclusive for integer inputs)."""
    out = {}
    for item in items:
        name, sep, bounds = str(item).rpartition(":")
        lo, comma, hi = bounds.partition(",")
        try:
            if not sep or not name or not comma:
                raise ValueError
            lo_v, hi_v = float(lo), float(hi)
        except ValueError:
            raise UsageError(f"--range {item!r}: expected NAME:LO,HI") from None
        if hi_v < lo_v:
            raise UsageError(f"--range {item!r}: LO is above HI")
        out[name] = (lo_v, hi_v)
    return out


def emit_report(report, as_json: bool, *, err: bool = False) -> None:
    """Print a verification report: a summary (or JSON) then the one-line verdict."""
    if as_json:
        click.echo(report.to_json())
        return
    for line in report.lines():
        click.echo(line, err=err)
    where = f"; wrote {report.output}" if report.output else ""
    scope = " (per node only; the whole model was not run)" if report.verified == "node" else ""
    click.echo(f"{report.command}: {report.verdict()}{scope}{where}", err=err)


def run_reported(fn, as_json: bool):
    """Run a converting API call; print the report, also when verification fails (then exit 1)."""
    try:
        result = fn()
    except VerificationFailed as failure:
        if failure.report is not None:
            emit_report(failure.report, as_json, err=not as_json)
        raise
    emit_report(result.report, as_json)
    return result
