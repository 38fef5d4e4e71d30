"""`to_openvino`: ONNX recurrent models to OpenVINO IR v11 (.xml + .bin), verified before anything is written.

Verification: each recurrent node alone (ONNX engine vs the IR interpreter), then the whole model (ONNX engine vs
IR interpreter, and the real OpenVINO runtime at f32 when the package is installed). A mismatch raises
VerificationFailed and leaves no file behind: the IR is written to temporary files in the target folder and
renamed into place only after every check passed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Mapping, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv import verify as verification
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import convert as ov_convert
from rnnconv.dialects.openvino import ir as ovir
from rnnconv.errors import IOFailure, VerificationFailed

OV_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


def to_openvino(model_or_path, out_xml=None, *, fp16: bool = False, verify: bool = True,
                atol: Optional[float] = None, rtol: Optional[float] = None, seed: int = 0, force: bool = False,
                runtime: Optional[bool] = None) -> verification.Report:
    """Convert; verify (unless verify=False); write `out_xml` and its .bin (when given). Returns the report.

    `runtime`: also run the real OpenVINO runtime (default: when the openvino package is importable).
    """
    model = io.load(model_or_path)
    report = verification.Report(command="to-openvino")
    out = Path(out_xml) if out_xml is not None else None
    if out is not None:
        io.guard_output(out, force=force, inputs=(model_or_path,) if isinstance(model_or_path, (str, os.PathLike))
                        else ())
    conversion = ov_convert.convert(model, fp16=fp16)
    report.rewrites.extend(conversion.rewrites)
    for rn in conversion.recurrent:
        report.rewrites.append({"node": rn.name, "what": f"{rn.op}-{rn.version} (layout {rn.layer.layout}, "
                                                         f"{rn.layer.direction}) -> {rn.op}Sequence-5"})
    xml_bytes, bin_bytes = ovir.serialize(conversion.graph)
    if not verify:
        report.verified = "none"
    tol = (atol, rtol) if not fp16 else (atol if atol is not None else 2e-3, rtol if rtol is not None else 2e-3)
    with _staged(out, xml_bytes, bin_bytes) as (tmp_xml, commit):
        if verify:
            for rn in conversion.recurrent:
                report.checks.append(_check_node(model, rn, fp16, seed, *tol))
            report.checks.extend(_check_model(model, conversion.graph, tmp_xml, seed, *tol, runtime=runtime))
            if not report.ok:
                raise VerificationFailed("to-openvino: " + report.verdict(), report)
        if out is not None:
            commit()
            report.output = str(out)
    return report


@contextlib.contextmanager
def _staged(out: Optional[Path], xml_bytes: bytes, bin_bytes: bytes):
    """Temporary .xml/.bin in the target folder (or a temp dir); `commit()` renames them into place."""
    folder = (out.parent if out is not None and str(out.parent) else Path(".")) if out is not None else None
    try:
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        tmpdir = Path(tempfile.mkdtemp(prefix=".rnnconv-ir.", dir=folder))
    except OSError as err:
        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    tmp_xml, tmp_bin = tmpdir / "model.xml", tmpdir / "model.bin"
    try:
        tmp_bin.write_bytes(bin_bytes)
        tmp_xml.write_bytes(xml_bytes)

        def commit():
            try:
                os.replace(tmp_bin, out.with_suffix(".bin"))
                os.replace(tmp_xml, out)
            except OSError as err:
                raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err

        yield tmp_xml, commit
    except OSError as err:
        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    finally:
        for p in (tmp_xml, tmp_bin):
            with contextlib.suppress(OSError):
                p.unlink()
        with contextlib.suppress(OSError):
            tmpdir.rmdir()


# -- inputs ------------------------------------------------------------------------------------------------
def feeds_for(model: ir.Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Random feeds: batch/sequence axes of recurrent X inputs named so symbolic dims get consistent sizes;
    sequence_lens inputs drawn in 1..T."""
    recurrent = onnx_recurrent.find(model)
    roles: dict[str, dict[int, str]] = {}
    lengths: dict[str, int] = {}
    for rn in recurrent:
        x = rn.inputs["X"]
        batch_axis, seq_axis = (0, 1) if rn.layer.layout == 1 else (1, 0)
        roles[x.name] = {batch_axis: "batch", seq_axis: "sequence"}
        lens = rn.inputs.get("sequence_lens")
        if lens is not None:
            t = x.shape[seq_axis] if x.shape is not None else None
            lengths[lens.name] = t if isinstance(t, int) else _sym_dim(t)
    dims = {"T": verification.DEFAULT_DIM["sequence"], "N": verification.DEFAULT_DIM["batch"]}
    return verification.random_inputs(model, seed=seed, dims=dims, roles=lambda v: roles.get(v.name, {}),
                                      lengths=lengths)


def _sym_dim(d) -> int:
    return verification.DEFAULT_DIM["sequence"]


def _ov_run(xml_path: Path, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml_path)), "CPU", OV_CONFIG)
    request = compiled.create_infer_request()
    names = {}
    for port in compiled.inputs:
        for n in port.get_names():
            names[n] = port
    inputs = {names[k]: np.ascontiguousarray(v) for k, v in feeds.items() if k in names}
    result = request.infer(inputs)
    out = {}
    for port in compiled.outputs:
        value = result[port]
        for n in port.get_names():
            out[n] = np.asarray(value)
    return out


def _have_openvino() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def _check_model(model, graph, xml_path, seed, atol, rtol, *, runtime=None) -> list:
    from rnnconv.engine.graph import run_onnx
    from rnnconv.engine.ir_graph import run_ir

    feeds = feeds_for(model, seed)
    names = [v.name for v in model.graph.outputs]
    ref = run_onnx(model, feeds, precision="float64")
    dtypes = _output_dtypes(model)
    checks = [_compare("whole model", "onnx engine vs IR interpreter (float64)", ref,
                       run_ir(graph, feeds, "float64"), names, atol, rtol, dtypes)]
    if runtime is None:
        runtime = _have_openvino()
    if runtime:
        checks.append(_compare("whole model", "onnx engine vs OpenVINO runtime (CPU, f32)", ref,
                               _ov_run(xml_path, feeds), names, atol, rtol, dtypes))
    return checks


def _output_dtypes(model: ir.Model) -> dict:
    out = {}
    for v in model.graph.outputs:
        try:
            out[v.name] = np.dtype(v.dtype.numpy()) if v.dtype is not None else np.dtype(np.float32)
        except Exception:
            out[v.name] = np.dtype(np.float32)
    return out


def _compare(subject, engines, ref, cand, names, atol, rtol, dtypes):
    """Per output, at the tolerance of the ONNX output's dtype (float32 at most as tight: the runtime is f32)."""
    outputs = []
    for n in names:
        if n not in cand:
            outputs.append(verification.compare_all(subject, engines, {n: ref[n]}, {}, names=[n]).outputs[0])
            continue
        r, c = np.asarray(ref[n]), np.asarray(cand[n])
        dt = dtypes.get(n, np.dtype(np.float32))
        a_def, r_def = verification.default_tolerances(dt if dt.kind == "f" and dt.itemsize < 4 else np.float32)
        if r.dtype.kind == "f":
            r, c = r.astype(np.float64), c.astype(np.float64)
        outputs.append(verification.compare(n, r, c, atol if atol is not None else a_def,
                                            rtol if rtol is not None else r_def))
    return verification.Check(subject, engines, outputs)


def _check_node(model, rn, fp16, seed, atol, rtol):
    """One recurrent node alone, its inputs random: ONNX engine vs the IR interpreter."""
    from rnnconv.engine.graph import run_onnx
    from rnnconv.engine.ir_graph import run_ir

    single = _node_model(model, rn)
    conv = ov_convert.convert(single, fp16=fp16)
    feeds = feeds_for(single, seed)
    names = [v.name for v in single.graph.outputs]
    ref = run_onnx(single, feeds, precision="float64")
    return _compare(f"{rn.op} node {rn.name!r}", "onnx engine vs IR interpreter (float64)", ref,
                    run_ir(conv.graph, feeds, "float64"), names, atol, rtol, _output_dtypes(single))


def _node_model(model: ir.Model, rn) -> ir.Model:
    """A model holding only `rn`: constant inputs stay initializers, the others become graph inputs whose
    shapes use the symbols "T" and "N" (so feeds agree across X, states and lengths)."""
    layer = rn.layer
    D, H = layer.num_directions, layer.hidden_size
    x = rn.inputs["X"]
    w = rn.inputs["W"]
    ftype = x.dtype or w.dtype or ir.DataType.FLOAT
    I = layer.input_size
    if I is None and x.shape is not None and isinstance(x.shape[-1], int):
        I = x.shape[-1]
    # Static dims of the source stay static (dynamic dims change which IR rnnconv writes).
    xs = list(x.shape) if x.shape is not None and len(x.shape) == 3 else [None, None, I]
    n_axis, t_axis = (0, 1) if layer.layout == 1 else (1, 0)
    n = xs[n_axis] if isinstance(xs[n_axis], int) else "N"
    t = xs[t_axis] if isinstance(xs[t_axis], int) else "T"
    canonical = {
        "X": [n, t, I] if layer.layout == 1 else [t, n, I],
        "initial_h": [n, D, H] if layer.layout == 1 else [D, n, H],
        "initial_c": [n, D, H] if layer.layout == 1 else [D, n, H],
        "sequence_lens": [n],
    }
    inputs, inits, new_inputs = [], [], []
    for role, v in zip(onnx_recurrent.INPUTS[rn.op], rn.node.inputs):
        if v is None or v.name == "":
            new_inputs.append(None)
            continue
        const = onnx_recurrent.constant_array(v)
        if const is not None:
            nv = ir.Value(name=v.name, shape=ir.Shape(const.shape), type=ir.TensorType(ir.DataType.from_numpy(
                const.dtype)), const_value=ir.tensor(const, name=v.name))
            inits.append(nv)
        else:
            dtype = ir.DataType.INT32 if role == "sequence_lens" else (v.dtype or ftype)
            shape = ir.Shape(canonical[role]) if role in canonical else v.shape
            nv = ir.Value(name=v.name, shape=shape, type=ir.TensorType(dtype))
            inputs.append(nv)
        new_inputs.append(nv)
    attrs = [ir.Attr(a.name, a.type, a.value) for a in rn.node.attributes.values()]
    outputs = [ir.Value(name=o.name if o is not None and o.name else "") for o in rn.node.outputs]
    node = ir.Node("", rn.node.op_type, new_inputs, attributes=attrs, outputs=outputs, name=rn.node.name)
    out_values = [o for o in outputs if o.name]
    for o in out_values:
        o.type = ir.TensorType(ftype)
    graph = ir.Graph(inputs, out_values, nodes=[node], initializers=inits,
                     opset_imports={"": onnx_recurrent.default_opset(model)}, name=f"{rn.name}-alone")
    return ir.Model(graph, ir_version=max(model.ir_version, 4))
