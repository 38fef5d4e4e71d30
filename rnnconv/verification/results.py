"""What one comparison found: per output (`OutputComparison`) and per pair of runs (`Check`).

Shapes must match exactly: no axis permutation is ever guessed (a guess is wrong exactly when batch equals
sequence length). Tolerances: `rnnconv.verification.tolerance`.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Optional

import numpy as np

from rnnconv.verification.tolerance import Tolerances

INF = float("inf")


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
    problem: str = ""  # shape/dtype/NaN mismatch, a run that failed; empty when none
    atol: Optional[float] = None
    rtol: Optional[float] = None
    median_abs: float = 0.0
    ref_value: Optional[float] = None  # both values at worst_index
    cand_value: Optional[float] = None
    nan: tuple = (0, 0)  # NaN count in (reference, candidate)
    inf: tuple = (0, 0)
    time_axis: Optional[int] = None  # recurrent outputs: the sequence axis, with the max error per step
    max_abs_per_step: Optional[list] = None
    tolerance: str = ""  # where atol and rtol came from (the default for a dtype and scale, or given)

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


def failed(name: str, problem: str, shape: tuple = ()) -> OutputComparison:
    """An output that could not be compared at all (missing, or a run that failed): counted as wrong."""
    size = int(np.prod(shape)) if shape else 1
    return OutputComparison(name, tuple(shape), INF, INF, INF, size, 1.0, None, problem=problem, median_abs=INF)


@dataclasses.dataclass
class Check:
    """One comparison: a replaced node against its replacement, or a whole model before against after."""

    subject: str
    engines: str
    outputs: list[OutputComparison]
    note: str = ""
    run: Optional[int] = None  # which input set, when there are several
    no_kernel: Optional[tuple[str, int]] = None  # (op, version): the runtime has no kernel for it, why it failed
    refusal: Optional[str] = None  # onnxruntime's refusal of the written model at its default session options
    # A failing whole-model comparison: where the runs part (verification.localize: a Divergence, or NotLocalized
    # saying why not; each has .text() and .as_dict())
    first_divergence: Optional[object] = None
    accepted: str = ""  # the warning under which it passes anyway (localize.rounding_verdict: faithful)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs) or bool(self.accepted)

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
        if self.first_divergence is not None:
            d["first_divergence"] = self.first_divergence.as_dict()
        if self.accepted:
            d["warning"] = self.accepted
        return d


def compare(name: str, ref: np.ndarray, cand: np.ndarray, atol: float, rtol: float, *,
            time_axis: Optional[int] = None) -> OutputComparison:
    """Compare one output elementwise; shapes must match exactly (no axis guessing)."""
    ref = np.asarray(ref)
    cand = np.asarray(cand)
    if ref.shape != cand.shape:
        out = failed(name, f"shape {list(cand.shape)} != reference {list(ref.shape)}", ref.shape)
        out.atol, out.rtol = atol, rtol
        return out
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


def magnitude(ref) -> float:
    """The largest finite |value| of a floating output (0 for other types and empty ones): the default
    tolerance's scale."""
    r = np.asarray(ref)
    if r.size == 0 or (r.dtype.kind not in "fc" and r.dtype.name != "bfloat16"):
        return 0.0
    r = np.abs(r.astype(np.float64))
    finite = r[np.isfinite(r)]
    return float(finite.max()) if finite.size else 0.0


def compare_outputs(subject: str, engines: str, ref: Mapping[str, np.ndarray], cand: Mapping[str, np.ndarray],
                    tolerances: Tolerances = Tolerances(), *, names: Optional[Iterable[str]] = None,
                    declared: Optional[Mapping[str, object]] = None,
                    time_axes: Optional[Mapping[str, int]] = None, reference: str = "reference") -> Check:
    """Compare every output of `names` (default: the reference's) at the tolerance policy's values: by the
    output's declared dtype (`declared`) and the dtypes both runs returned."""
    declared = declared or {}
    outputs = []
    for name in names if names is not None else ref:
        if name not in ref:
            outputs.append(failed(name, f"{reference} gave no output {name!r}"))
            continue
        r = np.asarray(ref[name])
        if name not in cand:
            outputs.append(failed(name, "missing from this run's outputs", r.shape))
            continue
        c = np.asarray(cand[name])
        atol, rtol, why = tolerances.explain(name, declared.get(name), r.dtype, c.dtype, magnitude=magnitude(r))
        outputs.append(compare(name, r, c, atol, rtol, time_axis=(time_axes or {}).get(name)))
        outputs[-1].tolerance = why
    return Check(subject, engines, outputs)
