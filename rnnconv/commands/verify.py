"""`rnnconv verify` (`compare_models`): two models, any engines, the same inputs, every output compared by name.
A plan of two models and the engines of each side (verification.plan.Versus), run by verification's one runner.

The files it is asked for (save_inputs, save_outputs, plot) are written atomically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from rnnconv import io
from rnnconv.engine import ENGINES, RNNCONV
from rnnconv.errors import UsageError
from rnnconv.verification.model import open_model
from rnnconv.verification.options import CheckOptions, check_keywords
from rnnconv.verification.plan import CheckPlan, Versus
from rnnconv.verification.report import VerifyReport
from rnnconv.verification.runner import verify_plan


def _engine_list(value: Optional[str], what: str) -> Optional[tuple[str, ...]]:
    if value is None:
        return None
    if value == "all":
        return ENGINES
    if value not in ENGINES:
        raise UsageError(f"{what} {value!r}: expected one of {', '.join(ENGINES)} or all")
    return (value,)


@check_keywords
def compare_models(reference, candidate, *, engine: str = RNNCONV, reference_engine: Optional[str] = None,
                   candidate_engine: Optional[str] = None, save_inputs=None, save_outputs=None, plot=None,
                   force: bool = False, options: Optional[CheckOptions] = None) -> VerifyReport:
    """Run REFERENCE and CANDIDATE (ONNX or OpenVINO IR, paths or in memory) on the same inputs and compare
    every output by name.

    engine: "rnnconv" (default: spec-exact numpy, float64), "onnxruntime", "openvino" (CPU, f32) or "all"
    (every engine that can run the model) for both sides; reference_engine / candidate_engine override one
    side. Every run is compared with the baseline: the reference in the first of its engines that runs it.
    The check options by name (CheckOptions: seed, runs, dims, ranges, inputs, atol, rtol), or `options`: all of
    them at once, as every converting command takes them.
    save_inputs / save_outputs (.npz) and plot (.png) are written atomically, never over a model, and over an
    existing file only with force.
    """
    ref, cand = open_model(reference), open_model(candidate)
    written = [Path(p) for p in (save_inputs, save_outputs, plot) if p is not None]
    for out in written:
        given = options.inputs if isinstance(options.inputs, (str, os.PathLike)) else None
        io.guard_output(out, force=force, inputs=(ref.path, cand.path, given))
    if len(set(p.resolve() for p in written)) < len(written):
        raise UsageError("save_inputs, save_outputs and plot must name different files")
    ref_engines = (_engine_list(reference_engine, "reference engine") or _engine_list(engine, "engine")
                   or (RNNCONV,))
    cand_engines = (_engine_list(candidate_engine, "candidate engine") or _engine_list(engine, "engine")
                    or (RNNCONV,))
    if plot is not None:
        _pyplot()  # fail before the runs, not after them
    report = VerifyReport("verify", reference=ref.describe(), candidate=cand.describe())
    verify_plan(CheckPlan(versus=Versus(ref, cand, ref_engines, cand_engines)), options, report)
    if save_inputs is not None:
        _savez(save_inputs, report.feeds)
    if save_outputs is not None:
        _savez(save_outputs, report.outputs)
    if plot is not None:
        plot_errors(report, plot)
    return report


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


verify = compare_models  # the public `rnnconv.verify(reference, candidate, ...)`
