"""`to_openvino`: ONNX recurrent models to OpenVINO IR v11 (.xml + .bin), verified before anything is written.

Verification: each recurrent node alone (rnnconv's ONNX engine vs the IR interpreter), then the whole model (the
source in onnxruntime, or the engine where onnxruntime cannot run it, vs the IR interpreter and, when the package
is installed, the real OpenVINO runtime at f32). A mismatch raises VerificationFailed and leaves no file behind:
the IR is written to temporary files in the target folder and renamed into place only after every check passed.

Big models: weights are reordered and folded per tensor and streamed into the .bin from their memory maps (see
`ovir.Pieces`); layers over rnnconv.convert.BIG_WEIGHT_BYTES are checked in float32 with small batch and sequence.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Mapping, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv import verify as verification
from rnnconv.convert import BIG_NODE_N, BIG_NODE_T, precision_for
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import convert as ov_convert
from rnnconv.dialects.openvino import ir as ovir
from rnnconv.errors import IOFailure, UsageError, VerificationFailed



def to_openvino(model_or_path, out_xml=None, *, fp16: bool = False, verify=True,
                atol: Optional[float] = None, rtol: Optional[float] = None, seed: int = 0, force: bool = False,
                runtime: Optional[bool] = None, isolate: bool = False) -> verification.Report:
    """Convert; verify; write `out_xml` and its .bin (when given). Returns the report.

    `verify`: True or "full" (each recurrent node, then the whole model), "node" (each recurrent node only, with
    its real weights: for models too big to compile in the OpenVINO runtime beside the conversion), False or "none".

    `runtime`: also run the real OpenVINO runtime (default: when the openvino package is importable).
    `isolate`: run it in a child process, so a crash of the OpenVINO plugin (seen in 2026.4 on some graphs)
    becomes a failed check instead of ending this process (the CLI does this; it costs about a second).
    """
    mode = ("full" if verify else "none") if isinstance(verify, bool) else verify
    if mode not in ("full", "node", "none"):
        raise UsageError(f"verify={verify!r}: expected full, node or none")
    model = io.load(model_or_path)
    report = verification.Report(command="to-openvino", verified=mode)
    out = Path(out_xml) if out_xml is not None else None
    if out is not None:
        _guard_ir_output(out, model, model_or_path, force)
    conversion = ov_convert.convert(model, fp16=fp16, release=io.release_pages)
    report.rewrites.extend(conversion.rewrites)
    tol = (atol, rtol) if not fp16 else (atol if atol is not None else 2e-3, rtol if rtol is not None else 2e-3)
    # The .bin is streamed into the staged file, each weight read from its memory map once and released.
    # Unchanged weight bytes (reordered gates) are copied file to file by the kernel, the rest streamed.
    with io.KernelCopier(model) as copy, \
            _staged(out, lambda f: ovir.write_to(conversion.graph, f, copy)) as (tmp_xml, commit):
        if mode != "none":
            for rn in conversion.recurrent:
                report.checks.append(_check_node(model, rn, fp16, seed, *tol))
            if mode == "full":
                if runtime is None:
                    runtime = _have_openvino()
                too_big = _runtime_would_not_fit(conversion.graph) if runtime else None
                if too_big:
                    report.skipped.append(too_big)
                    runtime = False
                report.checks.extend(_check_model(model, conversion.graph, tmp_xml, seed, *tol, runtime=runtime,
                                                  isolate=isolate))
            if not report.ok:
                raise VerificationFailed("to-openvino: " + report.verdict(), report)
        if out is not None:
            commit()
            report.output = str(out)
    return report


def _guard_ir_output(out: Path, model: ir.Model, source, force: bool) -> None:
    """Both files of the IR: neither may be an input (the model or its external data), nor exist without force."""
    if out.with_suffix(".bin") == out:
        raise UsageError(f"{out}: the .xml and its .bin would be the same file; name the output *.xml")
    inputs = [source] if isinstance(source, (str, os.PathLike)) else []
    inputs += io._external_paths(model)
    for target in (out, out.with_suffix(".bin")):
        io.guard_output(target, force=force, inputs=tuple(inputs))


@contextlib.contextmanager
def _staged(out: Optional[Path], write: Callable[[BinaryIO], bytes]):
    """Temporary .xml/.bin in the target folder (or a temp dir): `write(bin_file)` fills the .bin and returns
    the .xml bytes. `commit()` renames them into place, the .bin first; if the .xml cannot follow, the previous
    .bin (or none) is put back beside the previous .xml."""
    folder = (out.parent if out is not None and str(out.parent) else Path(".")) if out is not None else None
    try:
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        tmpdir = Path(tempfile.mkdtemp(prefix=".rnnconv-ir.", dir=folder))
    except OSError as err:
        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    tmp_xml, tmp_bin, backup = tmpdir / "model.xml", tmpdir / "model.bin", tmpdir / "previous.bin"
    try:
        with open(tmp_bin, "wb") as f:
            xml_bytes = write(f)
        tmp_xml.write_bytes(xml_bytes)

        def commit():
            target_bin = out.with_suffix(".bin")
            try:
                had_bin = _keep_previous(target_bin, backup)
                try:
                    os.replace(tmp_bin, target_bin)
                    os.replace(tmp_xml, out)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.replace(backup, target_bin) if had_bin else target_bin.unlink()
                    raise
            except OSError as err:
                raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err

        yield tmp_xml, commit
    except OSError as err:
        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    finally:
        for p in (tmp_xml, tmp_bin, backup):
            with contextlib.suppress(OSError):
                p.unlink()
        with contextlib.suppress(OSError):
            tmpdir.rmdir()


def _keep_previous(target: Path, backup: Path) -> bool:
    """A second name for the file at `target` (a hard link, else a copy), so that a failed commit can put it
    back while `target` itself is only ever replaced atomically. False when there is no such file."""
    if not (target.exists() or target.is_symlink()):
        return False
    try:
        os.link(target, backup, follow_symlinks=False)
    except OSError:
        shutil.copy2(target, backup, follow_symlinks=False)
    return True


# -- inputs ------------------------------------------------------------------------------------------------
def feeds_for(model: ir.Model, seed: int = 0, *, small: bool = False) -> dict[str, np.ndarray]:
    """Random feeds: batch/sequence axes of recurrent X inputs named so symbolic dims get consistent sizes;
    sequence_lens inputs drawn in 1..T. `small`: the sizes of big-layer checks (each step reads every weight)."""
    recurrent = onnx_recurrent.find(model)
    roles: dict[str, dict[int, str]] = {}
    lengths: dict[str, int] = {}
    default = {"sequence": BIG_NODE_T, "batch": BIG_NODE_N} if small else dict(verification.DEFAULT_DIM)
    dims = {"T": default["sequence"], "N": default["batch"]}
    if small:  # role-traced axes too
        dims.update(default)
    # A symbolic batch dim of X takes the static batch of the node's initial states (PyTorch exports pair a
    # dynamic x with a fixed-size h0).
    for rn in recurrent:
        x = rn.inputs["X"]
        n_axis = 0 if rn.layer.layout == 1 else 1
        sym = _symbol(x, n_axis)
        # One size per symbol across all inputs (h0 may share X's batch symbol).
        if sym is not None:
            dims.setdefault(sym, default["batch"])
        t_sym = _symbol(x, 1 - n_axis)
        if t_sym is not None:
            dims.setdefault(t_sym, default["sequence"])
        for state in ("initial_h", "initial_c"):
            v = rn.inputs.get(state)
            if sym is not None and v is not None and v.shape is not None and len(v.shape) == 3:
                b = v.shape[0 if rn.layer.layout == 1 else 1]
                if isinstance(b, int):
                    dims[sym] = b
    for rn in recurrent:
        x = rn.inputs["X"]
        batch_axis, seq_axis = (0, 1) if rn.layer.layout == 1 else (1, 0)
        roles[x.name] = {batch_axis: "batch", seq_axis: "sequence"}
        lens = rn.inputs.get("sequence_lens")
        if lens is not None:
            t = x.shape[seq_axis] if x.shape is not None else None
            lengths[lens.name] = t if isinstance(t, int) else dims.get(_symbol(x, seq_axis), default["sequence"])
    return verification.random_inputs(model, seed=seed, dims=dims, roles=lambda v: roles.get(v.name, {}),
                                      lengths=lengths)


def _symbol(value, axis):
    if value is None or value.shape is None or len(value.shape) <= axis:
        return None
    d = value.shape[axis]
    return None if isinstance(d, int) else getattr(d, "value", None)


def _ov_run(xml_path: Path, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    from rnnconv.engine import openvino_runtime

    return openvino_runtime.run(xml_path, feeds)


class _RuntimeCrash(Exception):
    pass


def _ov_run_isolated(xml_path: Path, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """_ov_run in a child process; our own pickles in our own temporary folder carry feeds and results."""
    import pickle
    import subprocess
    import sys

    folder = Path(xml_path).parent
    feeds_file, out_file = folder / "feeds.pkl", folder / "outputs.pkl"
    feeds_file.write_bytes(pickle.dumps(dict(feeds)))
    code = ("import pickle, sys; from pathlib import Path; from rnnconv.to_openvino import _ov_run; "
            "feeds = pickle.loads(Path(sys.argv[2]).read_bytes()); "
            "Path(sys.argv[3]).write_bytes(pickle.dumps(_ov_run(Path(sys.argv[1]), feeds)))")
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(xml_path), str(feeds_file), str(out_file)],
                              capture_output=True, text=True)
        if proc.returncode != 0 or not out_file.exists():
            tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise _RuntimeCrash(f"the OpenVINO runtime failed on this IR ({tail})")
        return pickle.loads(out_file.read_bytes())
    finally:
        for f in (feeds_file, out_file):
            with contextlib.suppress(OSError):
                f.unlink()


# Peak memory of OpenVINO's CPU plugin compiling an IR, per byte of its constants (measured with OpenVINO 2026.4
# on bidirectional LSTMSequence IRs of 1 and 2.5 GB, rnnconv's and OpenVINO's own alike: 4.1x), with a margin.
RUNTIME_COMPILE_FACTOR = 4.5


def _runtime_would_not_fit(graph: ovir.IRGraph) -> Optional[str]:
    """Why the whole-model run in the OpenVINO runtime is left out, if this machine lacks the memory to compile
    the IR (it would be killed, which is no verdict on the IR); None when it fits or memory is unknown."""
    need = RUNTIME_COMPILE_FACTOR * sum(layer.value.nbytes for layer in _all_layers(graph)
                                        if layer.type == "Const" and layer.value is not None)
    available = _available_memory()
    if available is None or need <= available:
        return None
    return (f"whole model [OpenVINO runtime]: compiling this IR needs about {need / 2**30:.1f} GiB "
            f"({RUNTIME_COMPILE_FACTOR}x its weights), {available / 2**30:.1f} GiB is available; "
            f"on a machine with more, `rnnconv verify MODEL.onnx OUT.xml --cand-engine openvino` runs it")


def _all_layers(graph: ovir.IRGraph):
    for layer in graph.layers:
        yield layer
        if layer.body is not None:
            yield from _all_layers(layer.body)


def _available_memory() -> Optional[int]:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _have_openvino() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def _check_model(model, graph, xml_path, seed, atol, rtol, *, runtime=None, isolate=False) -> list:
    """Big layers (rnnconv.convert.precision_for): the IR interpreter in float32 and small batch/sequence."""
    precision = precision_for(model)
    feeds = feeds_for(model, seed, small=precision == "float32")
    names = [v.name for v in model.graph.outputs]
    ref, ref_name = _reference(model, feeds)
    dtypes = _output_dtypes(model)
    checks = [_compare("whole model", f"{ref_name} vs IR interpreter ({precision})", ref,
                       _run_ir(graph, feeds, precision), names, atol, rtol, dtypes)]
    if runtime is None:
        runtime = _have_openvino()
    if runtime:
        engines = f"{ref_name} vs OpenVINO runtime (CPU, f32)"
        try:
            got = _ov_run_isolated(xml_path, feeds) if isolate else _ov_run(xml_path, feeds)
        except _RuntimeCrash as err:
            check = verification.Check("whole model", engines, [verification.OutputComparison(
                n, (), float("inf"), float("inf"), float("inf"), 1, 1.0, None, problem=str(err)) for n in names])
            checks.append(check)
            return checks
        checks.append(_compare("whole model", engines, ref, got, names, atol, rtol, dtypes))
    return checks


def _run_ir(graph: ovir.IRGraph, feeds, precision: str) -> dict:
    """The IR interpreter; afterwards the memory-mapped weights it read leave the resident set."""
    from rnnconv.engine.ir_graph import run_ir

    try:
        return run_ir(graph, feeds, precision)
    finally:
        _release(graph)


def _release(graph: ovir.IRGraph) -> None:
    for layer in graph.layers:
        if isinstance(layer.value, ovir.Pieces):
            for part in layer.value.parts:
                layer.value.release(part)
        if layer.body is not None:
            _release(layer.body)


def _reference(model, feeds) -> tuple[dict, str]:
    """The source model's outputs: onnxruntime when it runs the model, else rnnconv's engine.

    onnxruntime first because rnnconv's engine uses onnx's ReferenceEvaluator for non-recurrent ops, which has
    its own errors (measured: Softmax before opset 13 normalized over one axis, not the 2-D flattening).
    onnxruntime cannot run layout 1, GRU-1/3, LSTM-1, RNN-1 or float64 recurrent nodes: those use the engine.
    """
    try:
        sess = io.onnxruntime_session(model)
        out = sess.run(None, dict(feeds))
        return dict(zip([o.name for o in sess.get_outputs()], out)), "onnxruntime"
    except Exception:
        from rnnconv.engine.graph import run_onnx

        return run_onnx(model, feeds, precision="float64"), "onnx engine"
    finally:
        io.release_external(model)


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
        a_def, r_def = verification.default_tolerances(dt if ovir.is_float(dt) and dt.itemsize < 4 else np.float32)
        if ovir.is_float(r.dtype):
            r, c = r.astype(np.float64), c.astype(np.float64)
        outputs.append(verification.compare(n, r, c, atol if atol is not None else a_def,
                                            rtol if rtol is not None else r_def))
    return verification.Check(subject, engines, outputs)


def _check_node(model, rn, fp16, seed, atol, rtol):
    """One recurrent node alone, its inputs random: ONNX engine vs the IR interpreter. A big layer
    (rnnconv.convert.precision_for) runs in float32 with small batch and sequence, on its real weights."""
    from rnnconv.engine.graph import run_onnx

    precision = precision_for(model, [rn])
    single = _node_model(model, rn)
    conv = ov_convert.convert(single, fp16=fp16, release=io.release_pages)
    feeds = feeds_for(single, seed, small=precision == "float32")
    names = [v.name for v in single.graph.outputs]
    try:
        ref = run_onnx(single, feeds, precision=precision)
    finally:
        io.release_external(model)
    return _compare(f"{rn.op} node {rn.name!r}", f"onnx engine vs IR interpreter ({precision})", ref,
                    _run_ir(conv.graph, feeds, precision), names, atol, rtol, _output_dtypes(single))


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
            tensor = v.const_value if v.const_value is not None else ir.tensor(const, name=v.name)
            nv = ir.Value(name=v.name, shape=ir.Shape(const.shape), type=ir.TensorType(ir.DataType.from_numpy(
                const.dtype)), const_value=tensor)
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
