"""`rnnconv verify` (`compare_models`): two models, any engines, the same inputs, every output compared by name.

The files it is asked for (--save-inputs, --save-outputs, --plot) are written atomically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional

import numpy as np

from rnnconv import io
from rnnconv.errors import UsageError, Unsupported
from rnnconv.verify.engines import ENGINES, CannotRun, run
from rnnconv.verify.inputs import check_dim_names, check_inputs, draw_inputs, read_inputs
from rnnconv.verify.model import open_model
from rnnconv.verify.report import TOLERANCES, Check, OutputComparison, compare, default_tolerances
from rnnconv.verify.specs import merge_specs
from rnnconv.verify.time_axis import time_axes
from rnnconv.verify.verify_report import VerifyReport


def parse_tolerances(items: Iterable[str], option: str) -> tuple[Optional[float], dict[str, float]]:
    """`X` (every output) or `NAME=X` (one output); returns (global, per output)."""
    glob, per = None, {}
    for item in items:
        name, sep, value = str(item).rpartition("=")
        try:
            x = float(value)
        except ValueError:
            raise UsageError(f"{option} {item!r}: expected X or NAME=X") from None
        if x < 0:
            raise UsageError(f"{option} {item!r}: a tolerance must not be negative")
        if sep:
            per[name] = x
        else:
            glob = x
    return glob, per


def _tolerance_for(name: str, dtype, atol, rtol) -> tuple[float, float]:
    floating = dtype is not None and np.dtype(dtype).name in TOLERANCES
    a_def, r_def = default_tolerances(dtype if floating else np.float32)
    a = atol.get(name, atol.get("*", a_def)) if isinstance(atol, Mapping) else (a_def if atol is None else atol)
    r = rtol.get(name, rtol.get("*", r_def)) if isinstance(rtol, Mapping) else (r_def if rtol is None else rtol)
    return float(a), float(r)


def _engine_list(value: Optional[str], option: str) -> Optional[list[str]]:
    if value is None:
        return None
    if value == "all":
        return list(ENGINES)
    if value not in ENGINES:
        raise UsageError(f"{option} {value!r}: expected one of {', '.join(ENGINES)} or all")
    return [value]


def compare_models(reference, candidate, *, engine: str = "rnnconv", reference_engine: Optional[str] = None,
                   candidate_engine: Optional[str] = None, seed: int = 0,
                   ranges: Optional[Mapping[str, tuple]] = None, dims: Optional[Mapping[str, int]] = None,
                   inputs=None, runs: Optional[int] = None, atol=None, rtol=None, save_inputs=None,
                   save_outputs=None, plot=None, force: bool = False) -> VerifyReport:
    """Run REFERENCE and CANDIDATE (ONNX or OpenVINO IR, paths or in memory) on the same inputs and compare
    every output by name.

    engine: "rnnconv" (default: spec-exact numpy, float64), "onnxruntime", "openvino" (CPU, f32) or "all"
    (every engine that can run the model) for both sides; reference_engine / candidate_engine override one
    side. Every run is compared with the baseline: the reference in the first of its engines that runs it.
    ranges: input name -> (lo, hi); dims: symbol, "batch"/"seq" or "INPUT:AXIS" -> size; inputs: an .npz
    path or a dict of arrays (missing inputs are drawn); runs: input sets; atol/rtol: a float, or a dict of
    output name -> float ("*" for the others); defaults by the reference output's dtype (TOLERANCES).
    save_inputs / save_outputs (.npz) and plot (.png) are written atomically, never over a model, and over an
    existing file only with force.
    """
    ref, cand = open_model(reference), open_model(candidate)
    written = [Path(p) for p in (save_inputs, save_outputs, plot) if p is not None]
    for out in written:
        given = inputs if isinstance(inputs, (str, os.PathLike)) else None
        io.guard_output(out, force=force, inputs=(ref.path, cand.path, given))
    if len(set(p.resolve() for p in written)) < len(written):
        raise UsageError("--save-inputs, --save-outputs and --plot must name different files")
    ref_engines = _engine_list(reference_engine, "--ref-engine") or _engine_list(engine, "--engine") or ["rnnconv"]
    cand_engines = _engine_list(candidate_engine, "--cand-engine") or _engine_list(engine, "--engine") or ["rnnconv"]
    exploring = {"reference": len(ref_engines) > 1, "candidate": len(cand_engines) > 1}
    specs = merge_specs(ref, cand)
    names = ref.output_names()
    dtypes = ref.output_dtypes()
    for option, tol in (("--atol", atol), ("--rtol", rtol)):
        if isinstance(tol, Mapping):
            unknown = sorted(set(tol) - set(names) - {"*"})
            if unknown:
                raise UsageError(f"{option}: no output named {', '.join(unknown)} (outputs: {', '.join(names)})")
    unknown = sorted(set(ranges or {}) - set(specs))
    if unknown:
        raise UsageError(f"--range: no input named {', '.join(unknown)} (inputs: {', '.join(specs) or 'none'})")
    check_dim_names(dims or {}, specs)
    axes = {**time_axes(cand), **time_axes(ref)}

    if plot is not None:
        _pyplot()  # fail before the runs, not after them
    given_sets: list[dict] = [{}]
    if isinstance(inputs, (str, os.PathLike)):
        given_sets = read_inputs(inputs, specs)
    elif inputs is not None:
        given_sets = [check_inputs(dict(inputs), specs, "inputs")]
    if runs is not None and runs < 1:
        raise UsageError("--runs must be at least 1")
    if runs is not None and len(given_sets) > 1 and runs != len(given_sets):
        raise UsageError(f"--runs {runs}: the inputs file holds {len(given_sets)} input sets")
    n_runs = len(given_sets) if len(given_sets) > 1 else (runs or 1)
    rng = np.random.default_rng(seed)
    report = VerifyReport("verify", reference=ref.describe(), candidate=cand.describe(),
                          seed=seed if any(len(g) < len(specs) for g in given_sets) else None)
    missing = [n for n in names if n not in cand.output_names()]
    if missing:
        report.notes.append(f"the candidate has no output named {', '.join(missing)}")
    saved_inputs, saved_outputs = {}, {}
    active = {"reference": list(ref_engines), "candidate": list(cand_engines)}
    models = {"reference": ref, "candidate": cand}
    baseline = None
    for k in range(n_runs):
        given = given_sets[k] if len(given_sets) > 1 else given_sets[0]
        feeds, described = draw_inputs(specs, rng, dims or {}, ranges or {}, given)
        report.inputs.append(described)
        prefix = f"run{k}/" if n_runs > 1 else ""
        saved_inputs.update({prefix + n: v for n, v in feeds.items()})
        results = {}
        for side in ("reference", "candidate"):
            for eng in list(active[side]):
                try:
                    results[(side, eng)] = run(eng, models[side], feeds)
                except CannotRun as err:
                    if not exploring[side]:
                        raise Unsupported(f"{side} {models[side].label}: {eng} cannot run it: {err} "
                                          f"(see `rnnconv check`, or choose another --engine)") from err
                    active[side].remove(eng)
                    report.skipped.append({"side": side, "engine": eng, "reason": str(err)})
        if baseline is None:
            if not active["reference"]:
                raise Unsupported(f"reference {ref.label}: no engine could run it")
            baseline = ("reference", active["reference"][0])
            report.baseline = f"{baseline[0]}[{baseline[1]}]"
        if baseline not in results:
            raise Unsupported(f"the baseline {report.baseline} could not run input set {k}: "
                              f"{report.skipped[-1]['reason'] if report.skipped else 'unknown reason'}")
        base = results[baseline]
        for (side, eng), outs in results.items():
            saved_outputs.update({f"{prefix}{side}.{eng}/{n}": v for n, v in outs.items() if n in names})
            if (side, eng) == baseline:
                continue
            comparisons = []
            for n in names:
                a, r = _tolerance_for(n, dtypes.get(n), atol, rtol)
                if n not in base:
                    comparisons.append(OutputComparison(n, (), 0.0, 0.0, 0.0, 0, 0.0, None,
                                                        problem=f"{report.baseline} gave no output {n!r}"))
                elif n not in outs:
                    shape = np.shape(base[n])
                    comparisons.append(OutputComparison(n, shape, float("inf"), float("inf"), float("inf"),
                                                        int(np.prod(shape)), 1.0, None, atol=a, rtol=r,
                                                        problem="missing from this run's outputs"))
                else:
                    comparisons.append(compare(n, base[n], outs[n], a, r, time_axis=axes.get(n)))
            subject = f"{side}[{eng}]" + (f" run {k}" if n_runs > 1 else "")
            report.checks.append(Check(subject, f"{side}[{eng}] vs {report.baseline}", comparisons, run=k))
    report.engines = {side: active[side] for side in active}
    if save_inputs is not None:
        _savez(save_inputs, saved_inputs)
    if save_outputs is not None:
        _savez(save_outputs, saved_outputs)
    if plot is not None:
        plot_errors(report, plot)
    return report


def _savez(path, arrays: Mapping[str, np.ndarray]) -> None:
    _write_atomically(Path(path), lambda f: np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()}))


def _write_atomically(out: Path, write: Callable) -> None:
    """`write(file)` into a temporary file beside `out`, then a rename: no partial file is ever left."""
    import tempfile

    folder = out.parent if str(out.parent) else Path(".")
    tmp = None
    try:
        with tempfile.NamedTemporaryFile("wb", dir=folder, prefix=f".{out.name}.", suffix=".tmp",
                                         delete=False) as f:
            tmp = Path(f.name)
            write(f)
        os.replace(tmp, out)
    except OSError as err:
        from rnnconv.errors import IOFailure

        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    finally:
        if tmp is not None and tmp.exists():
            tmp.unlink()


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'rnnconv[plot]'") from None
    return plt


def plot_errors(report: VerifyReport, path) -> None:
    """Max |error| per time step of each recurrent output, one panel per output (needs matplotlib)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    series: dict[str, list] = {}
    for c in report.checks:
        for o in c.outputs:
            if o.max_abs_per_step:
                series.setdefault(o.name, []).append((c.subject, o))
    n = max(len(series), 1)
    fig, axes = plt.subplots(n, 1, figsize=(7, 2.8 * n), squeeze=False)
    if not series:
        axes[0][0].text(0.5, 0.5, "no output with a time axis", ha="center", va="center")
        axes[0][0].set_axis_off()
    for ax, (name, items) in zip(axes[:, 0], series.items()):
        for subject, o in items:
            errors = np.maximum(np.asarray(o.max_abs_per_step, dtype=float), 1e-12)
            ax.semilogy(range(len(errors)), errors, marker="o", label=f"{subject} vs {report.baseline}")
            ax.axhline(max(o.atol or 0.0, 1e-12), linestyle="--", linewidth=0.8, color="gray")
        ax.set_title(f"{name}: max |error| per time step (axis {items[0][1].time_axis}); dashed: atol")
        ax.set_xlabel("time step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize="small")
    fig.suptitle(report.verdict(), fontsize="small")
    fig.tight_layout()
    try:
        _write_atomically(Path(path), lambda f: fig.savefig(f, dpi=100, format="png"))
    finally:
        plt.close(fig)


def verify(reference, candidate, **kwargs) -> VerifyReport:
    """The public `rnnconv.verify(reference, candidate, ...)`: `compare_models` under the name the API uses."""
    return compare_models(reference, candidate, **kwargs)
