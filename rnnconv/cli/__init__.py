"""The `rnnconv` command: a thin click layer over the Python API (one module per command)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import warnings

import click


class _Deferred(type(sys)):
    """Stands in sys.modules for a module until one of its attributes is read, then imports the real one."""

    def __init__(self, name, spec):
        super().__init__(name)
        self.__spec__ = spec  # what `import name` looks at; reading it must not load the module

    def __getattr__(self, attr):
        import importlib

        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def _defer_sympy() -> None:
    """onnx_ir imports sympy, directly and through its _symbolic_shapes, for symbolic-dimension arithmetic that
    rnnconv never asks for: about 0.17 s of every command's start. Both now load on first use; if onnx_ir
    changes so that it reads them at import, they simply load then. (importlib's LazyLoader does not help:
    on Python 3.11 `import sympy` itself reads the module and loads it.)"""
    import importlib.machinery
    import importlib.util

    if "onnx_ir" in sys.modules or "sympy" in sys.modules:
        return
    onnx_ir, sympy = importlib.util.find_spec("onnx_ir"), importlib.util.find_spec("sympy")
    if onnx_ir is None or sympy is None or onnx_ir.submodule_search_locations is None:
        return
    # Found without importing the onnx_ir package (which would import sympy).
    shapes = importlib.machinery.PathFinder.find_spec("onnx_ir._symbolic_shapes", onnx_ir.submodule_search_locations)
    if shapes is None:
        return
    for spec in (sympy, shapes):
        sys.modules[spec.name] = _Deferred(spec.name, spec)


_defer_sympy()

from rnnconv import __version__  # noqa: E402
from rnnconv.cli.options import COMMANDS, error_text  # noqa: E402
from rnnconv.engine import telemetry  # noqa: E402
from rnnconv.errors import (  # noqa: E402
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_IO,
    EXIT_USAGE,
    RnnconvError,
    RnnconvWarning,
    exit_codes_help,
)

_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())


@click.group(epilog=exit_codes_help())
@click.version_option(__version__, prog_name="rnnconv")
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@click.pass_context
def cli(ctx, debug):
    """Move ONNX GRU/LSTM/RNN layers between opsets, layouts and OpenVINO IR, and prove the numbers were kept.

    \b
    Example: rnnconv upgrade fixtures/lstm.onnx -o out/lstm.onnx
    """
    ctx.obj = {"debug": debug}


for _name in COMMANDS:
    cli.add_command(importlib.import_module(f"rnnconv.cli.{_name}").command)


# numpy's BLAS (OpenBLAS, in numpy's wheels) on one thread unless the environment says otherwise. rnnconv's
# products are matrices times a few columns (checks draw small batches): memory-bound, where a second thread adds
# CPU, not speed (the node checks of a 1 GB LSTM: the same wall time, 1.0 s of CPU against 1.6 s), and its idle
# spinning takes a core from what runs beside (to-openvino's OpenVINO runtime compiling the IR, --jobs).
# Read when numpy loads, which no command has done before main() runs.
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}


def main(argv=None) -> None:
    """Run the CLI: every failure is one line on stderr and an exit code (rnnconv.errors); never a traceback
    unless --debug. Warnings rnnconv raises (RnnconvWarning) are one line each, once; library warnings and log
    records (numpy's RuntimeWarning on NaN weights, onnx_ir's shape inference) are silenced unless --debug."""
    for name, value in BLAS_THREADS.items():
        os.environ.setdefault(name, value)
    telemetry.switch_off()
    args = _debug_first(sys.argv[1:] if argv is None else list(argv))
    debug = args[:1] == ["--debug"]
    with warnings.catch_warnings(), _quiet_logging(debug):
        if not debug:
            warnings.simplefilter("ignore")
        warnings.simplefilter("always", RnnconvWarning)
        warnings.showwarning = _one_line_warning(set())
        code = _run(args, debug)
    sys.exit(code)


def _debug_first(args: list) -> list:
    """`--debug` is the group's option; written after the command (`rnnconv upgrade X -o Y --debug`, what a user
    adds to a failing command line) it is moved before it. Arguments after `--` are left alone."""
    end = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:end]:
        return args
    return ["--debug"] + [a for k, a in enumerate(args) if a != "--debug" or k > end]


def _run(args, debug: bool) -> int:
    """Run the command; every failure is one line and its documented exit code. --debug adds the traceback and
    keeps the code."""
    try:
        cli.main(args=args, prog_name="rnnconv", standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except (click.Abort, KeyboardInterrupt):  # click turns Ctrl-C (KeyboardInterrupt) into Abort
        _traceback(debug)
        click.echo("rnnconv: interrupted (nothing written)", err=True)
        return EXIT_INTERRUPTED
    except _NO_ARGS as e:  # `rnnconv` alone: the help (click >= 8.2)
        click.echo(e.ctx.get_help() if e.ctx is not None else e.format_message())
        return 0
    except click.UsageError as e:  # click's own: bad option, missing argument, invalid choice
        _traceback(debug)
        click.echo(f"rnnconv: error: {_one_line(e.format_message())}", err=True)
        return EXIT_USAGE
    except click.ClickException as e:
        _traceback(debug)
        click.echo(f"rnnconv: error: {_one_line(e.format_message())}", err=True)
        return e.exit_code
    except RnnconvError as e:
        _traceback(debug)
        click.echo(f"rnnconv: error: {error_text(e.message, e.fixes)}", err=True)
        return e.exit_code
    except MemoryError as e:  # a resource limit, not a bug: say how much was asked for
        _traceback(debug)
        click.echo(f"rnnconv: error: out of memory ({_one_line(e) or 'MemoryError'}); nothing written", err=True)
        return EXIT_IO
    except SystemExit as e:  # a command's own sys.exit (verify, check: exit 1)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:  # a bug: still one line
        _traceback(debug)
        click.echo(f"rnnconv: internal error: {type(e).__name__}: {_one_line(e)}"
                   + ("" if debug else " (rerun with --debug for the traceback)"), err=True)
        return EXIT_INTERNAL
    return 0


def _traceback(debug: bool) -> None:
    if debug:
        import traceback

        traceback.print_exc()


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def _one_line_warning(seen: set):
    def show(message, category, filename, lineno, file=None, line=None):
        text = _one_line(message if isinstance(message, Warning) else Warning(message))
        if text in seen:
            return
        seen.add(text)
        label = "warning" if issubclass(category, RnnconvWarning) else f"warning ({category.__name__})"
        click.echo(f"rnnconv: {label}: {text}", err=True)

    return show


@contextlib.contextmanager
def _quiet_logging(debug: bool):
    """Libraries log to stderr through logging's last-resort handler (multi-line, with tracebacks)."""
    if debug:
        yield
        return
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)
