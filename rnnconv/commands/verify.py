"""`rnnconv verify` (`compare_models`): two models, any engines, the same inputs, every output compared by name.

The files it is asked for (save_inputs, save_outputs, plot) are written atomically.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from rnnconv import io
from rnnconv.dialects import onnx_quantized
from rnnconv.errors import BadInput, Unsupported, UsageError
from rnnconv.verification import localize
from rnnconv.verification.checks import (
    CheckOptions,
    Run,
    input_sets,
    merge_placements,
    placements_note,
    runnable_sets,
)
from rnnconv.verification.engines import ENGINES, CannotRun, run
from rnnconv.verification.inputs import check_dim_names, read_inputs
from rnnconv.verification.model import open_model
from rnnconv.verification.report import VerifyReport
from rnnconv.verification.results import Check, compare, failed, magnitude
from rnnconv.verification.specs import merge_specs
from rnnconv.verification.time_axis import time_axes
from rnnconv.verification.tolerance import Tolerance


def _engine_list(value: Optional[str], what: str) -> Optional[list[str]]:
    if value is None:
        return None
    if value == "all":
        return list(ENGINES)
    if value not in ENGINES:
        raise UsageError(f"{what} {value!r}: expected one of {', '.join(ENGINES)} or all")
    return [value]


def compare_models(reference, candidate, *, engine: str = "rnnconv", reference_engine: Optional[str] = None,
                   candidate_engine: Optional[str] = None, seed: int = 0,
                   ranges: Optional[Mapping[str, tuple]] = None, dims: Optional[Mapping[str, int]] = None,
                   inputs=None, runs: Optional[int] = None, atol: Tolerance = None, rtol: Tolerance = None,
                   save_inputs=None,
                   save_outputs=None, plot=None, force: bool = False, options: Optional[CheckOptions] = None
                   ) -> VerifyReport:
    """Run REFERENCE and CANDIDATE (ONNX or OpenVINO IR, paths or in memory) on the same inputs and compare
    every output by name.

    engine: "rnnconv" (default: spec-exact numpy, float64), "onnxruntime", "openvino" (CPU, f32) or "all"
    (every engine that can run the model) for both sides; reference_engine / candidate_engine override one
    side. Every run is compared with the baseline: the reference in the first of its engines that runs it.
    ranges: input name -> (lo, hi); dims: symbol, "batch"/"seq" or "INPUT:AXIS" -> size; inputs: an .npz
    path or a dict of arrays (missing inputs are drawn); runs: input sets; atol/rtol: a float, or a dict of
    output name -> float ("*" for the others); defaults: `rnnconv.verification.tolerance`. `options`: all of
    these at once (CheckOptions, as every converting command takes them), instead of seed ... rtol.
    save_inputs / save_outputs (.npz) and plot (.png) are written atomically, never over a model, and over an
    existing file only with force.
    """
    if options is None:
        options = CheckOptions.of(seed=seed, runs=runs, dims=dims, ranges=ranges, inputs=inputs, atol=atol, rtol=rtol)
    seed, runs, dims, ranges, inputs = options.seed, options.runs, options.dims, options.ranges, options.inputs
    ref, cand = open_model(reference), open_model(candidate)
    written = [Path(p) for p in (save_inputs, save_outputs, plot) if p is not None]
    for out in written:
        given = inputs if isinstance(inputs, (str, os.PathLike)) else None
        io.guard_output(out, force=force, inputs=(ref.path, cand.path, given))
    if len(set(p.resolve() for p in written)) < len(written):
        raise UsageError("save_inputs, save_outputs and plot must name different files")
    ref_engines = (_engine_list(reference_engine, "reference engine") or _engine_list(engine, "engine")
                   or ["rnnconv"])
    cand_engines = (_engine_list(candidate_engine, "candidate engine") or _engine_list(engine, "engine")
                    or ["rnnconv"])
    exploring = {"reference": len(ref_engines) > 1, "candidate": len(cand_engines) > 1}
    specs = merge_specs(ref, cand)
    names = ref.output_names()
    dtypes = ref.output_dtypes()
    tolerances = options.tolerances
    tolerances.check_names(names)
    unknown = sorted(set(ranges or {}) - set(specs))
    if unknown:
        raise UsageError(f"range given for no input named {', '.join(unknown)} (inputs: {', '.join(specs) or 'none'})")
    check_dim_names(dims or {}, specs)
    axes = {**time_axes(cand), **time_axes(ref)}

    if plot is not None:
        _pyplot()  # fail before the runs, not after them
    if runs is not None and runs < 1:
        raise UsageError("runs must be at least 1")
    given_sets = read_inputs(inputs, specs) if isinstance(inputs, (str, os.PathLike)) else [dict(inputs or {})]
    if runs is not None and len(given_sets) > 1 and runs != len(given_sets):
        raise UsageError(f"runs={runs}, but the inputs file holds {len(given_sets)} input sets")
    try:  # the sizes the reference runs at (a model may need its own), drawn as every check draws them
        sets, _, size_note = runnable_sets(ref, specs, options, ref_engines)
        sizes_failed = None
    except BadInput as err:  # no engine of the reference runs it at any size: the runs below say which and why
        sets, size_note, sizes_failed = input_sets(specs, options), None, err
    n_runs = len(sets)
    report = VerifyReport("verify", reference=ref.describe(), candidate=cand.describe(),
                          seed=seed if any(len(g) < len(specs) for g in given_sets) else None)
    missing = [n for n in names if n not in cand.output_names()]
    if missing:
        report.notes.append(f"the candidate has no output named {', '.join(missing)}")
    if size_note:
        report.notes.append(size_note)
    saved_inputs, saved_outputs = {}, {}
    active = {"reference": list(ref_engines), "candidate": list(cand_engines)}
    models = {"reference": ref, "candidate": cand}
    baseline = None
    only_ort: dict[str, bool] = {}  # side -> rnnconv's engine ran that whole model in onnxruntime
    for k, (feeds, described) in enumerate(sets):
        report.inputs.append(described)
        prefix = f"run{k}/" if n_runs > 1 else ""
        saved_inputs.update({prefix + n: v for n, v in feeds.items()})
        results = {}
        for side in ("reference", "candidate"):
            for eng in list(active[side]):
                try:
                    placed: dict = {}
                    results[(side, eng)] = run(eng, models[side], feeds, placements=placed)
                    if placed:  # rnnconv's engine: where each node ran
                        merge_placements(report.placements.setdefault(side, {}), placed)
                        only_ort[side] = all(set(c) == {"onnxruntime"} for c in placed.values())
                except CannotRun as err:
                    if not exploring[side]:
                        raise Unsupported(f"{side} {models[side].label}: {eng} cannot run it: {err} (see "
                                          f"`rnnconv check`)", fixes=("another engine",)) from err
                    active[side].remove(eng)
                    report.skipped.append({"side": side, "engine": eng, "reason": str(err)})
        if baseline is None:
            if not active["reference"]:
                why = "; ".join(f"{s['engine']}: {s['reason']}" for s in report.skipped if s["side"] == "reference")
                if sizes_failed is not None:  # on no size drawn for it, as the conversions say it
                    raise BadInput(f"reference {ref.label}: no engine runs it ({why}); {sizes_failed.message}",
                                   fixes=[f for f in sizes_failed.fixes if not f.startswith("verify")])
                raise Unsupported(f"reference {ref.label}: no engine could run it ({why})")
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
            if eng == "onnxruntime" and only_ort.get(side) and (side, "rnnconv") in results:
                same = (f"{side}[onnxruntime]: not compared, the same runtime as {side}[rnnconv] (rnnconv's engine "
                        f"ran the whole {side} model in onnxruntime)")
                report.notes.extend([] if same in report.notes else [same])
                continue
            comparisons = []
            held = tolerances
            if _approximates(eng, models[side]) or _approximates(baseline[1], models[baseline[0]]):
                held = dataclasses.replace(tolerances, dequantized=True)
                note = (f"{side}[{eng}]: OpenVINO's ONNX import computes com.microsoft DynamicQuantizeLSTM otherwise "
                        f"than onnxruntime's kernel, which defines it: held to the 'dequantized' tolerance")
                report.notes.extend([] if note in report.notes else [note])
            for n in names:
                if n not in base:
                    comparisons.append(failed(n, f"{report.baseline} gave no output {n!r}"))
                elif n not in outs:
                    comparisons.append(failed(n, "missing from this run's outputs", np.shape(base[n])))
                else:
                    a, r, why = held.explain(n, dtypes.get(n), np.asarray(base[n]).dtype,
                                                   np.asarray(outs[n]).dtype, magnitude=magnitude(base[n]))
                    comparisons.append(compare(n, base[n], outs[n], a, r, time_axis=axes.get(n)))
                    comparisons[-1].tolerance = why
            subject = f"{side}[{eng}]" + (f" run {k}" if n_runs > 1 else "")
            check = Check(subject, f"{side}[{eng}] vs {report.baseline}", comparisons, run=k)
            if not check.ok:  # where the two runs part, tensors matched by name
                localize.attach(check, Run(models[baseline[0]], baseline[1], outputs=[base]),
                                Run(models[side], eng, outputs=[outs]), feeds, held)
            report.checks.append(check)
    report.engines = {side: active[side] for side in active}
    placed_note = placements_note(report.placements)
    report.notes.extend([placed_note] if placed_note else [])
    if save_inputs is not None:
        _savez(save_inputs, saved_inputs)
    if save_outputs is not None:
        _savez(save_outputs, saved_outputs)
    if plot is not None:
        plot_errors(report, plot)
    return report


def _approximates(engine: str, model) -> bool:
    """OpenVINO reading an ONNX model that holds a DynamicQuantizeLSTM: an approximation of the op by nature
    (`rnnconv check --target openvino` measures it), not a runtime bug."""
    return engine == "openvino" and model.format == "onnx" and onnx_quantized.holds(model.onnx)


def _savez(path, arrays: Mapping[str, np.ndarray]) -> None:
    io.atomic_write(path, lambda f: np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()}), force=True)


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("plotting needs matplotlib: pip install 'rnnconv[plot]'") from None
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
        io.atomic_write(path, lambda f: fig.savefig(f, dpi=100, format="png"), force=True)
    finally:
        plt.close(fig)


def verify(reference, candidate, **kwargs) -> VerifyReport:
    """The public `rnnconv.verify(reference, candidate, ...)`: `compare_models` under the name the API uses."""
    return compare_models(reference, candidate, **kwargs)
