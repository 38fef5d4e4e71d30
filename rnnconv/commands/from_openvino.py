"""`from_openvino`: OpenVINO IR (versions 10 and 11) back to ONNX, recurrent layers as ONNX GRU / LSTM / RNN.

The translation is `rnnconv.dialects.openvino.to_onnx`. Nothing is written unless the ONNX model passes
onnx.checker's full check and matches the IR (`verification.checks`): each recurrent layer alone (its IR, with its
real weights, in rnnconv's IR interpreter against its ONNX translation in rnnconv's engine), then the whole model:
the IR in rnnconv's IR interpreter against the ONNX model in rnnconv's engine (float64), and the IR in the OpenVINO
runtime (CPU, f32) against the ONNX model in onnxruntime.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from rnnconv import io
from rnnconv.conversion import Result, check_opset
from rnnconv.dialects.onnx_recurrent import LAYOUT_SINCE
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino.to_onnx import MIN_OPSET, Converter, Rewritten
from rnnconv.dialects.openvino.validate import validate
from rnnconv.engine.onnxruntime_runtime import newest_common_opset
from rnnconv.errors import (
    BadInput,
    RnnconvError,
    Unsupported,
    UsageError,
    VerificationFailed,
)
from rnnconv.verification import VERIFY_MODES, checks
from rnnconv.verification.model import ir_model, onnx_model
from rnnconv.verification.report import Report


def from_openvino(xml, output=None, *, bin=None, opset: Optional[int] = None, layout: int = 0,
                  verify: str = "full", force: bool = False, runtime: Optional[bool] = None, **check) -> Result:
    """Convert OpenVINO IR `xml` (+ its .bin, beside it or `bin`) to ONNX; verify; write `output` when given.

    `opset`: default-domain opset of the result (default: the newest onnx and onnxruntime both run);
    `layout`: 0 (time-major, Transposes around each recurrent node; onnxruntime runs it) or 1 (batch-major,
    opset >= 14); `verify`: "full" (each recurrent layer alone, then the whole model), "node" (each recurrent layer
    alone, on its real weights: for models too big to run whole) or "none"; `runtime`: also run the OpenVINO
    runtime (default: when installed); `check`: how outputs are compared (see CheckOptions).
    """
    xml = Path(os.fspath(xml))
    bin_path = Path(os.fspath(bin)) if bin is not None else ov_reader.bin_path_for(xml)
    if verify not in VERIFY_MODES:
        raise UsageError(f"verify={verify!r}: expected one of {', '.join(VERIFY_MODES)}")
    if layout not in (0, 1):
        raise UsageError(f"layout must be 0 or 1, got {layout}")
    opset = newest_common_opset() if opset is None else int(opset)
    check_opset(opset)
    if opset < MIN_OPSET:
        raise Unsupported(f"opset {opset}: the ONNX recurrent ops rnnconv writes need opset {MIN_OPSET} or newer",
                          fixes=(f"opset={MIN_OPSET}",))
    if layout == 1 and opset < LAYOUT_SINCE:
        raise Unsupported(f"layout 1 needs opset {LAYOUT_SINCE} or newer (the layout attribute is new in "
                          f"GRU/LSTM/RNN-{LAYOUT_SINCE})", fixes=(f"opset={LAYOUT_SINCE}",))
    if not xml.exists():
        raise BadInput(f"{xml}: no such file")
    if bin is not None and not bin_path.exists():
        raise BadInput(f"{bin_path}: no such file")
    if output is not None:
        io.guard_output(Path(output), force=force, inputs=(xml, bin_path))
        io.check_suffix(output, ".onnx", "an ONNX model")
    graph = ov_reader.read(xml, bin_path)
    try:
        validate(graph, str(xml))
        conv = Converter(graph, opset, layout)
        model = conv.run()
    except (KeyError, IndexError, ValueError, TypeError, AttributeError, OverflowError) as err:
        # The reader checked the XML and the .bin; what is left is an IR whose layers contradict each other.
        raise BadInput(f"{xml}: malformed IR ({type(err).__name__}: {err})") from err
    report = Report("from-openvino", rewrites=conv.rewrites, verified=verify)
    try:
        io.check_full(model)
    except RnnconvError as err:
        raise VerificationFailed(f"from-openvino: the converted model fails onnx.checker: {err}", report) from err
    options = checks.CheckOptions.of(**check)
    options.tolerances.check_names([v.name for v in model.graph.outputs])
    if verify != "none":
        report.checks.extend(checks.check_nodes([_node_pair(rw, opset, layout) for rw in conv.recurrent], options))
    if verify == "full":
        source = ir_model(graph, str(xml), xml, bin_path if bin_path.exists() else None)
        report.checks.extend(checks.check_models(source, onnx_model(model), options, runtime=runtime,
                                                 skipped=report.skipped, notes=report.notes,
                                                 placements=report.placements))
    if not report.ok:
        raise VerificationFailed(f"from-openvino: {report.verdict()}; nothing written", report)
    if output is not None:
        io.save(model, output, force=force, inputs=(xml, bin_path))
        report.output = str(output)
    return Result(model, report)


def _node_pair(rewritten: Rewritten, opset: int, layout: int) -> checks.NodePair:
    """The recurrent layer alone as IR, and its ONNX translation; a big layer (checks.precision_for) runs in
    float32 with a small batch and sequence, on its real weights."""
    alone = rewritten.alone()
    onnx = Converter(alone, opset, layout).run()
    return checks.NodePair(f"node {rewritten.path}", ir_model(alone, f"IR layer {rewritten.path}"),
                           onnx_model(onnx, f"ONNX node {rewritten.path}"), checks.precision_for(onnx))
