"""Options shared by every command (one place, as Polygraphy's argument groups), and batch mode.

Every converting command is written once as "convert one model" (`converting` below); the same decorator gives
it one model with `-o OUT`, or many models and directories with `--out-dir DIR`, run in parallel with `--jobs`,
summarized in one table and a `--report` JSON.
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

json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (for CI).")
output_option = click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
                             help="Where to write the converted model.")
force_option = click.option("--force", is_flag=True, help="Overwrite an existing output file.")

VERIFY_MODES = ("full", "node", "none")


def verify_options(f, modes: tuple = VERIFY_MODES):
    """--verify, --no-verify, --atol, --rtol, --seed: the verification contract of every rewriting command."""
    f = click.option("--seed", type=int, default=0, show_default=True, help="Seed for random inputs.")(f)
    f = click.option("--rtol", type=float, default=None, help="Relative tolerance (default by dtype).")(f)
    f = click.option("--atol", type=float, default=None, help="Absolute tolerance (default by dtype).")(f)
    f = click.option("--no-verify", is_flag=True, help="Skip verification (same as --verify none; not "
                                                       "recommended).")(f)
    what = {"full": "each rewritten node, then the whole model before against after",
            "node": "each rewritten node alone, with its real weights and a small batch and sequence (for models "
                    "too large to run twice)",
            "none": "no check"}
    f = click.option("--verify", "verify_mode", type=click.Choice(list(modes)), default="full", show_default=True,
                     help="; ".join(f"{m}: {what[m]}" for m in modes) + ".")(f)
    return f


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


# ---- converting commands: one model or many -----------------------------------------------------------------

def converting(name: str, *, reads: str = ".onnx", writes: str = ".onnx", verify_modes: tuple = VERIFY_MODES,
               progress: bool = False):
    """Turn `f(**command_options) -> convert` into the click command `name` over MODEL... .

    `convert(source, output, *, verify, atol, rtol, seed, force)` converts one model and returns a Result or a
    Report; it must be picklable (a module-level function or a functools.partial of one) for --jobs; with
    `progress` it also takes `progress=callback(done, total, label)` (a bar per step on a terminal). One MODEL
    with -o runs as before (the full report printed); --out-dir, several models or a directory (every `reads`
    file under it) run in batch mode: each model is converted whatever happened to the others, one summary
    table, --report FILE.json, exit status the largest exit code of any failed model.
    """

    def wrap(f: Callable[..., Callable]):
        @functools.wraps(f)
        def command(models, output, out_dir, report_file, jobs, quiet, verify_mode, no_verify, atol, rtol, seed,
                    as_json, force, **options):
            from rnnconv.errors import UsageError

            mode = "none" if no_verify else verify_mode
            common = dict(verify=mode, atol=atol, rtol=rtol, seed=seed, force=force)
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
                raise UsageError(f"{report_file}: exists (use --force to overwrite)")
            if single:
                if output is None:
                    raise UsageError("missing -o OUT (or --out-dir DIR)")
                plan = [(str(models[0]), output)]
            else:
                if out_dir is None:
                    raise UsageError("several models or a directory: give --out-dir DIR")
                plan = batch_plan(models, out_dir, reads, writes)
            rows = run_batch(name, convert, plan, common, jobs=jobs, progress=not (quiet or as_json))
            code = max((r["exit_code"] for r in rows), default=0)
            report = {"command": name, "ok": code == 0, "exit_code": code, "verified": mode, "models": rows}
            if report_file is not None:
                _write_report(Path(report_file), report, force=force)
            if as_json:
                click.echo(json.dumps(_finite(report), indent=2))
            elif not quiet or code:
                print_summary(rows, quiet=quiet)
            if code:
                sys.exit(code)

        command = click.option("--quiet", is_flag=True, help="No progress bar; in batch mode only failures are "
                                                             "printed.")(command)
        command = click.option("--jobs", "-j", type=int, default=1, show_default=True,
                               help="Convert this many models at once, each in its own process (batch mode).")(command)
        command = click.option("--report", "report_file", type=click.Path(dir_okay=False), default=None,
                               help="Write every model's result (and verification report) to this JSON file.")(command)
        command = force_option(json_option(verify_options(command, verify_modes)))
        command = click.option("--out-dir", type=click.Path(file_okay=False), default=None,
                               help=f"Batch mode: write each MODEL's result here as NAME{writes} (a directory's "
                                    f"models keep their relative paths).")(command)
        command = click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
                               help="Where to write the converted model (one MODEL).")(command)
        command = click.argument("models", nargs=-1, required=True, type=click.Path(exists=False))(command)
        return click.command(name)(command)

    return wrap


def batch_plan(models, out_dir, reads: str, writes: str) -> list[tuple[str, str]]:
    """(input, output) pairs: files as given, directories searched (recursively, sorted) for `reads` files.

    Each output is OUT_DIR/<relative path, suffix `writes`>; two inputs that would land on the same output
    are a usage error, before anything runs.
    """
    from rnnconv.errors import UsageError

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
    if jobs == 1 or len(plan) == 1:
        with _bar(show, bar_args) as bar:
            for i, (src, dst) in enumerate(plan):
                rows[i] = convert_one(convert, src, dst, common)
                bar.update(1)
        return rows
    import concurrent.futures as cf
    import multiprocessing

    # spawn: a forked child would inherit the parent's onnxruntime / OpenVINO threads in an unknown state.
    with cf.ProcessPoolExecutor(max_workers=min(jobs, len(plan)),
                                mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(convert_one, convert, src, dst, common): i for i, (src, dst) in enumerate(plan)}
        with _bar(show, bar_args) as bar:
            for fut in cf.as_completed(futures):
                i = futures[fut]
                try:
                    rows[i] = fut.result()
                except Exception as err:  # the worker itself died (killed, out of memory)
                    rows[i] = _row(plan[i][0], plan[i][1], 70, f"worker process failed: {type(err).__name__}: "
                                                               f"{err}", None, 0.0)
                bar.update(1)
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

    from rnnconv.errors import EXIT_IO, RnnconvError, RnnconvWarning, VerificationFailed

    start = time.perf_counter()
    report, code, error = None, 0, None
    logging.disable(logging.CRITICAL)  # libraries' log records; the row carries what matters
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", RnnconvWarning)
        try:
            result = convert(src, dst, **common)
            report = getattr(result, "report", result)
        except VerificationFailed as err:
            report, code, error = err.report, err.exit_code, _one_line(err)
        except RnnconvError as err:
            code, error = err.exit_code, _one_line(err)
        except MemoryError as err:
            code, error = EXIT_IO, f"out of memory ({_one_line(err) or 'MemoryError'}); nothing written"
        except Exception as err:  # a bug in rnnconv: this model fails, the batch goes on
            code, error = 70, f"internal error: {type(err).__name__}: {_one_line(err)}"
    row = _row(src, dst if code == 0 else None, code, error, report, time.perf_counter() - start)
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
                  "verification failed" if code == 1 else f"error {code}",
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


def _write_report(path: Path, report: dict, *, force: bool) -> None:
    from rnnconv.errors import IOFailure, UsageError

    if path.exists() and not force:
        raise UsageError(f"{path}: exists (use --force to overwrite)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(_finite(report), indent=2) + "\n")
        os.replace(tmp, path)
    except OSError as err:
        raise IOFailure(f"{path}: cannot write ({err.strerror or err})") from err


def _finite(o):
    """JSON has no NaN or Infinity: such errors are written as strings, as verification reports do."""
    if isinstance(o, float) and (o != o or o in (float("inf"), float("-inf"))):
        return "nan" if o != o else ("inf" if o > 0 else "-inf")
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_finite(v) for v in o]
    return o


def _one_line(e) -> str:
    return " ".join(str(e).split())
