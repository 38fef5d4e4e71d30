"""`to_openvino`: ONNX recurrent models to OpenVINO IR v11 (.xml + .bin), verified before anything is written.

The translation is `rnnconv.dialects.openvino.from_onnx` (then FoldIRTransposes). Verification
(`verification.checks`): each recurrent node alone (rnnconv's ONNX engine vs its IR interpreter), then the whole
model (the source in onnxruntime, or the engine where onnxruntime cannot run it, vs the IR interpreter and, when the
package is installed, the real OpenVINO runtime at f32). The IR is written to temporary files beside the target
and renamed into place only after every check passed.

Big models: weights are reordered and folded per tensor and streamed into the .bin from their memory maps (see
`graph.Pieces`); unchanged gate bytes are copied file to file by the kernel.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Optional, Union

import onnx_ir as ir

from rnnconv import io
from rnnconv.conversion import Result
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import from_onnx
from rnnconv.dialects.openvino import writer as ov_writer
from rnnconv.errors import IOFailure, UsageError, VerificationFailed
from rnnconv.passes.ir_transpose_fold import FoldIRTransposes
from rnnconv.verification import VERIFY_MODES, checks, extract
from rnnconv.verification.model import ir_model, onnx_model
from rnnconv.verification.report import Report


def translate(model: ir.Model, fp16: bool = False, release=io.release_pages) -> from_onnx.Conversion:
    """The IR graph of `model`, Transposes folded; `release(view)` is called on each memory-mapped weight view
    once it has been read (by default: its pages leave the resident set)."""
    conversion = from_onnx.convert(model, fp16=fp16, release=release)
    FoldIRTransposes()(conversion.graph)
    return conversion


def to_openvino(source, out_xml=None, *, fp16: bool = False, verify: Union[str, bool] = "full",
                force: bool = False, runtime: Optional[bool] = None, isolate: bool = False, **check) -> Result:
    """Convert; verify; write `out_xml` and its .bin (when given). Returns Result(IR graph, report).

    `verify`: "full" (each recurrent node, then the whole model), "node" (each recurrent node only, with its real
    weights: for models too big to compile in the OpenVINO runtime beside the conversion) or "none".
    `runtime`: also run the real OpenVINO runtime (default: when the openvino package is importable).
    `isolate`: run it in a child process, so that a crash of the OpenVINO plugin becomes a failed check (the
    CLI does this; it costs about a second). `check`: how outputs are compared (see CheckOptions)."""
    mode = ("full" if verify else "none") if isinstance(verify, bool) else verify
    if mode not in VERIFY_MODES:
        raise UsageError(f"verify={verify!r}: expected one of {', '.join(VERIFY_MODES)}")
    model = io.load(source)
    out = Path(out_xml) if out_xml is not None else None
    if out is not None:
        _guard(out, model, source, force)
    conversion = translate(model, fp16)
    report = Report(command="to-openvino", verified=mode, rewrites=list(conversion.rewrites))
    options = checks.CheckOptions.of(**check, fp16_weights=fp16)
    with contextlib.ExitStack() as stack:
        # Without an output, the IR still lies in files while it is checked (the OpenVINO runtime reads files).
        where = out if out is not None else Path(stack.enter_context(tempfile.TemporaryDirectory())) / "model.xml"
        copy = stack.enter_context(io.KernelCopier(model))
        staged = stack.enter_context(io.Staged([where.with_suffix(".bin"), where], str(where)))
        tmp_bin, tmp_xml = staged.temps
        try:
            with open(tmp_bin, "wb") as f:
                xml_bytes = ov_writer.write_to(conversion.graph, f, copy)
            tmp_xml.write_bytes(xml_bytes)
        except OSError as err:
            raise IOFailure(f"{where}: cannot write ({err.strerror or err})") from err
        if mode != "none":
            report.checks.extend(checks.check_nodes(
                [_node_pair(model, rn, fp16) for rn in conversion.recurrent], options))
        if mode == "full":
            report.checks.extend(checks.check_models(
                onnx_model(model, io.source_name(source)), ir_model(conversion.graph, str(out), tmp_xml, tmp_bin),
                options, runtime=runtime, isolate=isolate, skipped=report.skipped, notes=report.notes,
                precision=checks.precision_for(model)))
        if not report.ok:
            raise VerificationFailed("to-openvino: " + report.verdict(), report)
        if out is not None:
            staged.commit()
            report.output = str(out)
    return Result(conversion.graph, report)


def _guard(out: Path, model: ir.Model, source, force: bool) -> None:
    """Both files of the IR: neither may be an input (the model or its external data), nor exist without force."""
    inputs = [source] if isinstance(source, (str, os.PathLike)) else []
    inputs += io.external_paths(model)
    for target in (out, out.with_suffix(".bin")):
        io.guard_output(target, force=force, inputs=tuple(inputs))
    io.check_suffix(out, ".xml", "OpenVINO IR (NAME.xml + NAME.bin)")


def _node_pair(model: ir.Model, rn: onnx_recurrent.RecurrentNode, fp16: bool) -> checks.NodePair:
    """The node alone as ONNX, and as the IR rnnconv writes for it. A big layer (checks.precision_for) runs in
    float32 with a small batch and sequence, on its real weights."""
    single = extract.recurrent_node(rn, dict(model.opset_imports), model.ir_version)
    return checks.NodePair(f"node {rn.name}", onnx_model(single), ir_model(translate(single, fp16).graph),
                           checks.precision_for(model, [rn]))
