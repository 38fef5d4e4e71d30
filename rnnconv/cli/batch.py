"""Converting commands, one model or many: `converting` turns "convert one model" into a click command that takes
one MODEL with -o, or several models and directories with --out-dir (batch mode: each model converted whatever
happened to the others, in --jobs processes, one summary table, a --report JSON).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import click

from rnnconv.cli.options import (
    check_options,
    check_values,
    error_text,
    force_option,
    json_option,
    option,
    run_reported,
    verify_options,
)
from rnnconv.errors import (
    EXIT_INTERNAL,
    EXIT_IO,
    EXIT_VERIFY,
    RnnconvError,
    RnnconvWarning,
    UsageError,
    VerificationFailed,
)
from rnnconv.verification import VERIFY_MODES


def converting(name: str, *, reads: str = ".onnx", writes: str = ".onnx", verify_modes: tuple = VERIFY_MODES,
               progress: bool = False):
    """Turn `f(**command_options) -> convert` into the click command `name` over MODEL... .

    `convert(source, output, *, verify, force, options)` converts one model and returns a Result; it must be
    picklable (a module-level function or a functools.partial of one) for --jobs; with `progress` it also takes
    `progress=callback(done, total, label)` (a bar per step on a terminal). One MODEL with -o prints the full
    report; --out-dir, several models or a directory (every `reads` file under it) run in batch mode.
    """

    def wrap(f: Callable[..., Callable]):
        @functools.wraps(f)
        def command(models, output, out_dir, report_file, jobs, quiet, verify, no_verify, as_json, force,
                    **options):
            check = check_values(options)
            mode = "none" if no_verify else verify
            common = dict(verify=mode, force=force, options=check)
            convert = f(**options)
            if output is not None and out_dir is not None:
                raise UsageError("give -o OUT (one model) or --out-dir DIR, not both")
            if jobs < 1:
                raise UsageError(f"--jobs {jobs}: must be at least 1")
            single = len(models) == 1 and not Path(models[0]).is_dir() and out_dir is None
            if single and report_file is None:
                if output is None:
                    raise UsageError("missing -o OUT (or --out-dir DIR)")
                if progress and not (quiet or as_json) and sys.stderr.isatty():
                    def with_bar():
                        with StepBar(name) as bar:  # closed before the report is printed
                            return convert(models[0], output, progress=bar, **common)

                    return run_reported(with_bar, as_json)
                return run_reported(lambda: convert(models[0], output, **common), as_json)
            if report_file is not None and Path(report_file).exists() and not force:
                raise UsageError(f"{report_file}: exists", fixes=("force",))
            if single:
                if output is None:
                    raise UsageError("missing -o OUT (or --out-dir DIR)")
                plan = [(str(models[0]), output)]
            else:
                if out_dir is None:
                    raise UsageError("several models or a directory: give --out-dir DIR")
                plan = batch_plan(models, out_dir, reads, writes)
            from rnnconv import io  # on use: `rnnconv --help` stays light
            from rnnconv.verification.report import finite_json

            rows = run_batch(name, convert, plan, common, jobs=jobs, progress=not (quiet or as_json))
            code = max((r["exit_code"] for r in rows), default=0)
            report = {"command": name, "ok": code == 0, "exit_code": code, "verified": mode, "models": rows}
            if report_file is not None:
                io.atomic_write(report_file, lambda out: out.write((json.dumps(finite_json(report), indent=2) + "\n")
                                                                   .encode()), force=force)
            if as_json:
                click.echo(json.dumps(finite_json(report), indent=2))
            elif not quiet or code:
                print_summary(rows, quiet=quiet)
            if code:
                sys.exit(code)

        command = option("--quiet", is_flag=True, help="No progress bar; in batch mode only failures are "
                                                             "printed.")(command)
        command = option("--jobs", "-j", type=int, default=1, show_default=True,
                               help="Convert this many models at once, each in its own process (batch mode).")(command)
        command = option("--report", "report_file", type=click.Path(dir_okay=False), default=None,
                               help="Write every model's result (and verification report) to this JSON file.")(command)
        command = force_option(json_option(check_options(verify_options(command, verify_modes))))
        command = option("--out-dir", type=click.Path(file_okay=False), default=None,
                               help=f"Batch mode: write each MODEL's result here as NAME{writes} (a directory's "
                                    f"models keep their relative paths).")(command)
        command = option("-o", "--output", type=click.Path(dir_okay=False), default=None,
                               help=f"Where to write the converted model (one MODEL; NAME{writes}).")(command)
        command = click.argument("models", nargs=-1, required=True, type=click.Path(exists=False),
                                 metavar="MODEL...")(command)
        return click.command(name)(command)

    return wrap


def batch_plan(models, out_dir, reads: str, writes: str) -> list[tuple[str, str]]:
    """(input, output) pairs: files as given, directories searched (recursively, sorted) for `reads` files.

    Each output is OUT_DIR/<relative path, suffix `writes`>; two inputs that would land on the same output
    are a usage error, before anything runs.
    """
    out = Path(out_dir)
    plan, seen = [], {}
    for m in models:
        path = Path(m)
        if path.is_dir():
            found = sorted(p for p in path.rglob(f"*{reads}") if p.is_file() and not _inside(p, out))
            if not found:
                raise UsageError(f"{path}: no *{reads} file in this directory")
            pairs = [(p, out / p.relative_to(path).with_suffix(writes)) for p in found]
        else:
            pairs = [(path, out / (path.stem + writes))]
        for src, dst in pairs:
            key = os.path.normpath(dst)
            if key in seen:
                raise UsageError(f"{src} and {seen[key]} would both be written to {dst}; convert them separately")
            seen[key] = src
            plan.append((str(src), str(dst)))
    return plan


def _inside(p: Path, folder: Path) -> bool:
    try:
        return p.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def run_batch(name: str, convert, plan: list, common: dict, *, jobs: int = 1, progress: bool = True) -> list[dict]:
    """Convert every (input, output) pair, in `jobs` processes; one result row per model, in plan order."""
    show = progress and sys.stderr.isatty() and len(plan) > 1
    rows: list[Optional[dict]] = [None] * len(plan)
    bar_args = dict(length=len(plan), label=name, file=sys.stderr, show_pos=True)
    from rnnconv.engine import serving

    if jobs == 1 or len(plan) == 1:
        serving.share(True)  # one onnxruntime and one OpenVINO child for the whole batch, not per model
        try:
            with _bar(show, bar_args) as bar:
                for i, (src, dst) in enumerate(plan):
                    rows[i] = convert_one(convert, src, dst, common)
                    bar.update(1)
        finally:
            serving.share(False)
        return _spelled(rows)
    import concurrent.futures as cf
    import multiprocessing

    # Each worker process lives across models, with its own onnxruntime and OpenVINO children (serving).
    with cf.ProcessPoolExecutor(max_workers=min(jobs, len(plan)),
                                mp_context=multiprocessing.get_context(_start_method()),
                                initializer=serving.share) as pool:
        futures = {pool.submit(convert_one, convert, src, dst, common): i for i, (src, dst) in enumerate(plan)}
        with _bar(show, bar_args) as bar:
            for fut in cf.as_completed(futures):
                i = futures[fut]
                try:
                    rows[i] = fut.result()
                except Exception as err:  # the worker itself died (killed, out of memory)
                    rows[i] = _row(plan[i][0], plan[i][1], EXIT_INTERNAL,
                                   f"worker process failed: {type(err).__name__}: {err}", None, 0.0)
                bar.update(1)
    return _spelled(rows)


def _start_method() -> str:
    """fork while this process runs one thread and has not loaded onnxruntime or OpenVINO (the workers then start
    with rnnconv, onnx and numpy already imported: seconds less per worker); else spawn, since a forked child
    would inherit other threads (a runtime's pool) in an unknown state."""
    import multiprocessing
    import threading

    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() != 1 or \
            any(m in sys.modules for m in ("onnxruntime", "openvino")):
        return "spawn"
    try:
        return "fork" if len(os.listdir("/proc/self/task")) == 1 else "spawn"  # native threads too (BLAS pools)
    except OSError:
        return "spawn"


def _spelled(rows: list[dict]) -> list[dict]:
    for row in rows:
        if row.get("error"):
            row["error"] = error_text(row["error"], row.get("fixes") or ())
    return rows


class StepBar:
    """A click progress bar over one model's steps (each node's check, the whole model, writing), on stderr."""

    def __init__(self, label: str):
        self.label, self.bar = label, None

    def __call__(self, done: int, total: int, step: str) -> None:
        if self.bar is None and total:
            self.bar = click.progressbar(length=total, label=self.label, file=sys.stderr, show_pos=True,
                                         item_show_func=lambda item: item)
            self.bar.__enter__()
        if self.bar is not None:
            self.bar.current_item = step
            self.bar.update(max(0, done - self.bar.pos))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n):
        pass


def _bar(show: bool, args: dict):
    return click.progressbar(**args) if show else _NoBar()


def convert_one(convert, src: str, dst: str, common: dict) -> dict:
    """One model of a batch, never raising: its result row (exit code, error, report, time)."""
    import logging
    import warnings

    start = time.perf_counter()
    report, code, error, fixes = None, 0, None, ()
    logging.disable(logging.CRITICAL)  # libraries' log records; the row carries what matters
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", RnnconvWarning)
        try:
            result = convert(src, dst, **common)
            report = getattr(result, "report", result)
        except VerificationFailed as err:
            report, code, error, fixes = err.report, err.exit_code, err.message, err.fixes
        except RnnconvError as err:
            code, error, fixes = err.exit_code, err.message, err.fixes
        except MemoryError as err:
            code, error = EXIT_IO, f"out of memory ({_one_line(err) or 'MemoryError'}); nothing written"
        except Exception as err:  # a bug in rnnconv: this model fails, the batch goes on
            code, error = EXIT_INTERNAL, f"internal error: {type(err).__name__}: {_one_line(err)}"
    row = _row(src, dst if code == 0 else None, code, error, report, time.perf_counter() - start)
    row["fixes"] = list(fixes)  # spelled as flags by the parent (run_batch), which knows every command's flags
    row["warnings"] = list(dict.fromkeys(_one_line(w.message) for w in caught
                                         if issubclass(w.category, RnnconvWarning)))
    return row


def _row(src, dst, code, error, report, seconds) -> dict:
    checks = report.checks if report is not None else []
    return {
        "model": src, "output": dst, "ok": code == 0, "exit_code": code, "error": error,
        "result": "written, not verified" if code == 0 and (report is None or report.verified == "none") else
                  "ok (per node)" if code == 0 and report.verified == "node" else
                  "ok" if code == 0 else
                  "verification failed" if code == EXIT_VERIFY else f"error {code}",
        "verified": report.verified if report is not None else None,
        "nodes_rewritten": len(report.rewrites) if report is not None else None,
        "max_abs": max((c.max_abs for c in checks), default=None),
        "max_rel": max((c.max_rel for c in checks), default=None),
        "seconds": round(seconds, 3),
        "report": json.loads(report.to_json()) if report is not None else None,
    }


def print_summary(rows: list[dict], *, quiet: bool = False) -> None:
    """One table: model, result, nodes rewritten, max abs error, seconds; then each failure's message."""
    shown = [r for r in rows if not (quiet and r["ok"])]
    header = ("model", "result", "nodes", "max error", "time s")
    table = [header] + [(r["model"], r["result"], "-" if r["nodes_rewritten"] is None else str(r["nodes_rewritten"]),
                         "-" if r["max_abs"] is None else f"{r['max_abs']:.3g}", f"{r['seconds']:.2f}")
                        for r in shown]
    widths = [max(len(t[i]) for t in table) for i in range(len(header))]
    for t in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(t, widths)).rstrip())
    for r in rows:
        for w in r.get("warnings") or ():
            click.echo(f"rnnconv: warning: {r['model']}: {w}", err=True)
        if r["error"]:
            named = r["error"] if r["error"].startswith(r["model"]) else f"{r['model']}: {r['error']}"
            click.echo(f"rnnconv: {named}", err=True)
    bad = sum(not r["ok"] for r in rows)
    click.echo(f"{len(rows) - bad} of {len(rows)} model(s) converted" + (f", {bad} failed" if bad else ""))


def _one_line(e) -> str:
    return " ".join(str(e).split())
