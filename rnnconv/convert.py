"""The rewrite pipeline shared by every ONNX -> ONNX command: plan rewrites, verify each, verify the model, save.

Principle: no silent wrong answer. Each replaced node is run against its replacement (real weights, random
inputs with varied sequence_lens), then the whole model before against after, in the engine and in onnxruntime
when it runs both. Any mismatch raises VerificationFailed and nothing is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import io, verify
from rnnconv.dialects import onnx_recurrent
from rnnconv.engine.graph import run_onnx
from rnnconv.errors import BadInput, RnnconvError, UsageError, VerificationFailed
from rnnconv.passes import rewrite as rw
from rnnconv.passes import transpose_fold

NODE_T, NODE_N = 5, 3  # concrete sizes for dynamic sequence / batch dims in per-node checks
BIG_NODE_T, BIG_NODE_N = 3, 2  # the same for layers over BIG_WEIGHT_BYTES
# full: each rewritten node, then the whole model before against after; node: each rewritten node only (real
# weights, small batch and sequence); none: no check.
VERIFY_MODES = ("full", "node", "none")
BIG_WEIGHT_BYTES = 64 << 20


@dataclasses.dataclass
class Result:
    model: ir.Model
    report: verify.Report


def interface(model: ir.Model) -> list[tuple]:
    def sig(v: ir.Value):
        shape = None if v.shape is None else tuple(str(d) if not isinstance(d, int) else d for d in v.shape)
        return (v.name, None if v.dtype is None else v.dtype.name, shape)

    graph = model.graph
    inputs = [sig(v) for v in graph.inputs if v.name not in graph.initializers]
    return [("input", *s) for s in inputs] + [("output", *sig(v)) for v in graph.outputs]


def load(source) -> ir.Model:
    """The model to rewrite (external data stays memory-mapped)."""
    return source if isinstance(source, ir.Model) else io.load(source)


def prepare(model: ir.Model, source, *, original: bool = True) -> Optional[ir.Model]:
    """Check the loaded model's recurrent nodes and infer shapes; returns an independent copy to verify against
    (sharing the memory maps), or None without `original` (no whole-model check)."""
    copy = None
    if original:
        copy = (ir.serde.deserialize_model(io.to_proto(source)) if isinstance(source, ir.Model)
                else io.load(source, check=False))
        _share_external(copy, model)
    onnx_recurrent.find(model, io.source_name(source))  # bad recurrent nodes: BadInput naming the file
    infer_shapes(model)
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


def precision_for(model: ir.Model, nodes=None) -> str:
    """float64 (the engine's default), or float32 for layers whose float32 (or narrower) weights exceed
    BIG_WEIGHT_BYTES: a float64 copy of them would double the memory a big model needs to be verified."""
    weights = [v for rn in (nodes if nodes is not None else onnx_recurrent.find(model))
               for k, v in rn.inputs.items() if k in ("W", "R", "B", "P") and v is not None
               and v.const_value is not None]
    if any(v.const_value.dtype == ir.DataType.DOUBLE for v in weights):
        return "float64"
    return "float32" if sum(v.const_value.nbytes for v in weights) > BIG_WEIGHT_BYTES else "float64"


def _run(model: ir.Model, feeds, precision: str) -> dict:
    try:
        return run_onnx(model, feeds, precision)
    finally:
        io.release_external(model)


def _engine(precision: str) -> str:
    return "engine" if precision == "float64" else f"engine, {precision}"


def infer_shapes(model: ir.Model) -> None:
    """Fill in value types and shapes where onnx can infer them (some opset adapters need them)."""
    from onnx_ir.passes.common import ShapeInferencePass

    interface_values = [*model.graph.inputs, *model.graph.outputs]
    declared = [(v.type, v.shape) for v in interface_values]
    try:
        ShapeInferencePass(strict_mode=False)(model)
    except Exception:  # inference is a help for adapters, not a requirement
        pass
    # The interface keeps what the source declared: inferred facts stay on the values inside the graph.
    for v, (type_, shape) in zip(interface_values, declared):
        v.type, v.shape = type_, shape


# ---- per-node verification -------------------------------------------------------------------------------

def node_feeds(rn: onnx_recurrent.RecurrentNode, model: ir.Model, seed: int) -> dict[str, np.ndarray]:
    """Random inputs for a standalone node model: X, states, run-time weights; sequence_lens in 1..T."""
    rng = np.random.default_rng(seed)
    layer = rn.layer
    x = rn.inputs["X"]
    x_shape = list(x.shape) if x.shape is not None else [None, None, layer.input_size]
    t_axis, n_axis = (1, 0) if layer.layout else (0, 1)
    # A big layer's run time is its weights read once per step: fewer steps, still T != N (axis mix-ups show).
    node_t, node_n = (BIG_NODE_T, BIG_NODE_N) if precision_for(model, [rn]) == "float32" else (NODE_T, NODE_N)
    T = x_shape[t_axis] if isinstance(x_shape[t_axis], int) else node_t
    N = x_shape[n_axis] if isinstance(x_shape[n_axis], int) else node_n
    D, H = layer.num_directions, layer.hidden_size
    # Estimate before allocating: X, the projected inputs of every gate and Y, in float64.
    gates = len(onnx_recurrent.GATES[rn.op])
    need = float(T) * N * ((layer.input_size or 1) + (gates + 1) * H * D) * 8
    if need > verify.INPUT_LIMIT:
        raise BadInput(f"{rn.op} node {rn.name!r}: verifying it at its declared sizes (T={T}, N={N}) would need "
                       f"about {verify._human(need)}; the limit is {verify._human(verify.INPUT_LIMIT)} "
                       "(use --verify none, or declare those dims dynamic)")
    shapes = {"X": (N, T, layer.input_size) if layer.layout else (T, N, layer.input_size),
              "initial_h": (N, D, H) if layer.layout else (D, N, H)}
    shapes["initial_c"] = shapes["initial_h"]
    feeds = {}
    for key, value in rn.inputs.items():
        if value is None or rw.constant_array(value) is not None:
            continue
        dtype = value.dtype.numpy() if value.dtype is not None else np.dtype(np.float32)
        if key == "sequence_lens":
            feeds[value.name] = rng.integers(1, T + 1, size=N).astype(dtype)
            continue
        shape = shapes.get(key) or tuple(d if isinstance(d, int) else 1 for d in value.shape)
        feeds[value.name] = rng.uniform(-1, 1, size=shape).astype(dtype)
    return feeds


def check_node(model: ir.Model, rewrite: rw.NodeRewrite, opsets_before: dict, opsets_after: dict, seed: int,
               atol, rtol) -> verify.Check:
    rn = rewrite.original
    inputs = [v for v in rn.node.inputs if v is not None]
    keys = [k for k in rewrite.outputs if rn.outputs.get(k) is not None]
    ir_version = model.ir_version
    before = rw.extract([rn.node], inputs, [rn.outputs[k] for k in keys], opsets_before, ir_version)
    after_ir = max(ir_version, io.min_ir_version(opsets_after.get("", 1)))
    after = rw.extract(rewrite.nodes, inputs, [rewrite.outputs[k] for k in keys], opsets_after, after_ir)
    feeds = node_feeds(rn, model, seed)
    precision = precision_for(model, [rn])
    ref = _run(before, feeds, precision)
    cand = _run(after, feeds, precision)
    ref = dict(zip(keys, ref.values()))
    cand = dict(zip(keys, cand.values()))
    return verify.compare_all(f"node {rn.name}", _engine(precision), ref, cand, atol, rtol)


# ---- whole-model verification ----------------------------------------------------------------------------

def sequence_lens_inputs(model: ir.Model) -> dict[str, int]:
    """Graph inputs that feed a recurrent node's sequence_lens, with that node's T when static (else NODE_T)."""
    out = {}
    for rn in onnx_recurrent.find(model):
        sl = rn.inputs.get("sequence_lens")
        if sl is not None and sl.is_graph_input():
            x = rn.inputs["X"]
            axis = 1 if rn.layer.layout else 0
            t = x.shape[axis] if x.shape is not None and isinstance(x.shape[axis], int) else NODE_T
            out[sl.name] = t
    return out


def check_models(before: ir.Model, after: ir.Model, seed: int, atol, rtol,
                 dims: Optional[dict] = None) -> list[verify.Check]:
    lengths = sequence_lens_inputs(before)
    feeds = verify.random_inputs(before, seed, dims=dims or {}, lengths=lengths)
    outputs = [o.name for o in before.graph.outputs]
    precision = precision_for(before)
    engine_before = _run(before, feeds, precision)
    checks = [verify.compare_all("model", _engine(precision), engine_before, _run(after, feeds, precision), atol,
                                 rtol, names=outputs)]
    try:
        (ort_before, _), (ort_after, why) = onnxruntime_pair(before, after, feeds)
    except io.RuntimeCrash as err:
        return checks + [verify.Check("model", "onnxruntime", [verify.OutputComparison(
            name, (), float("inf"), float("inf"), float("inf"), 1, 1.0, None, problem=str(err)) for name in outputs])]
    ort = ort_before, ort_after
    if ort[0] is not None and ort[1] is not None:
        checks.append(verify.compare_all("model", "onnxruntime", ort[0], ort[1], atol, rtol, names=outputs))
    elif ort[0] is not None and not _onnxruntime_may_refuse(after):
        # onnxruntime ran the source: the converted model must run there too.
        checks.append(verify.Check("model", "onnxruntime", [verify.OutputComparison(
            name, (), float("inf"), float("inf"), float("inf"), 1, 1.0, None,
            problem=f"onnxruntime cannot run the converted model: {why}") for name in outputs]))
    elif ort[1] is not None:
        # The source cannot run in onnxruntime: hold the converted model in onnxruntime against the engine.
        checks.append(verify.compare_all("model", f"{_engine(precision)}(source) vs onnxruntime(converted)",
                                         engine_before, ort[1], atol, rtol, names=outputs))
    return checks


def onnxruntime_pair(before: ir.Model, after: ir.Model, feeds) -> list[tuple[Optional[dict], str]]:
    """onnxruntime_outputs of both models. Models whose external weights pass BIG_WEIGHT_BYTES run in a child
    process that maps the weights itself: this process, which holds the interpreter, onnx and the engine, then
    holds no weights while onnxruntime runs, so verifying a 1 GB model peaks near 1.05x its size, not 1.13x."""
    external = sum(v.const_value.nbytes for v in before.graph.initializers.values()
                   if isinstance(v.const_value, ir.ExternalTensor))
    if external > BIG_WEIGHT_BYTES:
        return io.onnxruntime_outputs_isolated([before, after], feeds)
    return [onnxruntime_outputs(before, feeds), onnxruntime_outputs(after, feeds)]


def onnxruntime_outputs(model: ir.Model, feeds) -> tuple[Optional[dict], str]:
    """onnxruntime's outputs, or None and the reason it could not run the model."""
    try:
        sess = io.onnxruntime_session(model)
    except Exception as err:  # refused (layout=1, opset < 7, float64...): decided by the caller
        return None, _first_line(err)
    try:
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(None, feeds))), ""
    except Exception as err:
        return None, _first_line(err)
    finally:
        del sess
        io.release_external(model)


def _onnxruntime_may_refuse(model: ir.Model) -> bool:
    """True when a recurrent node is one onnxruntime is known to refuse (rnnconv.check's facts)."""
    from rnnconv import check

    return any(check.node_findings(rn, "onnxruntime") for rn in onnx_recurrent.find(model))


def _first_line(err: Exception) -> str:
    lines = [ln for ln in str(err).splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else type(err).__name__


# ---- the pipeline ----------------------------------------------------------------------------------------

Planner = Callable[[ir.Model, rw.Names], list[rw.NodeRewrite]]
Progress = Callable[[int, int, str], None]


def rewrite_model(source, output, *, command: str, plan: Planner, target_opset: Optional[int] = None,
                  graph_pass: Optional[Callable[[ir.Model], None]] = None, verify_mode: str = "full",
                  atol: Optional[float] = None, rtol: Optional[float] = None, seed: int = 0, force: bool = False,
                  external_data: Optional[bool] = None, progress: Optional[Progress] = None) -> Result:
    """Plan the rewrites, check each (unless verify_mode is none), apply them, check the whole model (full), save.

    `progress(done, total, label)` is called as each step starts (a terminal's progress bar)."""
    tick = progress or (lambda done, total, label: None)
    if output is not None:
        io.guard_output(Path(output), force=force, inputs=_paths(source))
    if verify_mode not in VERIFY_MODES:
        raise UsageError(f"--verify {verify_mode}: expected one of {', '.join(VERIFY_MODES)}")
    model = load(source)
    # Untouched weights start copying now, beside the rest; save() keeps the copy where its layout agrees.
    early = io.EarlyCopy(model, output) if output is not None and external_data is not False else None
    with early or contextlib.nullcontext():
        original = prepare(model, source, original=verify_mode == "full")
        interface_before = interface(model)
        report = verify.Report(command, verified=verify_mode)
        opsets_before = dict(model.opset_imports)
        opsets_after = dict(opsets_before)
        if target_opset is not None:
            opsets_after[""] = target_opset
            opsets_after.pop("ai.onnx", None)
        names = rw.Names(model.graph)
        rewrites = plan(model, names)
        total = (len(rewrites) if verify_mode != "none" else 0) + (verify_mode == "full") + (output is not None)
        for i, r in enumerate(rewrites):
            if verify_mode != "none":
                tick(i, total, f"node {r.original.name}")
                report.checks.append(check_node(model, r, opsets_before, opsets_after, seed + i, atol, rtol))
            report.rewrites.append({"node": r.original.name, "op": r.original.op, "what": "; ".join(r.what)})
        for r in rewrites:
            rw.apply(model.graph, r)
        transpose_fold.FoldTransposes(scope=[n for r in rewrites for n in r.nodes])(model)
        if graph_pass is not None:
            graph_pass(model)
        if target_opset is not None:
            model.opset_imports.pop("ai.onnx", None)
            model.opset_imports[""] = target_opset
            model.ir_version = max(model.ir_version, io.min_ir_version(target_opset))
        if interface(model) != interface_before:
            raise VerificationFailed(f"{command}: the model's interface changed (a bug in rnnconv)", report)
        try:
            io.check_full(model)
        except RnnconvError as err:
            raise VerificationFailed(f"{command}: the converted model fails onnx.checker: {err}", report) from err
        if verify_mode == "full":
            tick(total - 1 - (output is not None), total, "whole model")
            report.checks.extend(check_models(original, model, seed, atol, rtol))
        if not report.ok:
            raise VerificationFailed(f"{command}: {report.verdict()}; nothing written", report)
        if output is not None:
            tick(total - 1, total, "writing")
            io.save(model, output, force=force, inputs=_paths(source), external_data=external_data,
                    early=early)
            report.output = str(output)
        tick(total, total, "done")
        return Result(model, report)


def _paths(source) -> tuple:
    return (source,) if isinstance(source, (str, os.PathLike)) else ()
