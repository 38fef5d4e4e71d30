"""`from_openvino`: OpenVINO IR (versions 10 and 11) back to ONNX, recurrent layers as ONNX GRU / LSTM / RNN.

The translation is `rnnconv.dialects.openvino.to_onnx`. Nothing is written unless the ONNX model passes
onnx.checker's full check and matches the IR (its CheckPlan, run by `verification.runner`): each recurrent layer alone (its IR, with its
real weights, in rnnconv's IR interpreter against its ONNX translation in rnnconv's engine), then the whole model:
the IR in rnnconv's IR interpreter against the ONNX model in rnnconv's engine (float64), and the IR in the OpenVINO
runtime (CPU, f32) against the ONNX model in onnxruntime.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Optional

from rnnconv import conversion, io
from rnnconv.dialects.onnx_recurrent import LAYOUT_SINCE
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino.to_onnx import MIN_OPSET, Converter, Rewritten
from rnnconv.dialects.openvino.validate import validate
from rnnconv.engine.onnxruntime_runtime import newest_common_opset
from rnnconv.errors import BadInput, RnnconvError, Unsupported, UsageError, VerificationFailed
from rnnconv.verification.checks import precision_for
from rnnconv.verification.model import ir_model, onnx_model
from rnnconv.verification.options import CheckOptions, check_keywords
from rnnconv.verification.plan import CheckPlan, NodePair, Runtimes, WholeModel


@dataclasses.dataclass
class FromOpenVINO:
    """The IR -> ONNX translator: `rnnconv.dialects.openvino.to_onnx` at `opset` in `layout`; each recurrent layer
    checked alone, then the whole model (in the OpenVINO runtime too, per `runtime`)."""

    opset: int
    layout: int = 0
    bin: Optional[Path] = None
    runtime: Optional[bool] = None
    command = "from-openvino"
    suffix = (".onnx", "an ONNX model")
    fp16_weights = dequantized = False

    @property
    def runtimes(self) -> Runtimes:
        return Runtimes(self.runtime)

    def __post_init__(self):
        if self.layout not in (0, 1):
            raise UsageError(f"layout must be 0 or 1, got {self.layout}")
        conversion.check_opset(self.opset)
        if self.opset < MIN_OPSET:
            raise Unsupported(f"opset {self.opset}: the ONNX recurrent ops rnnconv writes need opset {MIN_OPSET} or "
                              f"newer", fixes=(f"opset={MIN_OPSET}",))
        if self.layout == 1 and self.opset < LAYOUT_SINCE:
            raise Unsupported(f"layout 1 needs opset {LAYOUT_SINCE} or newer (the layout attribute is new in "
                              f"GRU/LSTM/RNN-{LAYOUT_SINCE})", fixes=(f"opset={LAYOUT_SINCE}",))

    def files(self, xml) -> tuple:
        xml = Path(os.fspath(xml))
        if not xml.exists():
            raise BadInput(f"{xml}: no such file")
        if self.bin is not None and not self.bin.exists():
            raise BadInput(f"{self.bin}: no such file")
        return xml, self.bin if self.bin is not None else ov_reader.bin_path_for(xml)

    def targets(self, output: Path) -> list[Path]:
        return [output]

    def open(self, xml) -> conversion.Source:
        xml, bin_path = self.files(xml)
        graph = ov_reader.read(xml, bin_path)
        return conversion.Source(graph, graph.output_names(), (xml, bin_path))

    def translate(self, source: conversion.Source, job: conversion.Job) -> conversion.Translation:
        graph, (xml, bin_path) = source.model, source.files
        try:
            validate(graph, str(xml))
            conv = Converter(graph, self.opset, self.layout)
            model = conv.run()
        except (KeyError, IndexError, ValueError, TypeError, AttributeError, OverflowError) as err:
            # The reader checked the XML and the .bin; what is left is an IR whose layers contradict each other.
            raise BadInput(f"{xml}: malformed IR ({type(err).__name__}: {err})") from err
        job.report.rewrites.extend(conv.rewrites)
        try:
            io.check_full(model)
        except RnnconvError as err:
            raise VerificationFailed(f"from-openvino: the converted model fails onnx.checker: {err}",
                                     job.report) from err
        pairs = [_node_pair(rw, self.opset, self.layout) for rw in conv.recurrent] if job.verify != "none" else []
        before = ir_model(graph, str(xml), xml, bin_path if bin_path.exists() else None)

        def stage(output: Path) -> io.Staged:
            return job.stack.enter_context(io.stage(model, output, force=job.force, inputs=(xml, bin_path)))

        whole = WholeModel(before, onnx_model(model), self.runtimes, as_written=True)
        return conversion.Translation(model, CheckPlan(tuple(pairs), whole), stage)


@check_keywords
def from_openvino(xml, output=None, *, bin=None, opset: Optional[int] = None, layout: int = 0,
                  verify: str = "full", force: bool = False, runtime: Optional[bool] = None,
                  options: Optional[CheckOptions] = None) -> conversion.Result:
    """Convert OpenVINO IR `xml` (+ its .bin, beside it or `bin`) to ONNX; verify; write `output` when given.

    `opset`: default-domain opset of the result (default: the newest onnx and onnxruntime both run);
    `layout`: 0 (time-major, Transposes around each recurrent node; onnxruntime runs it) or 1 (batch-major,
    opset >= 14); `verify`: "full" (each recurrent layer alone, then the whole model), "node" (each recurrent layer
    alone, on its real weights: for models too big to run whole) or "none"; `runtime`: also run the OpenVINO
    runtime (default: when installed); `options` (or the check options by name: seed, runs, dims...): how outputs
    are compared (see CheckOptions).
    """
    conversion.check_verify(verify)
    translator = FromOpenVINO(newest_common_opset() if opset is None else conversion.opset_number(opset), layout,
                              Path(os.fspath(bin)) if bin is not None else None, runtime)
    return conversion.run_conversion(xml, translator, options, output=output, verify=verify, force=force)


def _node_pair(rewritten: Rewritten, opset: int, layout: int) -> NodePair:
    """The recurrent layer alone as IR, and its ONNX translation; a big layer (checks.precision_for) runs in
    float32 with a small batch and sequence, on its real weights."""
    alone = rewritten.alone()
    onnx = Converter(alone, opset, layout).run()
    return NodePair(f"node {rewritten.path}", ir_model(alone, f"IR layer {rewritten.path}"),
                    onnx_model(onnx, f"ONNX node {rewritten.path}"), precision_for(onnx))
