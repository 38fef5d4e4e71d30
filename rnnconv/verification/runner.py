"""The one executor of verification (as onnx_ir's PassManager runs a list of passes and returns one result):
`verify_plan(plan, options, report)` runs a command's CheckPlan and fills its report. Every converting command
and `rnnconv verify` go through it; `plan.choose` decides which comparisons a plan makes, this module runs them:

1. the OpenVINO runtime's early run: the converted IR handed to the runtime's process (started with the command,
   `EarlyRuntime`) before anything else, so its compile overlaps the node checks;
2. the node checks: each replaced node alone against its replacement, in rnnconv's engine on its real weights;
3. the whole model (`WholeModel`: the comparisons `plan.choose` lists, on inputs the source runs on), the freed
   model's longer runs (`Longer`), or `rnnconv verify`'s runs (`Versus`);
4. a written ONNX model loaded and run once in onnxruntime as users run it (`WholeModel.as_written`).

Every failing whole-model comparison (any command's, and `rnnconv verify`'s) is localized in one place,
`localize_failure`: where the two runs part, and why (verification/localize.py).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from rnnconv import io
from rnnconv.dialects import onnx_recurrent
from rnnconv.engine import ONNXRUNTIME, OPENVINO, RNNCONV, openvino_runtime
from rnnconv.engine.onnx_graph import whole_in_onnxruntime
from rnnconv.errors import BadInput, RnnconvError, Unsupported, UsageError, human_size
from rnnconv.verification import engines, exercise, localize
from rnnconv.verification.checks import (
    Run,
    compare_runs,
    describe_inputs,
    input_sets,
    merge_placements,
    only_onnxruntime,
    placements_note,
    runnable_sets,
    run_sets,
    same_sets,
)
from rnnconv.verification.inputs import check_dim_names, read_inputs
from rnnconv.verification.model import Model
from rnnconv.verification.options import CheckOptions
from rnnconv.verification.plan import (
    ENGINE_GAP,
    CheckPlan,
    Comparison,
    Failure,
    Longer,
    LeftOut,
    Machine,
    NodePair,
    Side,
    Versus,
    WholeModel,
    choose,
    choose_versus,
    precision_of,
    unfit,
)
from rnnconv.verification.report import Report, VerifyReport
from rnnconv.verification.results import Check, failed
from rnnconv.verification.specs import input_specs, merge_specs
from rnnconv.verification.time_axis import time_axes
from rnnconv.verification.tolerance import Tolerances

WRITTEN = "written model"  # the subject of the as-users-run-it check


def verify_plan(plan: CheckPlan, options: CheckOptions, report: Report, *,
                early: Optional["EarlyRuntime"] = None, progress: Callable[[str], None] = lambda label: None,
                stage: Optional[Callable[[], Optional[Path]]] = None, machine: Optional[Machine] = None) -> Report:
    """Run every check of `plan` (see the module's steps), adding checks, notes and skipped checks to `report`.
    `early`: the OpenVINO runtime's process started with the command; `progress(label)`: called as each step
    starts; `stage()`: writes the output beside its target, uncommitted, and gives the ONNX file to load as users
    run it (None when nothing is written), called once every comparison passed."""
    machine = machine or Machine.this()
    if plan.versus is not None:
        return _versus(plan.versus, options, report)
    choice = choose(plan.whole, machine) if plan.whole is not None else None
    started = early.start(plan.whole, choice, options, machine) if early is not None and choice else None
    ahead = _ask_ahead(plan.whole, choice, options) if choice and plan.pairs else None
    try:
        report.checks.extend(check_nodes(plan.pairs, options, progress))
        runs = None
        if plan.whole is not None:
            progress("whole model")
            runs = _whole(plan.whole, choice, options, report, started, stage)
        for longer in plan.longer:
            report.checks.extend(_longer(longer, options))
        if runs is not None and plan.whole.as_written and stage is not None:
            report.checks.extend(_as_written(plan.whole, runs, stage, report.ok))
    finally:
        if ahead is not None:
            ahead.cancel()
    return report


def _first_sets(whole: WholeModel, options: CheckOptions) -> Optional[list]:
    """The first input sets the whole-model comparison draws (checks.runnable_sets), or None when drawing fails
    (the comparison says why, in its turn)."""
    precision = whole.precision or precision_of(whole.before)
    specs = merge_specs(whole.before, whole.after)
    try:
        return next(exercise.candidates(whole.before, whole.after, specs, options,
                                        lambda o: input_sets(specs, o, small=precision == "float32")))
    except RnnconvError:
        return None


def _ask_ahead(whole: WholeModel, choice, options: CheckOptions):
    """The baseline's onnxruntime run of a big ONNX source, started in its own process before the node checks,
    which run meanwhile on the other core (engines.ask_ahead; None where the baseline asks onnxruntime for none)."""
    before = whole.before
    if before.format != "onnx" or engines.external_bytes(before.onnx) <= engines.ISOLATE_WEIGHT_BYTES:
        return None
    sets = _first_sets(whole, options)
    return engines.ask_ahead(before, choice.baseline[0], sets[0][0]) if sets is not None and len(sets) == 1 \
        else None


def localize_failure(check: Check, reference: Run, candidate: Run, feeds: Mapping[str, np.ndarray],
                     tolerances: Tolerances, *, isolate: bool = False) -> None:
    """The one place a failing whole-model comparison (a conversion's, fuse's longer runs, `rnnconv verify`'s) is
    localized: `reference` and `candidate` ran on `feeds` and `check` failed. `check.first_divergence` gets where
    the two runs part and why (localize.attach), and `check.accepted` the warning under which it passes where the
    only difference is run-time rounding of the reference's quantizers. A run that failed, or a run against
    itself (a crashed runtime), has nothing to localize."""
    if check.ok or not (reference.ok and candidate.ok) or reference is candidate:
        return
    localize.attach(check, reference, candidate, feeds, tolerances, isolate=isolate)


# -- the OpenVINO runtime's early run -------------------------------------------------------------------------------

@dataclasses.dataclass
class Started:
    """The OpenVINO runtime's run of the converted IR, handed to its process before the other checks."""

    sets: list
    pending: engines.Pending


class EarlyRuntime:
    """The OpenVINO runtime's process, started with the command (Runtimes.early): it imports openvino while the
    command converts, and compiles the converted IR while the node checks run. It ends with `stack`."""

    def __init__(self, stack):
        self.worker = openvino_runtime.Worker()
        stack.callback(self.worker.close)

    @classmethod
    def wanted(cls, runtimes, verify: str, stack) -> Optional["EarlyRuntime"]:
        """The process, when the plan to come runs the OpenVINO runtime early (None otherwise)."""
        use = openvino_runtime.available() if runtimes.openvino is None else runtimes.openvino
        return cls(stack) if verify == "full" and runtimes.early and use else None

    def start(self, whole: WholeModel, choice, options: CheckOptions, machine: Machine) -> Optional[Started]:
        """Hand over the run the runtime comparison will make of the converted IR, on the inputs it will draw;
        None when it makes none, the IR does not fit beside the other checks, or there are several input sets."""
        after = whole.after
        runs_it = any(isinstance(c, Comparison) and c.candidate.engine == OPENVINO and c.candidate.model is after
                      for c in choice.comparisons)
        if not runs_it or after.path is None or unfit(after, machine, early=True):
            return None
        sets = _first_sets(whole, options)
        if sets is None or len(sets) != 1:
            return None
        return Started(sets, engines.Pending(after, sets[0][0], self.worker))


# -- node checks ----------------------------------------------------------------------------------------------------

def check_nodes(pairs: Sequence[NodePair], options: CheckOptions,
                progress: Callable[[str], None] = lambda label: None) -> list[Check]:
    """Each pair in rnnconv's engine, both sides on the same random inputs (the node's real weights)."""
    found = []
    for i, pair in enumerate(pairs):
        progress(pair.subject)
        specs = merge_specs(pair.before, pair.after)
        node_options = dataclasses.replace(options, seed=options.seed + i, inputs=None, runs=1)
        sets = input_sets(specs, node_options, small=pair.precision == "float32")
        _check_node_memory(pair, sets)
        ref = run_sets(pair.before, RNNCONV, sets, precision=pair.precision, partitioned=False)
        if not ref.ok:
            raise BadInput(f"{pair.subject}: it does not run alone on the inputs drawn for it "
                           f"({describe_inputs(sets[0][1])}): {ref.error}", fixes=("dims", "ranges"))
        cand = run_sets(pair.after, RNNCONV, sets, precision=pair.precision, partitioned=False)
        found += compare_runs(pair.subject, ref, cand, options.tolerances, pair.before.output_names(),
                              pair.before.output_dtypes())
    return found


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


# -- a conversion's whole model -------------------------------------------------------------------------------------

class _Runs:
    """Every run of one whole-model check, each made once: (model, engine, precision) -> Run on the same sets.
    `written`: how onnxruntime took the written file as users load it: None when it was not run from it, "" when
    it ran, else onnxruntime's refusal."""

    def __init__(self, whole: WholeModel, sets: list, precision: str, started: Optional[Started],
                 stage: Optional[Callable[[], Optional[Path]]]):
        self.whole, self.sets, self.precision, self.stage = whole, sets, precision, stage
        self.started = started if started is not None and same_sets(started.sets, sets) else None
        self.made: dict[tuple, Run] = {}
        self.unrun: dict[int, dict] = {}  # id(model) -> placements of an engine run left out as the runtime's own
        self.written: Optional[str] = None

    def add(self, run: Run) -> Run:
        self.made[self.key(run.model, run.engine, run.precision)] = run
        return run

    @staticmethod
    def key(model: Model, engine: str, precision: str) -> tuple:
        return id(model), engine, precision if engine == RNNCONV else ""

    def get(self, side: Side) -> tuple[Optional[Run], Optional[str]]:
        """The side's run, or (None, why) when its engine cannot run here (Side.unavailable, or installed and not
        importable)."""
        if side.unavailable is not None:
            return None, side.unavailable
        key = self.key(side.model, side.engine, side.precision)
        if key not in self.made:
            if self.started is not None and side.engine == OPENVINO and side.model is self.whole.after:
                run = Run(side.model, side.engine)
                try:
                    run.outputs.append(self.started.pending.result())
                except engines.CannotRun as err:
                    run.error = err
            elif side.as_written and self.stage is not None:
                run = self._as_written(side)
            else:
                run = run_sets(side.model, side.engine, self.sets, precision=side.precision, isolate=side.isolate)
            self.made[key] = run
        run = self.made[key]
        if isinstance(run.error, engines.Unavailable):  # installed, cannot be imported: skipped as when absent
            return None, f"{run.label}: {run.error}"
        return run, None

    def _as_written(self, side: Side) -> Run:
        """The converted model run from the file about to be written, as users load it: the comparison's run and
        the proof that it loads, in one session. Where that session refuses it, the model runs as every other
        model does (its weights fed as inputs, which leaves onnxruntime's graph optimizations nothing to rewrite)
        and the refusal is kept for the verdict."""
        path = self.stage()
        if path is not None:
            run = Run(side.model, side.engine)
            try:
                run.outputs = [engines.run_as_written(path, side.model, feeds, isolate=side.isolate)
                               for feeds, _ in self.sets]
                self.written = ""
                return run
            except engines.Crashed as err:
                run.error, run.outputs = err, []
                return run
            except engines.CannotRun as err:
                self.written = str(err)
        return run_sets(side.model, side.engine, self.sets, precision=side.precision, isolate=side.isolate)

    def stand_in(self, model: Model) -> Run:
        return self.get(Side(model, RNNCONV, self.precision))[0]

    def placements(self) -> dict:
        placed: dict = {}
        found = [(run.model, run.placements) for run in self.made.values()
                 if run.engine == RNNCONV and run.ok and run.placements]
        for model, placements in [*found, *((m, self.unrun[id(m)]) for m in (self.whole.before, self.whole.after)
                                            if id(m) in self.unrun)]:
            side = "source" if model is self.whole.before else "converted"
            merge_placements(placed.setdefault(side, {}), placements)
        return placed


def _whole(whole: WholeModel, choice, options: CheckOptions, report: Report, started: Optional[Started],
           stage: Optional[Callable[[], Optional[Path]]]) -> _Runs:
    """The comparisons `choice` lists, on the input sets the source runs on; report filled, the runs returned."""
    before, after = whole.before, whole.after
    precision = whole.precision or precision_of(before)
    specs = merge_specs(before, after)
    check_dim_names(options.dims, specs)
    sets, baseline, note = runnable_sets(before, specs, options, choice.baseline, small=precision == "float32",
                                         precision=precision, isolate=whole.runtimes.isolate, partner=after)
    report.exercised.extend(exercise.exercised(before, after, specs, options, sets))
    report.notes.extend([note] if note else [])
    runs = _Runs(whole, sets, precision, started, stage)
    runs.add(baseline)
    compared = _Compared(whole, options, report, sets)
    found: list[Check] = []
    for item in choice.comparisons:
        if isinstance(item, LeftOut):
            report.skipped.append(item.why)
        elif item.reference is None:  # against the baseline
            found += _engine_comparison(item, baseline, runs, compared)
        else:
            found += _runtime_comparison(item, runs, compared)
    gaps = [s for s in report.skipped if s.startswith(ENGINE_GAP)]
    if gaps and not found:  # a check that cannot run is skipped, unless no whole-model check ran at all
        raise BadInput(f"no whole-model check could run: {gaps[0]}", fixes=("verify=node",))
    report.checks.extend(found)
    note = placements_note(runs.placements())
    report.placements.update(runs.placements())
    report.notes.extend([note] if note else [])
    return runs


class _Compared:
    """compare_runs for one whole model, every failure handed to localize_failure."""

    def __init__(self, whole: WholeModel, options: CheckOptions, report: Report, sets: list):
        self.names, self.options, self.report, self.sets = whole.before.output_names(), options, report, sets
        self.declared = {**whole.after.output_dtypes(), **whole.before.output_dtypes()}
        self.isolate = whole.runtimes.isolate

    def __call__(self, c: Comparison, ref: Run, cand: Run, note: str = "") -> list[Check]:
        found = compare_runs(c.subject, ref, cand, self.options.tolerances, self.names, self.declared, note)
        for check in found:
            if not check.ok:
                localize_failure(check, ref, cand, self.sets[check.run or 0][0], self.options.tolerances,
                                 isolate=self.isolate)
        return found


def _crashed(run: Optional[Run]) -> bool:
    return run is not None and isinstance(run.error, engines.Crashed)


def _engine_comparison(c: Comparison, baseline: Run, runs: _Runs, compared: _Compared) -> list[Check]:
    """The baseline against the converted model in rnnconv's engine (plan.choose, Cases 3 and 4)."""
    if c.left_out_early and runs.started is not None:  # Case 3
        compared.report.notes.append(c.left_out_early)
        return []
    placed = whole_in_onnxruntime(c.candidate.model.onnx) if c.redundant and only_onnxruntime(baseline) else None
    if placed is not None:  # known before the run: a big model is not loaded once more for it
        runs.unrun[id(c.candidate.model)] = placed
        compared.report.notes.append(c.redundant)
        return []
    cand, _ = runs.get(c.candidate)
    if not cand.ok and not _crashed(cand) and c.candidate.failure is Failure.SKIPS:  # the engine lacks an op
        compared.report.skipped.append(_short(f"{ENGINE_GAP} ({cand.label}): {cand.error}", 300))
        return []
    if c.redundant and only_onnxruntime(baseline) and only_onnxruntime(cand):
        compared.report.notes.append(c.redundant)
        return []
    return compared(c, baseline, cand)


def _runtime_comparison(c: Comparison, runs: _Runs, compared: _Compared) -> list[Check]:
    """Each model in its runtime (plan.choose, Cases 7 and 8). The outcomes, by what each runtime did:
    Outcome 1: the converted model's runtime cannot run here after all (not importable): skipped.
    Outcome 2: a runtime's process died: the comparison fails (never a skip, never a stand-in).
    Outcome 3: the converted model refused, for no reason a runtime fact explains, and the source refused by the
        same runtime alike: the inputs, not the conversion: skipped (rnnconv's engine ran both).
    Outcome 4: the converted model refused, for no reason a runtime fact explains: the comparison fails, against
        the source in its runtime (or rnnconv's engine, which the note says).
    Outcome 5: the converted model refused for a known reason, and the source not run in that runtime: skipped.
    Outcome 6: the converted model refused for a known reason: rnnconv's engine runs it, the note says why.
    Outcome 7: the source not run in its runtime: rnnconv's engine runs it, the note says why.
    Outcome 8: both ran: compared."""
    report = compared.report
    rb, why_b = runs.get(c.reference)
    ra, why_a = runs.get(c.candidate)
    if ra is None:  # Outcome 1
        report.skipped.extend([why_a] if why_a else [])
        return []
    for side in (rb, ra):
        if _crashed(side):  # Outcome 2
            return compared(c, side, side)
    usable_b = rb is not None and rb.ok
    note = f"the source does not run in {rb.label}: {c.reference.known or rb.error}" if rb and not rb.ok else ""
    if not ra.ok:
        known = c.candidate.known
        explained = c.candidate.failure is Failure.STANDS_IN
        if not explained and rb is not None and not rb.ok and rb.engine == ra.engine and c.reference.known is None:
            report.skipped.append(_short(f"{ra.label}: runs neither model on these inputs ({rb.error})", 300))
            return []  # Outcome 3
        if not explained:  # Outcome 4
            return compared(c, rb if usable_b else runs.stand_in(c.reference.model), ra, note=_short(note))
        if not usable_b:  # Outcome 5
            report.skipped.append(f"{ra.label}: it refuses the converted model ({known}) and "
                                  f"{'cannot run the source either' if rb is not None else why_b}")
            return []
        return compared(c, rb, runs.stand_in(c.candidate.model),  # Outcome 6
                        note=_short(f"{ra.label} refuses the converted model: {known}"))
    if not usable_b:  # Outcome 7
        if rb is None and why_b:
            report.skipped.append(why_b)
        return compared(c, runs.stand_in(c.reference.model), ra, note=_short(note or why_b or ""))
    return compared(c, rb, ra)  # Outcome 8


def _as_written(whole: WholeModel, runs: _Runs, stage: Callable[[], Optional[Path]], ok: bool) -> list[Check]:
    """The written ONNX file in onnxruntime as users load it (default session options), where the comparisons
    ran the converted model in onnxruntime (a refusal they met is theirs to report): their own run from the file
    (_Runs._as_written), or, where they could not run it from the file, a load and a run of its own once every
    comparison passed (`ok`). A refusal is a failed check naming it, unless onnxruntime refuses the source
    loaded alike."""
    ran = runs.made.get(runs.key(whole.after, ONNXRUNTIME, "float64"))
    if ran is None or not ran.ok or runs.written == "":
        return []  # not run in onnxruntime (the comparisons say why), or run from the file already
    feeds = runs.sets[0][0]
    refusal, crashed = runs.written, False
    if refusal is None:  # not run from the file (bfloat16 inputs or outputs): loaded and run on its own
        path = stage() if ok else None
        if path is None:
            return []
        try:
            engines.run_as_written(path, whole.after, feeds, isolate=whole.runtimes.isolate)
            return []
        except engines.CannotRun as err:
            refusal, crashed = str(err), isinstance(err, engines.Crashed)
    if not crashed and whole.before.format == "onnx" and _source_refused(whole.before, feeds, whole.runtimes.isolate):
        return []  # the source is refused alike: not the conversion's doing
    why = f"onnxruntime (default session options, as users load the file) refuses it: {refusal}"
    return [Check(WRITTEN, "onnxruntime, default options", [failed(n, why) for n in whole.after.output_names()],
                  refusal=refusal)]


def _source_refused(before: Model, feeds: Mapping[str, np.ndarray], isolate: bool) -> bool:
    """Whether onnxruntime at its default session options refuses the source as well (its file, or, given in
    memory, the source written to a temporary one)."""
    with tempfile.TemporaryDirectory(prefix="rnnconv-source-") as folder:
        path = before.path
        if path is None:
            path = Path(folder) / "source.onnx"
            io.save(before.onnx, path)
        try:
            engines.run_as_written(path, before, feeds, isolate=isolate)
            return False
        except engines.CannotRun:
            return True


# -- fuse --free-sequence: the freed model on longer sequences ------------------------------------------------------

def _longer(longer: Longer, options: CheckOptions) -> list[Check]:
    """The source on the first input set, against the freed model on the same inputs with `steps` random steps
    appended along each time axis, on the outputs' first `length` steps; both in onnxruntime."""
    feeds, _ = input_sets(input_specs(longer.before), options)[0]
    rng = np.random.default_rng(options.seed + 1)
    extended = dict(feeds)
    for name, axis in longer.inputs:
        x = feeds[name]
        more = list(x.shape)
        more[axis] = longer.steps
        extended[name] = np.concatenate([x, rng.standard_normal(more).astype(x.dtype)], axis=axis)
    ref = run_sets(longer.before, ONNXRUNTIME, [(feeds, [])])
    cand = run_sets(longer.after, ONNXRUNTIME, [(extended, [])])
    if ref.ok and cand.ok:
        cut = {k: np.take(cand.outputs[0][k], range(longer.length), axis=a) for k, a in longer.outputs}
        cand = dataclasses.replace(cand, outputs=[cut])
    names = [k for k, _ in longer.outputs]
    found = compare_runs(longer.subject, ref, cand, options.tolerances, names, {}, engines_text=ONNXRUNTIME)
    for check in found:
        if not check.ok:
            localize_failure(check, ref, cand, feeds, options.tolerances)
    return found


# -- rnnconv verify ---------------------------------------------------------------------------------------------------

def _versus(versus: Versus, options: CheckOptions, report: VerifyReport) -> VerifyReport:
    """Every run of `plan.choose_versus` on every input set, each against the baseline (the reference in the
    first of its engines that runs it). The report keeps the inputs and every run's outputs (`feeds`, `outputs`)."""
    ref, cand = versus.reference, versus.candidate
    specs = merge_specs(ref, cand)
    names = ref.output_names()
    dtypes = ref.output_dtypes()
    options.tolerances.check_names(names)
    unknown = sorted(set(options.ranges) - set(specs))
    if unknown:
        raise UsageError(f"range given for no input named {', '.join(unknown)} (inputs: {', '.join(specs) or 'none'})")
    check_dim_names(options.dims, specs)
    axes = {**time_axes(cand), **time_axes(ref)}
    given_sets = (read_inputs(options.inputs, specs) if isinstance(options.inputs, (str, os.PathLike))
                  else [dict(options.inputs or {})])
    if options.runs is not None and len(given_sets) > 1 and options.runs != len(given_sets):
        raise UsageError(f"runs={options.runs}, but the inputs file holds {len(given_sets)} input sets")
    try:  # the sizes the reference runs at (a model may need its own), drawn as every check draws them
        sets, _, size_note = runnable_sets(ref, specs, options, versus.reference_engines, partner=cand)
        sizes_failed = None
    except BadInput as err:  # no engine of the reference runs it at any size: the runs below say which and why
        sets, size_note, sizes_failed = input_sets(specs, options), None, err
    report.seed = options.seed if any(len(g) < len(specs) for g in given_sets) else None
    missing = [n for n in names if n not in cand.output_names()]
    if missing:
        report.notes.append(f"the candidate has no output named {', '.join(missing)}")
    report.notes.extend([size_note] if size_note else [])
    report.exercised = exercise.exercised(ref, cand, specs, options, sets)
    runs = choose_versus(versus)
    active = list(runs)
    models = {"reference": ref, "candidate": cand}
    baseline = None
    only_ort: dict[str, bool] = {}  # side -> rnnconv's engine ran that whole model in onnxruntime
    for k, (feeds, described) in enumerate(sets):
        report.inputs.append(described)
        prefix = f"run{k}/" if len(sets) > 1 else ""
        report.feeds.update({f"{prefix}{n}": v for n, v in feeds.items()})
        results = {}
        for against in list(active):
            side, engine = against.side, against.engine
            try:
                placed: dict = {}
                results[against] = engines.run_once(engine, models[side], feeds, placements=placed)
                if placed:  # rnnconv's engine: where each node ran
                    merge_placements(report.placements.setdefault(side, {}), placed)
                    only_ort[side] = all(set(c) == {ONNXRUNTIME} for c in placed.values())
            except engines.CannotRun as err:
                if against.failure is Failure.REFUSES:  # Case 2
                    raise Unsupported(f"{side} {models[side].label}: {engine} cannot run it: {err} (see "
                                      f"`rnnconv check`)", fixes=("another engine",)) from err
                active.remove(against)  # Case 1
                report.skipped.append({"side": side, "engine": engine, "reason": str(err)})
        if baseline is None:
            baseline = next((a for a in active if a.side == "reference"), None)
            if baseline is None:
                why = "; ".join(f"{s['engine']}: {s['reason']}" for s in report.skipped if s["side"] == "reference")
                if sizes_failed is not None:  # on no size drawn for it, as the conversions say it
                    raise BadInput(f"reference {ref.label}: no engine runs it ({why}); {sizes_failed.message}",
                                   fixes=[f for f in sizes_failed.fixes if not f.startswith("verify")])
                raise Unsupported(f"reference {ref.label}: no engine could run it ({why})")
            report.baseline = f"{baseline.side}[{baseline.engine}]"
        if baseline not in results:
            raise Unsupported(f"the baseline {report.baseline} could not run input set {k}: "
                              f"{report.skipped[-1]['reason'] if report.skipped else 'unknown reason'}")
        base = results[baseline]
        for against, outs in results.items():
            side, engine = against.side, against.engine
            report.outputs.update({f"{prefix}{side}.{engine}/{n}": v for n, v in outs.items() if n in names})
            if against is baseline:
                continue
            if engine == ONNXRUNTIME and only_ort.get(side) and any(
                    a.side == side and a.engine == RNNCONV for a in results):
                same = (f"{side}[onnxruntime]: not compared, the same runtime as {side}[rnnconv] (rnnconv's engine "
                        f"ran the whole {side} model in onnxruntime)")
                report.notes.extend([] if same in report.notes else [same])
                continue
            tolerances = options.tolerances
            held = against.held or baseline.held
            if held:  # Case 3
                tolerances = dataclasses.replace(tolerances, dequantized=True)
                note = f"{side}[{engine}]: {held}"
                report.notes.extend([] if note in report.notes else [note])
            ref_run = Run(models[baseline.side], baseline.engine, outputs=[base])
            cand_run = Run(models[side], engine, outputs=[outs])
            [check] = compare_runs(f"{side}[{engine}]" + (f" run {k}" if len(sets) > 1 else ""), ref_run, cand_run,
                                   tolerances, names, dtypes, engines_text=f"{side}[{engine}] vs {report.baseline}",
                                   time_axes=axes, reference=report.baseline)
            check.run = k
            if not check.ok:
                localize_failure(check, ref_run, cand_run, feeds, tolerances)
            report.checks.append(check)
    report.engines = {side: [a.engine for a in active if a.side == side] for side in ("reference", "candidate")}
    note = placements_note(report.placements)
    report.notes.extend([note] if note else [])
    return report


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
