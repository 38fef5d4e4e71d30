"""ONNX graph (onnx_ir) -> OpenVINO IR graph: recurrent nodes as opset5 Sequence ops, the rest by `ops.TABLE`.

Recurrent mapping (ONNX LSTM/GRU/RNN, onnx.ai/onnx/operators/onnx__LSTM.html etc.; OpenVINO LSTMSequence-5,
GRUSequence-5, RNNSequence-5): X [T,N,I] (layout 0) is transposed to [N,T,I], states [D,N,H] to [N,D,H], Y comes
back from [N,D,T,H] to the source layout; W/R are reordered to OpenVINO's gate order and B folded
(see `gates`); absent inputs become zeros / full lengths. Constructs the Sequence ops cannot express are never
dropped: different activations per direction become two single-direction ops and a Concat (so do bidirectional
layers past SPLIT_BYTES of weights, see there); peepholes,
input_forget, other activations, clip 0 (and sequence_lens with dynamic dims, which OpenVINO's CPU plugin ignores)
become an explicit recurrence (`lowering`); what neither can do raises `Unsupported` naming node, construct, why.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.dialects.openvino import gates, lowering, ops, quantized
from rnnconv.dialects.openvino import writer as ov_writer
from rnnconv.dialects.openvino.graph import (
    IRGraph,
    Out,
    Pieces,
    element_type_of,
    numpy_dtype,
)
from rnnconv.errors import BadInput, Unsupported, human_size

# Bidirectional layers whose W and R pass this many bytes are written as their two directions: OpenVINO's CPU
# plugin runs one direction per op, and splitting a bidirectional op's constant weights when it compiles copies
# them all (measured with OpenVINO 2026.4 on a 1 GB LSTM: 1 GB more peak memory, about 25% more compile time).
SPLIT_BYTES = 64 << 20
STATE_CONST_ELEMENTS = 1 << 24  # zero states and full lengths up to this size are constants, larger ones broadcast
QUANTIZED_OP = f"{onnx_quantized.DOMAIN}.{onnx_quantized.OP}"


@dataclasses.dataclass
class Conversion:
    graph: IRGraph
    rewrites: list[dict]
    recurrent: list[onnx_recurrent.RecurrentNode]


def _ir_dims(value: ir.Value) -> Optional[list[int]]:
    if value.shape is None:
        return None
    return [d if isinstance(d, int) else -1 for d in value.shape]


def _element_type(value: ir.Value, where: str) -> str:
    if value.dtype is None:
        raise BadInput(f"{where}: value {value.name!r} has no element type")
    try:
        return element_type_of(value.dtype.numpy())
    except Exception:
        raise Unsupported(f"{where}: element type {value.dtype.name} of {value.name!r} has no OpenVINO IR "
                          "counterpart rnnconv writes (use float32)") from None


class OtherOpUnsupported(Unsupported):
    """rnnconv's own writer cannot map a node that is not recurrent (run-time Pad pads...); OpenVINO's ONNX import
    converts such nodes, with every recurrent node still mapped by rnnconv."""


def check_supported(model: ir.Model) -> list[onnx_recurrent.RecurrentNode]:
    """Every reason the model cannot be converted, raised at once; else its recurrent nodes."""
    problems = []
    bad_ops = [op for op in ops.unsupported_ops(model) if op != QUANTIZED_OP]
    if bad_ops:
        problems.append(f"op type(s) with no OpenVINO mapping: {', '.join(bad_ops)}")
    recurrent = onnx_recurrent.find(model)
    if problems:
        raise Unsupported(
            "cannot convert to OpenVINO IR without changing the numbers: " + " | ".join(problems)
            + ". What would work: keep these nodes in ONNX (onnxruntime runs them exactly), or change the source "
              "model to drop the construct and re-verify its accuracy.")
    return recurrent


def _peepholes_zero(rn) -> Optional[bool]:
    if rn.op != "LSTM" or not rn.layer.has_peepholes:
        return True
    if not rn.layer.weights_constant:
        return None
    return all(not np.any(c.P[g]) for c in rn.layer.cells for g in c.P)


def _inexpressible(rn) -> list[str]:
    return gates.inexpressible(rn.layer, _peepholes_zero(rn))


def _splittable(rn) -> bool:
    """Only different (but individually expressible) activations per direction: split into two ops."""
    why = _inexpressible(rn)
    if len(why) != 1 or not why[0].startswith("different activations per direction"):
        return False
    return True


def to_ir_graph(model: ir.Model, *, fp16: bool = False,
                release: Optional[Callable[[np.ndarray], None]] = None) -> Conversion:
    """The IR graph of `model`; its big weights are `Pieces` (views of the source) that call `release(view)`
    on each source view once read (to_openvino passes rnnconv.io.release_pages)."""
    recurrent = check_supported(model)
    by_node = {id(rn.node): rn for rn in recurrent}
    shared = _shared_x(recurrent)
    opset = onnx_recurrent.default_opset(model)
    g = IRGraph(model.graph.name or "model")
    ctx = ops.Context(g, opset)
    rewrites: list[dict] = []
    initializers = model.graph.initializers

    for value in model.graph.inputs:
        if value.name in initializers:
            continue
        ctx.values[value.name] = g.parameter(value.name, _element_type(value, "graph input"), _ir_dims(value))
    for name, value in initializers.items():
        arr = value.const_value.numpy()
        if arr.nbytes >= ov_writer.VIEW_BYTES:  # a view of the (memory-mapped) source, streamed when written
            arr = Pieces([arr], arr.shape, arr.dtype)
        ctx.values[name] = g.weight(arr, fp16, name)

    for node in model.graph:
        rn = by_node.get(id(node))
        if rn is not None:
            x = rn.inputs.get("X")
            outs = _recurrent(ctx, rn, fp16, rewrites, shared_x=x is not None and x.name in shared)
        elif onnx_quantized.is_quantized_lstm(node):
            outs = _quantized(ctx, onnx_quantized.read(node, opset=opset), rewrites, fp16)
        else:
            try:
                outs = ops.TABLE[node.op_type].to_openvino(ctx, node)
            except Unsupported as err:  # not a recurrent node: OpenVINO's own import may convert it
                raise OtherOpUnsupported(err.message, fixes=err.fixes) from err
            if node.op_type == "Constant" and fp16:
                outs = [g.weight(outs[0].const, fp16, node.name or None) if outs[0].const.dtype.kind == "f"
                        else outs[0]]
        for value, out in zip(node.outputs, outs):
            if value is None or value.name == "" or out is None:
                continue
            ctx.values[value.name] = out
            if value.name not in out.port.names:
                out.port.names.append(value.name)

    used: set[tuple[int, int]] = set()
    for value in model.graph.outputs:
        if value.name not in ctx.values:
            raise BadInput(f"graph output {value.name!r} is produced by no node")
        out = ctx.values[value.name]
        if out.layer.type == "Parameter" or (out.layer.id, out.index) in used:
            # An output aliasing an input or another output gets a port of its own: OpenVINO moves a shared
            # port's names to one side (measured: Parameter -> Result lost the input's name).
            if value.name in out.port.names:
                out.port.names.remove(value.name)
            out = g.op("Convert", out, destination_type=out.element_type)
            out.port.names.append(value.name)
        used.add((out.layer.id, out.index))
        g.result(out, name=f"{value.name}/sink_port_0", output_name=value.name)
    if release is not None:
        _set_release(g, release)
    return Conversion(g, rewrites, recurrent)


def _set_release(g: IRGraph, release) -> None:
    for layer in g.layers:
        if isinstance(layer.value, Pieces):
            layer.value.release = release
        for body in layer.bodies():
            _set_release(body, release)


# -- recurrent ---------------------------------------------------------------------------------------------
def _shared_x(recurrent) -> set[str]:
    """The X of more than one time-major recurrent node (see `_outputs`)."""
    seen: dict[str, int] = {}
    for rn in recurrent:
        if not layout_batch_first(rn.layer) and rn.inputs.get("X") is not None:
            seen[rn.inputs["X"].name] = seen.get(rn.inputs["X"].name, 0) + 1
    return {name for name, count in seen.items() if count > 1}


def _recurrent(ctx: ops.Context, rn: onnx_recurrent.RecurrentNode, fp16: bool, rewrites: list[dict], *,
               shared_x: bool = False) -> list:
    """ONNX GRU/LSTM/RNN (onnx__GRU, onnx__LSTM, onnx__RNN, every version and layout) -> OpenVINO
    GRUSequence-5 / LSTMSequence-5 / RNNSequence-5 with the transposes, reorders and synthesized inputs around it;
    `shared_x`: another recurrent node reads the same X (see `_outputs`)."""
    g, layer = ctx.g, rn.layer
    kind, D, H = rn.op, layer.num_directions, layer.hidden_size
    label = f"{kind} node {rn.name!r}"
    head = f"{kind}-{rn.version} (layout {layer.layout}, {layer.direction})"
    x = ctx.values[rn.inputs["X"].name]
    if x.dims is None or len(x.dims) != 3:
        raise BadInput(f"{label}: X must be 3-D")
    ftype = x.element_type
    fdt = numpy_dtype(ftype)
    x_ov = x if layout_batch_first(layer) else g.op("Transpose", x, ctx.i64([1, 0, 2]))
    N, T = x_ov.dims[0], x_ov.dims[1]
    shape_cache: dict[str, Out] = {}

    def x_shape() -> Out:
        if "shape" not in shape_cache:
            shape_cache["shape"] = g.op("ShapeOf", x_ov, output_type="i64", version="opset3")
        return shape_cache["shape"]

    def x_dim(axis: int) -> Out:
        # Gather-8 of ShapeOf-3: the dim as a [1] tensor, as OpenVINO's own ONNX import builds it.
        return g.op("Gather", x_shape(), ctx.i64([axis]), ctx.i64(0), batch_dims=0, version="opset8")

    def state(name: str) -> Out:
        v = rn.inputs.get(name)
        if v is not None:
            s = ctx.values[v.name]
            return s if layout_batch_first(layer) else g.op("Transpose", s, ctx.i64([1, 0, 2]))
        if 0 <= N * D * H <= STATE_CONST_ELEMENTS:
            return g.weight(np.zeros((N, D, H), dtype=fdt), fp16)
        # dynamic, or a static batch too big to hold as a constant (a declared 2**62): broadcast at run time
        target = g.op("Concat", x_dim(0), ctx.i64([D, H]), axis=0) if N < 0 else ctx.i64([N, D, H])
        return g.add("Broadcast", [g.const(np.zeros((), dtype=fdt)), target], {"mode": "numpy"}, version="opset3",
                     outputs=[(ftype, [N, D, H])])[0]

    why = _inexpressible(rn)
    dynamic = N < 0 or T < 0
    lens_given = rn.inputs.get("sequence_lens") is not None
    lower = bool(why and not _splittable(rn)) or (lens_given and dynamic)
    h0 = state("initial_h")
    c0 = state("initial_c") if kind == "LSTM" else None
    if rn.inputs.get("sequence_lens") is not None:
        lens = ctx.values[rn.inputs["sequence_lens"].name]
    elif 0 <= N <= STATE_CONST_ELEMENTS and T >= 0 and not lower:
        lens = g.const(np.full((N,), T, dtype=np.int64))
    else:
        # Also for static dims when lowering: the OpenVINO 2026.4 CPU plugin crashed compiling two
        # TensorIterators fed a constant lengths tensor (measured, bidirectional static RNN/GRU).
        lens = g.add("Broadcast", [x_dim(1), x_dim(0)], {"mode": "numpy"}, version="opset3",
                     outputs=[("i64", [N])])[0]

    if lower:
        # OpenVINO's CPU plugin ignores sequence_lengths with dynamic shapes: the explicit recurrence is exact.
        reason = "; ".join(why) if why and not _splittable(rn) else \
            "sequence_lens with dynamic dims (ignored by the OpenVINO CPU plugin in Sequence ops)"
        rewrites.append({"node": rn.name, "what": f"{head}: {reason} -> explicit recurrence (TensorIterator per "
                                                  "direction)"})
        onnx_weights = None if layer.weights_constant else {
            k: ctx.values[rn.inputs[k].name] for k in ("W", "R", "B", "P") if rn.inputs.get(k) is not None}
        seq = lowering.lowered_sequence(g, layer, x_ov, h0, c0, lens, lens_given, fdt, ctx.i64, onnx_weights, fp16)
        return _outputs(ctx, rn, seq)
    big = D == 2 and layer.weights_constant and _weight_bytes(layer) > SPLIT_BYTES
    if why or big:  # only per-direction activations reach here with a reason
        because = "different activations per direction" if why else \
            f"weights of {human_size(_weight_bytes(layer))}, one direction per op as OpenVINO's CPU plugin runs it"
        rewrites.append({"node": rn.name, "what": f"{head}: {because} -> forward and reverse "
                                                  f"{gates.SEQUENCE_OP[kind]}-5 + Concat"})
        if layer.weights_constant:  # each direction's own Consts (compressed on their own with fp16)
            t = gates.sequence_pieces(layer, fdt)
            wrb = [[g.weight(t[k][d:d + 1], fp16) for k in "WRB"] for d in range(2)]
        else:
            halves = [g.add("Split", [t, ctx.i64(0)], {"num_splits": 2})
                      for t in _sequence_weights(ctx, rn, fdt, fp16)]
            wrb = [[h[d] for h in halves] for d in range(2)]
        h_parts = g.add("Split", [h0, ctx.i64(1)], {"num_splits": 2})
        c_parts = g.add("Split", [c0, ctx.i64(1)], {"num_splits": 2}) if c0 is not None else None
        parts = []
        for d, direction in enumerate(("forward", "reverse")):
            args = [x_ov, h_parts[d]] + ([c_parts[d]] if c_parts else []) + [lens] + wrb[d]
            parts.append(g.add(gates.SEQUENCE_OP[kind], args, gates.attributes(layer, d, direction),
                               version=gates.VERSION, name=f"{rn.name or kind}/{direction}"))
        seq = [g.op("Concat", parts[0][k], parts[1][k], axis=1) for k in range(len(parts[0]))]
    else:
        W, R, B = _sequence_weights(ctx, rn, fdt, fp16)
        args = [x_ov, h0] + ([c0] if c0 is not None else []) + [lens, W, R, B]
        seq = g.add(gates.SEQUENCE_OP[kind], args, gates.attributes(layer), version=gates.VERSION,
                    name=rn.name or None)
        rewrites.append({"node": rn.name, "what": f"{head} -> {gates.SEQUENCE_OP[kind]}-5"})
        return _outputs(ctx, rn, seq, unmatched=shared_x and D == 1)
    return _outputs(ctx, rn, seq)


def _quantized(ctx: ops.Context, q: onnx_quantized.QuantizedLSTM, rewrites: list[dict], fp16: bool) -> list:
    """com.microsoft DynamicQuantizeLSTM -> its run-time quantization in OpenVINO ops (`quantized`). Its weights
    stay 8-bit integers and its scales float32 (what onnxruntime computes with): --fp16 has nothing to compress
    there, which the rewrite says."""
    def port(name):
        v = q.inputs.get(name)
        return None if v is None else ctx.values[v.name]

    outs = quantized.lower(ctx.g, q, port("X"), port("initial_h"), port("initial_c"), ctx.i64,
                           port("sequence_lens"))
    rewrites.append({"node": q.name, "what": f"{onnx_quantized.OP} ({q.layer.direction}, {q.weight_type} weights) "
                                             "-> run-time quantization of X and of H at every step, TensorIterator "
                                             "per direction" + ("; weights kept 8-bit (fp16 compresses float "
                                                                "weights only)" if fp16 else "")})
    return outs


def _outputs(ctx: ops.Context, rn, seq: list[Out], unmatched: bool = False) -> list:
    """Sequence-op outputs (Y [N,D,T,H], Ho/Co [N,D,H]) in the source node's ONNX layout.

    `unmatched` (one direction, layout 0): Y goes back through Squeeze, Transpose and Unsqueeze rather than one
    Transpose. OpenVINO 2026.4's CPU plugin turns X's Transpose, the Sequence op and Y's Transpose into one
    time-major op, rewiring the Transpose for every op that reads it: two Sequence ops reading one X (after its
    shared-op pass merges their Transposes) then feed the other one X untransposed, wrong at batch above 1
    (measured: a forward and a reverse RNN, GRU or LSTM node over one X)."""
    g, layer, kind = ctx.g, rn.layer, rn.op
    outs = []
    for k, name in enumerate(onnx_recurrent.OUTPUTS[kind]):
        if rn.outputs.get(name) is None:
            outs.append(None)
            continue
        if k == 0 and unmatched:  # [N,1,T,H] -> [N,T,H] -> [T,N,H] -> [T,1,N,H]
            y = g.op("Transpose", g.op("Squeeze", seq[0], ctx.i64([1])), ctx.i64([1, 0, 2]))
            outs.append(g.op("Unsqueeze", y, ctx.i64([1])))
        elif k == 0:
            # [N,D,T,H] -> [T,D,N,H] (layout 0) or [N,T,D,H] (layout 1)
            outs.append(g.op("Transpose", seq[0], ctx.i64([0, 2, 1, 3] if layout_batch_first(layer) else
                                                           [2, 1, 0, 3])))
        else:
            outs.append(seq[k] if layout_batch_first(layer) else g.op("Transpose", seq[k], ctx.i64([1, 0, 2])))
    # ONNX outputs are positional: map by position, skipping absent ones.
    return [outs[k] if k < len(outs) else None for k in range(len(rn.node.outputs))]


def _weight_bytes(layer) -> int:
    return sum(a.nbytes for c in layer.cells for k in ("W", "R") for a in getattr(c, k).values())


def layout_batch_first(layer) -> bool:
    return layer.layout == 1


def _sequence_weights(ctx: ops.Context, rn, fdt, fp16: bool) -> tuple[Out, Out, Out]:
    """W, R, B in OpenVINO form: folded numbers for constant weights, Split/Concat/Add ops for computed ones."""
    g, layer, kind = ctx.g, rn.layer, rn.op
    if layer.weights_constant:
        t = gates.sequence_pieces(layer, fdt)
        return tuple(g.weight(t[k], fp16) for k in ("W", "R", "B"))
    onnx_order = onnx_recurrent.GATES[kind]
    ov_order = gates.ORDER[kind]
    G, D, H = len(onnx_order), layer.num_directions, layer.hidden_size

    def reorder(v: ir.Value) -> Out:
        src = ctx.values[v.name]
        if onnx_order == ov_order:
            return src
        pieces = dict(zip(onnx_order, g.add("Split", [src, ctx.i64(1)], {"num_splits": G})))
        return g.op("Concat", *[pieces[k] for k in ov_order], axis=1)

    W, R = reorder(rn.inputs["W"]), reorder(rn.inputs["R"])
    slots = gates.bias_gates(kind, layer.linear_before_reset)
    if rn.inputs.get("B") is None:
        return W, R, g.weight(np.zeros((D, len(slots) * H), dtype=fdt), fp16)
    parts = g.add("Split", [ctx.values[rn.inputs["B"].name], ctx.i64(1)], {"num_splits": 2 * G})
    wb = dict(zip(onnx_order, parts[:G]))
    rb = dict(zip(onnx_order, parts[G:]))
    folded = []
    for gate, srcs in slots:
        if srcs == ("Wb", "Rb"):
            folded.append(g.op("Add", wb[gate], rb[gate]))
        else:
            folded.append((wb if srcs == ("Wb",) else rb)[gate])
    return W, R, g.op("Concat", *folded, axis=1)
