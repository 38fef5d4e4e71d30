"""What a command asks verification to check (`CheckPlan`), and the comparisons that makes (`choose`).

A translator returns its plan with the model it made: the node pairs (each replaced node alone against what
replaced it), the whole model before against after (`WholeModel`), comparisons of its own (`Longer`: fuse
--free-sequence); `rnnconv verify` plans two models and the engines of each side (`Versus`). `choose(plan,
machine)` is a pure function of the plan and the machine (what is installed, the memory to compile): it lists
every comparison and every comparison left out with its reason, the allowances deciding (verification/allowances.py).
`runner.verify_plan` runs what it chose. Whole-model comparisons of a conversion, by formats:

| before -> after | engine comparison | runtime comparison |
| --- | --- | --- |
| ONNX -> ONNX | engine vs engine | onnxruntime vs onnxruntime |
| ONNX -> IR | onnxruntime vs IR interpreter | onnxruntime vs OpenVINO runtime |
| IR -> ONNX | IR interpreter vs engine | OpenVINO runtime vs onnxruntime |

The engine comparison's reference is the baseline: the source in the first of `baseline` that runs it (an ONNX
source held against IR runs in onnxruntime), on the first input sizes it runs at (checks.runnable_sets).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Optional, Union

from rnnconv.engine import ONNXRUNTIME, OPENVINO, RNNCONV, openvino_runtime
from rnnconv.verification.model import Model

# allowances, engines and checks are imported where a plan is chosen, not where one is built: a command run with
# --verify none builds its plan (empty) without loading checking code.

ENGINE_GAP = "rnnconv's engine cannot run the converted model"
# What the checks running beside an early-started runtime hold, per byte of the model's weights (onnxruntime's
# session of the source: 1.6x measured on a 1 GB LSTM), with a margin: an early start demands it on top.
BESIDE_FACTOR = 2.0


# -- the plan ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class NodePair:
    """A node alone (`before`) and what replaced it (`after`), as standalone models with the same inputs and
    output names; both run in rnnconv's engine at `precision`."""

    subject: str
    before: Model
    after: Model
    precision: str = "float64"


@dataclasses.dataclass(frozen=True)
class Runtimes:
    """How the real runtimes take part in the whole-model comparisons. `openvino`: run the OpenVINO runtime (None:
    when installed); `isolate`: each real runtime in a child process (a crash fails the check instead of ending
    rnnconv); `early`: the OpenVINO runtime's process starts with the command, and compiles the converted IR
    while the node checks run (runner.EarlyRuntime)."""

    openvino: Optional[bool] = None
    isolate: bool = False
    early: bool = False


@dataclasses.dataclass(frozen=True)
class WholeModel:
    """A conversion's whole model, `before` against `after`, on the same inputs. `precision`: of rnnconv's engine
    (None: float64, or float32 for big layers, checks.precision_for). `as_written`: `after` is the ONNX file the
    command writes: onnxruntime loads and runs it once with its default session options, as users run it."""

    before: Model
    after: Model
    runtimes: Runtimes = Runtimes()
    precision: Optional[str] = None
    as_written: bool = False


@dataclasses.dataclass(frozen=True)
class Longer:
    """`after` run `steps` time steps longer than `before` (random steps appended to `inputs`, (name, time axis)),
    its `outputs` ((name, time axis)) compared with the source's on their first `length` steps, both in
    onnxruntime: a model whose sequence length was freed (fuse --free-sequence)."""

    before: Model
    after: Model
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    length: int
    steps: int

    @property
    def subject(self) -> str:
        return f"freed model at {self.length + self.steps} steps, its first {self.length}"


@dataclasses.dataclass(frozen=True)
class Versus:
    """`rnnconv verify`: REFERENCE and CANDIDATE, each in its engines; every run against the baseline, the
    reference in the first of its engines that runs it."""

    reference: Model
    candidate: Model
    reference_engines: tuple[str, ...] = (RNNCONV,)
    candidate_engines: tuple[str, ...] = (RNNCONV,)


@dataclasses.dataclass(frozen=True)
class CheckPlan:
    """Everything a command asks verification to check. `failed`: said after a failed verdict, with `fixes`."""

    pairs: tuple[NodePair, ...] = ()
    whole: Optional[WholeModel] = None
    longer: tuple[Longer, ...] = ()
    versus: Optional[Versus] = None
    failed: str = ""
    fixes: tuple[str, ...] = ()

    def scoped(self, verify: str) -> "CheckPlan":
        """What `verify` ("full", "node", "none") keeps of the plan."""
        if verify == "full":
            return self
        return CheckPlan(self.pairs if verify == "node" else (), failed=self.failed, fixes=self.fixes)


# -- the comparisons ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Machine:
    """What `choose` reads of this machine: whether the openvino package is installed, the memory available."""

    openvino: bool
    memory: Optional[int]

    @classmethod
    def this(cls) -> "Machine":
        from rnnconv.verification import allowances
        return cls(openvino_runtime.available(), allowances.available_memory())


class Failure(enum.Enum):
    """What it means when a side's engine cannot run its model."""

    FAILS = "the comparison fails, naming why"
    STANDS_IN = "rnnconv's engine runs the model instead, the note says why"
    SKIPS = "the comparison is left out, saying why"
    REFUSES = "the command stops: an engine asked for by name cannot run the model (Unsupported)"


@dataclasses.dataclass(frozen=True)
class Side:
    """One model in one engine. `known`: why the engine refuses this model, when a runtime fact says so
    (allowances.known_refusal); `unavailable`: why the engine cannot run here at all (not installed, too big to
    compile): rnnconv's engine runs the model instead, reported as skipped. `as_written`: the ONNX file the
    command writes, which onnxruntime runs from that file as users load it (WholeModel.as_written)."""

    model: Model
    engine: str
    precision: str = "float64"
    isolate: bool = False
    failure: Failure = Failure.FAILS
    known: Optional[str] = None
    unavailable: Optional[str] = None
    as_written: bool = False

    @property
    def label(self) -> str:
        from rnnconv.verification import engines
        return engines.label(self.engine, self.model, self.precision)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """`candidate` against `reference` (None: the baseline) on the same inputs. `left_out_early`: a note, the
    comparison left out when the OpenVINO runtime's early run stands for it; `redundant`: left out, with this note,
    when rnnconv's engine ran both models entirely in onnxruntime. A comparison that fails is localized by the
    runner (verification/localize.py), whose verdict may find it faithful up to run-time rounding."""

    subject: str
    reference: Optional[Side]  # None: the baseline
    candidate: Side
    left_out_early: Optional[str] = None
    redundant: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class LeftOut:
    """A comparison not made, and why (the report's `skipped`)."""

    why: str


Chosen = Union[Comparison, LeftOut]


@dataclasses.dataclass(frozen=True)
class Choice:
    """What `choose` made of a whole-model plan: the baseline's engines, in order, and the comparisons."""

    baseline: tuple[str, ...]
    comparisons: tuple[Chosen, ...]


def runtime_of(model: Model) -> str:
    return ONNXRUNTIME if model.format == "onnx" else OPENVINO


def choose(whole: WholeModel, machine: Machine) -> Choice:
    """The whole-model comparisons of a conversion (the module's table).

    The engine comparison (the baseline against `after` in rnnconv's engine):
    Case 1: `after` is IR with layers the IR interpreter has no kernel for (OpenVINO's own import made them):
        left out, the runtime comparison is the one that counts.
    Case 2: `after` is IR and the source quantizes at run time what float ops compute (allowances.requantized):
        left out; each quantized layer was checked alone.
    Case 3: big layers (float32) and the OpenVINO runtime's run of the IR under way (Runtimes.early): left out
        with a note when that run is on the baseline's inputs, since the node checks and the runtime show it.
    Case 4: otherwise made; left out with a note when rnnconv's engine ran both ONNX models entirely in
        onnxruntime (the runtime comparison makes the same one), skipped when the engine cannot run `after`.
    The runtime comparison (each model in its runtime: onnxruntime for ONNX, OpenVINO for IR):
    Case 5: `after` in OpenVINO without the package: left out, said only when the runtime was not switched off.
    Case 6: `after` in OpenVINO, too big to compile here: left out, saying so.
    Case 7: the source in OpenVINO, which cannot run here (5, 6): rnnconv's engine runs the source instead.
    Case 8: otherwise both models run in their runtimes; a runtime that cannot run the source is replaced by
        rnnconv's engine, one that refuses the converted model fails the comparison unless a runtime fact
        explains the refusal (then rnnconv's engine runs it instead); see runner's outcomes. The ONNX file the
        command writes (WholeModel.as_written) runs from that file as users load it."""
    from rnnconv.verification import allowances, engines
    before, after, runtimes = whole.before, whole.after, whole.runtimes
    precision = whole.precision or precision_of(before)
    cross = before.format != after.format
    openvino = machine.openvino if runtimes.openvino is None else runtimes.openvino
    baseline = (ONNXRUNTIME, RNNCONV) if cross and before.format == "onnx" else (RNNCONV,)
    chosen: list[Chosen] = []

    gap = allowances.interpreter_gap(after) or (allowances.requantized(before) if after.format == "ir" else None)
    if gap:  # Cases 1, 2
        chosen.append(LeftOut(gap))
    else:  # Cases 3, 4
        early = (precision == "float32" and runtimes.early and openvino and after.format == "ir"
                 and unfit(after, machine, early=True) is None)
        chosen.append(Comparison(
            "model", None, Side(after, RNNCONV, precision, failure=Failure.SKIPS),
            left_out_early=("IR interpreter: the whole model left out (big layers: each ran alone in it; the "
                            "OpenVINO runtime runs the whole model)") if early else None,
            redundant=None if cross else ("engine vs engine: left out, rnnconv's engine ran both models entirely in "
                                          "onnxruntime (the onnxruntime check); the node checks hold rnnconv's "
                                          "kernels against each replacement")))

    sides = []
    for model in (before, after):
        engine, why = runtime_of(model), None
        if engine == OPENVINO and not openvino:  # Cases 5, 7
            why = f"{engines.label(engine, model)}: {openvino_runtime.NOT_INSTALLED}" if runtimes.openvino is None \
                else ""
        elif engine == OPENVINO:  # Cases 6, 7
            why = unfit(model, machine)
        sides.append((engine, why))
    (engine_b, why_b), (engine_a, why_a) = sides
    if why_a is not None:  # Cases 5, 6
        chosen.extend([LeftOut(why_a)] if why_a else [])
    else:  # Cases 7, 8
        chosen.append(Comparison(
            "model",
            Side(before, engine_b, isolate=runtimes.isolate, failure=Failure.STANDS_IN,
                 known=allowances.known_refusal(before, engine_b), unavailable=why_b),
            _converted(after, engine_a, runtimes.isolate, whole.as_written)))
    return Choice(baseline, tuple(chosen))


def _converted(after: Model, engine: str, isolate: bool, as_written: bool) -> Side:
    """The converted model in its runtime: a refusal fails the comparison, unless a runtime fact explains it. The
    ONNX file the command writes runs in onnxruntime from that file, as users load it, where onnxruntime's Python
    API takes its inputs and outputs (engines.runs_as_written): one session for the comparison and the load."""
    from rnnconv.verification import allowances, engines
    known = allowances.known_refusal(after, engine)
    return Side(after, engine, isolate=isolate, failure=Failure.STANDS_IN if known else Failure.FAILS, known=known,
                as_written=as_written and not known and engine == ONNXRUNTIME and engines.runs_as_written(after))


def unfit(model: Model, machine: Machine, *, early: bool = False) -> Optional[str]:
    """Why the OpenVINO runtime cannot compile `model` here (allowances.would_not_fit); `early`: with the other
    checks running beside it."""
    from rnnconv.verification import allowances
    factor = allowances.RUNTIME_COMPILE_FACTOR + (BESIDE_FACTOR if early else 0.0)
    return allowances.would_not_fit(model, factor, machine.memory)


def precision_of(model: Model) -> str:
    """rnnconv's engine precision for a whole model: float32 for big layers of an ONNX model, else float64."""
    from rnnconv.verification.checks import precision_for
    return precision_for(model.onnx) if model.format == "onnx" else "float64"


@dataclasses.dataclass(frozen=True)
class Against:
    """`rnnconv verify`: one side's run in one engine, against the baseline. `failure`: SKIPS when the side runs
    in every engine (the report lists it), REFUSES when an engine was asked for by name; `held`: an allowance
    holding it to 'dequantized' from the start, with the reason."""

    side: str
    engine: str
    failure: Failure
    held: Optional[str] = None


def choose_versus(versus: Versus) -> tuple[Against, ...]:
    """Every run of `rnnconv verify`, reference engines first; the first reference engine that runs is the
    baseline (runner). Case 1: a side given several engines (`all`) skips those that cannot run it. Case 2: an
    engine named alone that cannot run its model stops the command. Case 3: OpenVINO reading an ONNX model with a
    DynamicQuantizeLSTM approximates the op by nature: held to 'dequantized' (allowances.approximates)."""
    from rnnconv.verification import allowances
    out = []
    for side, model, names in (("reference", versus.reference, versus.reference_engines),
                               ("candidate", versus.candidate, versus.candidate_engines)):
        failure = Failure.SKIPS if len(names) > 1 else Failure.REFUSES
        for engine in names:
            out.append(Against(side, engine, failure, allowances.approximates(engine, model)))
    return tuple(out)
