"""The one conversion pipeline every converting command runs (as onnxsim's `simplify(model) -> (model, ok)`):
`run_conversion(source, translator, options)` loads the source, guards the output, checks the tolerance names,
lets the translator convert (it returns the model it made and its CheckPlan), hands the plan to verification's one
runner (`verification.runner.verify_plan`: each replaced node against its replacement, then the whole model
before against after), writes only when every check passed, and returns the Result with its report. A command
supplies its translator and its options, nothing else.

Principle: no silent wrong answer. Each node a rewrite replaced is run against its replacement (real weights,
random inputs with varied sequence_lens), then the whole model before against after. Any mismatch raises
VerificationFailed and nothing is written. A source given in memory is never changed: the conversion rewrites a
copy.

`Passes` is the translator of the ONNX -> ONNX commands (upgrade, downgrade, layout, dequantize, fuse): its
interface (input and output names, dtypes, shapes) never changes; the result passes onnx.checker's full check (a
result that does not is a step rnnconv lacks: Unsupported, naming op and versions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Protocol, Sequence

import onnx_ir as ir

from rnnconv import io, schemas
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.onnx_recurrent import default_opset
from rnnconv.errors import ContradictedOutputs, RnnconvError, Unsupported, UsageError, VerificationFailed
from rnnconv.passes.base import Pass, Rewrite, RewritePass
from rnnconv.passes.fuse_match import Fusion
from rnnconv.passes.transpose_fold import FoldTransposes
from rnnconv.verification import VERIFY_MODES
from rnnconv.verification.model import Model, load_input, onnx_model
from rnnconv.verification.options import CheckOptions
from rnnconv.verification.plan import CheckPlan, Longer, NodePair, Runtimes, WholeModel
from rnnconv.verification.report import Report

if TYPE_CHECKING:
    from rnnconv.verification.runner import EarlyRuntime

Progress = Callable[[int, int, str], None]


@dataclasses.dataclass
class Result:
    """What a converting call returns: the converted model and its verification report."""

    model: object  # an onnx_ir Model, or an IRGraph for to_openvino
    report: Report


# -- the pipeline ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Source:
    """The loaded source: its model (an onnx_ir Model or an IR graph), its output names (the tolerance names are
    checked against them) and the files it is read from (an output may be none of them)."""

    model: object
    output_names: list[str]
    files: tuple = ()


@dataclasses.dataclass
class Job:
    """What the pipeline hands a translator: the call's settings, the report to fill, and an ExitStack that lives
    until the output is written (temporary files)."""

    source: object  # as the caller gave it
    output: Optional[Path]
    verify: str
    force: bool
    options: CheckOptions
    report: Report
    stack: contextlib.ExitStack


@dataclasses.dataclass
class Translation:
    """What a translator made: the converted model, its CheckPlan, and `stage(output)`: the output written beside
    its target, complete, renamed into place by its commit() once every check passed (an io.Staged, entered in
    the job's stack)."""

    model: object
    plan: CheckPlan
    stage: Callable[[Path], io.Staged]
    fp16_weights: bool = False  # the rewrites stored weights as float16: every output held to float16's tolerance


class Translator(Protocol):
    """A converting command: its name, what it writes, and the conversion itself."""

    command: str
    suffix: tuple[str, str]  # the output's suffix and what it holds ("an ONNX model")
    fp16_weights: bool  # weights stored as float16: every output held to float16's tolerance
    dequantized: bool  # quantized layers replaced by float ones: held to the 'dequantized' tolerance
    runtimes: Runtimes  # how the real runtimes take part in its whole-model comparisons

    def files(self, source) -> tuple:
        """The files `source` is read from, before loading (BadInput when one is missing)."""

    def targets(self, output: Path) -> list[Path]:
        """Every file written for `output`."""

    def open(self, source) -> Source: ...

    def translate(self, source: Source, job: Job) -> Translation: ...


def check_verify(verify: str) -> None:
    if verify not in VERIFY_MODES:
        raise UsageError(f"verify={verify!r}: expected one of {', '.join(VERIFY_MODES)}")


def run_conversion(source, translator: Translator, options: Optional[CheckOptions] = None, *, output=None,
                   verify: str = "full", force: bool = False, progress: Optional[Progress] = None) -> Result:
    """Convert `source` with `translator`, verify its plan (every replaced node unless verify is "none", the
    whole model when "full"), write `output` (when given) only when every check passed. `progress(done, total,
    label)` is called as each step starts."""
    tick = progress or (lambda done, total, label: None)
    check_verify(verify)
    options = (options or CheckOptions()).holding(fp16_weights=translator.fp16_weights,
                                                  dequantized=translator.dequantized)
    out = Path(output) if output is not None else None
    targets = translator.targets(out) if out is not None else []
    files = translator.files(source)
    for target in targets:  # before loading: the cheap refusals first
        io.guard_output(target, force=force, inputs=files)
    loaded = translator.open(source)
    options.tolerances.check_names(loaded.output_names)  # the one check of the names tolerances were given for
    for target in targets:  # over the input's external data too, then the name
        io.guard_output(target, force=force, inputs=loaded.files)
    if out is not None:
        io.check_suffix(out, *translator.suffix)
    report = Report(translator.command, verified=verify)
    with contextlib.ExitStack() as stack:
        early: Optional[EarlyRuntime] = None
        if verify != "none":  # --verify none loads no checking code (nor its runtimes)
            from rnnconv.verification.runner import EarlyRuntime, verify_plan

            early = EarlyRuntime.wanted(translator.runtimes, verify, stack)  # its import overlaps the translation
        done = translator.translate(loaded, Job(source, out, verify, force, options, report, stack))
        options = options.holding(fp16_weights=done.fp16_weights)
        plan = done.plan.scoped(verify)
        total = len(plan.pairs) + (plan.whole is not None) + (out is not None)
        step = iter(range(total + 1))
        staged: list[io.Staged] = []

        def stage() -> Optional[Path]:
            """The output, written beside its target (once); the model file it holds."""
            if out is None:
                return None
            if not staged:
                tick(next(step), total, "writing")
                staged.append(done.stage(out))
            return staged[0].temps[-1]

        if verify != "none":
            verify_plan(plan, options, report, early=early, stage=stage,
                        progress=lambda label: tick(next(step), total, label))
        if not report.ok:
            raise VerificationFailed(f"{translator.command}: {report.verdict()}; nothing written{plan.failed}",
                                     report, fixes=plan.fixes)
        if out is not None:
            stage()
            staged[0].commit()
            report.output = str(out)
        tick(total, total, "done")
        return Result(done.model, report)


# -- ONNX -> ONNX: passes -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Passes:
    """The translator of the ONNX -> ONNX commands: the passes `plan(model, report)` gives for the loaded model
    (raising, with the reason, when the command cannot or need not convert it; notes it adds to the report come
    first), each rewrite checked alone, Transposes folded around the rewrites. `last(model, before, job)`: the
    command's own last step, after the interface and onnx's full check, with the comparisons it adds (fuse
    --free-sequence; `before`: the source as the whole-model comparisons run it, None when they do not run)."""

    command: str
    plan: Callable[[ir.Model, Report], Sequence[Pass]]
    external_data: Optional[bool] = None
    dequantized: bool = False
    last: Optional[Callable[[ir.Model, Optional[Model], Job], Sequence[Longer]]] = None
    correct: bool = True  # a declared shape the converted nodes refute is corrected (else ContradictedOutputs)
    suffix = (".onnx", "an ONNX model")
    runtimes = Runtimes()
    fp16_weights = False

    def files(self, source) -> tuple:
        return (source,) if isinstance(source, (str, os.PathLike)) else ()

    def targets(self, output: Path) -> list[Path]:
        return [output]

    def open(self, source) -> Source:
        model = load(source)
        if model is source:  # an onnx_ir Model given in memory: the conversion rewrites a copy
            model = independent_copy(source)
        return Source(model, [v.name for v in model.graph.outputs], (*self.files(source), *io.external_paths(model)))

    def translate(self, loaded: Source, job: Job) -> Translation:
        model, report, verify, source = loaded.model, job.report, job.verify, job.source
        passes = self.plan(model, report)
        if job.output is not None and self.external_data is not False and self.last is None:
            # Untouched weights start copying now, beside the rest; save() keeps the copy where its layout agrees.
            early = job.stack.enter_context(io.EarlyCopy(model, job.output))
        else:
            early = None
        before = source_model(model, source) if verify == "full" else None
        onnx_recurrent.find(model, io.source_name(source))  # bad recurrent nodes: BadInput naming the file
        infer_shapes(model)
        interface_before = interface(model)
        opset_before = onnx_recurrent.default_opset(model)
        pairs: list[NodePair] = []
        fp16_weights = False
        rewriting = [p for p in passes if isinstance(p, RewritePass)]
        for p in passes:
            if isinstance(p, RewritePass):
                def observe(r: Rewrite, p=p):
                    op = r.op if isinstance(r, Fusion) else r.original.op
                    report.rewrites.append({"node": r.name, "op": op, "what": "; ".join(r.what)})
                    if verify != "none":
                        subject = f"node {r.name}" + (f" ({r.what[0]})" if len(rewriting) > 1 else "")
                        pairs.append(node_pair(model, r, subject))

                p.observe = observe
            result = p(model)
            report.notes.extend(result.changes)  # what the pass did beside its rewrites
            fp16_weights = fp16_weights or getattr(result, "fp16_weights", False)  # (onnx_ir's own passes: none)
            if isinstance(p, RewritePass) and result.rewrites:
                # Scoped to the rewrites' Transposes (and the ones they meet): the rest is not ours to edit.
                FoldTransposes(scope=[n for r in result.rewrites for n in r.nodes])(model)
        if interface(model) != interface_before:
            raise VerificationFailed(f"{self.command}: the model's interface changed (a bug in rnnconv)", report)
        try:
            io.check_full(model)
        except RnnconvError as err:
            contradicted = _declared_outputs_contradicted(model, str(err))
            corrected = correct_declared(model, _CHECKER_OP.search(str(err))) if contradicted and self.correct else None
            if corrected:  # the declarations, not the conversion: written as the nodes compute, and said
                report.notes.extend(corrected)
            elif contradicted is not None:
                found = _CHECKER_OP.search(str(err))
                raise ContradictedOutputs(f"{io.source_name(source)}: {contradicted}, which the older schemas of its "
                                          f"opset did not check; correct the declaration, or convert to a lower "
                                          f"opset (onnx's shape inference of the converted model: {err})",
                                          next((g for g in found.groups() if g), None) if found else None) from err
            else:
                raise missing_step(self.command, str(err), opset_before, onnx_recurrent.default_opset(model)) from err
        longer = tuple(self.last(model, before, job)) if self.last is not None else ()
        whole = WholeModel(before, onnx_model(model), as_written=True) if before is not None else None

        def stage(output: Path) -> io.Staged:
            return job.stack.enter_context(io.stage(model, output, force=job.force, inputs=self.files(source),
                                                    external_data=self.external_data, early=early))

        return Translation(model, CheckPlan(tuple(pairs), whole, longer), stage, fp16_weights)


def load(source) -> ir.Model:
    """The model to convert (external data stays memory-mapped)."""
    return load_input(source)


def source_opset(source) -> int:
    return onnx_recurrent.default_opset(load(source))


def opset_number(opset) -> int:
    """An opset given to the API, checked as the CLI checks --opset: an integer."""
    if isinstance(opset, bool) or not isinstance(opset, numbers.Integral):
        raise UsageError(f"opset={opset!r}: expected an integer")
    return int(opset)


def check_opset(opset: int) -> None:
    opset = opset_number(opset)
    latest = schemas.latest_opset()
    if not 1 <= opset <= latest:
        raise Unsupported(f"opset {opset} is outside 1..{latest}, the opsets the installed onnx knows"
                          + (" (upgrade onnx for newer ones)" if opset > latest else ""))


def interface(model: ir.Model) -> list[tuple]:
    def sig(v: ir.Value):
        shape = None if v.shape is None else tuple(str(d) if not isinstance(d, int) else d for d in v.shape)
        return (v.name, None if v.dtype is None else v.dtype.name, shape)

    graph = model.graph
    inputs = [sig(v) for v in graph.inputs if v.name not in graph.initializers]
    return [("input", *s) for s in inputs] + [("output", *sig(v)) for v in graph.outputs]


def infer_shapes(model: ir.Model) -> None:
    """Fill in value types and shapes where onnx can infer them (some adapters need them); the interface keeps
    what the source declared."""
    from onnx_ir.passes.common import ShapeInferencePass

    interface_values = [*model.graph.inputs, *model.graph.outputs]
    # copies: the pass merges what it infers into the declared Shape objects (an unset dim became "unk__1")
    declared = [(v.type, None if v.shape is None else v.shape.copy()) for v in interface_values]
    try:
        ShapeInferencePass(strict_mode=False)(model)
    except Exception:  # inference is a help for adapters, not a requirement
        pass
    for v, (type_, shape) in zip(interface_values, declared):
        v.type, v.shape = type_, shape


def independent_copy(model: ir.Model) -> ir.Model:
    """A copy of an in-memory model that a conversion may rewrite: its graphs, nodes and values its own, its
    tensors shared (rewrites replace tensors, never change one)."""
    return io.load(model.clone())  # as a loaded model: -1 dims are dynamic


def source_model(model: ir.Model, source) -> Model:
    """The source as the whole-model comparisons run it, beside the `model` being converted (which it shares its
    memory maps with): the caller's own onnx_ir Model (never changed), else the file or ModelProto read again."""
    if isinstance(source, ir.Model):
        return onnx_model(source, io.source_name(source))
    copy = io.load(source, check=False)
    _share_external(copy, model)
    path = source if isinstance(source, (str, os.PathLike)) else None
    return onnx_model(copy, io.source_name(source), path)


def _share_external(copy: ir.Model, model: ir.Model) -> None:
    """Let the copy read its external weights through the model's tensors: one memory map per file, so a
    weight read by both models' checks is resident once (rewrites replace tensors, never change one)."""
    for name, v in copy.graph.initializers.items():
        mine = model.graph.initializers.get(name)
        t, u = v.const_value, None if mine is None else mine.const_value
        if (isinstance(t, ir.ExternalTensor) and isinstance(u, ir.ExternalTensor)
                and os.fspath(t.location) == os.fspath(u.location) and t.offset == u.offset
                and t.length == u.length and t.dtype == u.dtype and t.shape == u.shape):
            v.const_value = u
    # A copy made from an in-memory model lost the folder its external data is read from.
    bases = {u.base_dir for u in (w.const_value for w in model.graph.initializers.values())
             if isinstance(u, ir.ExternalTensor)}
    if len(bases) == 1:
        for v in copy.graph.initializers.values():
            if isinstance(v.const_value, ir.ExternalTensor) and not v.const_value.base_dir:
                v.const_value.base_dir = next(iter(bases))


# How onnx.checker names the op of the node it refuses.
_CHECKER_OP = re.compile(r"op_type:\s*(\w+)|for operator (\w+)|Op \((\w+)\)|Node \(\S*\) of type (\w+)|"
                         r"OpType:\s*(\w+)")


# How onnx's shape inference says a declared rank is not the one it infers: (inferred) vs (declared).
_RANKS = re.compile(r"differ in rank: \((\d+)\) vs \((\d+)\)")


def _declared_outputs_contradicted(model: ir.Model, message: str) -> Optional[str]:
    """What the converted model's graph outputs declare against what its nodes compute, when onnx's full check
    passes without those declarations (which the conversion keeps from the source unchanged: bad input): their
    dims, or their rank (the one onnx's `message` says it inferred). None when the declarations are not what
    fails."""
    outputs = list(model.graph.outputs)
    declared = [(v.type, v.shape) for v in outputs]
    ranks = _RANKS.search(message)

    def passes(unset: list, rank: Optional[int]) -> bool:
        try:
            for v in unset:
                if v.shape is not None and (rank is None or len(v.shape) == int(ranks.group(2))):
                    v.shape = ir.Shape([None] * (len(v.shape) if rank is None else rank))
            io.check_full(model)
            return True
        except RnnconvError:
            return False
        finally:
            for v, (type_, shape) in zip(outputs, declared):
                v.type, v.shape = type_, shape

    for rank in (None, int(ranks.group(1)) if ranks else None):
        if not passes(outputs, rank):
            continue
        named = [v for v in outputs[:8] if passes([v], rank)]  # which one, where that is cheap to find
        if len(named) != 1:
            what = "dims" if rank is None else "ranks"
            return f"the {what} it declares for its outputs contradict what its nodes compute"
        v = named[0]
        shape = "[" + ", ".join(str(d) for d in v.shape) + "]"
        return (f"output {v.name!r} is declared {shape}, and its nodes compute other dims" if rank is None else
                f"output {v.name!r} is declared {shape}, rank {len(v.shape)}, and its nodes compute rank {rank}")
    return None


def correct_declared(model: ir.Model, found: Optional[re.Match] = None) -> Optional[list[str]]:
    """Give every output (and intermediate value) whose declared shape onnx's shape inference of the converted
    model refutes the shape its nodes compute (a declared dim the inference leaves open stays where the ranks
    agree); a note per output, naming both shapes. None, the model as it was, when onnx's full check still
    fails."""
    op = next((g for g in found.groups() if g), None) if found else None
    shapes, error = schemas.infer_shapes(model, data_prop=True)
    shapes = schemas.infer_shapes(model)[0] if error else shapes
    values = [*model.graph.outputs, *(v for node in model.graph for v in node.outputs
                                      if v.shape is not None and not v.is_graph_output())]
    saved = [(v, v.shape) for v in values]
    notes = []
    for v in values:
        computed = shapes.get(v.name)
        if v.shape is None or computed is None:
            continue
        declared = list(v.shape)
        if len(declared) != len(computed):
            new = list(computed)
        else:
            new = [c if isinstance(c, int) and c != d else d for d, c in zip(declared, computed)]
            if new == declared:
                continue
        v.shape = ir.Shape(new)
        if v.is_graph_output():
            rank = f", rank {len(declared)}" if len(declared) != len(computed) else ""
            checks_it = f" ({op}-{schemas.schema_since_version(op, default_opset(model))} checks it)" if op else ""
            notes.append(f"output {v.name!r} is declared {_dims_text(declared)}{rank}, its nodes compute "
                         f"{_dims_text(new)}{f', rank {len(new)}' if rank else ''}{checks_it}: written as they "
                         f"compute it")
    try:
        io.check_full(model)
        return notes or None
    except RnnconvError:
        for v, shape in saved:
            v.shape = shape
        return None


def _dims_text(dims) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def missing_step(command: str, message: str, before: int, after: int) -> Unsupported:
    """A converted model that fails onnx.checker: a step rnnconv lacks (exit 3), named by op and versions."""
    found = _CHECKER_OP.search(message)
    op = next((g for g in found.groups() if g), None) if found else None
    a, b = (schemas.schema_since_version(op, v) for v in (before, after)) if op else (None, None)
    if op is None or a is None or b is None:
        where = f"opset {before} -> {after}"
    elif a == b:
        where = f"{op}-{a}"
    else:
        where = f"{op}-{a} to {op}-{b}"
    return Unsupported(f"{command}: no step of rnnconv moves {where} correctly: the converted model fails "
                       f"onnx.checker ({message})")


def node_pair(model: ir.Model, r: Rewrite, subject: str) -> NodePair:
    """The rewritten node alone and its replacement alone, as models with the same inputs and output names."""
    from rnnconv.verification import extract
    from rnnconv.verification.checks import precision_for
    if isinstance(r, Fusion):
        return fusion_pair(model, r, subject)
    rn = r.original
    keys = [k for k in r.outputs if rn.outputs.get(k) is not None]
    inputs = [v for v in rn.node.inputs if v is not None]
    opsets = dict(model.opset_imports)
    after_opsets = {**opsets, "": r.opset} if r.opset is not None else opsets
    after_opsets.pop("ai.onnx", None) if r.opset is not None else None
    shapes = extract.recurrent_shapes(rn)
    before = extract.extract([rn.node], inputs, [rn.outputs[k] for k in keys], opsets, model.ir_version,
                             shapes=shapes)
    after = extract.extract(r.nodes, inputs, [r.outputs[k] for k in keys], after_opsets,
                            max(model.ir_version, schemas.min_ir_version(after_opsets.get("", 1))),
                            output_names=[rn.outputs[k].name for k in keys], shapes=shapes)
    return NodePair(subject, onnx_model(before), onnx_model(after), precision_for(model, [rn]))


def fusion_pair(model: ir.Model, f: Fusion, subject: str) -> NodePair:
    """The nodes a fusion matched and the ones that replace them, as models with the same inputs and outputs."""
    from rnnconv.verification import extract
    from rnnconv.verification.checks import precision_for
    opsets, version = dict(model.opset_imports), max(model.ir_version, 4)
    olds, news = [old for old, _ in f.replaced], [new for _, new in f.replaced]
    # The context (a Loop's trip count computed from its sequence's shape) runs in both, on the same inputs.
    before = extract.extract([*f.context, *f.matched], f.inputs, olds, opsets, version)
    if any(a.type == ir.AttributeType.GRAPH for n in f.matched for a in n.attributes.values()):
        # A body reads captured weights by name: through a proto, it reads the extracted model's copies.
        before = ir.serde.deserialize_model(ir.serde.serialize_model(before))
    after = extract.extract([*f.context, *f.nodes], f.inputs, news, opsets, version,
                            output_names=[v.name for v in olds])
    return NodePair(subject, onnx_model(before), onnx_model(after), precision_for(model, []))
