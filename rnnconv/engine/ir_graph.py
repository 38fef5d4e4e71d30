"""An interpreter of OpenVINO IR, with OpenVINO's semantics (not ONNX's): the operations rnnconv emits and those
real models' IR holds, If / Loop / TensorIterator included. Each layer runs the kernel of its type's entry in the
dialect's registry (`registry.IR_OPS`): elementwise and data movement in `ir_basic`, network layers in `ir_nn`,
the rest of what OpenVINO's importers write in `ir_more`, the recurrent and control flow layers here.

Each kernel follows its page in the OpenVINO operation specs (docs.openvino.ai, Operation Specifications);
the Sequence ops split OpenVINO's tensors (fico gate order, folded bias, batch-major [N,D,T,H] Y, GRU
linear_before_reset 4H bias) back into gate names and call the shared recurrence core.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Union

import numpy as np

from rnnconv.dialects.openvino import (
    gates as ov_gates,  # activations and op names only: see _SPEC_ORDER
)
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino import registry
from rnnconv.dialects.openvino.registry import kernel
from rnnconv.engine import ir_basic, ir_more, ir_nn  # noqa: F401  (they register their kernels)
from rnnconv.engine.ir_nn import _flag
from rnnconv.engine.recurrence import run_direction
from rnnconv.errors import BadInput, Unsupported

PRECISIONS = {"float64": np.float64, "float32": np.float32}

# IR type -> kernel, read from each type's registry entry: ir_basic's (elementwise, data movement), ir_nn's
# (convolutions, pooling, resizing, normalization...), ir_more's and the recurrent and control flow ones here.
KERNELS = registry.Functions("kernel")


def run_ir(graph: Union[ovir.IRGraph, str, os.PathLike], feeds: Mapping[str, np.ndarray],
           precision: str = "float64", *, keep: bool = False) -> dict[str, np.ndarray]:
    """Run an IR graph (or an .xml path); returns each Result's value under its tensor name.

    Floating-point tensors are computed in `precision`. `keep=True` returns every named tensor too.
    """
    if not isinstance(graph, ovir.IRGraph):
        graph = ov_reader.read(Path(graph))
    fdt = np.dtype(PRECISIONS[precision])
    return _execute(graph, feeds, fdt, keep)[0]


def _float(x, fdt):
    x = np.asarray(x)
    return x.astype(fdt, copy=False) if ovir.is_float(x.dtype) else x


def _execute(graph: ovir.IRGraph, feeds, fdt, keep=False, *, inner: dict | None = None):
    """(values by tensor name, values by (layer id, port id)); `inner` feeds a body's Parameters by layer id."""
    producers = graph.producers()
    result_names = dict(zip((r.id for r in graph.results()), graph.output_names()))
    computed: dict[tuple[int, int], np.ndarray] = {}
    outputs: dict[str, np.ndarray] = {}
    for layer in graph.topological():
        args = []
        for p in layer.inputs:
            src = producers.get((layer.id, p.id))
            if src is None:
                raise BadInput(f"IR layer {layer.name!r} input port {p.id} is not connected")
            if src not in computed:
                raise BadInput(f"IR edge into layer {layer.name!r} port {p.id} comes from output port {src[1]} of "
                               f"layer {src[0]}, which it does not have")
            arg = computed[src]
            if isinstance(arg, ovir.Pieces) and layer.type not in _TAKES_PIECES:
                arg = computed[src] = np.asarray(arg)  # joined once, for the kernels that compute on arrays
            args.append(arg)
        if layer.type == "Parameter":
            if inner is not None and layer.id in inner:
                value = inner[layer.id]
            else:
                name = ovir.parameter_name(layer)
                if name not in feeds:
                    raise BadInput(f"no value fed for IR Parameter {name!r}")
                value = np.asarray(feeds[name])
                want = ovir.numpy_dtype(layer.attrs.get("element_type", layer.outputs[0].element_type))
                value = value.astype(want) if not ovir.is_float(want) else value
            results = [_float(value, fdt)]
        elif layer.type == "Const" and isinstance(layer.value, ovir.Pieces):
            # Lazy: a Sequence op reads its weights gate by gate where they lie (memory-mapped, for big models).
            results = [layer.value.astype(fdt) if ovir.is_float(layer.value.dtype) else layer.value]
        elif layer.type == "Const":
            results = [_float(layer.value, fdt)]
        elif layer.type == "Result":
            outputs[result_names[layer.id]] = args[0]
            computed[(layer.id, -1)] = args[0]
            continue
        else:
            entry = registry.find(layer.type)
            fn = entry.kernel if entry is not None else None
            if not callable(fn):
                raise Unsupported(f"IR layer {layer.name!r}: the interpreter has no kernel for {layer.type}")
            results = fn(layer, args, fdt)
            if not isinstance(results, (list, tuple)):
                results = [results]
        for port, value in zip(layer.outputs, results):
            computed[(layer.id, port.id)] = value
            if keep:
                for n in port.names:
                    outputs.setdefault(n, value)
    return outputs, computed


# -- recurrent ---------------------------------------------------------------------------------------------
# Gate order and bias layout restated from the OpenVINO spec pages on purpose, not imported from the writer's
# dialect table: a wrong table must make the writer and this interpreter disagree, or verification proves nothing.
_SPEC_ORDER = {"LSTM": ("f", "i", "c", "o"), "GRU": ("z", "r", "h"), "RNN": ("i",)}


_TAKES_PIECES = frozenset(ov_gates.SEQUENCES)


def _gate_blocks(value, d: int, n: int) -> tuple[list, list]:
    """Direction d of a stacked weight [D, n*H, K] as n gate blocks [H, K], and the memory-mapped views read.

    Pieces laid out one piece per gate (to-openvino's reordered weights) give the pieces themselves: a big
    model's weights are never joined into a new array."""
    if isinstance(value, ovir.Pieces):
        one = value[d:d + 1]
        if isinstance(one, ovir.Pieces) and len(one.parts) == n and all(p.size * n == one.size for p in one.parts):
            shape = (one.shape[1] // n, *one.shape[2:])
            return [p.reshape(shape).astype(one.dtype, copy=False) for p in one.parts], one.parts
        value = np.asarray(value)
    return np.split(np.asarray(value[d]), n), []


def _split_spec(kind, W, R, B, lbr):
    """W, R: gate blocks in spec order; B [G*H] (GRU lbr: [4H] = Wbz+Rbz, Wbr+Rbr, Wbh, Rbh) -> gate dicts W,
    R, Wb, Rb."""
    order = _SPEC_ORDER[kind]
    Wd = dict(zip(order, W))
    Rd = dict(zip(order, R))
    if kind == "GRU" and lbr:
        bz, br, wbh, rbh = np.split(B, 4)
        return Wd, Rd, {"z": bz, "r": br, "h": wbh}, {"h": rbh}
    return Wd, Rd, dict(zip(order, np.split(B, len(order)))), {}


@kernel(*ov_gates.SEQUENCES)
def _sequence(layer, a, fdt):
    """LSTMSequence-5, GRUSequence-5, RNNSequence-5 (OpenVINO spec pages of the same names).

    Inputs X [N,T,I], H0 [N,D,H] (, C0 [N,D,H]), sequence_lengths [N], W [D,G*H,I], R [D,G*H,H], B [D,G*H]
    (GRU linear_before_reset: [D,4H]); outputs Y [N,D,T,H], Ho [N,D,H] (, Co [N,D,H]).
    """
    kind = ov_gates.SEQUENCES[layer.type]
    if kind == "LSTM":
        X, H0, C0, lens, W, R, B = a
    else:
        X, H0, lens, W, R, B = a
        C0 = None
    lbr = _flag(layer, "linear_before_reset")
    direction = layer.attrs.get("direction", "forward")
    acts = ov_gates.activations_from_attrs(kind, layer.attrs)
    clip = float(layer.attrs.get("clip", "0") or 0)
    N = X.shape[0]
    lens = np.asarray(lens).astype(np.int64)
    if lens.size == 1 and N != 1:
        lens = np.broadcast_to(lens, (N,))
    Xt = np.transpose(X, (1, 0, 2))
    ys, hs, cs = [], [], []
    reverse_flags = [direction == "reverse"] if direction != "bidirectional" else [False, True]
    n = len(_SPEC_ORDER[kind])
    B = np.asarray(B)
    for d, reverse in enumerate(reverse_flags):
        (Wg, w_read), (Rg, r_read) = _gate_blocks(W, d, n), _gate_blocks(R, d, n)
        Wd, Rd, Wb, Rb = _split_spec(kind, Wg, Rg, B[d], lbr)
        Y, Yh, Yc = run_direction(
            kind, Xt, Wd, Rd, Wb, Rb, {}, acts, clip=clip if clip > 0 else None, linear_before_reset=lbr,
            input_forget=False, sequence_lens=lens, initial_h=H0[:, d], initial_c=None if C0 is None else C0[:, d],
            reverse=reverse, dtype=fdt)
        for weights, read in ((W, w_read), (R, r_read)):  # resident one direction at a time
            for part in read:
                weights.release(part)
        ys.append(np.transpose(Y, (1, 0, 2)))  # [N,T,H]
        hs.append(Yh)
        cs.append(Yc)
    out = [np.stack(ys, axis=1).astype(fdt), np.stack(hs, axis=1).astype(fdt)]
    if kind == "LSTM":
        out.append(np.stack(cs, axis=1).astype(fdt))
    return out


@kernel(*ov_gates.CELLS)
def _cell(layer, a, fdt):
    """LSTMCell-1/4, GRUCell-3, RNNCell-0 (OpenVINO spec pages of the same names): one step.

    Inputs X [N,I], H [N,H] (, C [N,H]), W [G*H,I], R [G*H,H], B [G*H] (GRU linear_before_reset: [4H]); outputs
    Ho [N,H] (, Co [N,H]).
    """
    kind = ov_gates.CELLS[layer.type]
    n_state = 2 if kind == "LSTM" else 1
    X, states, (W, R, B) = a[0], a[1:1 + n_state], a[1 + n_state:4 + n_state]
    lbr = _flag(layer, "linear_before_reset")
    n = len(_SPEC_ORDER[kind])
    Wd, Rd, Wb, Rb = _split_spec(kind, np.split(np.asarray(W), n), np.split(np.asarray(R), n), np.asarray(B), lbr)
    clip = float(layer.attrs.get("clip", "0") or 0)
    acts = ov_gates.activations_from_attrs(kind, layer.attrs)
    _, Yh, Yc = run_direction(kind, X[None], Wd, Rd, Wb, Rb, {}, acts, clip=clip if clip > 0 else None,
                              linear_before_reset=lbr, sequence_lens=None, initial_h=states[0],
                              initial_c=states[1] if kind == "LSTM" else None, dtype=fdt)
    return [Yh.astype(fdt)] + ([Yc.astype(fdt)] if kind == "LSTM" else [])


@kernel("TensorIterator", "Loop")
def _loop(layer, args, fdt):
    """TensorIterator-1 and Loop-5: inputs with `axis` are sliced per iteration (part_size items; stride -1 walks
    from the end), inputs with a back edge start from the outer value and then take the body Result the edge
    names, the others are fed as they are; outputs with `axis` are concatenated over the iterations (in reverse
    for stride -1), the others give the last iteration's value. TensorIterator runs once per slice; Loop while
    the iteration is below trip_count (negative: no bound) and the condition holds (the execution_condition
    input, then the body's execution_condition output), its current_iteration Parameter fed the iteration."""
    body = layer.body
    inputs = [pm for kind, pm in layer.port_map if kind == "input"]
    outs = [pm for kind, pm in layer.port_map if kind == "output" and not pm.get("purpose")]
    special = {pm.get("purpose"): int(pm["internal_layer_id"]) for kind, pm in layer.port_map if pm.get("purpose")}
    back = {int(be["to-layer"]): int(be["from-layer"]) for be in layer.back_edges}
    port_index = {p.id: i for i, p in enumerate(layer.inputs)}

    def outer(pm):
        return args[port_index[int(pm["external_port_id"])]]

    sliced = [(int(pm["internal_layer_id"]), outer(pm), pm) for pm in inputs if "axis" in pm]
    state = {int(pm["internal_layer_id"]): outer(pm) for pm in inputs if "axis" not in pm and not pm.get("purpose")}
    n_slices = None
    for _, value, pm in sliced:
        n = value.shape[int(pm["axis"]) % value.ndim] // abs(int(pm.get("part_size", "1")))
        n_slices = n if n_slices is None else min(n_slices, n)
    if layer.type == "Loop":
        trip = int(np.asarray(args[0]).reshape(-1)[0])
        limit = trip if trip >= 0 else n_slices
        go = bool(np.asarray(args[1]).reshape(-1)[0])
    else:
        if n_slices is None:
            raise Unsupported(f"IR layer {layer.name!r}: TensorIterator without a sliced input")
        limit, go = n_slices, True
    collected: dict[int, list] = {int(pm["internal_layer_id"]): [] for pm in outs}
    it = 0
    while go and (limit is None or it < limit):
        feed = dict(state)
        for lid, value, pm in sliced:
            ax = int(pm["axis"]) % value.ndim
            size = int(pm.get("part_size", "1"))
            i = it if int(pm.get("stride", "1")) > 0 else n_slices - 1 - it
            index = [slice(None)] * value.ndim
            index[ax] = slice(i * size, (i + 1) * size)
            feed[lid] = value[tuple(index)]
        if "current_iteration" in special:
            param = next(p for p in body.layers if p.id == special["current_iteration"])
            port = param.outputs[0]
            feed[param.id] = np.array(it, ovir.numpy_dtype(port.element_type)).reshape(port.dims or ())
        computed = _execute(body, {}, fdt, inner=feed)[1]
        results = {res.id: computed[(res.id, -1)] for res in body.results()}
        for lid in collected:
            collected[lid].append(results[lid])
        for to_layer, from_layer in back.items():
            state[to_layer] = results[from_layer]
        if "execution_condition" in special:
            go = bool(np.asarray(results[special["execution_condition"]]).reshape(-1)[0])
        it += 1
    values = []
    for pm in outs:
        parts = collected[int(pm["internal_layer_id"])]
        if "axis" in pm:
            if int(pm.get("stride", "1")) < 0:
                parts = parts[::-1]
            values.append(np.concatenate(parts, axis=int(pm["axis"])))
        else:
            values.append(parts[-1])
    by_port = {int(pm["external_port_id"]): v for pm, v in zip(outs, values)}
    return [by_port[p.id] for p in layer.outputs]


@kernel("If")
def _if(layer, args, fdt):
    """If-8: the branch the condition selects (then_body when true), its Parameters fed the inputs its port_map
    names, each output the branch Result its port_map names."""
    branch = "then" if bool(np.asarray(args[0]).reshape(-1)[0]) else "else"
    body, port_map = layer.branches[branch]
    index = {p.id: i for i, p in enumerate(layer.inputs)}
    feed = {int(pm["internal_layer_id"]): args[index[int(pm["external_port_id"])]] for kind, pm in port_map
            if kind == "input"}
    computed = _execute(body, {}, fdt, inner=feed)[1]
    results = {int(pm["external_port_id"]): computed[(int(pm["internal_layer_id"]), -1)] for kind, pm in port_map
               if kind == "output"}
    return [results[p.id] for p in layer.outputs]

