"""Verification: inputs, engines, comparison, report.

Every rewriting command checks each replaced node against its replacement, then the whole model before against
after. Tolerances follow Polygraphy's contract: an element is bad when |a - b| > atol + rtol * |b|.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Callable, Iterable, Mapping, Optional

import numpy as np
import onnx_ir as ir

# Defaults by dtype (documented in README): float64 runs are compared at 1e-7, float32 at 1e-5.
TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (2e-2, 2e-2),
}
DEFAULT_DIM = {"batch": 3, "sequence": 5, "other": 2}


def default_tolerances(dtype) -> tuple[float, float]:
    return TOLERANCES.get(np.dtype(dtype).name if not isinstance(dtype, str) else dtype, (1e-5, 1e-5))


@dataclasses.dataclass
class OutputComparison:
    name: str
    shape: tuple
    max_abs: float
    max_rel: float
    mean_abs: float
    n_bad: int
    frac_bad: float
    worst_index: Optional[tuple]
    problem: str = ""  # shape/dtype/NaN mismatch, empty when none

    @property
    def ok(self) -> bool:
        return self.n_bad == 0 and not self.problem

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["ok"] = self.ok
        d["shape"] = list(self.shape)
        d["worst_index"] = None if self.worst_index is None else list(self.worst_index)
        return d


@dataclasses.dataclass
class Check:
    """One comparison: a replaced node against its replacement, or a whole model before against after."""

    subject: str
    engines: str
    outputs: list[OutputComparison]
    note: str = ""

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
        return {"subject": self.subject, "engines": self.engines, "ok": self.ok, "max_abs": self.max_abs,
                "max_rel": self.max_rel, "note": self.note, "outputs": [o.as_dict() for o in self.outputs]}


@dataclasses.dataclass
class Report:
    command: str
    rewrites: list[dict] = dataclasses.field(default_factory=list)
    checks: list[Check] = dataclasses.field(default_factory=list)
    verified: str = "full"  # "full", "node" or "none"
    output: Optional[str] = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict:
        return {"command": self.command, "ok": self.ok, "verified": self.verified, "output": self.output,
                "rewrites": self.rewrites, "checks": [c.as_dict() for c in self.checks]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, default=_json_default)

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
        if not self.checks:
            out.append("  verification skipped" if self.verified == "none" else "  nothing to verify")
        return out

    def verdict(self) -> str:
        if self.verified == "none":
            return "written without verification"
        n = len(self.checks)
        bad = [c.subject for c in self.checks if not c.ok]
        return f"verified: {n} check(s) passed" if not bad else f"verification FAILED: {', '.join(bad)}"


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def compare(name: str, ref: np.ndarray, cand: np.ndarray, atol: float, rtol: float) -> OutputComparison:
    ref = np.asarray(ref)
    cand = np.asarray(cand)
    if ref.shape != cand.shape:
        return OutputComparison(name, ref.shape, float("inf"), float("inf"), float("inf"), int(ref.size), 1.0, None,
                                problem=f"shape {list(cand.shape)} != reference {list(ref.shape)}")
    if ref.size == 0:
        return OutputComparison(name, ref.shape, 0.0, 0.0, 0.0, 0, 0.0, None)
    if ref.dtype.kind not in "fc" and ref.dtype.name != "bfloat16":
        bad = ref != cand
        n_bad = int(bad.sum())
        worst = tuple(int(i) for i in np.argwhere(bad)[0]) if n_bad else None
        return OutputComparison(name, ref.shape, float(n_bad > 0), 0.0, float(bad.mean()), n_bad, n_bad / ref.size,
                                worst)
    r = ref.astype(np.float64)
    c = cand.astype(np.float64)
    nan_mismatch = np.isnan(r) != np.isnan(c)
    inf_mismatch = np.isinf(r) & (r != c)
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
    return OutputComparison(name, ref.shape, float(diff.max()), float(rel.max()), float(diff.mean()), n_bad,
                            n_bad / r.size, worst, problem)


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


# ---- inputs ----------------------------------------------------------------------------------------------

def _concrete_dims(value: ir.Value, dims: Mapping[str, int], axis_roles: Mapping[int, str]) -> tuple[int, ...]:
    shape = []
    for axis, d in enumerate(value.shape or ()):
        if isinstance(d, int):
            shape.append(d)
            continue
        sym = getattr(d, "value", None)
        if sym is not None and sym in dims:
            shape.append(int(dims[sym]))
        else:
            shape.append(int(dims.get(axis_roles.get(axis, "other"), DEFAULT_DIM[axis_roles.get(axis, "other")])))
    return tuple(shape)


def random_inputs(model: ir.Model, seed: int = 0, dims: Optional[Mapping[str, int]] = None,
                  roles: Optional[Callable[[ir.Value], Mapping[int, str]]] = None,
                  lengths: Optional[Mapping[str, int]] = None) -> dict[str, np.ndarray]:
    """Random feeds for every graph input that is not an initializer.

    `roles(value)` may name axes ("batch", "sequence") so unnamed dynamic dims get consistent sizes;
    `lengths` maps sequence_lens-like inputs to their T so their values are drawn in 1..T.
    """
    rng = np.random.default_rng(seed)
    dims = dict(dims or {})
    feeds = {}
    for value in model.graph.inputs:
        if value.name in model.graph.initializers:
            continue
        axis_roles = roles(value) if roles else {}
        shape = _concrete_dims(value, dims, axis_roles)
        dtype = value.dtype.numpy() if value.dtype is not None else np.dtype(np.float32)
        if np.dtype(dtype).kind in "iu":
            hi = (lengths or {}).get(value.name)
            arr = rng.integers(1, (hi or 1) + 1, size=shape) if hi else rng.integers(0, 2, size=shape)
            feeds[value.name] = arr.astype(dtype)
        elif np.dtype(dtype).kind == "b":
            feeds[value.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            feeds[value.name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    return feeds
