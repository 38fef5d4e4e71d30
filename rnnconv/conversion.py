"""The conversion every ONNX -> ONNX command runs (upgrade, downgrade, layout): load, run the passes, check,
write.

Principle: no silent wrong answer. Each node a pass replaced is run against its replacement (real weights, random
inputs with varied sequence_lens), then the whole model before against after (`verification.checks`). Any
mismatch raises VerificationFailed and nothing is written. The interface (input and output names, dtypes, shapes)
never changes; the result passes onnx.checker's full check (a result that does not is a step rnnconv lacks:
Unsupported, naming op and versions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from pathlib import Path
from typing import Callable, Optional, Sequence

import onnx_ir as ir

from rnnconv import io, schemas
from rnnconv.dialects import onnx_recurrent
from rnnconv.errors import BadInput, RnnconvError, Unsupported, UsageError, VerificationFailed
from rnnconv.passes.base import Pass, Rewrite, RewritePass
from rnnconv.passes.fuse_cells import Fusion
from rnnconv.passes.transpose_fold import FoldTransposes
from rnnconv.verification import VERIFY_MODES, checks, extract
from rnnconv.verification.model import load_input, onnx_model
from rnnconv.verification.report import Report

Progress = Callable[[int, int, str], None]


@dataclasses.dataclass
class Result:
    """What a converting call returns: the converted model and its verification report."""

    model: object  # an onnx_ir Model, or an IRGraph for to_openvino
    report: Report


def load(source) -> ir.Model:
    """The model to convert (external data stays memory-mapped)."""
    return load_input(source)


def source_opset(source) -> int:
    return onnx_recurrent.default_opset(load(source))


def check_opset(opset: int) -> None:
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


def original_copy(model: ir.Model, source) -> ir.Model:
    """An independent copy of the loaded model to verify against, sharing its memory maps."""
    copy = (ir.serde.deserialize_model(io.to_proto(source)) if isinstance(source, ir.Model)
            else io.load(source, check=False))
    _share_external(copy, model)
    return copy


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


def _declared_outputs_contradicted(model: ir.Model) -> bool:
    """Whether the converted model passes onnx's full check once its graph outputs declare no dims: then what
    fails is the output declarations, which the conversion keeps from the source unchanged (bad input)."""
    outputs = list(model.graph.outputs)
    declared = [(v.type, v.shape) for v in outputs]
    try:
        for v in outputs:
            v.shape = None if v.shape is None else ir.Shape([None] * len(v.shape))
        io.check_full(model)
        return True
    except RnnconvError:
        return False
    finally:
        for v, (type_, shape) in zip(outputs, declared):
            v.type, v.shape = type_, shape


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


def node_pair(model: ir.Model, r: Rewrite, subject: str) -> checks.NodePair:
    """The rewritten node alone and its replacement alone, as models with the same inputs and output names."""
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
    return checks.NodePair(subject, onnx_model(before), onnx_model(after), checks.precision_for(model, [rn]))


def fusion_pair(model: ir.Model, f: Fusion, subject: str) -> checks.NodePair:
    """The nodes a fusion matched and the ones that replace them, as models with the same inputs and outputs."""
    opsets, version = dict(model.opset_imports), max(model.ir_version, 4)
    olds, news = [old for old, _ in f.replaced], [new for _, new in f.replaced]
    before = extract.extract(f.matched, f.inputs, olds, opsets, version)
    if any(a.type == ir.AttributeType.GRAPH for n in f.matched for a in n.attributes.values()):
        # A body reads captured weights by name: through a proto, it reads the extracted model's copies.
        before = ir.serde.deserialize_model(ir.serde.serialize_model(before))
    after = extract.extract(f.nodes, f.inputs, news, opsets, version, output_names=[v.name for v in olds])
    return checks.NodePair(subject, onnx_model(before), onnx_model(after), checks.precision_for(model, []))


def convert(source, output, *, command: str, passes: Sequence[Pass], verify: str = "full",
            options: Optional[checks.CheckOptions] = None, force: bool = False,
            external_data: Optional[bool] = None, progress: Optional[Progress] = None,
            loaded: Optional[ir.Model] = None) -> Result:
    """Run `passes` on the model, check every rewrite (unless verify is "none") and the whole model ("full"),
    write `output` (when given). `progress(done, total, label)` is called as each step starts; `loaded`: the
    source, already loaded."""
    tick = progress or (lambda done, total, label: None)
    options = options or checks.CheckOptions()
    paths = (source,) if isinstance(source, (str, os.PathLike)) else ()
    if output is not None:
        io.guard_output(Path(output), force=force, inputs=paths)
    if verify not in VERIFY_MODES:
        raise UsageError(f"verify={verify!r}: expected one of {', '.join(VERIFY_MODES)}")
    model = loaded if loaded is not None else load(source)
    options.tolerances.check_names([v.name for v in model.graph.outputs])
    if output is not None:  # over the input's external data first, then the name
        io.guard_output(Path(output), force=force, inputs=(*paths, *io.external_paths(model)))
        io.check_suffix(output, ".onnx", "an ONNX model")
    # Untouched weights start copying now, beside the rest; save() keeps the copy where its layout agrees.
    early = io.EarlyCopy(model, output) if output is not None and external_data is not False else None
    with early or contextlib.nullcontext():
        original = original_copy(model, source) if verify == "full" else None
        onnx_recurrent.find(model, io.source_name(source))  # bad recurrent nodes: BadInput naming the file
        infer_shapes(model)
        interface_before = interface(model)
        opset_before = onnx_recurrent.default_opset(model)
        report = Report(command, verified=verify)
        pairs: list[checks.NodePair] = []
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
            if isinstance(p, RewritePass) and result.rewrites:
                # Scoped to the rewrites' Transposes (and the ones they meet): the rest is not ours to edit.
                FoldTransposes(scope=[n for r in result.rewrites for n in r.nodes])(model)
        if interface(model) != interface_before:
            raise VerificationFailed(f"{command}: the model's interface changed (a bug in rnnconv)", report)
        try:
            io.check_full(model)
        except RnnconvError as err:
            if _declared_outputs_contradicted(model):
                raise BadInput(f"{io.source_name(source)}: the shapes it declares for its outputs contradict "
                               f"what its nodes compute, which the older schemas of its opset did not check "
                               f"(onnx's shape inference of the converted model: {err})") from err
            raise missing_step(command, str(err), opset_before, onnx_recurrent.default_opset(model)) from err
        total = len(pairs) + (verify == "full") + (output is not None)
        step = iter(range(total + 1))
        report.checks.extend(checks.check_nodes(pairs, options, lambda label: tick(next(step), total, label)))
        if verify == "full":
            tick(next(step), total, "whole model")
            report.checks.extend(checks.check_models(onnx_model(original, io.source_name(source)),
                                                     onnx_model(model), options, skipped=report.skipped,
                                                     notes=report.notes, placements=report.placements))
        if not report.ok:
            raise VerificationFailed(f"{command}: {report.verdict()}; nothing written", report)
        if output is not None:
            tick(next(step), total, "writing")
            io.save(model, output, force=force, inputs=paths, external_data=external_data, early=early)
            report.output = str(output)
        tick(total, total, "done")
        return Result(model, report)
