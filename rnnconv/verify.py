"""Verification: inputs, engines, comparison, report.

Every rewriting command checks each replaced node against its replacement, then the whole model before against
after; `rnnconv verify` (`compare_models`, also callable as `rnnconv.verify(...)`) holds any two models, ONNX or
OpenVINO IR, against each other in any engine. Tolerances follow Polygraphy's contract: an element is bad when
|candidate - reference| > atol + rtol * |reference|. Outputs are matched by name and shapes must match exactly:
no axis permutation is ever guessed (a guess is wrong exactly when batch equals sequence length).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import types
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional

import ml_dtypes
import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv.errors import BadInput, UsageError, Unsupported

# Defaults by dtype (documented in README): float64 runs are compared at 1e-7, float32 at 1e-5.
TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (2e-2, 2e-2),
}
DEFAULT_DIM = {"batch": 3, "sequence": 5, "other": 2}


def default_tolerances(dtype) -> tuple[float, float]:
    return TOLERANCES.get(np.dtype(dtype).name if not isinstance(dtype, str) else dtype, (1e-5, 1e-5))


@dataclasses.dataclass
class OutputComparison:
    """One output of one comparison. An element is bad when |cand - ref| > atol + rtol * |ref|."""

    name: str
    shape: tuple
    max_abs: float
    max_rel: float
    mean_abs: float
    n_bad: int
    frac_bad: float
    worst_index: Optional[tuple]
    problem: str = ""  # shape/dtype/NaN mismatch, empty when none
    atol: Optional[float] = None
    rtol: Optional[float] = None
    median_abs: float = 0.0
    ref_value: Optional[float] = None  # both values at worst_index
    cand_value: Optional[float] = None
    nan: tuple = (0, 0)  # NaN count in (reference, candidate)
    inf: tuple = (0, 0)
    time_axis: Optional[int] = None  # recurrent outputs: the sequence axis, with the max error per step
    max_abs_per_step: Optional[list] = None

    @property
    def ok(self) -> bool:
        return self.n_bad == 0 and not self.problem

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["ok"] = self.ok
        d["shape"] = list(self.shape)
        d["worst_index"] = None if self.worst_index is None else list(self.worst_index)
        d["nan"], d["inf"] = list(self.nan), list(self.inf)
        return d


@dataclasses.dataclass
class Check:
    """One comparison: a replaced node against its replacement, or a whole model before against after."""

    subject: str
    engines: str
    outputs: list[OutputComparison]
    note: str = ""
    run: Optional[int] = None  # `rnnconv verify`: which input set

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    def as_dict(self) -> dict:
        d = {"subject": self.subject, "engines": self.engines, "ok": self.ok, "max_abs": self.max_abs,
             "max_rel": self.max_rel, "note": self.note, "outputs": [o.as_dict() for o in self.outputs]}
        if self.run is not None:
            d["run"] = self.run
        return d


@dataclasses.dataclass
class Report:
    command: str
    rewrites: list[dict] = dataclasses.field(default_factory=list)
    checks: list[Check] = dataclasses.field(default_factory=list)
    verified: str = "full"  # "full", "node" or "none"
    output: Optional[str] = None
    skipped: list[str] = dataclasses.field(default_factory=list)  # checks not run, each with why


    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict:
        return {"command": self.command, "ok": self.ok, "verified": self.verified, "output": self.output,
                "rewrites": self.rewrites, "checks": [c.as_dict() for c in self.checks], "skipped": self.skipped}

    def to_json(self) -> str:
        return json.dumps(_finite(self.as_dict()), indent=2, default=_json_default)

    def lines(self) -> list[str]:
        out = []
        for r in self.rewrites:
            out.append(f"  rewrote {r['node']}: {r['what']}")
        for c in self.checks:
            status = "ok  " if c.ok else "FAIL"
            out.append(f"  {status} {c.subject} [{c.engines}] max abs {c.max_abs:.3g}, max rel {c.max_rel:.3g}"
                       + (f" ({c.note})" if c.note else ""))
            for o in c.outputs:
                if not o.ok:
                    why = o.problem or (f"{o.n_bad} of {int(np.prod(o.shape)) if o.shape else 1} elements out of "
                                        f"tolerance, worst at {list(o.worst_index or ())}")
                    out.append(f"       output {o.name}: {why}")
        out.extend(f"  skipped {why}" for why in self.skipped)
        if not self.checks:
            out.append("  verification skipped" if self.verified == "none" else "  nothing to verify")
        return out

    def verdict(self) -> str:
        if self.verified == "none":
            return "written without verification"
        n = len(self.checks)
        bad = [c.subject for c in self.checks if not c.ok]
        skipped = f" ({len(self.skipped)} skipped)" if self.skipped else ""
        return f"verified: {n} check(s) passed{skipped}" if not bad else f"verification FAILED: {', '.join(bad)}"


def _finite(o):
    """JSON has no Infinity or NaN: write them as strings so every JSON reader (jq included) can load the report."""
    if isinstance(o, float) and not np.isfinite(o):
        return "nan" if np.isnan(o) else ("inf" if o > 0 else "-inf")
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def compare(name: str, ref: np.ndarray, cand: np.ndarray, atol: float, rtol: float, *,
            time_axis: Optional[int] = None) -> OutputComparison:
    """Compare one output elementwise; shapes must match exactly (no axis guessing)."""
    ref = np.asarray(ref)
    cand = np.asarray(cand)
    inf = float("inf")
    if ref.shape != cand.shape:
        return OutputComparison(name, ref.shape, inf, inf, inf, int(ref.size), 1.0, None,
                                problem=f"shape {list(cand.shape)} != reference {list(ref.shape)}", atol=atol,
                                rtol=rtol, median_abs=inf)
    if ref.size == 0:
        return OutputComparison(name, ref.shape, 0.0, 0.0, 0.0, 0, 0.0, None, atol=atol, rtol=rtol)
    if ref.dtype.kind not in "fc" and ref.dtype.name != "bfloat16":
        bad = ref != cand
        n_bad = int(bad.sum())
        worst = tuple(int(i) for i in np.argwhere(bad)[0]) if n_bad else None
        return OutputComparison(name, ref.shape, float(n_bad > 0), 0.0, float(bad.mean()), n_bad, n_bad / ref.size,
                                worst, atol=atol, rtol=rtol)
    r = ref.astype(np.float64)
    c = cand.astype(np.float64)
    nan_mismatch = np.isnan(r) != np.isnan(c)
    inf_mismatch = (np.isinf(r) | np.isinf(c)) & (r != c) & ~np.isnan(r) & ~np.isnan(c)
    finite = np.isfinite(r) & np.isfinite(c)
    diff = np.where(finite, np.abs(r - c), 0.0)
    rel = np.where(finite, diff / np.maximum(np.abs(r), np.finfo(np.float64).tiny), 0.0)
    bad = (diff > atol + rtol * np.abs(np.where(finite, r, 0.0))) | nan_mismatch | inf_mismatch
    n_bad = int(bad.sum())
    score = np.where(bad, np.inf, 0.0) + diff if n_bad else diff
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(score)), r.shape))
    problem = ""
    if nan_mismatch.any():
        problem = f"NaN in one side only at {int(nan_mismatch.sum())} element(s)"
    elif inf_mismatch.any():
        problem = f"Inf mismatch at {int(inf_mismatch.sum())} element(s)"
    per_step = None
    if time_axis is not None and -r.ndim <= time_axis < r.ndim:
        other = tuple(a for a in range(r.ndim) if a != time_axis % r.ndim)
        per_step = [float(v) for v in (np.max(diff, axis=other) if other else diff)]
    return OutputComparison(name, ref.shape, float(diff.max()), float(rel.max()), float(diff.mean()), n_bad,
                            n_bad / r.size, worst, problem, atol=atol, rtol=rtol,
                            median_abs=float(np.median(diff)), ref_value=float(r[worst]), cand_value=float(c[worst]),
                            nan=(int(np.isnan(r).sum()), int(np.isnan(c).sum())),
                            inf=(int(np.isinf(r).sum()), int(np.isinf(c).sum())),
                            time_axis=None if per_step is None else time_axis % r.ndim, max_abs_per_step=per_step)


def compare_all(subject: str, engines: str, ref: Mapping[str, np.ndarray], cand: Mapping[str, np.ndarray],
                atol: Optional[float] = None, rtol: Optional[float] = None,
                names: Optional[Iterable[str]] = None) -> Check:
    outputs = []
    for name in names if names is not None else ref:
        if name not in cand:
            outputs.append(OutputComparison(name, np.shape(ref[name]), float("inf"), float("inf"), float("inf"), 1,
                                            1.0, None, problem="missing from candidate"))
            continue
        a, r = default_tolerances(np.asarray(ref[name]).dtype)
        outputs.append(compare(name, ref[name], cand[name], a if atol is None else atol, r if rtol is None else rtol))
    return Check(subject, engines, outputs)


# ---- inputs ----------------------------------------------------------------------------------------------

def random_inputs(model: ir.Model, seed: int = 0, dims: Optional[Mapping[str, int]] = None,
                  roles: Optional[Callable[[ir.Value], Mapping[int, str]]] = None,
                  lengths: Optional[Mapping[str, int]] = None) -> dict[str, np.ndarray]:
    """Random feeds for every graph input that is not an initializer, drawn as `rnnconv verify` draws them.

    Batch and sequence axes are traced from the recurrent nodes (different sizes, so a swapped axis shows),
    sequence_lens lie in 1..T, token ids below the table size, and a request too large for memory is refused
    with its estimate. `roles(value)` adds axis roles ("batch", "sequence") the tracing did not find;
    `lengths` maps further sequence_lens-like inputs to their T.
    """
    specs = _onnx_specs(model)
    for value in model.graph.inputs:
        spec = specs.get(value.name)
        if spec is None:
            continue
        for axis, role in (roles(value) if roles else {}).items():
            spec.roles.setdefault(axis, role)
        if lengths and value.name in lengths and spec.dtype.kind in "iu" and spec.int_range is None:
            _narrow(spec, (1, int(lengths[value.name])), "sequence_lens")
    feeds, _ = draw_inputs(specs, np.random.default_rng(seed), dict(dims or {}), {})
    return feeds


# ---- `rnnconv verify`: two models, any engines ---------------------------------------------------------------

ENGINES = ("rnnconv", "onnxruntime", "openvino")
INPUT_LIMIT = 1 << 31  # bytes of random inputs per run; a larger request is refused before allocating
ROLE_ALIASES = {"batch": "batch", "n": "batch", "seq": "sequence", "sequence": "sequence", "t": "sequence"}
SEQUENCE_OPS = {"LSTMSequence": 3, "GRUSequence": 2, "RNNSequence": 2}  # IR op -> sequence_lengths port
_PASS_THROUGH = {"Identity", "Cast", "Convert"}
_ELEMENTWISE_UNARY = {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "Elu", "Gelu", "Dropout", "Softmax", "LogSoftmax"}
_ELEMENTWISE_BINARY = {"Add", "Sub", "Mul", "Div"}


class CannotRun(Exception):
    """An engine cannot run a model; the message says why (one line)."""


@dataclasses.dataclass
class Model:
    """A model to verify: ONNX (an onnx_ir Model) or OpenVINO IR (rnnconv's IRGraph), and where it came from."""

    label: str
    format: str  # "onnx" or "ir"
    onnx: Optional[ir.Model] = None
    graph: Optional[object] = None  # rnnconv.dialects.openvino.ir.IRGraph
    path: Optional[Path] = None

    def output_names(self) -> list[str]:
        if self.format == "onnx":
            return [v.name for v in self.onnx.graph.outputs]
        return self.graph.output_names()

    def output_dtypes(self) -> dict[str, Optional[np.dtype]]:
        if self.format == "onnx":
            return {v.name: _np_dtype(v.dtype) for v in self.onnx.graph.outputs}
        from rnnconv.dialects.openvino import ir as ovir

        out = {}
        for name, res in zip(self.graph.output_names(), self.graph.results()):
            et = res.inputs[0].element_type if res.inputs else None
            try:
                out[name] = ovir.numpy_dtype(et) if et else None
            except Exception:
                out[name] = None
        return out

    def describe(self) -> str:
        if self.format == "onnx":
            opset = self.onnx.opset_imports.get("", self.onnx.opset_imports.get("ai.onnx"))
            return f"{self.label} (ONNX, opset {opset})"
        return f"{self.label} (OpenVINO IR)"


def open_model(source) -> Model:
    """A path (.xml is OpenVINO IR, anything else ONNX), an onnx_ir Model, a ModelProto or an IRGraph."""
    from rnnconv.dialects.openvino import ir as ovir

    if isinstance(source, Model):
        return source
    if isinstance(source, ovir.IRGraph):
        return Model("<IR graph>", "ir", graph=source)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.suffix.lower() == ".xml":
            if not path.is_file():
                raise BadInput(f"{path}: no such file")
            return Model(str(path), "ir", graph=ovir.read(path), path=path)
        return Model(str(path), "onnx", onnx=io.load(path), path=path)
    return Model("<in-memory model>", "onnx", onnx=io.load(source))


def _np_dtype(dtype) -> Optional[np.dtype]:
    if dtype is None:
        return None
    try:
        return np.dtype(dtype.numpy())
    except Exception:
        return None


# -- what each input is ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class InputSpec:
    """A graph input: dims are ints, symbol names (str) or None (unnamed dynamic); roles name axes."""

    name: str
    dtype: np.dtype
    dims: list
    roles: dict = dataclasses.field(default_factory=dict)  # axis -> "batch" | "sequence"
    int_range: Optional[tuple] = None  # inclusive valid range read from the graph
    int_source: str = ""
    role: str = ""  # "sequence_lens" or "token ids": values given in an inputs file are checked against it
    lengths_of: Optional[tuple] = None  # sequence_lens: (input, axis) whose size is T; values in 1..T


def _onnx_specs(model: ir.Model) -> dict[str, InputSpec]:
    from rnnconv.dialects import onnx_recurrent

    graph = model.graph
    specs = {}
    for v in graph.inputs:
        if v.name in graph.initializers:
            continue
        dims = []
        for d in (v.shape or ()):
            if isinstance(d, int):
                dims.append(d)
            else:
                sym = getattr(d, "value", None)
                dims.append(sym if isinstance(sym, str) and sym else None)
        specs[v.name] = InputSpec(v.name, _np_dtype(v.dtype) or np.dtype(np.float32), dims)

    for rn in onnx_recurrent.find(model):
        t_axis, n_axis = (1, 0) if rn.layer.layout else (0, 1)
        x = rn.inputs["X"]
        for axis, role in ((t_axis, "sequence"), (n_axis, "batch")):
            src = _trace_back(x, axis)
            if src is not None and src[0] in specs:
                specs[src[0]].roles.setdefault(src[1], role)
        for key in ("initial_h", "initial_c"):
            src = _trace_back(rn.inputs.get(key), n_axis)
            if src is not None and src[0] in specs:
                specs[src[0]].roles.setdefault(src[1], "batch")
        lens = rn.inputs.get("sequence_lens")
        src = _trace_back(lens, 0)
        if src is None or src[0] not in specs:
            continue
        spec = specs[src[0]]
        spec.roles.setdefault(src[1], "batch")
        t = x.shape[t_axis] if x.shape is not None and len(x.shape) > t_axis else None
        where = f"sequence_lens of {rn.op} {rn.name!r}"
        if isinstance(t, int):
            _narrow(spec, (1, t), where)
            spec.role = "sequence_lens"
        else:
            x_src = _trace_back(x, t_axis)
            if x_src is not None and x_src[0] in specs:
                spec.lengths_of, spec.int_source, spec.role = x_src, where, "sequence_lens"
    for v in graph.inputs:
        if v.name in specs and specs[v.name].dtype.kind in "iu":
            _token_range(v, specs[v.name])
    return specs


def _narrow(spec: InputSpec, rng: tuple, why: str) -> None:
    if spec.int_range is None:
        spec.int_range, spec.int_source = rng, why
    else:
        lo, hi = max(spec.int_range[0], rng[0]), min(spec.int_range[1], rng[1])
        spec.int_range = (lo, max(lo, hi))
        if why not in spec.int_source:
            spec.int_source = f"{spec.int_source}; {why}"


def _trace_back(value: Optional[ir.Value], axis: int, depth: int = 0) -> Optional[tuple[str, int]]:
    """The graph input and axis that `value`'s `axis` comes from, through Transpose, Cast, Identity, Gather."""
    if value is None or depth > 16:
        return None
    if value.is_graph_input():
        return value.name, axis
    node = value.producer()
    if node is None:
        return None
    if node.op_type in _PASS_THROUGH:
        return _trace_back(node.inputs[0], axis, depth + 1)
    if node.op_type == "Transpose":
        perm = node.attributes.get("perm")
        if perm is None:
            return None
        return _trace_back(node.inputs[0], list(perm.value)[axis], depth + 1)
    if node.op_type == "Gather":  # embedding lookup: ids axes come first when gathering along axis 0
        g_axis = node.attributes["axis"].value if "axis" in node.attributes else 0
        ids = node.inputs[1]
        if g_axis == 0 and ids is not None and ids.shape is not None and axis < len(ids.shape):
            return _trace_back(ids, axis, depth + 1)
    return None


def _token_range(value: ir.Value, spec: InputSpec, depth: int = 0) -> None:
    """Ids that index a constant table through Gather are drawn below the table's size on that axis."""
    from rnnconv.dialects.onnx_recurrent import constant_array

    if depth > 8:
        return
    for node, index in value.uses():
        if node.op_type in _PASS_THROUGH | {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose"}:
            if index == 0:
                for out in node.outputs:
                    _token_range(out, spec, depth + 1)
        elif node.op_type == "Gather" and index == 1:
            data = node.inputs[0]
            axis = node.attributes["axis"].value if "axis" in node.attributes else 0
            size = None
            table = constant_array(data)
            if table is not None:
                size = table.shape[axis]
            elif data is not None and data.shape is not None and isinstance(data.shape[axis], int):
                size = data.shape[axis]
            if size:
                _narrow(spec, (0, size - 1), f"ids into {node.op_type} {node.name or data.name!r} "
                                             f"(table size {size})")
                spec.role = spec.role or "token ids"


def _ir_specs(graph) -> dict[str, InputSpec]:
    from rnnconv.dialects.openvino import ir as ovir

    by_id = graph.by_id()
    producers = graph.producers()
    consumers: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in graph.edges:
        consumers.setdefault((e.from_layer, e.from_port), []).append((e.to_layer, e.to_port))
    specs, param_of = {}, {}
    for p in graph.parameters():
        if not p.outputs:
            raise BadInput(f"IR Parameter {p.name!r} has no <output> port")
        port = p.outputs[0]
        name = port.names[0] if port.names else p.name
        dims = None if port.dims is None else [None if d < 0 else int(d) for d in port.dims]
        specs[name] = InputSpec(name, ovir.numpy_dtype(p.attrs.get("element_type", port.element_type)), dims or [])
        param_of[p.id] = name

    def back(layer_id: int, port: int, axis: int, depth=0):
        """(parameter name, axis) feeding input `port` of `layer_id` at `axis`, through Convert/Transpose."""
        src = producers.get((layer_id, port))
        if src is None or depth > 16:
            return None
        layer = by_id[src[0]]
        if layer.type == "Parameter":
            return param_of.get(layer.id), axis
        if layer.type == "Convert":
            return back(layer.id, layer.inputs[0].id, axis, depth + 1)
        if layer.type == "Transpose":
            perm = _ir_const(graph, layer, 1)
            if perm is None:
                return None
            return back(layer.id, layer.inputs[0].id, int(np.asarray(perm).reshape(-1)[axis]), depth + 1)
        return None

    for layer in graph.layers:
        if layer.type in SEQUENCE_OPS:
            ports = [p.id for p in layer.inputs]
            for axis, role in ((0, "batch"), (1, "sequence")):
                src = back(layer.id, ports[0], axis)
                if src and src[0] in specs:
                    specs[src[0]].roles.setdefault(src[1], role)
            lens_port = SEQUENCE_OPS[layer.type]
            for port in ports[1:lens_port + 1]:
                src = back(layer.id, port, 0)
                if src and src[0] in specs:
                    specs[src[0]].roles.setdefault(src[1], "batch")
            src = back(layer.id, ports[lens_port], 0)
            if src and src[0] in specs:
                x_dims = layer.inputs[0].dims
                where = f"sequence_lengths of {layer.type} {layer.name!r}"
                if x_dims and len(x_dims) > 1 and x_dims[1] > 0:
                    _narrow(specs[src[0]], (1, int(x_dims[1])), where)
                    specs[src[0]].role = "sequence_lens"
                else:
                    x_src = back(layer.id, ports[0], 1)
                    if x_src and x_src[0] in specs:
                        specs[src[0]].lengths_of, specs[src[0]].int_source = x_src, where
                        specs[src[0]].role = "sequence_lens"
        elif layer.type == "Gather" and len(layer.inputs) >= 2:
            src = back(layer.id, layer.inputs[1].id, 0)
            table = _ir_const(graph, layer, 0)
            axis = _ir_const(graph, layer, 2)
            if src and src[0] in specs and table is not None:
                ax = int(np.asarray(axis).reshape(-1)[0]) if axis is not None else 0
                size = np.asarray(table).shape[ax]
                _narrow(specs[src[0]], (0, size - 1), f"ids into Gather {layer.name!r} (table size {size})")
                specs[src[0]].role = specs[src[0]].role or "token ids"
    return specs


def _ir_const(graph, layer, port_index: int):
    """The constant on input `port_index` of `layer` (through Convert, as fp16-compressed weights are), or None."""
    producers, by_id = graph.producers(), graph.by_id()
    if port_index >= len(layer.inputs):
        return None
    src = producers.get((layer.id, layer.inputs[port_index].id))
    for _ in range(4):
        if src is None:
            return None
        prod = by_id[src[0]]
        if prod.type == "Const":
            return prod.value
        if prod.type != "Convert":
            return None
        src = producers.get((prod.id, prod.inputs[0].id))
    return None


def input_specs(model: Model) -> dict[str, InputSpec]:
    return _onnx_specs(model.onnx) if model.format == "onnx" else _ir_specs(model.graph)


def merge_specs(reference: Model, candidate: Model) -> dict[str, InputSpec]:
    """The reference's inputs, with what the candidate knows added (symbol names, valid ranges, static sizes)."""
    ref, cand = input_specs(reference), input_specs(candidate)
    extra = sorted(set(cand) - set(ref))
    if extra:
        raise BadInput(f"the candidate needs input(s) {extra} that the reference does not have "
                       f"(reference inputs: {sorted(ref)})")
    for name, c in cand.items():
        r = ref[name]
        if r.dims and c.dims and len(r.dims) != len(c.dims):
            raise BadInput(f"input {name!r}: rank {len(r.dims)} in the reference, {len(c.dims)} in the candidate")
        if not r.dims:
            r.dims = list(c.dims)
        for axis, (a, b) in enumerate(zip(r.dims, c.dims)):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise BadInput(f"input {name!r} axis {axis}: size {a} in the reference, {b} in the candidate")
            if isinstance(b, int) or (a is None and isinstance(b, str)):
                r.dims[axis] = b
        for axis, role in c.roles.items():
            r.roles.setdefault(axis, role)
        if c.int_range is not None:
            _narrow(r, c.int_range, c.int_source)
        r.role = r.role or c.role
        if r.lengths_of is None and c.lengths_of is not None:
            r.lengths_of = c.lengths_of
            r.int_source = r.int_source or c.int_source
    return ref


# -- drawing inputs ---------------------------------------------------------------------------------------------

def parse_dims(items: Iterable[str]) -> dict[str, int]:
    """`name=N` (a symbolic dim, or batch / seq), or `INPUT:AXIS=N`."""
    out = {}
    for item in items:
        key, sep, value = str(item).rpartition("=")
        if not sep or not key:
            raise UsageError(f"--dim {item!r}: expected NAME=N or INPUT:AXIS=N")
        try:
            n = int(value)
        except ValueError:
            raise UsageError(f"--dim {item!r}: {value!r} is not an integer") from None
        if n <= 0:
            raise UsageError(f"--dim {item!r}: a size must be positive")
        out[key] = n
    return out


def parse_ranges(items: Iterable[str]) -> dict[str, tuple[float, float]]:
    """`name:lo,hi` (inclusive for integer inputs)."""
    out = {}
    for item in items:
        name, sep, bounds = str(item).rpartition(":")
        lo, comma, hi = bounds.partition(",")
        try:
            if not sep or not name or not comma:
                raise ValueError
            lo_v, hi_v = float(lo), float(hi)
        except ValueError:
            raise UsageError(f"--range {item!r}: expected NAME:LO,HI") from None
        if hi_v < lo_v:
            raise UsageError(f"--range {item!r}: LO is above HI")
        out[name] = (lo_v, hi_v)
    return out


def expand_dims(dims: Mapping[str, int]) -> dict[str, int]:
    """--dim names as given, plus the roles their aliases name (seq=17 also sets "sequence")."""
    out = dict(dims)
    for k, v in dims.items():
        alias = ROLE_ALIASES.get(k.lower()) if ":" not in k else None
        if alias:
            out.setdefault(alias, v)
    return out


def check_dim_names(dims: Mapping[str, int], specs: Mapping[str, InputSpec]) -> None:
    """Every --dim must name something: a symbolic dim, batch/seq, or a dynamic INPUT:AXIS."""
    known = set(ROLE_ALIASES)
    for spec in specs.values():
        for axis, d in enumerate(spec.dims):
            if isinstance(d, str):
                known.add(d)
            if not isinstance(d, int):
                known.add(f"{spec.name}:{axis}")
    unknown = sorted(k for k in dims if k not in known and k.lower() not in ROLE_ALIASES)
    if unknown:
        raise UsageError(f"--dim {', '.join(unknown)}: no dynamic dim of that name (symbols and dynamic axes: "
                         f"{', '.join(sorted(known - set(ROLE_ALIASES))) or 'none'}; or batch, seq)")


def _shape_of(spec: InputSpec, dims: Mapping[str, int], symbols: dict) -> tuple[int, ...]:
    shape = []
    for axis, d in enumerate(spec.dims):
        key = f"{spec.name}:{axis}"
        role = spec.roles.get(axis)
        if isinstance(d, int):
            if key in dims and dims[key] != d:
                raise UsageError(f"--dim {key}={dims[key]}: that axis is fixed at {d}")
            shape.append(d)
        elif key in dims:
            shape.append(dims[key])
        elif isinstance(d, str):
            if d not in symbols:
                symbols[d] = dims.get(d, dims.get(role, DEFAULT_DIM.get(role, DEFAULT_DIM["other"])))
            shape.append(symbols[d])
        else:
            shape.append(dims.get(role, DEFAULT_DIM.get(role, DEFAULT_DIM["other"])))
    return tuple(shape)


def draw_inputs(specs: Mapping[str, InputSpec], rng: np.random.Generator, dims: Mapping[str, int],
                ranges: Mapping[str, tuple], given: Optional[Mapping[str, np.ndarray]] = None
                ) -> tuple[dict[str, np.ndarray], list[dict]]:
    """One input set: `given` arrays as they are, the rest random in valid ranges. Returns feeds and a
    description per input (how it was made) for the report."""
    dims = expand_dims(dims)
    given = dict(given or {})
    symbols: dict = {}
    shapes = {name: _shape_of(spec, dims, symbols) for name, spec in specs.items()}
    for name, arr in given.items():  # given arrays fix their symbols for the random ones
        for axis, d in enumerate(specs[name].dims):
            if isinstance(d, str) and axis < np.ndim(arr):
                symbols[d] = np.shape(arr)[axis]
    shapes = {name: _shape_of(spec, dims, symbols) for name, spec in specs.items()}
    for name, arr in given.items():
        shapes[name] = tuple(np.shape(arr))
    for name, arr in given.items():
        _check_given(specs[name], np.asarray(arr), shapes)
    drawn = {n: float(np.prod(shapes[n], dtype=np.float64)) * specs[n].dtype.itemsize for n in specs if n not in given}
    if sum(drawn.values()) > INPUT_LIMIT:
        big = max(drawn, key=drawn.get)
        raise BadInput(f"the random inputs would need {_human(sum(drawn.values()))} ({big} "
                       f"{specs[big].dtype.name}{_shape_text(shapes[big])} alone {_human(drawn[big])}); the limit "
                       f"is {_human(INPUT_LIMIT)}: give smaller sizes with --dim")
    feeds, described = {}, []
    for name, spec in specs.items():
        shape = shapes[name]
        info = {"name": name, "dtype": spec.dtype.name, "shape": list(shape)}
        if name in given:
            feeds[name] = given[name]
            info["from"] = "inputs file"
        elif spec.dtype.kind in "iu":
            if name in ranges:
                lo, hi, why = int(np.ceil(ranges[name][0])), int(np.floor(ranges[name][1])), "--range"
            elif spec.lengths_of is not None:
                src, axis = spec.lengths_of
                lo, hi, why = 1, int(shapes[src][axis]), spec.int_source
            elif spec.int_range is not None:
                (lo, hi), why = spec.int_range, spec.int_source
            else:
                lo, hi, why = 0, 1, "no valid range known (use --range)"
            if hi < lo:
                raise UsageError(f"--range {name}: no integer in [{ranges[name][0]}, {ranges[name][1]}]")
            feeds[name] = rng.integers(lo, hi + 1, size=shape).astype(spec.dtype)
            info.update({"range": [lo, hi], "from": why})
        elif spec.dtype.kind == "b":
            feeds[name] = rng.integers(0, 2, size=shape).astype(bool)
            info.update({"range": [0, 1], "from": "random booleans"})
        else:
            lo, hi = ranges.get(name, (-1.0, 1.0))
            feeds[name] = rng.uniform(lo, hi, size=shape).astype(spec.dtype)
            info.update({"range": [lo, hi], "from": "--range" if name in ranges else "uniform default"})
        described.append(info)
    return feeds, described


def _check_given(spec: InputSpec, arr: np.ndarray, shapes: Mapping[str, tuple]) -> None:
    """Given sequence lengths and token ids must be valid: a wrong value would make any comparison meaningless."""
    if not spec.role or arr.size == 0 or spec.dtype.kind not in "iu":
        return
    if spec.role == "sequence_lens":
        hi = shapes[spec.lengths_of[0]][spec.lengths_of[1]] if spec.lengths_of else spec.int_range[1]
        lo = 0
    else:
        hi = spec.int_range[1]
        lo = -(hi + 1)  # Gather takes negative indices from the end
    if arr.min() < lo or arr.max() > hi:
        shown = arr.reshape(-1)[:8].tolist()
        raise BadInput(f"input {spec.name!r}: {spec.role} must lie in [{lo}, {hi}], got {shown}"
                       + (" ..." if arr.size > 8 else ""))


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} TiB"


def read_inputs(path, specs: Mapping[str, InputSpec]) -> list[dict[str, np.ndarray]]:
    """Input sets from an .npz: keys `NAME` (one set) or `runK/NAME` (several), as --save-inputs writes them."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except Exception as err:
        raise BadInput(f"{path}: not a readable .npz file ({type(err).__name__}: {err})") from err
    sets: dict[int, dict] = {}
    for key, arr in arrays.items():
        run, sep, name = key.partition("/")
        if sep and run.startswith("run") and run[3:].isdigit():
            sets.setdefault(int(run[3:]), {})[name] = arr
        else:
            sets.setdefault(0, {})[key] = arr
    return [check_inputs(sets[k], specs, str(path)) for k in sorted(sets)]


def check_inputs(arrays: Mapping[str, np.ndarray], specs: Mapping[str, InputSpec], where: str
                 ) -> dict[str, np.ndarray]:
    """Given input arrays: known names, the model's rank and static sizes, a compatible dtype (cast to it)."""
    feeds = {}
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if name not in specs:
            raise BadInput(f"{where}: {name!r} is not an input of the reference (inputs: {sorted(specs)})")
        spec = specs[name]
        if spec.dims and len(spec.dims) != arr.ndim:
            raise BadInput(f"{where}: {name!r} has rank {arr.ndim}, the model wants {len(spec.dims)}")
        for axis, d in enumerate(spec.dims):
            if isinstance(d, int) and arr.shape[axis] != d:
                raise BadInput(f"{where}: {name!r} has shape {list(arr.shape)}, axis {axis} must be {d}")
        if spec.dtype.name == "bfloat16" and arr.dtype == np.uint16:
            arr = arr.view(spec.dtype)  # bfloat16 stored as its bit pattern
        elif arr.dtype.kind not in "biuf" and arr.dtype != spec.dtype or (
                arr.dtype.kind == "f" and spec.dtype.kind in "iub"):
            raise BadInput(f"{where}: {name!r} holds {arr.dtype} values, the model wants {spec.dtype}")
        feeds[name] = arr.astype(spec.dtype, copy=False)
    return feeds


# -- engines --------------------------------------------------------------------------------------------------

def can_read(engine: str, model: Model) -> Optional[str]:
    """Why `engine` cannot even read the model's format (None when it can)."""
    if engine == "onnxruntime" and model.format != "onnx":
        return "onnxruntime reads ONNX only"
    return None


def run(engine: str, model: Model, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run `model` in `engine`; every failure is CannotRun with the engine's reason."""
    why = can_read(engine, model)
    if why:
        raise CannotRun(why)
    try:
        if engine == "rnnconv":
            return _run_rnnconv(model, feeds)
        if engine == "onnxruntime":
            return _run_onnxruntime(model, feeds)
        if engine == "openvino":
            return _run_openvino(model, feeds)
    except (CannotRun, BadInput):
        raise  # BadInput: the model or the inputs are malformed (exit 4), whichever engine noticed
    except ImportError as err:
        raise CannotRun(f"{engine} is not installed ({err})") from err
    except Exception as err:  # the engine's own error, kept to one line
        raise CannotRun(_one_line(err)) from err
    raise UsageError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)} or all")


def _one_line(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip() and not ln.strip().startswith("Exception from")]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def _run_rnnconv(model: Model, feeds) -> dict[str, np.ndarray]:
    if model.format == "onnx":
        from rnnconv.engine.graph import run_onnx

        graph = model.onnx.graph
        wanted = {v.name for v in graph.inputs}
        return run_onnx(model.onnx, {k: v for k, v in feeds.items() if k in wanted}, precision="float64")
    from rnnconv.engine.ir_graph import run_ir

    wanted = {s.name for s in _ir_specs(model.graph).values()}
    return run_ir(model.graph, {k: v for k, v in feeds.items() if k in wanted}, "float64")


_ORT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
              "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


def _run_onnxruntime(model: Model, feeds) -> dict[str, np.ndarray]:
    onnx_model = _bfloat16_outputs_as_float32(model.onnx)
    if _has_bfloat16(onnx_model):
        sess = _plain_onnxruntime_session(onnx_model)  # io's session feeds weights as numpy: no bfloat16 there
    else:
        sess = io.onnxruntime_session(onnx_model)
    inputs = {}
    for i in sess.get_inputs():
        if i.name not in feeds:
            continue
        if i.type == "tensor(bfloat16)":  # numpy has no bfloat16 for onnxruntime: hand it the bits
            import onnxruntime as ort

            bits = np.ascontiguousarray(np.asarray(feeds[i.name]).astype(ml_dtypes.bfloat16).view(np.uint16))
            inputs[i.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, int(ir.DataType.BFLOAT16))
            continue
        want = _ORT_TYPES.get(i.type)
        inputs[i.name] = np.asarray(feeds[i.name]).astype(want) if want else feeds[i.name]
    names = [o.name for o in sess.get_outputs()]
    if any(not isinstance(v, np.ndarray) for v in inputs.values()):
        values = sess.run_with_ort_values(None, inputs)
        results = [v.numpy() for v in values]
    else:
        results = sess.run(None, inputs)
    bf16 = {v.name for v in model.onnx.graph.outputs if v.dtype == ir.DataType.BFLOAT16}
    return {n: (r.astype(ml_dtypes.bfloat16) if n in bf16 else r) for n, r in zip(names, results)}


def _has_bfloat16(model: ir.Model) -> bool:
    graph = model.graph
    return any(v.dtype == ir.DataType.BFLOAT16 for v in [*graph.inputs, *graph.initializers.values()])


def _plain_onnxruntime_session(model: ir.Model):
    import onnxruntime as ort

    proto = io.to_proto(model)
    proto.ir_version = min(proto.ir_version, io.onnxruntime_max_ir_version())
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _bfloat16_outputs_as_float32(model: ir.Model) -> ir.Model:
    """onnxruntime's Python API cannot return bfloat16 arrays: a copy whose bfloat16 outputs pass through an exact
    Cast to float32 (the caller rounds them back)."""
    if not any(v.dtype == ir.DataType.BFLOAT16 for v in model.graph.outputs):
        return model
    copy = ir.serde.deserialize_model(io.to_proto(model))
    graph = copy.graph
    for i, v in enumerate(list(graph.outputs)):
        if v.dtype != ir.DataType.BFLOAT16:
            continue
        name = v.name
        v.name = f"{name}.bfloat16"
        out = ir.Value(name=name, shape=v.shape, type=ir.TensorType(ir.DataType.FLOAT))
        graph.append(ir.Node("", "Cast", [v], attributes=[ir.AttrInt64("to", int(ir.DataType.FLOAT))],
                             outputs=[out]))
        graph.outputs[i] = out
    return copy


def _run_openvino(model: Model, feeds) -> dict[str, np.ndarray]:
    import tempfile

    from rnnconv.engine import openvino_runtime

    with tempfile.TemporaryDirectory(prefix="rnnconv-verify-") as tmp:
        if model.path is not None and (model.format != "onnx" or (model.onnx is not None and _saved_as_is(model))):
            ov_model = openvino_runtime.read(model.path)
        elif model.format == "onnx":
            path = Path(tmp) / "model.onnx"
            io.save(model.onnx, path, force=True)
            ov_model = openvino_runtime.read(path)
        else:
            from rnnconv.dialects.openvino import ir as ovir

            xml, _ = ovir.write(model.graph, Path(tmp) / "model.xml")
            ov_model = openvino_runtime.read(xml)
        return openvino_runtime.by_tensor_name(openvino_runtime.infer(ov_model, feeds))


def _saved_as_is(model: Model) -> bool:
    return model.path is not None and model.path.is_file()


# -- where the time axis of each output is (for per-step errors and --plot) ---------------------------------

def time_axes(model: Model) -> dict[str, int]:
    """Outputs that carry a recurrent node's Y (through Transpose/Squeeze/Unsqueeze/Identity/Cast), with the
    axis that is time there."""
    return _onnx_time_axes(model.onnx) if model.format == "onnx" else _ir_time_axes(model.graph)


def _onnx_time_axes(model: ir.Model) -> dict[str, int]:
    from rnnconv.dialects import onnx_recurrent
    from rnnconv.dialects.onnx_recurrent import constant_array

    outputs = {v.name for v in model.graph.outputs}
    found: dict[str, int] = {}

    def follow(value: ir.Value, axis: int, rank: int, depth: int = 0):
        if value is None or depth > 16:
            return
        if value.name in outputs:
            found.setdefault(value.name, axis)
        for node, index in value.uses():
            if index != 0 or not node.outputs:
                continue
            op = node.op_type
            if op in _PASS_THROUGH or op in _ELEMENTWISE_UNARY:
                follow(node.outputs[0], axis, rank, depth + 1)
            elif op in _ELEMENTWISE_BINARY or op == "MatMul":
                # a head (x @ W + b): the time axis stays when the other operand is a constant that
                # broadcasts into x's trailing axes without reaching the time axis
                other = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
                keep = axis <= rank - 3 if op == "MatMul" else axis < rank - (np.ndim(other) if other is not None
                                                                              else rank)
                if other is not None and np.ndim(other) <= 2 and keep:
                    follow(node.outputs[0], axis, rank, depth + 1)
            elif op == "Transpose" and "perm" in node.attributes:
                follow(node.outputs[0], list(node.attributes["perm"].value).index(axis), rank, depth + 1)
            elif op in ("Squeeze", "Unsqueeze"):
                axes = _onnx_axes(node)
                if axes is None:
                    continue
                if op == "Squeeze":
                    axes = sorted({a % rank for a in axes})
                    if axis not in axes:
                        follow(node.outputs[0], axis - sum(a < axis for a in axes), rank - len(axes), depth + 1)
                else:
                    new_rank = rank + len(axes)
                    a = axis
                    for ax in sorted(x % new_rank for x in axes):
                        if ax <= a:
                            a += 1
                    follow(node.outputs[0], a, new_rank, depth + 1)

    for rn in onnx_recurrent.find(model):
        y = rn.outputs.get("Y")
        if y is not None:
            follow(y, 1 if rn.layer.layout else 0, 4)
    return found


def _onnx_axes(node: ir.Node) -> Optional[list[int]]:
    from rnnconv.dialects.onnx_recurrent import constant_array

    if "axes" in node.attributes:
        return [int(a) for a in node.attributes["axes"].value]
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        arr = constant_array(node.inputs[1])
        return None if arr is None else [int(a) for a in np.asarray(arr).reshape(-1)]
    return None


def _ir_time_axes(graph) -> dict[str, int]:
    by_id = graph.by_id()
    consumers: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in graph.edges:
        consumers.setdefault((e.from_layer, e.from_port), []).append((e.to_layer, e.to_port))
    found: dict[str, int] = {}

    def follow(layer, port_id: int, axis: int, depth=0):
        if depth > 16:
            return
        for to_layer, to_port in consumers.get((layer.id, port_id), []):
            nxt = by_id[to_layer]
            if nxt.type == "Result":
                port = next((p for p in layer.outputs if p.id == port_id), None)
                name = port.names[0] if port is not None and port.names else nxt.name
                found.setdefault(name, axis)
            elif not nxt.outputs or to_port != nxt.inputs[0].id:
                continue
            elif nxt.type == "Convert":
                follow(nxt, nxt.outputs[0].id, axis, depth + 1)
            elif nxt.type == "Transpose":
                perm = _ir_const(graph, nxt, 1)
                if perm is not None:
                    follow(nxt, nxt.outputs[0].id, [int(p) for p in np.asarray(perm).reshape(-1)].index(axis),
                           depth + 1)
            elif nxt.type == "Squeeze":
                axes = _ir_const(graph, nxt, 1)
                rank = len(nxt.inputs[0].dims or [])
                if axes is not None and rank:
                    axes = sorted(int(a) % rank for a in np.asarray(axes).reshape(-1))
                    if axis not in axes:
                        follow(nxt, nxt.outputs[0].id, axis - sum(a < axis for a in axes), depth + 1)

    for layer in graph.layers:
        if layer.type in SEQUENCE_OPS and layer.outputs:
            follow(layer, layer.outputs[0].id, 2)  # Y is [N, D, T, H]
    return found


# -- tolerances ---------------------------------------------------------------------------------------------------

def parse_tolerances(items: Iterable[str], option: str) -> tuple[Optional[float], dict[str, float]]:
    """`X` (every output) or `NAME=X` (one output); returns (global, per output)."""
    glob, per = None, {}
    for item in items:
        name, sep, value = str(item).rpartition("=")
        try:
            x = float(value)
        except ValueError:
            raise UsageError(f"{option} {item!r}: expected X or NAME=X") from None
        if x < 0:
            raise UsageError(f"{option} {item!r}: a tolerance must not be negative")
        if sep:
            per[name] = x
        else:
            glob = x
    return glob, per


def _tolerance_for(name: str, dtype, atol, rtol) -> tuple[float, float]:
    floating = dtype is not None and np.dtype(dtype).name in TOLERANCES
    a_def, r_def = default_tolerances(dtype if floating else np.float32)
    a = atol.get(name, atol.get("*", a_def)) if isinstance(atol, Mapping) else (a_def if atol is None else atol)
    r = rtol.get(name, rtol.get("*", r_def)) if isinstance(rtol, Mapping) else (r_def if rtol is None else rtol)
    return float(a), float(r)


# -- the report ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class VerifyReport(Report):
    """The report of `rnnconv verify`: every comparison against the baseline run, per input set."""

    reference: str = ""
    candidate: str = ""
    baseline: str = ""
    engines: dict = dataclasses.field(default_factory=dict)  # side -> engines that ran
    skipped: list = dataclasses.field(default_factory=list)  # engines that could not run a model, and why
    inputs: list = dataclasses.field(default_factory=list)  # per run: how each input was made
    seed: Optional[int] = None
    notes: list = dataclasses.field(default_factory=list)

    def as_dict(self) -> dict:
        d = super().as_dict()
        for key in ("rewrites", "verified", "output"):  # conversion fields: nothing is written here
            d.pop(key, None)
        d.update({"agree": self.ok, "verdict": self.verdict(), "reference": self.reference,
                  "candidate": self.candidate, "baseline": self.baseline, "engines": self.engines,
                  "skipped": self.skipped, "seed": self.seed, "inputs": self.inputs, "notes": self.notes})
        return d

    def lines(self) -> list[str]:
        out = [f"reference: {self.reference}", f"candidate: {self.candidate}"]
        distinct = [d for k, d in enumerate(self.inputs) if d not in self.inputs[:k]]
        for k, described in enumerate(distinct):
            parts = []
            for i in described:
                rng = f" in [{_num(i['range'][0])}, {_num(i['range'][1])}]" if "range" in i else ""
                parts.append(f"{i['name']} {i['dtype']}{_shape_text(i['shape'])}{rng} ({i['from']})")
            runs = f"run {self.inputs.index(described)}" if len(distinct) > 1 else f"{len(self.inputs)} run(s)"
            head = f"inputs ({runs}" + (f", seed {self.seed}" if self.seed is not None else "") + "): "
            out.append(head + "; ".join(parts))
        for s in self.skipped:
            out.append(f"skipped {s['side']}[{s['engine']}]: {s['reason']}")
        for note in self.notes:
            out.append(f"note: {note}")
        width = max((len(o.name) for c in self.checks for o in c.outputs), default=1)
        swidth = max((len(_shape_text(o.shape)) for c in self.checks for o in c.outputs), default=1)
        for c in self.checks:
            out.append(f"{'ok  ' if c.ok else 'FAIL'} {c.subject} vs {self.baseline}" + (f" ({c.note})" if c.note
                                                                                        else ""))
            for o in c.outputs:
                out.append("     " + _output_line(o, width, swidth))
        return out

    def verdict(self) -> str:
        if not self.checks:
            return "nothing compared"
        bad = [c for c in self.checks if not c.ok]
        if not bad:
            return f"agree: {len(self.checks)} comparison(s) within tolerance"
        parts = []
        for c in bad:
            parts.append(f"{c.subject} on {', '.join(o.name for o in c.outputs if not o.ok)}")
        return "DISAGREE: " + "; ".join(parts)


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _output_line(o: OutputComparison, width: int, swidth: int = 0) -> str:
    head = f"{'ok ' if o.ok else 'BAD'} {o.name.ljust(width)} {_shape_text(o.shape).ljust(swidth)}"
    if o.problem and o.worst_index is None:
        return f"{head}  {o.problem}"
    size = int(np.prod(o.shape)) if o.shape else 1
    text = f"{head}  max abs {o.max_abs:.2g}  max rel {o.max_rel:.2g}  mean abs {o.mean_abs:.2g}  bad {o.n_bad}/{size}"
    if o.n_bad:
        text += f" ({100 * o.frac_bad:.1f}%)"
        if o.worst_index is not None and o.ref_value is not None:
            text += f"  worst {_shape_text(o.worst_index)}: {o.cand_value:.6g} vs {o.ref_value:.6g}"
        if o.time_axis is not None and o.max_abs_per_step:
            steps = [t for t, e in enumerate(o.max_abs_per_step) if e > (o.atol or 0)]
            if steps:
                text += f"  steps {_ranges(steps)} of {len(o.max_abs_per_step)}"
        text += f"  (atol {o.atol:g}, rtol {o.rtol:g})"
    if any(o.nan) or any(o.inf):
        text += f"  NaN {o.nan[0]}/{o.nan[1]}, Inf {o.inf[0]}/{o.inf[1]} (reference/candidate)"
    if o.problem:
        text += f"  {o.problem}"
    return text


def _shape_text(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _ranges(steps: list[int]) -> str:
    out, start = [], steps[0]
    for a, b in zip(steps, steps[1:] + [None]):
        if b != a + 1:
            out.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ",".join(out)


# -- the command ----------------------------------------------------------------------------------------------

def _engine_list(value: Optional[str], option: str) -> Optional[list[str]]:
    if value is None:
        return None
    if value == "all":
        return list(ENGINES)
    if value not in ENGINES:
        raise UsageError(f"{option} {value!r}: expected one of {', '.join(ENGINES)} or all")
    return [value]


def compare_models(reference, candidate, *, engine: str = "rnnconv", reference_engine: Optional[str] = None,
                   candidate_engine: Optional[str] = None, seed: int = 0,
                   ranges: Optional[Mapping[str, tuple]] = None, dims: Optional[Mapping[str, int]] = None,
                   inputs=None, runs: Optional[int] = None, atol=None, rtol=None, save_inputs=None,
                   save_outputs=None, plot=None, force: bool = False) -> VerifyReport:
    """Run REFERENCE and CANDIDATE (ONNX or OpenVINO IR, paths or in memory) on the same inputs and compare
    every output by name.

    engine: "rnnconv" (default: spec-exact numpy, float64), "onnxruntime", "openvino" (CPU, f32) or "all"
    (every engine that can run the model) for both sides; reference_engine / candidate_engine override one
    side. Every run is compared with the baseline: the reference in the first of its engines that runs it.
    ranges: input name -> (lo, hi); dims: symbol, "batch"/"seq" or "INPUT:AXIS" -> size; inputs: an .npz
    path or a dict of arrays (missing inputs are drawn); runs: input sets; atol/rtol: a float, or a dict of
    output name -> float ("*" for the others); defaults by the reference output's dtype (TOLERANCES).
    save_inputs / save_outputs (.npz) and plot (.png) are written atomically, never over a model, and over an
    existing file only with force.
    """
    ref, cand = open_model(reference), open_model(candidate)
    written = [Path(p) for p in (save_inputs, save_outputs, plot) if p is not None]
    for out in written:
        given = inputs if isinstance(inputs, (str, os.PathLike)) else None
        io.guard_output(out, force=force, inputs=(ref.path, cand.path, given))
    if len(set(p.resolve() for p in written)) < len(written):
        raise UsageError("--save-inputs, --save-outputs and --plot must name different files")
    ref_engines = _engine_list(reference_engine, "--ref-engine") or _engine_list(engine, "--engine") or ["rnnconv"]
    cand_engines = _engine_list(candidate_engine, "--cand-engine") or _engine_list(engine, "--engine") or ["rnnconv"]
    exploring = {"reference": len(ref_engines) > 1, "candidate": len(cand_engines) > 1}
    specs = merge_specs(ref, cand)
    names = ref.output_names()
    dtypes = ref.output_dtypes()
    for option, tol in (("--atol", atol), ("--rtol", rtol)):
        if isinstance(tol, Mapping):
            unknown = sorted(set(tol) - set(names) - {"*"})
            if unknown:
                raise UsageError(f"{option}: no output named {', '.join(unknown)} (outputs: {', '.join(names)})")
    unknown = sorted(set(ranges or {}) - set(specs))
    if unknown:
        raise UsageError(f"--range: no input named {', '.join(unknown)} (inputs: {', '.join(specs) or 'none'})")
    check_dim_names(dims or {}, specs)
    axes = {**time_axes(cand), **time_axes(ref)}

    if plot is not None:
        _pyplot()  # fail before the runs, not after them
    given_sets: list[dict] = [{}]
    if isinstance(inputs, (str, os.PathLike)):
        given_sets = read_inputs(inputs, specs)
    elif inputs is not None:
        given_sets = [check_inputs(dict(inputs), specs, "inputs")]
    if runs is not None and runs < 1:
        raise UsageError("--runs must be at least 1")
    if runs is not None and len(given_sets) > 1 and runs != len(given_sets):
        raise UsageError(f"--runs {runs}: the inputs file holds {len(given_sets)} input sets")
    n_runs = len(given_sets) if len(given_sets) > 1 else (runs or 1)
    rng = np.random.default_rng(seed)
    report = VerifyReport("verify", reference=ref.describe(), candidate=cand.describe(),
                          seed=seed if any(len(g) < len(specs) for g in given_sets) else None)
    missing = [n for n in names if n not in cand.output_names()]
    if missing:
        report.notes.append(f"the candidate has no output named {', '.join(missing)}")
    saved_inputs, saved_outputs = {}, {}
    active = {"reference": list(ref_engines), "candidate": list(cand_engines)}
    models = {"reference": ref, "candidate": cand}
    baseline = None
    for k in range(n_runs):
        given = given_sets[k] if len(given_sets) > 1 else given_sets[0]
        feeds, described = draw_inputs(specs, rng, dims or {}, ranges or {}, given)
        report.inputs.append(described)
        prefix = f"run{k}/" if n_runs > 1 else ""
        saved_inputs.update({prefix + n: v for n, v in feeds.items()})
        results = {}
        for side in ("reference", "candidate"):
            for eng in list(active[side]):
                try:
                    results[(side, eng)] = run(eng, models[side], feeds)
                except CannotRun as err:
                    if not exploring[side]:
                        raise Unsupported(f"{side} {models[side].label}: {eng} cannot run it: {err} "
                                          f"(see `rnnconv check`, or choose another --engine)") from err
                    active[side].remove(eng)
                    report.skipped.append({"side": side, "engine": eng, "reason": str(err)})
        if baseline is None:
            if not active["reference"]:
                raise Unsupported(f"reference {ref.label}: no engine could run it")
            baseline = ("reference", active["reference"][0])
            report.baseline = f"{baseline[0]}[{baseline[1]}]"
        if baseline not in results:
            raise Unsupported(f"the baseline {report.baseline} could not run input set {k}: "
                              f"{report.skipped[-1]['reason'] if report.skipped else 'unknown reason'}")
        base = results[baseline]
        for (side, eng), outs in results.items():
            saved_outputs.update({f"{prefix}{side}.{eng}/{n}": v for n, v in outs.items() if n in names})
            if (side, eng) == baseline:
                continue
            comparisons = []
            for n in names:
                a, r = _tolerance_for(n, dtypes.get(n), atol, rtol)
                if n not in base:
                    comparisons.append(OutputComparison(n, (), 0.0, 0.0, 0.0, 0, 0.0, None,
                                                        problem=f"{report.baseline} gave no output {n!r}"))
                elif n not in outs:
                    shape = np.shape(base[n])
                    comparisons.append(OutputComparison(n, shape, float("inf"), float("inf"), float("inf"),
                                                        int(np.prod(shape)), 1.0, None, atol=a, rtol=r,
                                                        problem="missing from this run's outputs"))
                else:
                    comparisons.append(compare(n, base[n], outs[n], a, r, time_axis=axes.get(n)))
            subject = f"{side}[{eng}]" + (f" run {k}" if n_runs > 1 else "")
            report.checks.append(Check(subject, f"{side}[{eng}] vs {report.baseline}", comparisons, run=k))
    report.engines = {side: active[side] for side in active}
    if save_inputs is not None:
        _savez(save_inputs, saved_inputs)
    if save_outputs is not None:
        _savez(save_outputs, saved_outputs)
    if plot is not None:
        plot_errors(report, plot)
    return report


def _savez(path, arrays: Mapping[str, np.ndarray]) -> None:
    _write_atomically(Path(path), lambda f: np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()}))


def _write_atomically(out: Path, write: Callable) -> None:
    """`write(file)` into a temporary file beside `out`, then a rename: no partial file is ever left."""
    import tempfile

    folder = out.parent if str(out.parent) else Path(".")
    tmp = None
    try:
        with tempfile.NamedTemporaryFile("wb", dir=folder, prefix=f".{out.name}.", suffix=".tmp",
                                         delete=False) as f:
            tmp = Path(f.name)
            write(f)
        os.replace(tmp, out)
    except OSError as err:
        from rnnconv.errors import IOFailure

        raise IOFailure(f"{out}: cannot write ({err.strerror or err})") from err
    finally:
        if tmp is not None and tmp.exists():
            tmp.unlink()


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'rnnconv[plot]'") from None
    return plt


def plot_errors(report: VerifyReport, path) -> None:
    """Max |error| per time step of each recurrent output, one panel per output (needs matplotlib)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    series: dict[str, list] = {}
    for c in report.checks:
        for o in c.outputs:
            if o.max_abs_per_step:
                series.setdefault(o.name, []).append((c.subject, o))
    n = max(len(series), 1)
    fig, axes = plt.subplots(n, 1, figsize=(7, 2.8 * n), squeeze=False)
    if not series:
        axes[0][0].text(0.5, 0.5, "no output with a time axis", ha="center", va="center")
        axes[0][0].set_axis_off()
    for ax, (name, items) in zip(axes[:, 0], series.items()):
        for subject, o in items:
            errors = np.maximum(np.asarray(o.max_abs_per_step, dtype=float), 1e-12)
            ax.semilogy(range(len(errors)), errors, marker="o", label=f"{subject} vs {report.baseline}")
            ax.axhline(max(o.atol or 0.0, 1e-12), linestyle="--", linewidth=0.8, color="gray")
        ax.set_title(f"{name}: max |error| per time step (axis {items[0][1].time_axis}); dashed: atol")
        ax.set_xlabel("time step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize="small")
    fig.suptitle(report.verdict(), fontsize="small")
    fig.tight_layout()
    try:
        _write_atomically(Path(path), lambda f: fig.savefig(f, dpi=100, format="png"))
    finally:
        plt.close(fig)


def verify(reference, candidate, **kwargs) -> VerifyReport:
    """The public `rnnconv.verify(reference, candidate, ...)`: `compare_models` under the name the API uses."""
    return compare_models(reference, candidate, **kwargs)


class _CallableModule(types.ModuleType):
    """`rnnconv.verify(reference, candidate, ...)` runs `compare_models`, and `rnnconv.verify.Report` etc. stay
    reachable: the public function and this module share one name."""

    def __call__(self, reference, candidate, **kwargs) -> VerifyReport:
        return compare_models(reference, candidate, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
