"""com.microsoft DynamicQuantizeLSTM as OpenVINO ops: onnxruntime's run-time quantization, step by step.

The op (rnnconv.dialects.onnx_quantized) and its kernel as onnxruntime computes it
(rnnconv.engine.op_dynamic_quantize_lstm) say what to build. Per direction:

    XW = float((quantize(X) - zp_x) @ (W - zp_W)) * (scale_x * W_scale)      one quantization over the whole X
    a TensorIterator-1 over t (stride -1 for a reverse direction), one step:
        G = float((quantize(H) - zp_h) @ (R - zp_R)) * (scale_h * R_scale) + XW[t]
        i, o, f, c gates as ONNX LSTM (peepholes, clip, input_forget, activations), bias Wb + Rb added once

quantize(A) is DynamicQuantizeLinear's recipe over the block: lo = min(A, 0), hi = max(A, 0), scale = (hi - lo)
/ 255 (1 when hi = lo), zp = round_half_even(clamp(-lo / scale, 0, 255)), q - zp = round_half_even(clamp(A /
scale, -zp, 255 - zp)). Every float32 operation is onnxruntime's, in its order, so that OpenVINO computes the same
numbers to the bit (measured with OpenVINO 2026.4 on x86-64 with AVX512-VNNI, T up to 50, I 512, H 256, N 5):
- the divisions are IEEE divisions and MLAS's sigmoid and tanh (rational functions, FMA3 or SSE2 kernel as on the
  machine that converts) fuse their multiply-adds, both built from exact float32 steps (`exact`): OpenVINO's
  CPU plugin divides by the reciprocal and never fuses;
- the integer products run as float32 MatMuls of integers: exact while every partial sum stays below 2^24
  (|q - zp| <= 255, |W - zp_W| <= 255: always for input sizes up to 257, and for quantize_dynamic's int8
  weights (|W| <= 127) up to 518; past that, a sum that large is rare and rounds once).
What the IR does not reproduce: on x86-64 CPUs with AVX2 and no VNNI, MLAS saturates u8 x s8 pair sums to int16
(`mlas.mlas_saturates`), the IR computes the exact products (as MLAS with VNNI, AMX or on ARM); onnxruntime
sessions with several threads quantize H per thread's rows of a batch (N > 4, or N >= 2 and H <= 256), the IR
over the whole batch (onnxruntime with one thread); Elu, Softplus and ScaledTanh use OpenVINO's exp, not the C
library's expf; when Y is not requested and some, not all, sequence lengths are 0, onnxruntime quantizes rows of
its H buffer it never initialised (the IR: zeros, as the engine's kernel).
Not lowered (refused naming the node): weights computed at run time.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.dialects import mlas
from rnnconv.dialects import onnx_quantized as dq
from rnnconv.dialects.onnx_recurrent import PEEPHOLES, constant_array
from rnnconv.dialects.openvino import exact
from rnnconv.dialects.openvino.graph import Edge, IRGraph, IRLayer, Out, Port
from rnnconv.dialects.openvino.lowering import _act
from rnnconv.errors import Unsupported

F32 = np.float32


def lowerable(q: dq.QuantizedLSTM) -> list[str]:
    """What keeps the node from being lowered (empty: it can be)."""
    why = []
    if not q.layer.weights_constant:
        why.append("its weights are computed at run time")
    return why


def quantize(b: IRGraph, a: Out) -> tuple[Out, Out]:
    """(q - zp as float32 integers, scale []) of the whole block `a`, onnxruntime's GetQuantizationParameter +
    MlasQuantizeLinear."""

    def c(v):
        return b.const(np.array(v, F32))

    axes = b.const(np.arange(len(a.dims), dtype=np.int64))
    lo = b.op("Minimum", b.op("ReduceMin", a, axes, keep_dims=False), c(0))
    hi = b.op("Maximum", b.op("ReduceMax", a, axes, keep_dims=False), c(0))
    scale = b.op("Select", b.op("Equal", hi, lo), c(1), exact.divide(b, b.op("Subtract", hi, lo), c(255)))
    zp = b.op("Round", b.op("Clamp", b.op("Negative", exact.divide(b, lo, scale)), min=0.0, max=255.0),
              mode="half_to_even", version="opset5")
    v = b.op("Minimum", b.op("Maximum", exact.divide(b, a, scale), b.op("Negative", zp)),
             b.op("Subtract", c(255), zp))
    return b.op("Round", v, mode="half_to_even", version="opset5"), scale


def _horner(b: IRGraph, x2: Out, coefficients, fma: bool) -> Out:
    def c(v):
        return b.const(np.array(v, F32))

    if fma:
        acc = exact.fma(b, x2, c(coefficients[0]), c(coefficients[1]))
        for k in coefficients[2:]:
            acc = exact.fma(b, x2, acc, c(k))
        return acc
    acc = b.op("Add", b.op("Multiply", x2, c(coefficients[0])), c(coefficients[1]))
    for k in coefficients[2:]:
        acc = b.op("Add", b.op("Multiply", acc, x2), c(k))
    return acc


def _activation(b: IRGraph, a, x: Out, fma: bool) -> Out:
    """Sigmoid and Tanh as MLAS computes them (MlasComputeLogistic, MlasComputeTanh: a rational function of the
    clamped input, FMA or SSE2 kernel as on this machine); the other activations as OpenVINO's ops."""
    if a.name not in ("Sigmoid", "Tanh"):
        return _act(b, a, x, F32)  # Elu, Softplus, ScaledTanh: OpenVINO's exp, not expf (a last bit)
    sigmoid = a.name == "Sigmoid"
    bound = 18.0 if sigmoid else 9.0
    v = b.op("Clamp", x, min=-bound, max=bound)
    x2 = b.op("Multiply", v, v)
    p, q = (mlas.LOGISTIC_P, mlas.LOGISTIC_Q) if sigmoid else (mlas.TANH_P, mlas.TANH_Q)
    r = exact.divide(b, b.op("Multiply", v, _horner(b, x2, p, fma)), _horner(b, x2, q, fma))
    if not sigmoid:
        return r
    r = b.op("Add", r, b.const(np.array(0.5, F32)))
    return b.op("Maximum", r, b.const(np.array(0, F32))) if fma else b.op("Clamp", r, min=0.0, max=1.0)


def _integer_weights(q: np.ndarray, zero_point: int) -> np.ndarray:
    """[K, 4H] 8-bit weights less their zero point, as float32 integers."""
    return (q.astype(np.int32) - zero_point).astype(F32)


def _product(b: IRGraph, a: Out, weights: np.ndarray, zero_point: int, weight_scale: np.ndarray) -> Out:
    """float(quantize(a) @ (weights - zero_point)) * (scale_a * weight_scale): rnn::detail::ComputeGemm."""
    qa, scale = quantize(b, a)
    acc = b.op("MatMul", qa, b.const(_integer_weights(weights, zero_point)), transpose_a=False, transpose_b=False)
    return b.op("Multiply", acc, b.op("Multiply", scale, b.const(weight_scale.astype(F32))))


def _body(q: dq.QuantizedLSTM, d: int, arrays: dict, lens: bool) -> tuple[IRGraph, dict]:
    """One step of direction d: Parameters xw_t [N,1,4H], h [N,H], c [N,H]; Results h_next, c_next, y_t
    [N,1,H]. With `lens`, also t [1], lens [N] and the block of H quantized at this step (onnxruntime's H buffer:
    the last step's Y rows, 0 past a row's end, when Y is requested; else each row's state), each step masked
    with t < lens (the state kept, y 0 past the row's end)."""
    layer, H = q.layer, q.layer.hidden_size
    cell = layer.cells[d]
    b = IRGraph("step")
    ids = {}
    xw_t = b.parameter("xw_t", "f32", [-1, 1, 4 * H])
    h = b.parameter("h_prev", "f32", [-1, H])
    c = b.parameter("c_prev", "f32", [-1, H])
    params = [("xw", xw_t), ("h", h), ("c", c)]
    if lens:
        t, lengths, block = b.parameter("t", "i64", [1]), b.parameter("lens", "i64", [-1]), \
            b.parameter("block", "f32", [-1, H])
        params += [("t", t), ("lens", lengths), ("block", block)]
    for key, p in params:
        ids[key] = p.layer.id
        p.port.names.clear()
    rq = dq.quantization("R", arrays["R"], arrays["R_scale"], arrays["R_zero_point"], layer.num_directions, H)
    xw = b.op("Squeeze", xw_t, b.const(np.array([1], np.int64)))
    G = b.op("Add", _product(b, block if lens else h, arrays["R"][d], rq.zero_point[d], rq.scale[d]), xw)
    # G's gates, the bias's and the peepholes' in ONNX's orders
    gates = dict(zip(dq.GATES, b.add("Split", [G, b.const(np.array(1, np.int64))], {"num_splits": len(dq.GATES)})))
    B, P = arrays.get("B"), arrays.get("P")
    bias = None if B is None else (B[d, :4 * H] + B[d, 4 * H:]).astype(F32)  # LoadBias: Wb + Rb, once

    def rows(order: tuple, k: str) -> slice:
        return slice(order.index(k) * H, (order.index(k) + 1) * H)

    def gate(k: str, peephole: bool = False, state: Optional[Out] = None) -> Out:
        # (G + P * C) + (Wb + Rb), then clipped
        pre = gates[k]
        if peephole and P is not None:
            pre = b.op("Add", pre, b.op("Multiply", state, b.const(P[d, rows(PEEPHOLES, k)])))
        if bias is not None:
            pre = b.op("Add", pre, b.const(bias[rows(dq.GATES, k)]))
        if layer.clip is not None:
            pre = b.op("Clamp", pre, min=-float(layer.clip), max=float(layer.clip))
        return pre

    f, g, hf = cell.activations
    fma = mlas.mlas_fma()

    def act(a, x):
        return _activation(b, a, x, fma)

    it = act(f, gate("i", True, c))
    ft = b.op("Subtract", b.const(np.array(1, F32)), it) if layer.input_forget else act(f, gate("f", True, c))
    ct = act(g, gate("c"))
    c_new = b.op("Add", b.op("Multiply", c, ft), b.op("Multiply", it, ct))
    ot = act(f, gate("o", True, c_new))
    h_new = b.op("Multiply", act(hf, c_new), ot)
    y = h_new
    if lens:
        mask = b.op("Unsqueeze", b.op("Less", t, lengths), b.const(np.array([1], np.int64)))
        h_new, c_new = b.op("Select", mask, h_new, h), b.op("Select", mask, c_new, c)
        y = b.op("Select", mask, y, b.const(np.array(0, F32)))
        with_y = q.outputs.get("Y") is not None
        ids["r_block"] = b.result(y if with_y else h_new).id
        ids["r_t"] = b.result(b.op("Add", t, b.const(np.array([1], np.int64)))).id
    ids["r_h"] = b.result(h_new).id
    ids["r_c"] = b.result(c_new).id
    ids["r_y"] = b.result(b.op("Unsqueeze", y, b.const(np.array([1], np.int64)))).id
    return b, ids


def _iterate(g: IRGraph, q: dq.QuantizedLSTM, d: int, xw: Out, h0: Out, c0: Out, reverse: bool,
             arrays: dict, lens: Optional[Out] = None) -> list[Out]:
    """TensorIterator-1 over xw [N,T,4H] (backwards when `reverse`): Y [N,T,H] in time order, Ho, Co [N,H]."""
    H = q.layer.hidden_size
    body, ids = _body(q, d, arrays, lens is not None)
    ti = IRLayer(len(g.layers), g._unique(f"{q.layer.name or 'DynamicQuantizeLSTM'}/TensorIterator_{d}"),
                 "TensorIterator", "opset1")
    g.layers.append(ti)
    walk = {"start": "-1", "end": "0", "stride": "-1"} if reverse else {"start": "0", "end": "-1", "stride": "1"}
    sources = [("xw", xw), ("h", h0), ("c", c0)]
    if lens is not None:
        sources += [("t", g.const(np.array([0], np.int64))), ("lens", lens), ("block", h0)]
    for port_id, (key, src) in enumerate(sources):
        ti.inputs.append(Port(port_id, src.element_type, None if src.dims is None else list(src.dims)))
        g.edges.append(Edge(src.layer.id, src.port.id, ti.id, port_id))
        pm = {"external_port_id": str(port_id), "internal_layer_id": str(ids[key])}
        if key == "xw":
            pm = {"axis": "1", **pm, **walk, "part_size": "1"}
        ti.port_map.append(("input", pm))
    n, t = xw.dims[0], xw.dims[1]
    for j, (key, dims, concat) in enumerate((("r_y", [n, t, H], True), ("r_h", [n, H], False),
                                             ("r_c", [n, H], False))):
        port_id = len(sources) + j
        ti.outputs.append(Port(port_id, "f32", dims))
        pm = {"external_port_id": str(port_id), "internal_layer_id": str(ids[key])}
        if concat:
            pm = {"axis": "1", **pm, **walk, "part_size": "1"}
        ti.port_map.append(("output", pm))
    ti.back_edges = [{"from-layer": str(ids["r_h"]), "to-layer": str(ids["h"])},
                     {"from-layer": str(ids["r_c"]), "to-layer": str(ids["c"])}]
    if lens is not None:
        ti.back_edges += [{"from-layer": str(ids["r_t"]), "to-layer": str(ids["t"])},
                          {"from-layer": str(ids["r_block"]), "to-layer": str(ids["block"])}]
    ti.body = body
    return [Out(ti, j) for j in range(3)]


def lower(g: IRGraph, q: dq.QuantizedLSTM, x: Out, initial_h: Optional[Out], initial_c: Optional[Out],
          i64, sequence_lens: Optional[Out] = None) -> list[Optional[Out]]:
    """The node's outputs (Y [T,D,N,H], Y_h, Y_c [D,N,H]) from X [T,N,I], the initial states (None: zeros) and
    sequence_lens (None: whole sequences). With lengths, as onnxruntime: X[0:L] quantized, L = max(sequence_lens);
    L steps; a reverse direction reverses each sequence within its length; Y zero past each length and padded
    back to T; Y_h, Y_c of an empty sequence 0."""
    why = lowerable(q)
    if why:
        raise Unsupported(f"{dq.OP} node {q.name!r}: {'; '.join(why)}: the OpenVINO lowering of the op handles "
                          "constant weights", fixes=("dequantize",))
    layer, D, H = q.layer, q.layer.num_directions, q.layer.hidden_size
    arrays = {k: constant_array(q.inputs.get(k)) for k in ("W", "R", "B", "P") + dq.QUANTIZATION}
    if x.dims is None or len(x.dims) != 3 or x.dims[2] < 0:
        raise Unsupported(f"{dq.OP} node {q.name!r}: X must be 3-D with a static input size")
    wq = dq.quantization("W", arrays["W"], arrays["W_scale"], arrays["W_zero_point"], D, H)
    x_ov = g.op("Transpose", x, i64([1, 0, 2]))  # [N, T, I]

    def states(given: Optional[Out]) -> list[Out]:
        if given is None:
            batch = g.op("Gather", g.op("ShapeOf", x_ov, output_type="i64", version="opset3"), i64([0]), i64(0),
                         batch_dims=0, version="opset8")
            zeros = g.add("Broadcast", [g.const(np.zeros((), F32)), g.op("Concat", batch, i64([H]), axis=0)],
                          {"mode": "numpy"}, version="opset3", outputs=[("f32", [x_ov.dims[0], H])])[0]
            return [zeros] * D
        parts = [given] if D == 1 else g.add("Split", [given, i64(0)], {"num_splits": D})
        return [g.op("Squeeze", p, i64([0])) for p in parts]

    hs, cs = states(initial_h), states(initial_c)
    ys, hos, cos = [], [], []
    reverse = [layer.direction == "reverse"] if D == 1 else [False, True]
    lens = longest = None
    x_used = x_ov
    if sequence_lens is not None:
        lens = g.op("Convert", sequence_lens, destination_type="i64")
        longest = g.op("ReduceMax", lens, i64([0]), keep_dims=True)
        x_used = g.op("Slice", x_ov, i64([0]), longest, i64([1]), i64([1]), version="opset8")  # X[:, 0:L]
    for d in range(D):
        xw = _product(g, x_used, arrays["W"][d], wq.zero_point[d], wq.scale[d])  # [N, T or L, 4H]
        if lens is None:
            y, ho, co = _iterate(g, q, d, xw, hs[d], cs[d], reverse[d], arrays)
        else:
            if reverse[d]:  # each row's own steps reversed (the same rows of XW as of X), its padding in place
                xw = g.op("ReverseSequence", xw, lens, batch_axis=0, seq_axis=1)
            y, ho, co = _iterate(g, q, d, xw, hs[d], cs[d], False, arrays, lens)
            if reverse[d]:
                y = g.op("ReverseSequence", y, lens, batch_axis=0, seq_axis=1)
            T = g.op("Gather", g.op("ShapeOf", x_ov, output_type="i64", version="opset3"), i64([1]), i64(0),
                     batch_dims=0, version="opset8")
            pads = g.op("Concat", i64([0]), g.op("Subtract", T, longest), i64([0]), axis=0)
            y = g.add("Pad", [y, i64([0, 0, 0]), pads, g.const(np.zeros((), F32))], {"pad_mode": "constant"},
                      outputs=[("f32", [x_ov.dims[0], x_ov.dims[1], H])])[0]
            nonempty = g.op("Unsqueeze", g.op("Greater", lens, i64(0)), i64([1]))
            zero = g.const(np.zeros((), F32))
            ho, co = g.op("Select", nonempty, ho, zero), g.op("Select", nonempty, co, zero)
        ys.append(g.op("Unsqueeze", y, i64([1])))
        hos.append(g.op("Unsqueeze", ho, i64([0])))
        cos.append(g.op("Unsqueeze", co, i64([0])))

    def cat(parts, axis):
        return parts[0] if len(parts) == 1 else g.op("Concat", *parts, axis=axis)

    Y = g.op("Transpose", cat(ys, 1), i64([2, 1, 0, 3]))  # [N, D, T, H] -> [T, D, N, H]
    outs = {"Y": Y, "Y_h": cat(hos, 0), "Y_c": cat(cos, 0)}
    return [outs[name] if q.outputs.get(name) is not None else None for name in dq.OUTPUTS][:len(q.node.outputs)]

