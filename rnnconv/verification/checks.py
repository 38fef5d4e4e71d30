"""The one verification pipeline of every converting command: each replaced node against its replacement, then
the whole model before against after, in rnnconv's engine and in the real runtimes.

ONNX or OpenVINO IR on either side. Node checks run both sides in rnnconv's engine (the ONNX engine or the IR
interpreter) on the node's real weights. Whole-model checks, by formats:

| before -> after | first check | second check |
| --- | --- | --- |
| ONNX -> ONNX | engine vs engine | onnxruntime vs onnxruntime |
| ONNX -> IR | onnxruntime vs IR interpreter | onnxruntime vs OpenVINO runtime |
| IR -> ONNX | IR interpreter vs engine | OpenVINO runtime vs onnxruntime |

An ONNX source is run in onnxruntime when it is held against IR; where a runtime cannot run the source, rnnconv's
engine stands in for it. A runtime that refuses the converted model fails the check, unless the
refusal is one rnnconv knows (`rnnconv.runtimes`): then rnnconv's engine stands in and the note says why. A check
that cannot run at all is reported as skipped, with the reason: the IR interpreter's, when the IR holds layers it has
no kernel for (what OpenVINO's own ONNX import made, on to-openvino's OpenVINO route), which leaves the runtime's.

rnnconv's engine runs a whole model partitioned (engine/partition.py: onnxruntime for every node it runs as the
spec says, rnnconv's kernels for the recurrent nodes it refuses or lacks): the report says where each node ran
(`placements`, and one note). Where the engine ran both models entirely in onnxruntime, its check would repeat
the onnxruntime one: it is left out, and said so. A check the engine cannot run is skipped, unless no whole-model
check ran at all (exit 4).

Layers whose weights pass BIG_WEIGHT_BYTES are checked in float32 with a small batch and sequence (each step reads
every weight once), so that verifying a big model costs about its size once in memory.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import onnx_ir as ir

from rnnconv.dialects import onnx_recurrent
from rnnconv.engine import ONNXRUNTIME, OPENVINO, RNNCONV, openvino_runtime
from rnnconv.engine.onnx_graph import REFERENCE, Placements
from rnnconv.errors import BadInput, RnnconvError, human_size
from rnnconv.verification import allowances, engines, exercise
from rnnconv.verification.inputs import (
    DEFAULT_DIM,
    SMALL_DIM,
    check_dim_names,
    check_inputs,
    draw_inputs,
    read_inputs,
)
from rnnconv.verification.model import Model
from rnnconv.verification.options import CheckOptions  # re-exported: its home is light, for --verify none
from rnnconv.verification.results import Check, compare_outputs, failed
from rnnconv.verification.sizes import COMPARED, empty_window
from rnnconv.verification.specs import InputSpec, merge_specs, told_sizes

BIG_WEIGHT_BYTES = 64 << 20
ENGINE_GAP = "rnnconv's engine cannot run the converted model"
# What the checks running beside an early-started runtime hold, per byte of the model's weights (onnxruntime's
# session of the source: 1.6x measured on a 1 GB LSTM), with a margin: start_runtime demands it on top.
BESIDE_FACTOR = 2.0


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


def run(model: Model, engine: str, sets: list, *, precision: str = "float64", isolate: bool = False,
        partitioned: bool = True) -> Run:
    out = Run(model, engine, precision)
    try:
        for feeds, _ in sets:
            placed: Placements = {}
            out.outputs.append(engines.run(engine, model, feeds, precision=precision, isolate=isolate,
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


def compare_runs(subject: str, ref: Run, cand: Run, options: CheckOptions, names: Sequence[str],
                 declared: Mapping[str, object], note: str = "") -> list[Check]:
    engines_text = ref.label if ref.label == cand.label else f"{ref.label} vs {cand.label}"
    if not cand.ok:
        why = f"{cand.label} cannot run it: {cand.error}"
        return [Check(subject, engines_text, [failed(n, why) for n in names], note, no_kernel=cand.error.no_kernel)]
    checks = []
    for k, (r, c) in enumerate(zip(ref.outputs, cand.outputs)):
        check = compare_outputs(subject, engines_text, r, c, options.tolerances, names=names, declared=declared)
        check.note = note
        check.run = k if len(ref.outputs) > 1 else None
        checks.append(check)
    return checks


# -- node checks ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class NodePair:
    """A node alone (`before`) and what replaced it (`after`), as standalone models with the same inputs and
    output names."""

    subject: str
    before: Model
    after: Model
    precision: str = "float64"


def check_nodes(pairs: Sequence[NodePair], options: CheckOptions,
                progress: Callable[[str], None] = lambda label: None) -> list[Check]:
    """Each pair in rnnconv's engine, both sides on the same random inputs (the node's real weights)."""
    checks = []
    for i, pair in enumerate(pairs):
        progress(pair.subject)
        specs = merge_specs(pair.before, pair.after)
        node_options = dataclasses.replace(options, seed=options.seed + i, inputs=None, runs=1)
        sets = input_sets(specs, node_options, small=pair.precision == "float32")
        _check_node_memory(pair, sets)
        ref = run(pair.before, "rnnconv", sets, precision=pair.precision, partitioned=False)
        if not ref.ok:
            raise BadInput(f"{pair.subject}: it does not run alone on the inputs drawn for it "
                           f"({describe_inputs(sets[0][1])}): {ref.error}", fixes=("dims", "ranges"))
        cand = run(pair.after, "rnnconv", sets, precision=pair.precision, partitioned=False)
        names = pair.before.output_names()
        checks += compare_runs(pair.subject, ref, cand, options, names, pair.before.output_dtypes())
    return checks


def _check_node_memory(pair: NodePair, sets: list) -> None:
    """A node check's working memory is X, every gate's projection of it and Y, in the precision it runs in:
    refused, with the estimate, before anything is allocated."""
    if pair.before.format != "onnx":
        return
    limit = 1 << 31
    for rn in onnx_recurrent.find(pair.before.onnx):
        x = sets[0][0].get(rn.inputs["X"].name) if rn.inputs["X"] is not None else None
        if x is None:
            continue
        T, N = (x.shape[1], x.shape[0]) if rn.layer.layout else (x.shape[0], x.shape[1])
        H, D = rn.layer.hidden_size, rn.layer.num_directions
        need = float(T) * N * ((rn.layer.input_size or 1) + (len(onnx_recurrent.GATES[rn.op]) + 1) * H * D) * 8
        if need > limit:
            raise BadInput(f"{rn.op} node {rn.name!r}: checking it at its declared sizes (T={T}, N={N}) would need "
                           f"about {human_size(need)}; the limit is {human_size(limit)}",
                           fixes=("verify=none", "dims (when those dims are dynamic)"))


# -- whole-model checks ---------------------------------------------------------------------------------------

def _runtime_of(model: Model) -> str:
    return "onnxruntime" if model.format == "onnx" else "openvino"


@dataclasses.dataclass
class Started:
    """The OpenVINO runtime's run of a converted IR, handed to a worker process before the other checks: a big
    IR's compile (most of its whole-model check) overlaps them. check_models collects it."""

    sets: list
    pending: engines.Pending


def start_runtime(before: Model, after: Model, options: CheckOptions, worker, *,
                  precision: Optional[str] = None) -> Optional[Started]:
    """Start what check_models(before, after, options, precision=precision) will run in the OpenVINO runtime
    on `worker` (an openvino_runtime.Worker), on the inputs it will draw; None when it would not run it there
    (the IR does not fit in memory to compile, or several input sets)."""
    if after.format != "ir" or after.path is None or allowances.would_not_fit(
            after, allowances.RUNTIME_COMPILE_FACTOR + BESIDE_FACTOR):
        return None  # (check_models may still run it alone, afterwards)
    if precision is None:
        precision = precision_for(before.onnx) if before.format == "onnx" else "float64"
    try:
        specs = merge_specs(before, after)
        sets = next(exercise.candidates(before, after, specs, options,
                                        lambda o: input_sets(specs, o, small=precision == "float32")))
    except RnnconvError:  # check_models says it, in its turn
        return None
    if len(sets) != 1:
        return None
    return Started(sets, engines.Pending(after, sets[0][0], worker))


def check_models(before: Model, after: Model, options: CheckOptions, *, placements: Optional[dict] = None,
                 notes: Optional[list] = None, **kwargs) -> list[Check]:
    """`before` against `after` (_check_models, below). `placements`: filled with where rnnconv's engine ran each
    node of each model ({"source": Placements, "converted": Placements}); `notes` gets one line saying where they
    ran (placements_note)."""
    notes = [] if notes is None else notes
    skipped = kwargs.pop("skipped", None)
    skipped = [] if skipped is None else skipped
    ran: list[Run] = []
    found = _check_models(before, after, options, notes=notes, ran=ran, skipped=skipped, **kwargs)
    gaps = [s for s in skipped if s.startswith(ENGINE_GAP)]
    if gaps and not found:  # a check that cannot run is skipped, unless no whole-model check ran at all
        raise BadInput(f"no whole-model check could run: {gaps[0]}", fixes=("verify=node",))
    placed: dict = {} if placements is None else placements
    for r in ran:
        if r.engine == RNNCONV and r.ok and r.placements:
            merge_placements(placed.setdefault("source" if r.model is before else "converted", {}), r.placements)
    note = placements_note(placed)
    notes.extend([note] if note else [])
    return found


def placements_note(placements: Mapping[str, Placements]) -> Optional[str]:
    """Where rnnconv's engine ran the nodes of each model, in one line: `engine: onnxruntime 41 nodes; rnnconv
    LSTM 1` (rnnconv: the nodes onnxruntime refuses or lacks; `placements` as check_models fills it), one part per
    model when they differ; None when the engine ran no model."""
    def listed(placed: Placements) -> str:
        by_place: dict[str, list] = {}
        for op, counts in sorted(placed.items()):
            for place, n in counts.items():
                by_place.setdefault(place, []).append((op, n))
        parts = []
        if ONNXRUNTIME in by_place:
            n = sum(n for _, n in by_place["onnxruntime"])
            parts.append(f"onnxruntime {n} node{'s' if n > 1 else ''}")
        if RNNCONV in by_place:
            parts.append("rnnconv " + ", ".join(f"{op} {n}" for op, n in by_place["rnnconv"]))
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
            and all(set(counts) == {"onnxruntime"} for counts in run.placements.values()))


def _check_models(before: Model, after: Model, options: CheckOptions, *, ran: list, runtime: Optional[bool] = None,
                 isolate: bool = False, skipped: Optional[list] = None, notes: Optional[list] = None,
                 precision: Optional[str] = None, started: Optional[Started] = None,
                 exercised: Optional[list] = None) -> list[Check]:
    """`before` against `after` on the same inputs (see the module's table). `runtime`: run the OpenVINO
    runtime (default: when installed); `isolate`: real runtimes run in a child process; `started`: that run,
    already under way (start_runtime). What could not be checked goes to `skipped`, how the checks were made to
    `notes`, the steps and batch each recurrent node ran at to `exercised`."""
    exercised = [] if exercised is None else exercised
    rounding = allowances.runtime_rounding(before, after)

    def compared(subject, ref, cand, options, *args, **kwargs) -> list[Check]:
        """compare_runs; where the models round values computed at run time, a comparison that
        fails is held again to the 'dequantized' tolerance, saying so and what it measured first."""
        found = compare_runs(subject, ref, cand, options, *args, **kwargs)
        if not rounding or not cand.ok or all(c.ok for c in found):
            return found
        strict = max(c.max_abs for c in found)
        notes.append(f"{rounding}; {found[0].engines}: max abs {strict:.3g} at the usual tolerance")
        return compare_runs(subject, ref, cand, options.holding(dequantized=True), *args, **kwargs)

    skipped = [] if skipped is None else skipped
    notes = [] if notes is None else notes
    if precision is None:
        precision = precision_for(before.onnx) if before.format == "onnx" else "float64"
    small = precision == "float32"
    specs = merge_specs(before, after)
    check_dim_names(options.dims, specs)
    names = before.output_names()
    declared = {**after.output_dtypes(), **before.output_dtypes()}
    use_openvino = openvino_runtime.available() if runtime is None else runtime
    cross = before.format != after.format

    # The reference: the source in its first engine that runs it, on the first input sets it runs on.
    first = ["onnxruntime", "rnnconv"] if cross and before.format == "onnx" else ["rnnconv"]
    sets, ref, note = runnable_sets(before, specs, options, first, small=small, precision=precision, isolate=isolate,
                                    partner=after)
    exercised.extend(exercise.exercised(before, after, specs, options, sets))
    ran.append(ref)
    notes.extend([note] if note else [])
    gap = allowances.interpreter_gap(after) or (allowances.requantized(before) if after.format == "ir" else None)
    if gap:  # the ops OpenVINO's own import made, or quantization the engines' float ops tip: see the runtime's
        skipped.append(gap)
        checks = []
    elif small and started is not None and use_openvino and _same_sets(started.sets, sets):
        # Big layers, the runtime's run under way: the interpreter would read every weight again while the
        # runtime compiles, for what the node checks (each layer in the interpreter) and the runtime both show.
        notes.append("IR interpreter: the whole model left out (big layers: each ran alone in it; the OpenVINO "
                     "runtime runs the whole model)")
        checks = []
    else:
        cand = run(after, "rnnconv", sets, precision=precision)
        ran.append(cand)
        checks = compared("model", ref, cand, options, names, declared)
        if not cand.ok and not isinstance(cand.error, engines.Crashed):
            # rnnconv's engine lacks what the converted model needs: the runtimes' checks below decide
            checks = []
            skipped.append(_short(f"{ENGINE_GAP} ({cand.label}): {cand.error}", 300))
        elif only_onnxruntime(ref) and only_onnxruntime(cand) and not cross:
            checks = []
            notes.append("engine vs engine: left out, rnnconv's engine ran both models entirely in onnxruntime (the "
                         "onnxruntime check); the node checks hold rnnconv's kernels against each replacement")

    # The runtimes: each model in its own (onnxruntime for ONNX, OpenVINO for IR).
    def runtime_run(model: Model) -> tuple[Optional[Run], Optional[str]]:
        engine = _runtime_of(model)
        if engine == OPENVINO:
            if not use_openvino:
                why = f"{engines.label(engine, model)}: {openvino_runtime.NOT_INSTALLED}"
                return None, (why if runtime is None else None)
            too_big = allowances.would_not_fit(model)
            if too_big:
                return None, too_big
        if ref.engine == engine and ref.model is model:
            return ref, None
        if started is not None and model is after and _same_sets(started.sets, sets):
            out = Run(model, engine)
            try:
                out.outputs.append(started.pending.result())
            except engines.CannotRun as err:
                out.error = err
        else:
            out = run(model, engine, sets, isolate=isolate)
        if isinstance(out.error, engines.Unavailable):  # installed, cannot be imported: skipped as when absent
            return None, f"{out.label}: {out.error}"
        return out, None

    def stand_in(model: Model) -> Run:
        if ref.engine == RNNCONV and ref.model is model:
            return ref
        ran.append(run(model, "rnnconv", sets, precision=precision))
        return ran[-1]

    (rb, skip_b), (ra, skip_a) = runtime_run(before), runtime_run(after)
    for side in (rb, ra):
        if side is not None and isinstance(side.error, engines.Crashed):  # never a verdict to skip
            return checks + compared("model", side, side, options, names, declared)
    usable_b = rb is not None and rb.ok
    note = ""
    if rb is not None and not rb.ok:
        note = f"the source does not run in {rb.label}: {allowances.known_refusal(before, rb.engine) or rb.error}"
    if ra is None:
        skipped.extend(s for s in (skip_a,) if s)
        return checks
    if not ra.ok:
        known = allowances.known_refusal(after, ra.engine)
        if (known is None and rb is not None and not rb.ok and rb.engine == ra.engine
                and allowances.known_refusal(before, rb.engine) is None):
            # Neither model runs there on these inputs, for no reason a runtime fact explains: the inputs, not
            # the conversion (rnnconv's engine ran both).
            skipped.append(_short(f"{ra.label}: runs neither model on these inputs ({rb.error})", 300))
            return checks
        if known is None:  # the converted model must run wherever its runtime runs the source's ops
            return checks + compared("model", rb if usable_b else stand_in(before), ra, options, names,
                                         declared, note=_short(note))
        if not usable_b:
            skipped.append(f"{ra.label}: it refuses the converted model ({known}) and "
                           f"{'cannot run the source either' if rb is not None else skip_b}")
            return checks
        return checks + compared("model", rb, stand_in(after), options, names, declared,
                                     note=_short(f"{ra.label} refuses the converted model: {known}"))
    if not usable_b:
        if rb is None and skip_b:
            skipped.append(skip_b)
        note = note or skip_b or ""
        return checks + compared("model", stand_in(before), ra, options, names, declared, note=_short(note))
    return checks + compared("model", rb, ra, options, names, declared)


def runnable_sets(model: Model, specs: Mapping[str, InputSpec], options: CheckOptions, engines: Sequence[str], *,
                  small: bool = False, precision: str = "float64", isolate: bool = False,
                  partner: Optional[Model] = None) -> tuple[list, Run, Optional[str]]:
    """Input sets `model` runs on, the run in the first of `engines` that ran it, and a note when that took other
    sizes than the defaults (`_size_attempts`; in each, first the sizes that give every recurrent node its steps,
    `exercise.candidates`, read through `partner` when `model` is IR). BadInput, with the first failure and what
    would fix it, when no attempt runs."""
    failure, tried = None, []
    for how, kwargs in _size_attempts(model, options):
        for sets in exercise.candidates(model, partner, specs, options,
                                        lambda o: input_sets(specs, o, small=small, **kwargs)):
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
                ref = run(model, engine, sets, precision=precision, isolate=isolate)
                if ref.ok:
                    note = None if not how else (f"inputs drawn with {how} ({describe_inputs(sets[0][1])}): the "
                                                 f"model did not run at the default sizes ({failure[1]})")
                    return sets, ref, note
            failure = failure or (describe_inputs(sets[0][1]), ref.error)
    also = f"; also tried {' | '.join(tried[1:])}" if len(tried) > 1 else ""
    raise BadInput(f"the model does not run on the inputs drawn for it ({failure[0]}{also}): {failure[1]}",
                   fixes=("dims", "ranges", "inputs", "verify=node"))


def _size_attempts(model: Model, options: CheckOptions):
    """(how, input_sets keywords) to try in turn until the source runs: the defaults; every dynamic dim one size;
    the sizes the model states in constant Reshape targets (told_sizes); larger sizes for dims no recurrent node
    explains (a convolutional front end that needs a minimum width); size 1 (a model that runs only there).
    Inputs the user gave are never redrawn."""
    yield "", {}
    if options.inputs is not None:
        return
    if any(COMPARED in why for spec in merge_specs(model, model).values() for _, why in spec.sizes.values()):
        yield "the sizes the model's comparisons test left at their defaults", {"compared": False}
    yield "every dynamic dim the same size", {"uniform": True}
    yield "dims of no known role at 16", {"sizes": {"other": 16}}
    for size in told_sizes(model)[:4]:
        yield f"dynamic dims at {size}, a size a Reshape in the model states", {"sizes": {"sequence": size,
                                                                                         "other": size}}
    yield "dims of no known role at 64", {"sizes": {"other": 64}}
    yield "dynamic dims of no known role and time at 1", {"sizes": {"sequence": 1, "other": 1}}


def _same_sets(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x) for (x, _), (y, _) in zip(a, b))


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
