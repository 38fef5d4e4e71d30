"""Comparison results, as every command reports them: one output, one check, the report, its text and JSON.

Tolerances follow Polygraphy's contract: an element is bad when |candidate - reference| > atol + rtol * |reference|.
Shapes must match exactly: no axis permutation is ever guessed (a guess is wrong exactly when batch equals sequence
length).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterable, Mapping, Optional

import numpy as np


# Defaults by dtype (documented in README): float64 runs are compared at 1e-7, float32 at 1e-5.
TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (2e-2, 2e-2),
}


def default_tolerances(dtype) -> tuple[float, float]:
    return TOLERANCES.get(np.dtype(dtype).name if not isinstance(dtype, str) else dtype, (1e-5, 1e-5))


@dataclasses.dataclass
class OutputComparison:
    """One output of one comparison. An element is bad when |cand - ref| > atol + rtol * |ref|."""

    name: str
    shape: tuple
    max_abs: float
    max_rel: float
    mean_abs: float
    n_bad: int
    frac_bad: float
    worst_index: Optional[tuple]
    problem: str = ""  # shape/dtype/NaN mismatch, empty when none
    atol: Optional[float] = None
    rtol: Optional[float] = None
    median_abs: float = 0.0
    ref_value: Optional[float] = None  # both values at worst_index
    cand_value: Optional[float] = None
    nan: tuple = (0, 0)  # NaN count in (reference, candidate)
    inf: tuple = (0, 0)
    time_axis: Optional[int] = None  # recurrent outputs: the sequence axis, with the max error per step
    max_abs_per_step: Optional[list] = None

    @property
    def ok(self) -> bool:
        return self.n_bad == 0 and not self.problem

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["ok"] = self.ok
        d["shape"] = list(self.shape)
        d["worst_index"] = None if self.worst_index is None else list(self.worst_index)
        d["nan"], d["inf"] = list(self.nan), list(self.inf)
        return d


@dataclasses.dataclass
class Check:
    """One comparison: a replaced node against its replacement, or a whole model before against after."""

    subject: str
    engines: str
    outputs: list[OutputComparison]
    note: str = ""
    run: Optional[int] = None  # `rnnconv verify`: which input set

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    def as_dict(self) -> dict:
        d = {"subject": self.subject, "engines": self.engines, "ok": self.ok, "max_abs": self.max_abs,
             "max_rel": self.max_rel, "note": self.note, "outputs": [o.as_dict() for o in self.outputs]}
        if self.run is not None:
            d["run"] = self.run
        return d


@dataclasses.dataclass
class Report:
    command: str
    rewrites: list[dict] = dataclasses.field(default_factory=list)
    checks: list[Check] = dataclasses.field(default_factory=list)
    verified: str = "full"  # "full", "node" or "none"
    output: Optional[str] = None
    skipped: list[str] = dataclasses.field(default_factory=list)  # checks not run, each with why


    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict:
        return {"command": self.command, "ok": self.ok, "verified": self.verified, "output": self.output,
                "rewrites": self.rewrites, "checks": [c.as_dict() for c in self.checks], "skipped": self.skipped}

    def to_json(self) -> str:
        return json.dumps(_finite(self.as_dict()), indent=2, default=_json_default)

    def lines(self) -> list[str]:
        out = []
        for r in self.rewrites:
            out.append(f"  rewrote {r['node']}: {r['what']}")
        for c in self.checks:
            status = "ok  " if c.ok else "FAIL"
            out.append(f"  {status} {c.subject} [{c.engines}] max abs {c.max_abs:.3g}, max rel {c.max_rel:.3g}"
                       + (f" ({c.note})" if c.note else ""))
            for o in c.outputs:
                if not o.ok:
                    why = o.problem or (f"{o.n_bad} of {int(np.prod(o.shape)) if o.shape else 1} elements out of "
                                        f"tolerance, worst at {list(o.worst_index or ())}")
                    out.append(f"       output {o.name}: {why}")
        out.extend(f"  skipped {why}" for why in self.skipped)
        if not self.checks:
            out.append("  verification skipped" if self.verified == "none" else "  nothing to verify")
        return out

    def verdict(self) -> str:
        if self.verified == "none":
            return "written without verification"
        n = len(self.checks)
        bad = [c.subject for c in self.checks if not c.ok]
        skipped = f" ({len(self.skipped)} skipped)" if self.skipped else ""
        return f"verified: {n} check(s) passed{skipped}" if not bad else f"verification FAILED: {', '.join(bad)}"


def _finite(o):
    """JSON has no Infinity or NaN: write them as strings so every JSON reader (jq included) can load the report."""
    if isinstance(o, float) and not np.isfinite(o):
        return "nan" if np.isnan(o) else ("inf" if o > 0 else "-inf")
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def compare(name: str, ref: np.ndarray, cand: np.ndarray, atol: float, rtol: float, *,
            time_axis: Optional[int] = None) -> OutputComparison:
    """Compare one output elementwise; shapes must match exactly (no axis guessing)."""
    ref = np.asarray(ref)
    cand = np.asarray(cand)
    inf = float("inf")
    if ref.shape != cand.shape:
        return OutputComparison(name, ref.shape, inf, inf, inf, int(ref.size), 1.0, None,
                                problem=f"shape {list(cand.shape)} != reference {list(ref.shape)}", atol=atol,
                                rtol=rtol, median_abs=inf)
    if ref.size == 0:
        return OutputComparison(name, ref.shape, 0.0, 0.0, 0.0, 0, 0.0, None, atol=atol, rtol=rtol)
    if ref.dtype.kind not in "fc" and ref.dtype.name != "bfloat16":
        bad = ref != cand
        n_bad = int(bad.sum())
        worst = tuple(int(i) for i in np.argwhere(bad)[0]) if n_bad else None
        return OutputComparison(name, ref.shape, float(n_bad > 0), 0.0, float(bad.mean()), n_bad, n_bad / ref.size,
                                worst, atol=atol, rtol=rtol)
    r = ref.astype(np.float64)
    c = cand.astype(np.float64)
    nan_mismatch = np.isnan(r) != np.isnan(c)
    inf_mismatch = (np.isinf(r) | np.isinf(c)) & (r != c) & ~np.isnan(r) & ~np.isnan(c)
    finite = np.isfinite(r) & np.isfinite(c)
    diff = np.where(finite, np.abs(r - c), 0.0)
    rel = np.where(finite, diff / np.maximum(np.abs(r), np.finfo(np.float64).tiny), 0.0)
    bad = (diff > atol + rtol * np.abs(np.where(finite, r, 0.0))) | nan_mismatch | inf_mismatch
    n_bad = int(bad.sum())
    score = np.where(bad, np.inf, 0.0) + diff if n_bad else diff
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(score)), r.shape))
    problem = ""
    if nan_mismatch.any():
        problem = f"NaN in one side only at {int(nan_mismatch.sum())} element(s)"
    elif inf_mismatch.any():
        problem = f"Inf mismatch at {int(inf_mismatch.sum())} element(s)"
    per_step = None
    if time_axis is not None and -r.ndim <= time_axis < r.ndim:
        other = tuple(a for a in range(r.ndim) if a != time_axis % r.ndim)
        per_step = [float(v) for v in (np.max(diff, axis=other) if other else diff)]
    return OutputComparison(name, ref.shape, float(diff.max()), float(rel.max()), float(diff.mean()), n_bad,
                            n_bad / r.size, worst, problem, atol=atol, rtol=rtol,
                            median_abs=float(np.median(diff)), ref_value=float(r[worst]), cand_value=float(c[worst]),
                            nan=(int(np.isnan(r).sum()), int(np.isnan(c).sum())),
                            inf=(int(np.isinf(r).sum()), int(np.isinf(c).sum())),
                            time_axis=None if per_step is None else time_axis % r.ndim, max_abs_per_step=per_step)


def compare_all(subject: str, engines: str, ref: Mapping[str, np.ndarray], cand: Mapping[str, np.ndarray],
                atol: Optional[float] = None, rtol: Optional[float] = None,
                names: Optional[Iterable[str]] = None) -> Check:
    outputs = []
    for name in names if names is not None else ref:
        if name not in cand:
            outputs.append(OutputComparison(name, np.shape(ref[name]), float("inf"), float("inf"), float("inf"), 1,
                                            1.0, None, problem="missing from candidate"))
            continue
        a, r = default_tolerances(np.asarray(ref[name]).dtype)
        outputs.append(compare(name, ref[name], cand[name], a if atol is None else atol, r if rtol is None else rtol))
    return Check(subject, engines, outputs)


def _shape_text(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
