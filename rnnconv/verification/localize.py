"""Where two runs part, on every failing whole-model comparison (what Polygraphy's `--onnx-outputs mark all` and
`debug reduce` give a user who runs them by hand): both models run with every intermediate tensor they share by
name exposed (ONNX value names survive in OpenVINO's tensor names), the tensors are compared in the reference's
topological order, and each that differs beyond tolerance is computed again alone, in both runtimes, on the
reference's values of what it reads (`exposure.cut`: every shared tensor fed, so each node runs alone at once).

The cause, per diverging tensor (`divergence.Divergence`): the node computes differently given identical inputs
("node"); or it agrees and its inputs already differed ("upstream"); or, holding a run-time quantizer, it differs
given identical inputs only where float arithmetic before a rounding tips it ("rounding": values one step the other
way where a last bit of its inputs moves the reference's own rounding too, or rnnconv's engine in float64 where it
agrees in float32). An "upstream" tensor computed from nothing that diverged is a tip: a difference within
tolerance crossed a rounding step. Where no node computes differently and every tip is a run-time quantizer of the
REFERENCE (the source's ops, `divergence.QUANTIZERS`), the conversion is faithful (`divergence.rounding_verdict`):
the comparison passes, with a warning saying what differs. Localization never decides a verdict by failing: what
it cannot do is said in one line.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import numpy as np

from rnnconv.engine import OPENVINO, RNNCONV
from rnnconv.verification import engines, exposure
from rnnconv.verification.divergence import QUANTIZERS, CannotLocalize, Divergence, NotLocalized, rounding_verdict
from rnnconv.verification.exposure import ALONE
from rnnconv.verification.model import Model
from rnnconv.verification.results import Check, compare, magnitude
from rnnconv.verification.tolerance import Tolerances

# Tensors above this size are neither compared nor cut (they join the region of the node that reads them): the
# memory of a localization stays near a few times the activations of the model, without its biggest ones.
TENSOR_BYTES = 16 << 20
# An IR in the OpenVINO runtime is written again (.xml and .bin) for each run a localization makes: past this much
# Const data, that costs more than the comparison that failed, and the localization is left out, said.
IR_WEIGHT_BYTES = 1 << 30


def first_divergence(reference: Model, candidate: Model, ref_engine: str, cand_engine: str,
                     feeds: Mapping[str, np.ndarray], tolerances: Tolerances, *,
                     precisions: Sequence[str] = ("float64", "float64"), isolate: bool = False
                     ) -> Optional[Divergence]:
    """Where `candidate` in `cand_engine` parts from `reference` in `ref_engine` on `feeds` (see the module's
    docstring); None when no tensor they share differs. Real runtimes run in a child process (OpenVINO always:
    it shares no process with numpy's BLAS), onnxruntime when `isolate`. CannotLocalize says why it could not."""
    for model, engine in ((reference, ref_engine), (candidate, cand_engine)):
        weights = sum(x.value.nbytes for x in model.graph.all_layers() if x.type == "Const" and x.value is not None) \
            if model.format == "ir" and engine == OPENVINO else 0
        if weights > IR_WEIGHT_BYTES:
            raise CannotLocalize(f"left out: {model.describe()} holds {weights / 2**30:.1f} GiB of weights, which each "
                                 f"run of a localization in the OpenVINO runtime would write again")
    sides = [_Side(reference, ref_engine, precisions[0]), _Side(candidate, cand_engine, precisions[1])]
    ref, cand = sides
    shared, left = _shared(sides)
    outputs = set(reference.output_names())
    for side in sides:
        side.exposed = side.run(exposure.exposed(side.model, shared), feeds, isolate, "with its tensors exposed")
    compared, diverging, widths = [], [], {}
    for name in shared:
        r, c = ref.exposed.get(name), cand.exposed.get(name)
        why = _incomparable(r, c, name in outputs)
        if why:
            left[why] = left.get(why, 0) + 1
            continue
        compared.append(name)
        found = _compare(name, r, c, tolerances)
        widths[name] = found.max_abs
        if not found.ok:
            diverging.append(name)
    if not compared:
        raise CannotLocalize("no tensor the two models share by name could be compared ("
                             + "; ".join(f"{n} tensor(s) {why}" for why, n in left.items()) + ")")
    if not diverging:
        return None
    values = {n: ref.exposed[n] for n in compared}
    for side in sides:
        side.alone = side.run_cut(values, diverging, feeds, isolate)
    cuts = {ref.named[n] for n in compared}
    by_key = {ref.named[n]: n for n in compared}
    rounds = QUANTIZERS[reference.format]
    tensors, tainted, diverged = [], set(), set(diverging)  # tainted: diverging, or computed from what diverged
    for name in compared:
        nodes, reads = ref.view.region(ref.named[name], cuts)
        ins = [by_key[k] for k in reads]
        carried = bool(tainted.intersection(ins))
        if name not in diverged:
            if carried:
                tainted.add(name)
            continue
        tainted.add(name)
        t = _Diverged(name, next((n for n in nodes if ref.named[name] in n.outputs), None), widths[name], ins,
                      _compare(name, ref.alone[name], cand.alone[name], tolerances),
                      [n for n in nodes if rounds.intersection(n.ops)], carried)
        tensors.append(t)
    _roundings([t for t in tensors if not t.alone.ok and t.quantizers], ref, cand, values, feeds, tolerances, isolate)
    alone = {t.name: t.entry(alone_max_abs=t.alone.max_abs) for t in tensors if t.cause in ("node", "rounding")}
    if alone:
        _which_runtime(list(alone.values()), sides, values, feeds, tolerances, isolate)
    differing = [alone[t.name] for t in tensors if t.cause == "node"]
    tipped = [{"node": t.quantizers[0].name, "op_type": t.quantizers[0].op, "tensor": t.name, "max_abs": t.width,
               "cause": t.cause, **({"elements": t.elements, "how": t.how,
                                     "which_runtime": alone[t.name].get("which_runtime")} if t.cause == "rounding"
                                    else {})}
              for t in tensors if t.cause == "rounding" or (t.cause == "upstream" and not t.carried and t.quantizers)]
    unexplained = [t.entry(max_abs=t.width) for t in tensors
                   if t.cause == "upstream" and not t.carried and not t.quantizers]
    first = tensors[0]
    head = first.entry()
    nodes, _ = ref.view.region(ref.named[first.name], cuts)
    return Divergence(head["node"], head["op_type"], first.name, first.cause, first.alone.max_abs,
                      max((widths[n] for n in first.ins), default=0.0), first.width, tipped,
                      differing[0].get("which_runtime") if first.cause == "node" else None,
                      differing[1:] if first.cause == "node" else differing, unexplained,
                      [n.name for n in nodes if n is not first.node], len(compared), diverging,
                      "; ".join(f"{n} tensor(s) {why}" for why, n in left.items()))


@dataclasses.dataclass
class _Diverged:
    """One tensor that differs beyond tolerance between the two runs."""

    name: str
    node: Optional[exposure.Node]  # the reference's node computing it
    width: float  # max abs between the two runs
    ins: list  # the shared tensors its region reads
    alone: object  # OutputComparison of the region alone in both runtimes on the reference's values
    quantizers: list  # run-time quantizers of the reference in its region
    carried: bool  # some of `ins` diverged, or were computed from a tensor that did
    elements: int = 0  # "rounding": how many values it rounds the other way
    rounding: bool = False
    how: str = ""  # "rounding": "boundary" (a last bit of its inputs moves them) or "float64" (rnnconv's engine)

    @property
    def cause(self) -> str:
        return "upstream" if self.alone.ok else "rounding" if self.rounding else "node"

    def entry(self, **extra) -> dict:
        return {"node": self.node.name if self.node else self.name, "op_type": self.node.op if self.node else "",
                "tensor": self.name, **extra}


# How far the reference's inputs are nudged to find its own rounding boundaries: units in the last place of
# float32, at random per element between these (what two runtimes' float arithmetic before a rounding differs by,
# with a margin; never the same for all elements, which a quantizer's own scale would follow).
NUDGE_ULPS = (2, 16)


def _roundings(suspects: list, ref: "_Side", cand: "_Side", values: Mapping[str, np.ndarray], feeds,
               tolerances: Tolerances, isolate: bool) -> None:
    """Which of `suspects` (a region holding a run-time quantizer of the reference, which differs given identical
    inputs) differ only where float arithmetic before a rounding tips it ("rounding"):

    - a side that ran in rnnconv's engine in float64 agrees once run in float32, the model's precision: the
      engine's float64 arithmetic rounds otherwise (a quantized recurrence carries that);
    - an integer result (a quantized value) differs by one step only at elements that a last bit moves: the
      reference's region is run again on its float inputs nudged by NUDGE_ULPS, up and down, in two random
      patterns; an element whose rounding a nudge moves in the reference itself lies on a boundary."""
    names = [t.name for t in suspects]
    wide = [side for side in (ref, cand) if side.engine == RNNCONV and side.precision == "float64"]
    if names and wide:
        again = {id(side): side.run_cut(values, names, feeds, isolate, precision="float32") for side in wide}
        for t in suspects:
            r, c = (again.get(id(side), side.alone)[t.name] for side in (ref, cand))
            if _compare(t.name, r, c, tolerances).ok:
                t.rounding, t.how, t.elements = True, "float64", t.alone.n_bad
    suspects = [t for t in suspects if not t.rounding and np.asarray(ref.alone[t.name]).dtype.kind in "iub"]
    nudged_names = sorted({n for t in suspects for n in t.ins if np.asarray(values[n]).dtype.kind == "f"})
    if not suspects or not nudged_names:
        return
    rng = np.random.default_rng(0)
    moved = {t.name: np.zeros(np.shape(ref.alone[t.name]), bool) for t in suspects}
    for _ in range(2):
        ulps = {n: rng.integers(*NUDGE_ULPS, size=np.shape(values[n]), endpoint=True)
                * rng.choice([-1.0, 1.0], size=np.shape(values[n])) for n in nudged_names}
        for direction in (1.0, -1.0):
            nudged = dict(values)
            for n in nudged_names:
                v = np.asarray(values[n])
                step = np.spacing(np.abs(v).astype(np.float32)).astype(np.float64) * ulps[n]
                nudged[n] = (v + direction * step).astype(v.dtype)
            got = ref.run_cut(nudged, [t.name for t in suspects], feeds, isolate)
            for t in suspects:
                moved[t.name] |= np.asarray(got[t.name]) != np.asarray(ref.alone[t.name])
    for t in suspects:
        steps = np.asarray(cand.alone[t.name]).astype(np.int64) - np.asarray(ref.alone[t.name]).astype(np.int64)
        if np.abs(steps).max() <= 1 and not np.any((steps != 0) & ~moved[t.name]):
            t.rounding, t.how, t.elements = True, "boundary", int(np.count_nonzero(steps))


@dataclasses.dataclass
class _Side:
    model: Model
    engine: str
    precision: str
    exposed: dict = dataclasses.field(default_factory=dict)
    alone: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self.view = exposure.view(self.model)
        self.named = self.view.named()

    def run(self, model: Model, feeds: Mapping[str, np.ndarray], isolate: bool, how: str, engine: str = "",
            precision: str = "") -> dict:
        engine, precision = engine or self.engine, precision or self.precision
        try:
            return engines.run_once(engine, model, feeds, precision=precision, isolate=isolate or engine == OPENVINO)
        except engines.CannotRun as err:
            raise CannotLocalize(f"{engines.label(engine, model, precision)} cannot run the {self.model.describe()} "
                                 f"{how}: {err}") from err

    def run_cut(self, values: Mapping[str, np.ndarray], wanted: Sequence[str], feeds: Mapping[str, np.ndarray],
                isolate: bool, engine: str = "", precision: str = "") -> dict:
        """Each of `wanted` computed alone from `values` (the reference's), under its own name."""
        dtypes = {n: np.asarray(v).dtype for n, v in self.exposed.items()}
        model, fed = exposure.cut(self.model, values, wanted, dtypes)
        got = self.run(model, {**feeds, **fed}, isolate, "cut at its shared tensors", engine, precision)
        return {n: got.get(n + ALONE) for n in wanted}


def _shared(sides: list[_Side]) -> tuple[list[str], dict]:
    """The tensor names both models compute (in the reference's topological order), one per tensor; and how many
    were left out, by reason."""
    shared, seen, left = [], set(), {}
    outputs = set(sides[0].model.output_names())  # compared whatever their size: the check holds them already
    for name, key in sides[0].named.items():
        other = sides[1].named.get(name)
        if other is None or (0, key) in seen or (1, other) in seen:
            continue
        seen.update(((0, key), (1, other)))
        sizes = [exposure.static_bytes(side.model, k) for side, k in zip(sides, (key, other))]
        if name not in outputs and any(s is not None and s > TENSOR_BYTES for s in sizes):
            left["above the size limit"] = left.get("above the size limit", 0) + 1
            continue
        shared.append(name)
    if not shared:
        counts = f" ({'; '.join(f'{n} tensor(s) {why}' for why, n in left.items())})" if left else ""
        raise CannotLocalize(f"the two models share no intermediate tensor by name{counts}")
    return shared, left


def _which_runtime(differing: list[dict], sides: list[_Side], values, feeds, tolerances, isolate: bool) -> None:
    """Where an IR runs in the OpenVINO runtime: the nodes computed alone again in rnnconv's IR interpreter, which
    follows the IR's op specs. The interpreter agreeing with the other side puts the difference on the runtime;
    disagreeing, on the IR's ops."""
    for k, side in enumerate(sides):
        if side.engine != OPENVINO or side.model.format != "ir":
            continue
        other = sides[1 - k]
        wanted = [d["tensor"] for d in differing]
        try:
            mine = side.run_cut(values, wanted, feeds, isolate, RNNCONV, "float64")
        except CannotLocalize as err:
            for d in differing:
                d["which_runtime"] = f"rnnconv's IR interpreter cannot tell whose ({err})"
            return
        for d in differing:
            layer = next((n for n in side.view.nodes if side.named.get(d["tensor"]) in n.outputs), None)
            what = f"{layer.op} {layer.name!r}" if layer else f"tensor {d['tensor']}"
            whose = "the IR's" if k == 1 else "the reference IR's"
            if _compare(d["tensor"], other.alone[d["tensor"]], mine[d["tensor"]], tolerances).ok:
                d["which_runtime"] = (f"OpenVINO runtime computes {whose} node {what} differently from the IR's ops "
                                      f"(rnnconv's IR interpreter agrees with the {'reference' if k else 'candidate'})")
            else:
                d["which_runtime"] = f"rnnconv's IR interpreter computes {whose} node {what} differently too"
        return


def _incomparable(r, c, output: bool = False) -> Optional[str]:
    if not isinstance(r, np.ndarray) or not isinstance(c, np.ndarray):
        return "not returned as tensors by both runs"
    if r.shape != c.shape:
        return "of different shapes"
    if not output and max(r.nbytes, c.nbytes) > TENSOR_BYTES:
        return "above the size limit"
    return None


def _compare(name: str, r, c, tolerances: Tolerances):
    if r is None or c is None:
        raise CannotLocalize(f"tensor {name!r}: a run alone gave no value")
    with np.errstate(all="ignore"):  # intermediate tensors may hold what outputs never do (huge, infinite)
        atol, rtol = tolerances.for_output(name, np.asarray(r).dtype, np.asarray(c).dtype, magnitude=magnitude(r))
        return compare(name, r, c, atol, rtol)


def attach(check: Check, ref_run, cand_run, feeds: Mapping[str, np.ndarray], tolerances: Tolerances, *,
           isolate: bool = False) -> None:
    """Localize a failing whole-model comparison: `check.first_divergence` gets the Divergence (or NotLocalized,
    saying why not), and `check.accepted` the warning of `rounding_verdict` where the conversion is faithful.
    `ref_run`, `cand_run`: what ran (`.model`, `.engine`, `.precision`, `.outputs` per input set, as
    checks.Run holds them); `feeds`: the input set of `check`. Never raises (but on an interrupt)."""
    if check.ok:
        return
    try:
        found = first_divergence(ref_run.model, cand_run.model, ref_run.engine, cand_run.engine, feeds, tolerances,
                                 precisions=(ref_run.precision, cand_run.precision), isolate=isolate)
    except CannotLocalize as err:
        check.first_divergence = NotLocalized(str(err))
        return
    except Exception as err:  # a bug of its own must not decide the verdict: said, and the check stays failed
        check.first_divergence = NotLocalized(f"localization failed: {engines.one_line(err)}")
        return
    if found is None:
        check.first_divergence = NotLocalized("with every shared tensor exposed, the two runs agree (a runtime "
                                              "computes the whole model otherwise than node by node)")
        return
    check.first_divergence = found
    k = check.run or 0
    pick = (lambda run: run.outputs[0] if len(run.outputs) == 1 else run.outputs[k] if k < len(run.outputs) else {})
    check.accepted = rounding_verdict(check, found, pick(ref_run), pick(cand_run)) or ""
