"""The rewrite pipeline shared by every ONNX -> ONNX command: plan rewrites, verify each, verify the model, save.

Principle: no silent wrong answer. Each replaced node is run against its replacement (real weights, random
inputs with varied sequence_lens), then the whole model before against after, in the engine and in onnxruntime
when it runs both. Any mismatch raises VerificationFailed and nothing is written.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import io, verify
from rnnconv.dialects import onnx_recurrent
from rnnconv.engine.graph import run_onnx
from rnnconv.errors import RnnconvError, VerificationFailed
from rnnconv.passes import rewrite as rw
from rnnconv.passes import transpose_fold

NODE_T, NODE_N = 5, 3  # concrete sizes for dynamic sequence / batch dims in per-node checks


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


def load_pair(source) -> tuple[ir.Model, ir.Model]:
    """Two independent copies: one to rewrite, one to verify against (external data stays memory-mapped)."""
    if isinstance(source, ir.Model):
        model, original = source, ir.serde.deserialize_model(io.to_proto(source))
    else:
        model, original = io.load(source), io.load(source, check=False)
    onnx_recurrent.find(model, io.source_name(source))  # bad recurrent nodes: BadInput naming the file
    infer_shapes(model)
    return model, original


def infer_shapes(model: ir.Model) -> None:
    """Fill in value types and shapes where onnx can infer them (some opset adapters need them)."""
    from onnx_ir.passes.common import ShapeInferencePass

    try:
        ShapeInferencePass(strict_mode=False)(model)
    except Exception:  # inference is a help for adapters, not a requirement
        pass


# ---- per-node verification -------------------------------------------------------------------------------

def node_feeds(rn: onnx_recurrent.RecurrentNode, model: ir.Model, seed: int) -> dict[str, np.ndarray]:
    """Random inputs for a standalone node model: X, states, run-time weights; sequence_lens in 1..T."""
    rng = np.random.default_rng(seed)
    layer = rn.layer
    x = rn.inputs["X"]
    x_shape = list(x.shape) if x.shape is not None else [None, None, layer.input_size]
    t_axis, n_axis = (1, 0) if layer.layout else (0, 1)
    T = x_shape[t_axis] if isinstance(x_shape[t_axis], int) else NODE_T
    N = x_shape[n_axis] if isinstance(x_shape[n_axis], int) else NODE_N
    D, H = layer.num_directions, layer.hidden_size
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
    ref = run_onnx(before, feeds)
    cand = run_onnx(after, feeds)
    ref = dict(zip(keys, ref.values()))
    cand = dict(zip(keys, cand.values()))
    return verify.compare_all(f"node {rn.name}", "engine", ref, cand, atol, rtol)


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
    checks = [verify.compare_all("model", "engine", run_onnx(before, feeds), run_onnx(after, feeds), atol, rtol,
                                 names=outputs)]
    ort = _onnxruntime_outputs(before, feeds), _onnxruntime_outputs(after, feeds)
    if ort[0] is not None and ort[1] is not None:
        checks.append(verify.compare_all("model", "onnxruntime", ort[0], ort[1], atol, rtol, names=outputs))
    elif ort[1] is not None:
        # The source cannot run in onnxruntime: hold the converted model in onnxruntime against the engine.
        checks.append(verify.compare_all("model", "engine(source) vs onnxruntime(converted)",
                                         run_onnx(before, feeds), ort[1], atol, rtol, names=outputs))
    return checks


def _onnxruntime_outputs(model: ir.Model, feeds) -> Optional[dict]:
    try:
        sess = io.onnxruntime_session(model)
    except Exception:  # onnxruntime refuses the model (layout=1, opset < 7, float64...): no second opinion
        return None
    try:
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(None, feeds)))
    except Exception:
        return None


# ---- the pipeline ----------------------------------------------------------------------------------------

Planner = Callable[[ir.Model, rw.Names], list[rw.NodeRewrite]]


def rewrite_model(source, output, *, command: str, plan: Planner, target_opset: Optional[int] = None,
                  graph_pass: Optional[Callable[[ir.Model], None]] = None, verify_mode: str = "full",
                  atol: Optional[float] = None, rtol: Optional[float] = None, seed: int = 0, force: bool = False,
                  external_data: Optional[bool] = None) -> Result:
    if output is not None:
        io.guard_output(Path(output), force=force, inputs=_paths(source))
    model, original = load_pair(source)
    report = verify.Report(command, verified=verify_mode)
    opsets_before = dict(model.opset_imports)
    opsets_after = dict(opsets_before)
    if target_opset is not None:
        opsets_after[""] = target_opset
        opsets_after.pop("ai.onnx", None)
    names = rw.Names(model.graph)
    rewrites = plan(model, names)
    for i, r in enumerate(rewrites):
        if verify_mode != "none":
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
    if interface(model) != interface(original):
        raise VerificationFailed(f"{command}: the model's interface changed (a bug in rnnconv)", report)
    try:
        io.check_full(model)
    except RnnconvError as err:
        raise VerificationFailed(f"{command}: the converted model fails onnx.checker: {err}", report) from err
    if verify_mode == "full":
        report.checks.extend(check_models(original, model, seed, atol, rtol))
    if not report.ok:
        raise VerificationFailed(f"{command}: {report.verdict()}; nothing written", report)
    if output is not None:
        io.save(model, output, force=force, inputs=_paths(source), external_data=external_data)
        report.output = str(output)
    return Result(model, report)


def _paths(source) -> tuple:
    return (source,) if isinstance(source, (str, os.PathLike)) else ()
