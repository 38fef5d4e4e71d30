"""The `rnnconv` command: a thin click layer over the Python API (one module per command)."""

from __future__ import annotations

import importlib
import sys

import click

from rnnconv import __version__
from rnnconv.errors import EXIT_CODES_HELP, RnnconvError

# Each entry is a module in rnnconv/cli/ defining `command`; adding a command is one line here.
COMMANDS = ["inspect", "upgrade", "downgrade", "layout", "to_openvino", "verify", "check"]

EXIT_INTERNAL = 70


@click.group(epilog=EXIT_CODES_HELP + f" {EXIT_INTERNAL} internal error (a bug: please report it with --debug).")
@click.version_option(__version__, prog_name="rnnconv")
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@click.pass_context
def cli(ctx, debug):
    """Move ONNX GRU/LSTM/RNN layers between opsets, layouts and OpenVINO IR, and prove the numbers were kept."""
    ctx.obj = {"debug": debug}


for _name in COMMANDS:
    cli.add_command(importlib.import_module(f"rnnconv.cli.{_name}").command)


def main(argv=None) -> None:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=argv, prog_name="rnnconv", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.Abort:
        click.echo("rnnconv: aborted", err=True)
        sys.exit(EXIT_INTERNAL)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except RnnconvError as e:
        if debug:
            raise
        click.echo(f"rnnconv: error: {e}", err=True)
        sys.exit(e.exit_code)
    except Exception as e:  # a bug: still one line unless --debug
        if debug:
            raise
        click.echo(f"rnnconv: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)",
                   err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(0)
