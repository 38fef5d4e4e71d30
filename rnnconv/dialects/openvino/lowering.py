"""Recurrent layers the opset5 Sequence ops cannot run exactly, as an explicit recurrence: a TensorIterator-1
whose body is one cell step of primitive ops (MatMul, Add, Multiply, Select, activations), for each direction.

Used for what OpenVINO's Sequence ops cannot express (LSTM peepholes, input_forget, activations other than
relu/sigmoid/tanh, an explicit clip of 0) and for sequence_lens with dynamic dims, which the OpenVINO 2026.4 CPU
plugin ignores in GRUSequence/LSTMSequence/RNNSequence (measured: Y past each length is not zeroed and reverse
passes start at T-1; static shapes are right).

Specs: ONNX LSTM / GRU / RNN equations (onnx.ai/onnx/operators/onnx__LSTM.html, __GRU, __RNN); OpenVINO
TensorIterator-1 (port_map: sliced inputs with `axis`, merged inputs with back_edges, concatenated or last-value
outputs) and ReverseSequence-1 (docs.openvino.ai, Operation Specifications).
Sequence lengths: each step is masked with t < sequence_lens (state kept, Y zero past the end); a reverse
direction runs forward over ReverseSequence(X, lens) and reverses Y back, as ONNX reverses each sequence within
its own length.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.dialects.onnx_recurrent import GATES, PEEPHOLES
from rnnconv.dialects.openvino import writer as ov_writer
from rnnconv.dialects.openvino.gates import folded
from rnnconv.dialects.openvino.graph import (
    Edge,
    IRGraph,
    IRLayer,
    Out,
    Pieces,
    Port,
    element_type_of,
)
from rnnconv.errors import Unsupported
from rnnconv.layer import Layer


def _act(b: IRGraph, a, x: Out, dt) -> Out:
    """An ONNX activation (onnx__LSTM "Activation functions" table) in OpenVINO primitive ops."""

    def c(v):
        return b.const(np.array(v, dtype=dt))

    name = a.name
    if name == "Relu":
        return b.op("Relu", x)
    if name == "Tanh":
        return b.op("Tanh", x)
    if name == "Sigmoid":
        return b.op("Sigmoid", x)
    if name == "Affine":
        return b.op("Add", b.op("Multiply", x, c(a.alpha)), c(a.beta))
    if name == "LeakyRelu":
        return b.op("Select", b.op("GreaterEqual", x, c(0)), x, b.op("Multiply", x, c(a.alpha)))
    if name == "ThresholdedRelu":
        return b.op("Select", b.op("Greater", x, c(a.alpha)), x, c(0))
    if name == "ScaledTanh":
        return b.op("Multiply", b.op("Tanh", b.op("Multiply", x, c(a.beta))), c(a.alpha))
    if name == "HardSigmoid":
        return b.op("Clamp", b.op("Add", b.op("Multiply", x, c(a.alpha)), c(a.beta)), min=0.0, max=1.0)
    if name == "Elu":
        neg = b.op("Multiply", b.op("Subtract", b.op("Exp", b.op("Minimum", x, c(0))), c(1)), c(a.alpha))
        return b.op("Select", b.op("GreaterEqual", x, c(0)), x, neg)
    if name == "Softsign":
        return b.op("Divide", x, b.op("Add", b.op("Abs", x), c(1)))
    if name == "Softplus":
        return b.op("SoftPlus", x, version="opset4")
    raise Unsupported(f"activation {name} has no OpenVINO lowering")


def _cell_body(layer: Layer, d: int, I: int, dt, external: bool, fp16: bool) -> tuple[IRGraph, dict]:
    """One step of direction d: Parameters x_t [N,1,I], h [N,H], (c [N,H]), t [1], lens [N] (and, with
    `external`, one invariant Parameter per weight tensor and gate); Results h_next, (c_next), t_next (back edges)
    and y_t [N,1,H] (concatenated). `fp16`: constant weights stored as f16 (IRGraph.weight)."""
    kind, H = layer.kind, layer.hidden_size
    cell = layer.cells[d]
    b = IRGraph("cell")
    ids: dict = {}
    weight_params: dict = {}

    def weight(tensor: str, g: str) -> Out:
        # Constant weights are body Consts; computed ones enter as TensorIterator invariant inputs.
        if not external:
            v = np.asarray(getattr(cell, tensor)[g])
            return b.weight(Pieces([v], v.shape, dt) if v.nbytes >= ov_writer.VIEW_BYTES else np.asarray(v, dtype=dt),
                            fp16)
        if (tensor, g) not in weight_params:
            dims = [H, I] if tensor == "W" else [H, H] if tensor == "R" else [H]
            p = b.parameter(f"{tensor}_{g}", _et(dt), dims)
            p.port.names.clear()
            weight_params[(tensor, g)] = p
            ids[(tensor, g)] = p.layer.id
        return weight_params[(tensor, g)]

    xt = b.parameter("x_t", _et(dt), [-1, 1, I])
    h = b.parameter("h_prev", _et(dt), [-1, H])
    c = b.parameter("c_prev", _et(dt), [-1, H]) if kind == "LSTM" else None
    t = b.parameter("t", "i64", [1])
    lens = b.parameter("lens", "i64", [-1])
    for k, p in (("x", xt), ("h", h), ("c", c), ("t", t), ("lens", lens)):
        if p is not None:
            ids[k] = p.layer.id
            p.port.names.clear()
    x = b.op("Squeeze", xt, b.const(np.array([1], np.int64)))

    def const(v):
        return b.const(np.asarray(v, dtype=dt))

    def clip(v: Out) -> Out:
        if layer.clip is None:
            return v
        return b.op("Clamp", v, min=-float(layer.clip), max=float(layer.clip))

    def proj(g: str) -> Out:
        # Xt*(Wg^T) + Ht-1*(Rg^T) + Wbg + Rbg
        s = b.op("Add", b.op("MatMul", x, weight("W", g), transpose_a=False, transpose_b=True),
                 b.op("MatMul", h, weight("R", g), transpose_a=False, transpose_b=True))
        if not external:
            return b.op("Add", s, b.weight(np.asarray(folded(cell, g), dtype=dt), fp16))
        return b.op("Add", b.op("Add", s, weight("Wb", g)), weight("Rb", g))

    acts = cell.activations
    c_next = None
    if kind == "RNN":
        h_new = _act(b, acts[0], clip(proj("i")), dt)
    elif kind == "GRU":
        f, g = acts
        z = _act(b, f, clip(proj("z")), dt)
        r = _act(b, f, clip(proj("r")), dt)
        xh = b.op("Add", b.op("MatMul", x, weight("W", "h"), transpose_a=False, transpose_b=True),
                  weight("Wb", "h"))
        if layer.linear_before_reset:
            # ht = g(Xt*(Wh^T) + (rt (.) (Ht-1*(Rh^T) + Rbh)) + Wbh)
            hr = b.op("Add", b.op("MatMul", h, weight("R", "h"), transpose_a=False, transpose_b=True),
                      weight("Rb", "h"))
            pre = b.op("Add", xh, b.op("Multiply", r, hr))
        else:
            # ht = g(Xt*(Wh^T) + (rt (.) Ht-1)*(Rh^T) + Rbh + Wbh)
            rh = b.op("MatMul", b.op("Multiply", r, h), weight("R", "h"), transpose_a=False, transpose_b=True)
            pre = b.op("Add", b.op("Add", xh, rh), weight("Rb", "h"))
        hh = _act(b, g, clip(pre), dt)
        # Ht = (1 - zt) (.) ht + zt (.) Ht-1
        h_new = b.op("Add", b.op("Multiply", b.op("Subtract", const(1), z), hh), b.op("Multiply", z, h))
    else:
        f, g, hf = acts
        P = cell.P if layer.has_peepholes else {}

        def peep(v: Out, gate: str, state: Out) -> Out:
            if external and layer.has_peepholes or gate in P and np.any(P[gate]):
                return b.op("Add", v, b.op("Multiply", weight("P", gate), state))
            return v

        i = _act(b, f, clip(peep(proj("i"), "i", c)), dt)
        if layer.input_forget:
            # Coupled gates (onnxruntime, rnnconv's engine): ft = 1 - it.
            fg = b.op("Subtract", const(1), i)
        else:
            fg = _act(b, f, clip(peep(proj("f"), "f", c)), dt)
        cc = _act(b, g, clip(proj("c")), dt)
        # Ct = ft (.) Ct-1 + it (.) ct ; ot sees Po (.) Ct ; Ht = ot (.) h(Ct)
        c_new = b.op("Add", b.op("Multiply", fg, c), b.op("Multiply", i, cc))
        o = _act(b, f, clip(peep(proj("o"), "o", c_new)), dt)
        h_new = b.op("Multiply", o, _act(b, hf, c_new, dt))
    mask = b.op("Unsqueeze", b.op("Less", t, lens), b.const(np.array([1], np.int64)))
    h_next = b.op("Select", mask, h_new, h)
    if kind == "LSTM":
        c_next = b.op("Select", mask, c_new, c)
    y = b.op("Unsqueeze", b.op("Select", mask, h_new, const(0)), b.const(np.array([1], np.int64)))
    t_next = b.op("Add", t, b.const(np.array([1], np.int64)))
    ids["r_h"] = b.result(h_next).id
    if c_next is not None:
        ids["r_c"] = b.result(c_next).id
    ids["r_t"] = b.result(t_next).id
    ids["r_y"] = b.result(y).id
    return b, ids


def _et(dt) -> str:
    return element_type_of(dt)


def tensor_iterator(g: IRGraph, layer: Layer, d: int, x: Out, h0: Out, c0, lens: Out, dt,
                    gate_weights: Optional[dict] = None, fp16: bool = False) -> list[Out]:
    """TensorIterator-1 over x [N,T,I] for direction d run forward: outputs Y [N,T,H], Ho [N,H] (, Co).

    `gate_weights`: {(tensor, gate): Out} for weights computed at run time (invariant inputs)."""
    H = layer.hidden_size
    I = x.dims[2]
    if I is None or I < 0:
        raise Unsupported(f"{layer.kind} node {layer.name!r}: the explicit recurrence needs a static input size")
    body, ids = _cell_body(layer, d, I, dt, gate_weights is not None, fp16)
    ti = IRLayer(len(g.layers), g._unique(f"{layer.name or layer.kind}/TensorIterator_{d}"), "TensorIterator",
                 "opset1")
    g.layers.append(ti)
    t0 = g.const(np.array([0], np.int64))
    sources = [("x", x), ("h", h0)] + ([("c", c0)] if c0 is not None else []) + [("t", t0), ("lens", lens)]
    sources += [(key, gate_weights[key]) for key in ids if isinstance(key, tuple)]
    for port_id, (key, src) in enumerate(sources):
        ti.inputs.append(Port(port_id, src.element_type, None if src.dims is None else list(src.dims)))
        g.edges.append(Edge(src.layer.id, src.port.id, ti.id, port_id))
        pm = {"external_port_id": str(port_id), "internal_layer_id": str(ids[key])}
        if key == "x":
            pm = {"axis": "1", **pm, "start": "0", "end": "-1", "stride": "1", "part_size": "1"}
        ti.port_map.append(("input", pm))
    n, t = x.dims[0], x.dims[1]
    et = x.element_type
    outs = [("r_y", [n, t, H], True), ("r_h", [n, H], False)] + ([("r_c", [n, H], False)] if c0 is not None else [])
    for j, (key, dims, concat) in enumerate(outs):
        port_id = len(sources) + j
        ti.outputs.append(Port(port_id, et, dims))
        pm = {"external_port_id": str(port_id), "internal_layer_id": str(ids[key])}
        if concat:
            pm = {"axis": "1", **pm, "start": "0", "end": "-1", "stride": "1", "part_size": "1"}
        ti.port_map.append(("output", pm))
    ti.back_edges = [{"from-layer": str(ids["r_h"]), "to-layer": str(ids["h"])},
                     {"from-layer": str(ids["r_t"]), "to-layer": str(ids["t"])}]
    if c0 is not None:
        ti.back_edges.insert(1, {"from-layer": str(ids["r_c"]), "to-layer": str(ids["c"])})
    ti.body = body
    return [Out(ti, j) for j in range(len(outs))]


def _gate_weights(g: IRGraph, layer: Layer, onnx_weights: dict, dt, i64, fp16: bool) -> list[dict]:
    """Per direction {(tensor, gate): Out} sliced out of ONNX W [D,G*H,I], R, B [D,2*G*H], P [D,3H] with Split
    (ONNX gate order: LSTM i,o,f,c; GRU z,r,h; peepholes i,o,f)."""
    D, H = layer.num_directions, layer.hidden_size
    gates = GATES[layer.kind]
    out = [{} for _ in range(D)]

    def per_direction(t: Out) -> list[Out]:
        parts = [t] if D == 1 else g.add("Split", [t, i64(0)], {"num_splits": D})
        return [g.op("Squeeze", p, i64([0])) for p in parts]

    for name, names in (("W", [("W", k) for k in gates]), ("R", [("R", k) for k in gates]),
                        ("B", [("Wb", k) for k in gates] + [("Rb", k) for k in gates]),
                        ("P", [("P", k) for k in PEEPHOLES])):
        t = onnx_weights.get(name)
        for d in range(D):
            if t is None:
                if name == "B":
                    for key in names:
                        out[d][key] = g.weight(np.zeros((H,), dtype=dt), fp16)
                continue
            pieces = g.add("Split", [per_direction(t)[d], i64(0)], {"num_splits": len(names)})
            for key, piece in zip(names, pieces):
                out[d][key] = piece
    return out


def lowered_sequence(g: IRGraph, layer: Layer, x_ov: Out, h0: Out, c0, lens: Out, lens_given: bool, dt,
                     i64, onnx_weights: Optional[dict] = None, fp16: bool = False) -> list[Out]:
    """The Sequence op's outputs Y [N,D,T,H], Ho [N,D,H] (, Co) computed by one TensorIterator per direction.

    `onnx_weights`: the ONNX W/R/B/P ports when they are computed at run time (None: use the layer's arrays).
    `fp16`: constant weights stored as f16, decompressed to f32 in the body (as everywhere with --fp16)."""
    D = layer.num_directions
    gate_weights = _gate_weights(g, layer, onnx_weights, dt, i64, fp16) if onnx_weights is not None else [None] * D
    lens64 = g.op("Convert", lens, destination_type="i64") if lens.element_type != "i64" else lens
    one = i64([1])

    def per_direction(state: Out) -> list[Out]:
        if state is None:
            return [None] * D
        parts = [state] if D == 1 else g.add("Split", [state, i64(1)], {"num_splits": 2})
        return [g.op("Squeeze", p, one) for p in parts]

    hs, cs = per_direction(h0), per_direction(c0)
    ys, hos, cos = [], [], []
    reverse_flags = [layer.direction == "reverse"] if D == 1 else [False, True]
    for d, reverse in enumerate(reverse_flags):
        xd = g.op("ReverseSequence", x_ov, lens64, batch_axis=0, seq_axis=1) if reverse else x_ov
        outs = tensor_iterator(g, layer, d, xd, hs[d], cs[d], lens64, dt, gate_weights[d], fp16)
        y = outs[0]
        if reverse:
            y = g.op("ReverseSequence", y, lens64, batch_axis=0, seq_axis=1)
        ho, co = outs[1], (outs[2] if len(outs) > 2 else None)
        if lens_given:
            # An empty sequence gives zero states (onnxruntime), not its initial state.
            nonempty = g.op("Unsqueeze", g.op("Greater", lens64, i64(0)), one)
            zero = g.const(np.array(0, dtype=dt))
            ho = g.op("Select", nonempty, ho, zero)
            co = g.op("Select", nonempty, co, zero) if co is not None else None
        ys.append(g.op("Unsqueeze", y, one))
        hos.append(g.op("Unsqueeze", ho, one))
        if co is not None:
            cos.append(g.op("Unsqueeze", co, one))

    def cat(parts):
        return parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis=1)

    out = [cat(ys), cat(hos)]
    if cos:
        out.append(cat(cos))
    return out
