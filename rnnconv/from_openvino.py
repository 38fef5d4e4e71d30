"""`from_openvino`: OpenVINO IR (versions 10 and 11) back to ONNX, recurrent layers as ONNX GRU / LSTM / RNN.

The conversion is `rnnconv.dialects.openvino.to_onnx` (the TensorIterator-over-one-cell pattern:
`rnnconv.dialects.openvino.tensor_iterator`). Nothing is written unless the ONNX model passes onnx.checker's full
check and matches the IR: the IR run by rnnconv's IR interpreter against the ONNX model in rnnconv's engine
(float64), and the IR in the OpenVINO runtime (CPU, f32) against the ONNX model in onnxruntime.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv import verify as verification
from rnnconv.convert import Result
from rnnconv.dialects.openvino import ir as ovir
from rnnconv.dialects.openvino.ir_facts import interpreter_names, output_names
from rnnconv.dialects.openvino.ir_validate import validate
from rnnconv.dialects.openvino.to_onnx import MIN_OPSET, Converter
from rnnconv.errors import BadInput, RnnconvError, UsageError, VerificationFailed


# -- verification ------------------------------------------------------------------------------------------
def _feeds(model: ir.Model, lengths: dict[str, int], seed: int, uniform: bool = False) -> dict[str, np.ndarray]:
    """Random inputs: N and T where the converter traced batch and time axes, 2 elsewhere; `uniform` gives every
    dynamic dim the same size (for graphs whose dynamic dims are tied in ways the tracing did not see)."""
    dims = {"N": verification.DEFAULT_DIM["batch"], "T": verification.DEFAULT_DIM["sequence"]}
    if uniform:
        size = verification.DEFAULT_DIM["batch"]
        dims = {d.value: size for v in model.graph.inputs for d in (v.shape or ()) if not isinstance(d, int)}
        lengths = {k: min(t, size) for k, t in lengths.items()}
    # random_inputs refuses, with its estimate, inputs too large for memory.
    return verification.random_inputs(model, seed=seed, dims=dims, lengths=lengths)


def _run_checked(fn, what: str):
    try:
        return fn(), ""
    except RnnconvError:
        raise
    except Exception as err:  # a runtime refusing the model is a failed check, reported, not a crash
        return None, f"{what} failed: {type(err).__name__}: {str(err).strip().splitlines()[0] if str(err) else ''}"


def _ov_run(xml: Path, bin_path: Optional[Path], graph: ovir.IRGraph, onnx_names: list[str], feeds: dict
            ) -> dict[str, np.ndarray]:
    """The IR in the OpenVINO runtime (CPU, f32), reshaped to the feeds' static shapes, outputs by ONNX name."""
    from rnnconv.engine import openvino_runtime

    outputs = openvino_runtime.infer(openvino_runtime.read(xml, bin_path), feeds, reshape=True)
    wanted = dict(zip([r.name for r in graph.results()], onnx_names))
    out = {}
    for o in outputs:
        name = wanted.get(o.result) or next((n for n in o.names if n in wanted.values()), None)
        if name is not None:
            out[name] = o.value
    return out


def _check(subject, engines, ref, cand, names, atol, rtol, note=""):
    """Compare at the tolerance of each output's dtype (float32 at most as tight: the runtimes compute in f32)."""
    outputs = []
    for n in names:
        if n not in cand or n not in ref:
            outputs.append(verification.OutputComparison(n, (), float("inf"), float("inf"), float("inf"), 1, 1.0,
                                                         None, problem="missing from one side"))
            continue
        r, c = np.asarray(ref[n]), np.asarray(cand[n])
        dt = r.dtype if r.dtype.kind == "f" and r.dtype.itemsize < 4 else np.dtype(np.float32)
        a_def, r_def = verification.default_tolerances(dt)
        if r.dtype.kind == "f":
            r, c = r.astype(np.float64), c.astype(np.float64)
        outputs.append(verification.compare(n, r, c, a_def if atol is None else atol, r_def if rtol is None else rtol))
    return verification.Check(subject, engines, outputs, note)


def check(model: ir.Model, graph: ovir.IRGraph, xml: Path, bin_path: Optional[Path], lengths: dict[str, int],
          seed: int, atol, rtol, *, runtime: Optional[bool] = None, onnx_names: Optional[list[str]] = None
          ) -> list[verification.Check]:
    """The IR against the ONNX model: interpreter vs engine (float64); OpenVINO runtime vs onnxruntime (f32)."""
    from rnnconv.convert import onnxruntime_outputs
    from rnnconv.engine.graph import run_onnx
    from rnnconv.engine.ir_graph import run_ir

    names = [v.name for v in model.graph.outputs]
    onnx_names = onnx_names or output_names(graph)
    rename = dict(zip(interpreter_names(graph), onnx_names))
    checks = []
    for uniform in (False, True):
        feeds = _feeds(model, lengths, seed, uniform)
        interp, why_i = _run_checked(lambda: {rename.get(k, k): v for k, v in run_ir(graph, feeds, "float64").items()},
                                     "IR interpreter")
        engine, why_e = _run_checked(lambda: run_onnx(model, feeds, "float64"), "ONNX engine")
        if engine is not None and interp is not None:
            break
    if engine is None:
        raise VerificationFailed(f"from-openvino: the converted model does not run: {why_e}")
    if interp is not None:
        checks.append(_check("whole model", "IR interpreter vs ONNX engine (float64)", interp, engine, names, atol,
                             rtol))
    if runtime is None:
        try:
            import openvino  # noqa: F401

            runtime = True
        except ImportError:
            runtime = False
    ov_out, why_ov = (None, "openvino not installed")
    if runtime:
        ov_out, why_ov = _run_checked(lambda: _ov_run(xml, bin_path, graph, onnx_names, feeds), "OpenVINO runtime")
    ort_out, _ = onnxruntime_outputs(model, feeds)
    if ov_out is not None:
        if ort_out is not None:
            checks.append(_check("whole model", "OpenVINO runtime (CPU, f32) vs onnxruntime", ov_out, ort_out,
                                 names, atol, rtol))
        else:
            checks.append(_check("whole model", "OpenVINO runtime (CPU, f32) vs ONNX engine", ov_out, engine, names,
                                 atol, rtol, note="onnxruntime does not run this model (layout 1?)"))
    elif interp is not None and ort_out is not None:
        checks.append(_check("whole model", "IR interpreter vs onnxruntime", interp, ort_out, names, atol, rtol,
                             note=why_ov))
    if not checks:
        raise VerificationFailed(f"from-openvino: nothing could run the IR to check against ({why_i}; {why_ov})")
    return checks


# -- the API -----------------------------------------------------------------------------------------------
def _ir_version(xml: Path) -> int:
    import re

    try:
        with open(xml, "rb") as f:
            head = f.read(4096)
    except OSError:
        return 11
    m = re.search(rb"<net\b[^>]*\bversion=\"(\d+)\"", head)
    return int(m.group(1)) if m else 11


def from_openvino(xml, output=None, *, bin=None, opset: Optional[int] = None, layout: int = 0,
                  verify: str = "full", atol: Optional[float] = None, rtol: Optional[float] = None, seed: int = 0,
                  force: bool = False, runtime: Optional[bool] = None) -> Result:
    """Convert OpenVINO IR `xml` (+ its .bin, beside it or `bin`) to ONNX; verify; write `output` when given.

    `opset`: default-domain opset of the result (default: the newest onnx and onnxruntime both run);
    `layout`: 0 (time-major, Transposes around each recurrent node; onnxruntime runs it) or 1 (batch-major,
    opset >= 14); `verify`: "full" or "none"; `runtime`: also run the OpenVINO runtime (default: when installed).
    """
    from rnnconv.opset import newest_common_opset

    xml = Path(os.fspath(xml))
    bin_path = Path(os.fspath(bin)) if bin is not None else ovir.bin_path_for(xml)
    if verify not in ("full", "none"):
        raise UsageError(f"verify must be 'full' or 'none', got {verify!r}")
    if layout not in (0, 1):
        raise UsageError(f"--layout must be 0 or 1, got {layout}")
    opset = newest_common_opset() if opset is None else int(opset)
    if opset < MIN_OPSET or opset > io.latest_opset():
        raise UsageError(f"--opset must be in {MIN_OPSET}..{io.latest_opset()}, got {opset}")
    if layout == 1 and opset < 14:
        raise UsageError("--layout 1 needs --opset 14 or newer (the layout attribute is new in GRU/LSTM/RNN-14)")
    if not xml.exists():
        raise BadInput(f"{xml}: no such file")
    if bin is not None and not bin_path.exists():
        raise BadInput(f"{bin_path}: no such file")
    if output is not None:
        io.guard_output(Path(output), force=force, inputs=(xml, bin_path))
    graph = ovir.read(xml, bin_path)
    try:
        validate(graph, str(xml))
        conv = Converter(graph, opset, layout, _ir_version(xml))
        model = conv.run()
    except (KeyError, IndexError, ValueError, TypeError, AttributeError, OverflowError) as err:
        # The reader checked the XML and the .bin; what is left is an IR whose layers contradict each other.
        raise BadInput(f"{xml}: malformed IR ({type(err).__name__}: {err})") from err
    report = verification.Report("from-openvino", rewrites=conv.rewrites, verified=verify)
    try:
        io.check_full(model)
    except RnnconvError as err:
        raise VerificationFailed(f"from-openvino: the converted model fails onnx.checker: {err}", report) from err
    if verify == "full":
        lengths = {}
        for key, t in conv.lengths.items():
            v = conv.values.get(key)
            if v is not None:
                lengths[v.name] = t
        report.checks.extend(check(model, graph, xml, bin_path if bin_path.exists() else None, lengths, seed, atol,
                                   rtol, runtime=runtime, onnx_names=conv.output_names))
        if not report.ok:
            raise VerificationFailed(f"from-openvino: {report.verdict()}; nothing written", report)
    if output is not None:
        io.save(model, output, force=force, inputs=(xml, bin_path))
        report.output = str(output)
    return Result(model, report)
