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

import numpy as np

from rnnconv.dialects.openvino.ir import IRGraph, IRLayer, Out, Port
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


def _cell_body(layer: Layer, d: int, I: int, dt) -> tuple[IRGraph, dict[str, int]]:
    """One step of direction d: Parameters x_t [N,1,I], h [N,H], (c [N,H]), t [1], lens [N];
    Results h_next, (c_next), t_next (back edges) and y_t [N,1,H] (concatenated)."""
    kind, H = layer.kind, layer.hidden_size
    cell = layer.cells[d]
    b = IRGraph("cell")
    ids = {}
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

    def proj(g: str, with_rb: bool = True) -> Out:
        # Xt*(Wg^T) + Ht-1*(Rg^T) + Wbg + Rbg
        s = b.op("Add", b.op("MatMul", x, const(cell.W[g]), transpose_a=False, transpose_b=True),
                 b.op("MatMul", h, const(cell.R[g]), transpose_a=False, transpose_b=True))
        bias = cell.Wb[g] + (cell.Rb[g] if with_rb else 0)
        return b.op("Add", s, const(bias))

    acts = cell.activations
    c_next = None
    if kind == "RNN":
        h_new = _act(b, acts[0], clip(proj("i")), dt)
    elif kind == "GRU":
        f, g = acts
        z = _act(b, f, clip(proj("z")), dt)
        r = _act(b, f, clip(proj("r")), dt)
        xh = b.op("Add", b.op("MatMul", x, const(cell.W["h"]), transpose_a=False, transpose_b=True),
                  const(cell.Wb["h"]))
        if layer.linear_before_reset:
            # ht = g(Xt*(Wh^T) + (rt (.) (Ht-1*(Rh^T) + Rbh)) + Wbh)
            hr = b.op("Add", b.op("MatMul", h, const(cell.R["h"]), transpose_a=False, transpose_b=True),
                      const(cell.Rb["h"]))
            pre = b.op("Add", xh, b.op("Multiply", r, hr))
        else:
            # ht = g(Xt*(Wh^T) + (rt (.) Ht-1)*(Rh^T) + Rbh + Wbh)
            rh = b.op("MatMul", b.op("Multiply", r, h), const(cell.R["h"]), transpose_a=False, transpose_b=True)
            pre = b.op("Add", b.op("Add", xh, rh), const(cell.Rb["h"]))
        hh = _act(b, g, clip(pre), dt)
        # Ht = (1 - zt) (.) ht + zt (.) Ht-1
        h_new = b.op("Add", b.op("Multiply", b.op("Subtract", const(1), z), hh), b.op("Multiply", z, h))
    else:
        f, g, hf = acts
        P = cell.P if layer.has_peepholes else {}

        def peep(v: Out, gate: str, state: Out) -> Out:
            if gate in P and np.any(P[gate]):
                return b.op("Add", v, b.op("Multiply", const(P[gate]), state))
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
    from rnnconv.dialects.openvino.ir import element_type_of

    return element_type_of(dt)


def tensor_iterator(g: IRGraph, layer: Layer, d: int, x: Out, h0: Out, c0, lens: Out, dt) -> list[Out]:
    """TensorIterator-1 over x [N,T,I] for direction d run forward: outputs Y [N,T,H], Ho [N,H] (, Co)."""
    if not layer.weights_constant:
        raise Unsupported(f"{layer.kind} node {layer.name!r}: lowering to a TensorIterator needs constant weights "
                          "(W/R/B/P are computed at run time here); make them initializers")
    H = layer.hidden_size
    I = x.dims[2]
    body, ids = _cell_body(layer, d, I, dt)
    ti = IRLayer(len(g.layers), g._unique(f"{layer.name or layer.kind}/TensorIterator_{d}"), "TensorIterator",
                 "opset1")
    g.layers.append(ti)
    t0 = g.const(np.array([0], np.int64))
    sources = [("x", x), ("h", h0)] + ([("c", c0)] if c0 is not None else []) + [("t", t0), ("lens", lens)]
    from rnnconv.dialects.openvino.ir import Edge

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


def lowered_sequence(g: IRGraph, layer: Layer, x_ov: Out, h0: Out, c0, lens: Out, lens_given: bool, dt,
                     i64) -> list[Out]:
    """The Sequence op's outputs Y [N,D,T,H], Ho [N,D,H] (, Co) computed by one TensorIterator per direction."""
    D = layer.num_directions
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
        outs = tensor_iterator(g, layer, d, xd, hs[d], cs[d], lens64, dt)
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
