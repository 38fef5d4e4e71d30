"""The pieces every comparison is made of: input sets (drawn as the options say, at sizes the model runs at), one
model run in one engine on every set (`Run`, `run_sets`), two runs compared output by output (`compare_runs`), and
where rnnconv's engine placed each node. What is compared, and in which engines, is the plan's (verification/plan.py);
verification/runner.py runs it.

Layers whose weights pass BIG_WEIGHT_BYTES are checked in float32 with a small batch and sequence (each step reads
every weight once), so that verifying a big model costs about its size once in memory.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Optional, Sequence

import numpy as np
import onnx_ir as ir

from rnnconv.dialects import onnx_recurrent
from rnnconv.engine import ONNXRUNTIME, RNNCONV
from rnnconv.engine.onnx_graph import REFERENCE, Placements
from rnnconv.errors import BadInput
from rnnconv.verification import engines, exercise
from rnnconv.verification.inputs import DEFAULT_DIM, SMALL_DIM, check_inputs, draw_inputs, read_inputs
from rnnconv.verification.model import Model
from rnnconv.verification.options import CheckOptions  # noqa: F401 (where callers long found it)
from rnnconv.verification.results import Check, compare_outputs, failed
from rnnconv.verification.sizes import COMPARED, empty_window
from rnnconv.verification.specs import InputSpec, merge_specs, told_sizes
from rnnconv.verification.tolerance import Tolerances

BIG_WEIGHT_BYTES = 64 << 20


def precision_for(model: ir.Model, nodes: Optional[Sequence[onnx_recurrent.RecurrentNode]] = None) -> str:
    """float64 (the engine's default), or float32 for layers whose float32 (or narrower) weights exceed
    BIG_WEIGHT_BYTES: a float64 copy of them would double the memory a big model needs to be verified."""
    weights = [v for rn in (nodes if nodes is not None else onnx_recurrent.find(model))
               for k, v in rn.inputs.items() if k in onnx_recurrent.WEIGHTS and v is not None
               and v.const_value is not None]
    if any(v.const_value.dtype == ir.DataType.DOUBLE for v in weights):
        return "float64"
    return "float32" if sum(v.const_value.nbytes for v in weights) > BIG_WEIGHT_BYTES else "float64"


# -- inputs -------------------------------------------------------------------------------------------------

def input_sets(specs: Mapping[str, InputSpec], options: CheckOptions, *, small: bool = False,
               uniform: bool = False, sizes: Optional[Mapping[str, int]] = None, compared: bool = True
               ) -> list[tuple[dict, list]]:
    """(feeds, how each input was made) per run. `small`: the sizes of big-layer checks; `uniform`: every dynamic
    dim the same size (for models whose dynamic dims are tied in ways the specs do not show); `sizes`: default
    sizes by role ("sequence", "other") instead of DEFAULT_DIM's; `compared`: False leaves out the sizes an Equal
    of the model tests (a branch's size, not a need). What the user gave always wins."""
    if not compared:
        specs = {name: dataclasses.replace(spec, sizes={a: v for a, v in spec.sizes.items() if COMPARED not in v[1]})
                 for name, spec in specs.items()}
    given_sets: list[dict] = [{}]
    if isinstance(options.inputs, (str, os.PathLike)):
        given_sets = read_inputs(options.inputs, specs)
    elif options.inputs is not None:
        given_sets = [check_inputs(dict(options.inputs), specs, "inputs")]
    n_runs = len(given_sets) if len(given_sets) > 1 else (options.runs or 1)
    dims = dict(options.dims)
    default = {**(SMALL_DIM if small else DEFAULT_DIM), **(sizes or {})}
    for role in ("batch", "sequence", "other"):
        dims.setdefault(role, default[role])
    if uniform:
        for spec in specs.values():
            for axis, d in enumerate(spec.dims):
                if isinstance(d, str) and axis not in spec.sizes:  # a size the model fixes stays
                    dims.setdefault(d, default["batch"])
        dims.setdefault("other", default["batch"])
    rng = np.random.default_rng(options.seed)
    return [draw_inputs(specs, rng, dims, options.ranges, given_sets[k if len(given_sets) > 1 else 0])
            for k in range(n_runs)]


def describe_inputs(described: list) -> str:
    return "; ".join(f"{i['name']} {i['dtype']}[{','.join(map(str, i['shape']))}]" for i in described)


# -- running one side ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Run:
    """One model run in one engine on every input set: outputs per set, or why it could not run."""

    model: Model
    engine: str
    precision: str = "float64"
    outputs: list = dataclasses.field(default_factory=list)
    error: Optional[engines.CannotRun] = None
    placements: Placements = dataclasses.field(default_factory=dict)  # rnnconv's ONNX engine: where nodes ran

    @property
    def label(self) -> str:
        return engines.label(self.engine, self.model, self.precision)

    @property
    def ok(self) -> bool:
        return self.error is None


def run_sets(model: Model, engine: str, sets: list, *, precision: str = "float64", isolate: bool = False,
             partitioned: bool = True) -> Run:
    """`model` in `engine` on every input set (as engines.run_once runs one); a failure is the Run's error."""
    out = Run(model, engine, precision)
    try:
        for feeds, _ in sets:
            placed: Placements = {}
            out.outputs.append(engines.run_once(engine, model, feeds, precision=precision, isolate=isolate,
                                                placements=placed, partitioned=partitioned))
            merge_placements(out.placements, placed)
    except engines.CannotRun as err:
        out.error, out.outputs, out.placements = err, [], {}
    return out


def merge_placements(into: Placements, placed: Placements) -> None:
    """Counts of nodes, not of runs: a model run on several input sets places each node once."""
    for op, counts in placed.items():
        mine = into.setdefault(op, {})
        for place, n in counts.items():
            mine[place] = max(mine.get(place, 0), n)


def compare_runs(subject: str, ref: Run, cand: Run, tolerances: Tolerances, names: Sequence[str],
                 declared: Mapping[str, object], note: str = "", *, engines_text: Optional[str] = None,
                 time_axes: Optional[Mapping[str, int]] = None, reference: str = "reference") -> list[Check]:
    """One Check per input set: `cand` against `ref`, output by output (a candidate that could not run fails
    every output, with its reason)."""
    engines_text = engines_text or (ref.label if ref.label == cand.label else f"{ref.label} vs {cand.label}")
    if not cand.ok:
        why = f"{cand.label} cannot run it: {cand.error}"
        return [Check(subject, engines_text, [failed(n, why) for n in names], note, no_kernel=cand.error.no_kernel)]
    checks = []
    for k, (r, c) in enumerate(zip(ref.outputs, cand.outputs)):
        check = compare_outputs(subject, engines_text, r, c, tolerances, names=names, declared=declared,
                                time_axes=time_axes, reference=reference)
        check.note = note
        check.run = k if len(ref.outputs) > 1 else None
        checks.append(check)
    return checks


def placements_note(placements: Mapping[str, Placements]) -> Optional[str]:
    """Where rnnconv's engine ran the nodes of each model, in one line: `engine: onnxruntime 41 nodes; rnnconv
    LSTM 1` (rnnconv: the nodes onnxruntime refuses or lacks; `placements` by side, as the runner fills them), one
    part per model when they differ; None when the engine ran no model."""
    def listed(placed: Placements) -> str:
        by_place: dict[str, list] = {}
        for op, counts in sorted(placed.items()):
            for place, n in counts.items():
                by_place.setdefault(place, []).append((op, n))
        parts = []
        if ONNXRUNTIME in by_place:
            n = sum(n for _, n in by_place[ONNXRUNTIME])
            parts.append(f"onnxruntime {n} node{'s' if n > 1 else ''}")
        if RNNCONV in by_place:
            parts.append("rnnconv " + ", ".join(f"{op} {n}" for op, n in by_place[RNNCONV]))
        if REFERENCE in by_place:
            parts.append(f"{REFERENCE} (no onnxruntime kernel) " + ", ".join(f"{op} {n}"
                                                                               for op, n in by_place[REFERENCE]))
        return "; ".join(parts) or "no node"

    by_side = {side: listed(placed) for side, placed in placements.items() if placed}
    if not by_side:
        return None
    if len(set(by_side.values())) == 1:
        return f"engine: {by_side.popitem()[1]}"
    return "engine: " + " | ".join(f"{side}{' model' if side == 'converted' else ''}: {text}"
                                   for side, text in by_side.items())


def only_onnxruntime(run: Run) -> bool:
    """Whether rnnconv's engine ran this whole model in onnxruntime: compared with onnxruntime, it checks nothing."""
    return (run.engine == RNNCONV and run.ok and bool(run.placements)
            and all(set(counts) == {ONNXRUNTIME} for counts in run.placements.values()))


def runnable_sets(model: Model, specs: Mapping[str, InputSpec], options: CheckOptions, engines: Sequence[str], *,
                  small: bool = False, precision: str = "float64", isolate: bool = False,
                  partner: Optional[Model] = None) -> tuple[list, Run, Optional[str]]:
    """Input sets `model` runs on, the run in the first of `engines` that ran it, and a note when that took other
    sizes than the defaults (`_size_attempts`; in each, first the sizes that give every recurrent node its steps,
    `exercise.candidates`, read through `partner` when `model` is IR). BadInput, with the first failure and what
    would fix it, when no attempt runs."""
    failure, tried = None, []
    for attempt in _size_attempts(model, options):
        how = attempt.how

        def draw(o: CheckOptions, attempt: SizeAttempt = attempt) -> list:
            return input_sets(specs, o, small=small, uniform=attempt.uniform, sizes=attempt.sizes,
                              compared=attempt.compared)

        for sets in exercise.candidates(model, partner, specs, options, draw):
            shapes = ", ".join(f"{i['name']}[{','.join(map(str, i['shape']))}]" for i in sets[0][1])
            if shapes in tried:
                continue
            tried.append(shapes)
            empty = (empty_window(model.onnx, {i["name"]: i["shape"] for i in sets[0][1]})
                     if model.format == "onnx" and options.inputs is None else None)
            if empty:  # too small for a Conv or pooling window: onnxruntime runs it, on empty tensors
                failure = failure or (describe_inputs(sets[0][1]), f"{empty} at these sizes")
                continue
            for engine in engines:
                ref = run_sets(model, engine, sets, precision=precision, isolate=isolate)
                if ref.ok:
                    note = None if not how else (f"inputs drawn with {how} ({describe_inputs(sets[0][1])}): the "
                                                 f"model did not run at the default sizes ({failure[1]})")
                    return sets, ref, note
            failure = failure or (describe_inputs(sets[0][1]), ref.error)
    also = f"; also tried {' | '.join(tried[1:])}" if len(tried) > 1 else ""
    raise BadInput(f"the model does not run on the inputs drawn for it ({failure[0]}{also}): {failure[1]}",
                   fixes=("dims", "ranges", "inputs", "verify=node"))


@dataclasses.dataclass(frozen=True)
class SizeAttempt:
    """How one attempt draws the inputs (input_sets' uniform, sizes, compared), and how the note says it."""

    how: str = ""
    uniform: bool = False
    sizes: Optional[Mapping[str, int]] = None
    compared: bool = True


def _size_attempts(model: Model, options: CheckOptions):
    """The SizeAttempts to try in turn until the source runs: the defaults; every dynamic dim one size; the sizes
    the model states in constant Reshape targets (told_sizes); larger sizes for dims no recurrent node explains (a
    convolutional front end that needs a minimum width); size 1 (a model that runs only there). Inputs the user
    gave are never redrawn."""
    yield SizeAttempt()
    if options.inputs is not None:
        return
    if any(COMPARED in why for spec in merge_specs(model, model).values() for _, why in spec.sizes.values()):
        yield SizeAttempt("the sizes the model's comparisons test left at their defaults", compared=False)
    yield SizeAttempt("every dynamic dim the same size", uniform=True)
    yield SizeAttempt("dims of no known role at 16", sizes={"other": 16})
    for size in told_sizes(model)[:4]:
        yield SizeAttempt(f"dynamic dims at {size}, a size a Reshape in the model states",
                          sizes={"sequence": size, "other": size})
    yield SizeAttempt("dims of no known role at 64", sizes={"other": 64})
    yield SizeAttempt("dynamic dims of no known role and time at 1", sizes={"sequence": 1, "other": 1})


def same_sets(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x) for (x, _), (y, _) in zip(a, b))


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
