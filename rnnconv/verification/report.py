"""Reports as every command prints them: the converting commands' `Report` (rewrites, checks, skipped checks)
and `rnnconv verify`'s `VerifyReport` (every run against the baseline), each as text lines and JSON."""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

import numpy as np

from rnnconv.verification.results import Check, OutputComparison


@dataclasses.dataclass
class Report:
    command: str
    rewrites: list[dict] = dataclasses.field(default_factory=list)
    checks: list[Check] = dataclasses.field(default_factory=list)
    verified: str = "full"  # "full", "node" or "none"
    output: Optional[str] = None
    skipped: list[str] = dataclasses.field(default_factory=list)  # checks not run: what, and why
    notes: list[str] = dataclasses.field(default_factory=list)  # how the checks were made (inputs, engines)
    # where rnnconv's engine ran each node of the whole-model runs: {"source" | "converted": {op: {place: count}}}
    placements: dict = dataclasses.field(default_factory=dict)
    # the steps and batch each recurrent node ran at in the whole-model checks (exercise.Exercised)
    exercised: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict:
        return {"command": self.command, "ok": self.ok, "verified": self.verified, "output": self.output,
                "rewrites": self.rewrites, "checks": [c.as_dict() for c in self.checks], "skipped": self.skipped,
                "notes": self.notes, "placements": self.placements,
                "exercised": [e.as_dict() for e in self.exercised]}

    def to_json(self) -> str:
        return json.dumps(finite_json(self.as_dict()), indent=2, default=_json_default)

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
            out.extend(_localized(c, "       "))
        out.extend(f"  exercised: {e.text()}" for e in self.exercised)
        out.extend(f"  note: {note}" for note in self.notes)
        out.extend(f"  skipped: {why}" for why in self.skipped)
        if not self.checks:
            out.append("  verification skipped" if self.verified == "none" else "  nothing to verify")
        return out

    def verdict(self) -> str:
        if self.verified == "none":
            return "written without verification"
        n = len(self.checks)
        bad = [c.subject for c in self.checks if not c.ok]
        skipped = f", {len(self.skipped)} skipped" if self.skipped else ""
        warned = sum(bool(c.accepted) for c in self.checks)
        warned_text = f" ({warned} faithful up to run-time rounding: see the warning)" if warned else ""
        return (f"verified: {n} check(s) passed{warned_text}{skipped}" if not bad else
                f"verification FAILED: {', '.join(bad)}")


def _localized(check: Check, indent: str) -> list[str]:
    """Under a failing comparison: where the runs part, and the warning it passed under."""
    out = [f"{indent}first divergence: {check.first_divergence.text()}"] if check.first_divergence else []
    return out + ([f"{indent}warning: {check.accepted}"] if check.accepted else [])


def finite_json(o):
    """JSON has no Infinity or NaN: write them as strings so every JSON reader (jq included) can load the report."""
    if isinstance(o, float) and not np.isfinite(o):
        return "nan" if np.isnan(o) else ("inf" if o > 0 else "-inf")
    if isinstance(o, dict):
        return {k: finite_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [finite_json(v) for v in o]
    return o


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _shape_text(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


@dataclasses.dataclass
class VerifyReport(Report):
    """The report of `rnnconv verify`: every comparison against the baseline run, per input set."""

    reference: str = ""
    candidate: str = ""
    baseline: str = ""
    engines: dict = dataclasses.field(default_factory=dict)  # side -> engines that ran
    skipped: list = dataclasses.field(default_factory=list)  # engines that could not run a model, and why
    inputs: list = dataclasses.field(default_factory=list)  # per run: how each input was made
    seed: Optional[int] = None
    notes: list = dataclasses.field(default_factory=list)
    # what the runs took and gave, for save_inputs / save_outputs: [runK/]NAME and [runK/]SIDE.ENGINE/OUTPUT
    feeds: dict = dataclasses.field(default_factory=dict, repr=False)
    outputs: dict = dataclasses.field(default_factory=dict, repr=False)

    def as_dict(self) -> dict:
        d = super().as_dict()
        for key in ("rewrites", "verified", "output"):  # conversion fields: nothing is written here
            d.pop(key, None)
        d.update({"agree": self.ok, "verdict": self.verdict(), "reference": self.reference,
                  "candidate": self.candidate, "baseline": self.baseline, "engines": self.engines,
                  "skipped": self.skipped, "seed": self.seed, "inputs": self.inputs, "notes": self.notes})
        return d

    def lines(self) -> list[str]:
        out = [f"reference: {self.reference}", f"candidate: {self.candidate}"]
        distinct = [d for k, d in enumerate(self.inputs) if d not in self.inputs[:k]]
        for k, described in enumerate(distinct):
            parts = []
            for i in described:
                rng = f" in [{_num(i['range'][0])}, {_num(i['range'][1])}]" if "range" in i else ""
                parts.append(f"{i['name']} {i['dtype']}{_shape_text(i['shape'])}{rng} ({i['from']})")
            runs = f"run {self.inputs.index(described)}" if len(distinct) > 1 else f"{len(self.inputs)} run(s)"
            head = f"inputs ({runs}" + (f", seed {self.seed}" if self.seed is not None else "") + "): "
            out.append(head + "; ".join(parts))
        out.extend(f"exercised: {e.text()}" for e in self.exercised)
        for s in self.skipped:
            out.append(f"skipped {s['side']}[{s['engine']}]: {s['reason']}")
        for note in self.notes:
            out.append(f"note: {note}")
        width = max((len(o.name) for c in self.checks for o in c.outputs), default=1)
        swidth = max((len(_shape_text(o.shape)) for c in self.checks for o in c.outputs), default=1)
        for c in self.checks:
            out.append(f"{'ok  ' if c.ok else 'FAIL'} {c.subject} vs {self.baseline}" + (f" ({c.note})" if c.note
                                                                                        else ""))
            for o in c.outputs:
                out.append("     " + _output_line(o, width, swidth))
            out.extend(_localized(c, "     "))
        return out

    def verdict(self) -> str:
        if not self.checks:
            return "nothing compared"
        bad = [c for c in self.checks if not c.ok]
        warned = sum(bool(c.accepted) for c in self.checks)
        if not bad and warned:
            within = len(self.checks) - warned
            return (f"agree: {f'{within} comparison(s) within tolerance, ' if within else ''}{warned} comparison(s) "
                    f"faithful up to run-time rounding (see the warning)")
        if not bad:
            return f"agree: {len(self.checks)} comparison(s) within tolerance"
        parts = []
        for c in bad:
            parts.append(f"{c.subject} on {', '.join(o.name for o in c.outputs if not o.ok)}")
        return "DISAGREE: " + "; ".join(parts)


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _output_line(o: OutputComparison, width: int, swidth: int = 0) -> str:
    head = f"{'ok ' if o.ok else 'BAD'} {o.name.ljust(width)} {_shape_text(o.shape).ljust(swidth)}"
    if o.problem and o.worst_index is None:
        return f"{head}  {o.problem}"
    size = int(np.prod(o.shape)) if o.shape else 1
    text = f"{head}  max abs {o.max_abs:.2g}  max rel {o.max_rel:.2g}  mean abs {o.mean_abs:.2g}  bad {o.n_bad}/{size}"
    if o.n_bad:
        text += f" ({100 * o.frac_bad:.1f}%)"
        if o.worst_index is not None and o.ref_value is not None:
            text += f"  worst {_shape_text(o.worst_index)}: {o.cand_value:.6g} vs {o.ref_value:.6g}"
        if o.time_axis is not None and o.max_abs_per_step:
            steps = [t for t, e in enumerate(o.max_abs_per_step) if e > (o.atol or 0)]
            if steps:
                text += f"  steps {_ranges(steps)} of {len(o.max_abs_per_step)}"
        text += f"  (atol {o.atol:.3g}, rtol {o.rtol:g}; {o.tolerance})" if o.tolerance else \
            f"  (atol {o.atol:g}, rtol {o.rtol:g})"
    if any(o.nan) or any(o.inf):
        text += f"  NaN {o.nan[0]}/{o.nan[1]}, Inf {o.inf[0]}/{o.inf[1]} (reference/candidate)"
    if o.problem:
        text += f"  {o.problem}"
    return text


def _ranges(steps: list[int]) -> str:
    out, start = [], steps[0]
    for a, b in zip(steps, steps[1:] + [None]):
        if b != a + 1:
            out.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ",".join(out)
