"""`to_openvino`: ONNX recurrent models to OpenVINO IR v11 (.xml + .bin), verified before anything is written.

Two routes, chosen per model:
- rnnconv's own writer (`rnnconv.dialects.openvino.from_onnx`, then FoldIRTransposes) when every op of the model
  is in rnnconv's op table: it needs no openvino package and streams big models (weights are reordered and
  folded per tensor and streamed into the .bin from their memory maps, see `graph.Pieces`; unchanged gate bytes
  are copied file to file by the kernel).
- OpenVINO's own ONNX import (`rnnconv.dialects.openvino.frontend`) for everything else (a convolutional front
  end, If/Loop bodies...) when the openvino package is installed, or when rnnconv's writer cannot express the
  model on its own (an explicit recurrence whose input size only OpenVINO's shape inference knows): each
  GRU/LSTM/RNN node still goes through rnnconv's exact mapping, grafted into OpenVINO's graph. Without openvino
  such a model is refused (exit 3) naming the ops and the install command.
com.microsoft DynamicQuantizeLSTM: rnnconv's own writer computes onnxruntime's run-time quantization of X and of
H at every step in OpenVINO ops (`dialects.openvino.quantized`); OpenVINO's ONNX import would compute the float
LSTM of the dequantized weights, so such a node on that route is refused (dequantize first).

Verification (its CheckPlan, run by `verification.runner`): each recurrent node alone (rnnconv's ONNX engine vs its IR interpreter;
on the OpenVINO route, the node as OpenVINO's import fed it, against the IR that was grafted), then the whole model
(the source in onnxruntime, or the engine where onnxruntime cannot run it, vs the IR interpreter and, when the
package is installed, the real OpenVINO runtime at f32; on the OpenVINO route the interpreter has no kernels for
the ops OpenVINO made, so the runtime check is the one that counts). The IR is written to temporary files beside
the target and renamed into place only after every check passed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Optional, Union

import onnx_ir as ir

from rnnconv import conversion, io
from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.dialects.openvino import from_onnx, frontend, ops, quantized, shapes
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino import writer as ov_writer
from rnnconv.engine import AUTO, OPENVINO, RNNCONV, ROUTES, openvino_runtime
from rnnconv.errors import IOFailure, Unsupported, UsageError
from rnnconv.passes.ir_transpose_fold import FoldIRTransposes
from rnnconv.passes.settle_ifs import settle
from rnnconv.verification.model import ir_model, load_input, onnx_model
from rnnconv.verification.options import CheckOptions, check_keywords
from rnnconv.verification.plan import CheckPlan, NodePair, Runtimes, WholeModel
from rnnconv.verification.report import Report
from rnnconv.verification.tolerance import TOLERANCES

QUANTIZED = ("com.microsoft", "DynamicQuantizeLSTM")


# Real models' float16 weights alone can move outputs past float16's tolerance (silero-vad's LSTM state 2.4e-3,
# DeepFilterNet's encoder 1.6e-2, measured with the weights rounded in the ONNX model): say so where it fails.
FP16_FAILED = (f"; float16 weights (fp16) hold every output to float16's tolerance (atol {TOLERANCES['float16'][0]:g}"
               f" + rtol {TOLERANCES['float16'][1]:g}), which their rounding alone can exceed: float32 weights, or a "
               "larger tolerance, would pass")


def onnx_to_ir(model: ir.Model, fp16: bool = False, release=io.release_pages) -> from_onnx.Conversion:
    """The IR graph of `model`, Transposes folded; `release(view)` is called on each memory-mapped weight view
    once it has been read (by default: its pages leave the resident set)."""
    converted = from_onnx.to_ir_graph(model, fp16=fp16, release=release)
    FoldIRTransposes()(converted.graph)
    return converted


IMPORT_WOULD = ("OpenVINO's ONNX import converts them, with every recurrent node still mapped by rnnconv, when the "
                "openvino package is installed")


@dataclasses.dataclass
class ToOpenVINO:
    """The ONNX -> OpenVINO IR translator: rnnconv's own writer or OpenVINO's ONNX import (`route`), the IR staged
    beside its target while it is checked. `fp16`: float weights stored as f16, which also holds every output to
    float16's tolerance and says so when a check fails. `runtime`, `isolate`: see to_openvino."""

    fp16: bool = False
    route: str = AUTO
    runtime: Optional[bool] = None
    isolate: bool = False
    command = "to-openvino"
    suffix = (".xml", "OpenVINO IR (NAME.xml + NAME.bin)")

    def __post_init__(self):
        if self.route not in ROUTES:
            raise UsageError(f"route={self.route!r}: expected one of {', '.join(ROUTES)}")

    dequantized = False

    @property
    def fp16_weights(self) -> bool:
        return self.fp16

    @property
    def runtimes(self) -> Runtimes:
        # In a child process (the CLI), the OpenVINO runtime starts with the command: it imports openvino while
        # this process converts, and compiles the IR as soon as it is written, while the node checks run.
        return Runtimes(self.runtime, self.isolate, early=self.isolate)

    def files(self, source) -> tuple:
        return (source,) if isinstance(source, (str, os.PathLike)) else ()

    def targets(self, out: Path) -> list[Path]:
        return [out, out.with_suffix(".bin")]  # neither may be an input, nor exist without force

    def open(self, source) -> conversion.Source:
        model = load_input(source)
        return conversion.Source(model, [v.name for v in model.graph.outputs],
                                 (*self.files(source), *io.external_paths(model)))

    def translate(self, loaded: conversion.Source, job: conversion.Job) -> conversion.Translation:
        source, model, report, stack = job.source, loaded.model, job.report, job.stack
        _refuse_quantized(model)
        _refuse_deep_nesting(model)
        # Converted: the source with the Ifs its shapes settle replaced by their branches; verified against the
        # source.
        settled = settle(model)
        if settled.refusal():
            raise Unsupported(f"cannot convert to OpenVINO IR (OpenVINO needs static ranks): {settled.refusal()}")
        source_model, model = model, settled.model
        report.notes.extend(f"settled {line}" for line in settled.changes)
        converted, why = None, _route(model, self.route)
        if why is None:
            try:
                converted = onnx_to_ir(model, self.fp16)
            except Unsupported as err:
                if self.route == RNNCONV:
                    raise
                if not openvino_runtime.available():
                    if isinstance(err, from_onnx.OtherOpUnsupported):
                        raise Unsupported(f"cannot convert to OpenVINO IR with rnnconv's own writer: {err}. "
                                          f"{IMPORT_WOULD}", fixes=(openvino_runtime.INSTALL,)) from err
                    raise
                why = f"rnnconv's own writer cannot convert it alone ({err})"
        # Without an output, the IR still lies in files while it is checked (the OpenVINO runtime reads files).
        out = job.output
        where = out if out is not None else Path(stack.enter_context(tempfile.TemporaryDirectory())) / "model.xml"
        staged = stack.enter_context(io.Staged([where.with_suffix(".bin"), where], str(where)))
        tmp_bin, tmp_xml = staged.temps
        if converted is not None:
            graph, pairs = self._write_own(model, converted, staged, where, stack, job.verify)
            report.rewrites.extend(converted.rewrites)
        else:
            written = source if model is source_model else model  # the frontend reads a file: the settled one
            try:
                graph, pairs = self._write_through_openvino(written, model, staged, where, report, why)
            except ImportError as err:  # installed, but `import openvino` fails
                raise Unsupported(f"cannot convert through OpenVINO's ONNX import ({why}): "
                                  f"{openvino_runtime.cannot_import(err)}") from err
        ranked = shapes.dynamic_rank(graph)
        if ranked and job.verify != "none" and (openvino_runtime.available() if self.runtime is None
                                               else self.runtime):
            refused = openvino_runtime.compile_error(tmp_xml, tmp_bin)  # OpenVINO says whether it matters
            if refused and "dynamic rank" in refused:
                report.notes.append(f"OpenVINO's CPU plugin compiles this IR only at static input shapes (reshape "
                                    f"the model to your input sizes before compile_model): {ranked}, a dynamic "
                                    f"rank; the checks ran it reshaped to their inputs")
        if job.verify == "none":  # nothing to check: no checking code loaded, no node taken out to check alone
            plan = CheckPlan(())
        else:
            from rnnconv.verification.checks import precision_for

            before = onnx_model(source_model, io.source_name(source))
            after = ir_model(graph, str(out), tmp_xml, tmp_bin)
            # The IR of a DynamicQuantizeLSTM reproduces onnxruntime's float32 operations one by one (its
            # divisions and FMAs from exact float32 steps, see dialects.openvino.exact): the interpreter runs it
            # in float32.
            precision = "float32" if onnx_quantized.holds(source_model) else precision_for(source_model)
            plan = CheckPlan(tuple(pairs), WholeModel(before, after, self.runtimes, precision),
                             failed=FP16_FAILED if self.fp16 else "", fixes=("atol", "rtol") if self.fp16 else ())
        return conversion.Translation(graph, plan, lambda _: staged, _computes_in_float16(source_model))

    def _write_own(self, model: ir.Model, converted: from_onnx.Conversion, staged, where: Path, stack, verify: str):
        """rnnconv's own writer into the staged files; the graph and the node pairs to check (none unverified)."""
        copy = stack.enter_context(io.KernelCopier(model))
        tmp_bin, tmp_xml = staged.temps
        try:
            with open(tmp_bin, "wb") as f:
                xml_bytes = ov_writer.write_to(converted.graph, f, copy)
            tmp_xml.write_bytes(xml_bytes)
        except OSError as err:
            raise IOFailure(f"{where}: cannot write ({err.strerror or err})") from err
        nodes = [*converted.recurrent, *onnx_quantized.find(model)] if verify != "none" else []
        return converted.graph, [self._node_pair(model, rn) for rn in nodes]

    def _write_through_openvino(self, source, model: ir.Model, staged, where: Path, report: Report, why: str):
        """OpenVINO's ONNX import with rnnconv's recurrent mapping into the staged files; the written IR as rnnconv
        reads it, and the node pairs (each node as OpenVINO fed it, against the IR grafted for it)."""
        tmp_bin, tmp_xml = staged.temps
        with contextlib.ExitStack() as stack:
            path = source if isinstance(source, (str, os.PathLike)) else None
            if path is None:  # the frontend reads files
                path = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=staged.tmpdir))) / "source.onnx"
                io.save(model, path, force=True)
            # Converted in the source's precision: fp16 is save_model's compression (OpenVINO's offline passes
            # fold rnnconv's own f16 Consts back to f32).
            converted = frontend.import_onnx(path, model, onnx_to_ir, tmpdir=str(staged.tmpdir))
            openvino_runtime.offline_transforms(converted.model)
            try:
                frontend.save(converted, tmp_xml, tmp_bin, fp16=self.fp16)
            except OSError as err:
                raise IOFailure(f"{where}: cannot write ({err.strerror or err})") from err
            converted.model = None  # the IR is on disk: OpenVINO's copy of the graph is not needed any more
        report.notes.append(f"converted through OpenVINO's ONNX import: {why}")
        report.notes.append(converted.imported_note())
        for m in converted.mapped:
            for r in m.conversion.rewrites:
                report.rewrites.append({**r, "what": f"{r['what']} (rnnconv's mapping, inside OpenVINO's import)"})
        from rnnconv.verification.checks import precision_for

        pairs = [NodePair(f"node {m.node.name}", onnx_model(m.single), ir_model(m.conversion.graph),
                          "float32" if m.node.op == QUANTIZED[1] else precision_for(model, [m.node]))
                 for m in converted.mapped]
        return ov_reader.read(tmp_xml, tmp_bin, mapped=True), pairs  # the weights stay in the file

    def _node_pair(self, model: ir.Model, rn: onnx_recurrent.RecurrentNode) -> NodePair:
        """The node alone as ONNX, and as the IR rnnconv writes for it. A big layer (checks.precision_for) runs in
        float32 with a small batch and sequence, on its real weights."""
        from rnnconv.verification import extract
        from rnnconv.verification.checks import precision_for

        single = extract.recurrent_node(rn, dict(model.opset_imports), model.ir_version)
        precision = "float32" if rn.op == QUANTIZED[1] else precision_for(model, [rn])
        return NodePair(f"node {rn.name}", onnx_model(single), ir_model(onnx_to_ir(single, self.fp16).graph),
                        precision)


@check_keywords
def to_openvino(source, out_xml=None, *, fp16: bool = False, verify: Union[str, bool] = "full",
                force: bool = False, runtime: Optional[bool] = None, isolate: bool = False, route: str = AUTO,
                options: Optional[CheckOptions] = None) -> conversion.Result:
    """Convert; verify; write `out_xml` and its .bin (when given). Returns Result(IR graph, report).

    `verify`: "full" (each recurrent node, then the whole model), "node" (each recurrent node only, with its real
    weights: for models too big to compile in the OpenVINO runtime beside the conversion) or "none".
    `runtime`: also run the real OpenVINO runtime (default: when the openvino package is importable).
    `isolate`: run it in a child process, so that a crash of the OpenVINO plugin becomes a failed check (the
    CLI does this; it costs about a second). `options` (or the check options by name: seed, runs, dims...): how
    outputs are compared (see CheckOptions).
    `route`: "auto" (see the module's docstring), "rnnconv" (rnnconv's own writer only) or "openvino" (OpenVINO's
    ONNX import with rnnconv's recurrent mapping, whatever the ops). On the OpenVINO route the returned graph is
    the written IR as rnnconv reads it."""
    mode = ("full" if verify else "none") if isinstance(verify, bool) else verify
    conversion.check_verify(mode)
    if runtime and mode != "none" and not openvino_runtime.available():  # asked for: a check that cannot run
        raise Unsupported("runtime=True needs the openvino package", fixes=(openvino_runtime.INSTALL,))
    return conversion.run_conversion(source, ToOpenVINO(fp16, route, runtime, isolate), options, output=out_xml,
                                     verify=mode, force=force)


def openvino_extensions(model=None) -> list:
    """The conversion extensions that make OpenVINO's own conversion map every ONNX GRU / LSTM / RNN node (versions
    1-22, layout 0 and 1, every attribute, in If / Loop / Scan bodies too) and com.microsoft DynamicQuantizeLSTM
    as to-openvino does: `ov.convert_model("m.onnx", extension=rnnconv.openvino_extensions())`.

    Each node is read from what OpenVINO's import gives the extension (its attributes, its inputs' types and
    shapes, its constant weights) and converted alone by rnnconv's mapping; no file is left behind. `model` (a
    path, ModelProto or onnx_ir Model: the model being converted) adds the nodes' names and versions to messages.
    A node rnnconv refuses fails OpenVINO's conversion with rnnconv's reason in OpenVINO's error. Nothing is
    verified here (the conversion is OpenVINO's): `rnnconv to-openvino` checks what it writes."""
    if not openvino_runtime.available():
        raise Unsupported("openvino_extensions needs the openvino package", fixes=(openvino_runtime.INSTALL,))
    loaded = load_input(model) if model is not None else None
    try:
        return frontend.extensions(_node_translation, loaded)
    except ImportError as err:
        raise Unsupported(f"openvino_extensions: {openvino_runtime.cannot_import(err)}") from err


def _node_translation(single: ir.Model) -> from_onnx.Conversion:
    """One node as the extensions convert it: as to-openvino does, a DynamicQuantizeLSTM refused unless its
    weights are constants."""
    for q in onnx_quantized.find(single):
        why = quantized.lowerable(q)
        if why:
            raise Unsupported(f"{'; '.join(why)}: rnnconv lowers onnxruntime's run-time quantization only with "
                              f"constant weights. What would work: dequantize the model first and convert the "
                              f"float LSTM exactly", fixes=("dequantize",))
    return onnx_to_ir(single)


def _route(model: ir.Model, route: str) -> Optional[str]:
    """None for rnnconv's own writer, else why the model goes through OpenVINO's ONNX import. Ops outside
    rnnconv's table without the openvino package: Unsupported naming them and the install command."""
    if route == OPENVINO:
        if not openvino_runtime.available():
            raise Unsupported("route=openvino needs the openvino package", fixes=(openvino_runtime.INSTALL,))
        return "asked for (route=openvino)"
    bad = [op for op in ops.unsupported_ops(model) if op != from_onnx.QUANTIZED_OP]
    if not bad:
        return None
    why = f"op type(s) outside rnnconv's own OpenVINO table: {', '.join(bad)}"
    if route == RNNCONV:
        raise Unsupported(f"cannot convert to OpenVINO IR with rnnconv's own writer: {why}",
                          fixes=(f"route={AUTO}",) if openvino_runtime.available() else (openvino_runtime.INSTALL,))
    if not openvino_runtime.available():
        raise Unsupported(f"cannot convert to OpenVINO IR: {why}. {IMPORT_WOULD}", fixes=(openvino_runtime.INSTALL,))
    return why


def _refuse_quantized(model: ir.Model) -> None:
    """DynamicQuantizeLSTM nodes rnnconv cannot lower (`quantized.lowerable`) or in a body or a function: Unsupported
    naming them, with dequantize as the fix."""
    found = [(scope, node) for node, scope, _ in onnx_recurrent.walk(model)
             if (node.domain, node.op_type) == QUANTIZED]
    if not found:
        return
    problems = []
    for scope, node in found:
        label = repr(scope + onnx_recurrent.node_label(node))
        why = ["it lies in a subgraph or function"] if scope else quantized.lowerable(onnx_quantized.read(node))
        problems += [f"{label}: {'; '.join(why)}"] if why else []
    if problems:
        raise Unsupported(
            f"{QUANTIZED[1]} node(s) {' | '.join(problems)}: rnnconv lowers onnxruntime's run-time quantization "
            "only for a node of the main graph with constant weights. What would work: "
            "dequantize the model first and convert the float LSTM exactly", fixes=("dequantize",))


# OpenVINO's conversion and compilation time about doubles with each level of If/Loop bodies nested in one another
# (measured on a 2 KB model, each level an If around the next: 16 levels 9 s in all, 18 levels 21 s, 20 levels
# 104 s, 24 levels over 4 minutes): deeper models are refused rather than hold a CI job for minutes.
MAX_NESTING = 16


def _refuse_deep_nesting(model: ir.Model) -> None:
    depth, path = _deepest(model.graph)
    for function in model.functions.values():
        depth, path = max((depth, path), _deepest(function, [f"function {function.name}"]), key=lambda b: b[0])
    if depth > MAX_NESTING:
        raise Unsupported(f"the body {'/'.join(path)!r} lies {depth} subgraphs deep (If/Loop bodies within bodies); "
                          f"OpenVINO's conversion time doubles with each level, so to-openvino takes at most "
                          f"{MAX_NESTING}. What would work: flatten the nesting (an If whose condition is known can be "
                          f"replaced by its branch) before converting")


def _deepest(nodes, path=()) -> tuple[int, list]:
    """The deepest subgraph nesting below `nodes` and the path of node labels to it."""
    best = (0, list(path))
    for node in nodes:
        for attr in node.attributes.values():
            bodies = ([attr.value] if attr.type == ir.AttributeType.GRAPH else
                      list(attr.value) if attr.type == ir.AttributeType.GRAPHS else [])
            for body in bodies:
                depth, where = _deepest(body, [*path, f"{onnx_recurrent.node_label(node)}.{attr.name}"])
                best = max(best, (depth + 1, where), key=lambda b: b[0])
    return best


def _computes_in_float16(model: ir.Model) -> bool:
    """A recurrent node of float16 weights (Keras' mixed precision, fused): onnxruntime runs it in float16, the
    OpenVINO CPU plugin in float32, so every output is held to float16's tolerance, float32 though it may be."""
    return any(getattr(rn.layer.dtype, "name", str(rn.layer.dtype)) == "float16"
               for rn in onnx_recurrent.find(model))
