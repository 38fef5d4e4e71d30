"""OpenVINO IR (versions 10 and 11) to ONNX, recurrent layers as ONNX GRU / LSTM / RNN
(`rnnconv.commands.from_openvino`).

Specs: OpenVINO GRUSequence-5, LSTMSequence-5, RNNSequence-5, GRUCell-3, LSTMCell-1/4, RNNCell-0,
TensorIterator-1 (docs.openvino.ai, Operation Specifications; ../shared/spec/) and ONNX GRU / LSTM / RNN
(onnx.ai/onnx/operators/onnx__GRU.html etc.). The mapping is the inverse of `rnnconv.dialects.openvino.from_onnx`:

1. Sequence ops: gates f,i,c,o -> i,o,f,c (`gates.layer_from_sequence`); the folded bias comes back as
   B = [Wb, Rb] with Rb = 0, exact because only the sum enters the equations (GRU linear_before_reset's 4H bias:
   Wb = [bz, br, Wbh], Rb = [0, 0, Rbh]); X [N,T,I] / Y [N,D,T,H] / states [N,D,H] are transposed to layout 0
   (default) or fed as layout 1.
2. Inputs OpenVINO synthesized: an initial state that is provably zero becomes absent, and sequence_lengths that
   provably equal T for every batch entry (a constant, or Broadcast of Gather(ShapeOf(X), 1)) becomes absent;
   anything else is kept.
3. TensorIterator whose body is exactly one LSTMCell / GRUCell / RNNCell step: the ONNX sequence op; a cell
   elsewhere (in any body): the ONNX sequence op over one step. Sizes come from the weights.
4. If / Loop / other TensorIterators: ONNX If and Loop (`control_flow`), each body converted by a sub-converter
   into a subgraph of the same name space (recurrent layers inside are mapped as above).
5. Every other layer through the reverse half of the shared op table (`ops.REVERSE`, keyed by IR type, one
   spelling: the reader canonicalizes); constant sub-graphs (fp16 weights with their decompression Convert, shape
   arithmetic on static shapes) are folded. Scalars stay rank 0.

Each recurrent layer mapped is kept (`Rewritten`) with what a node check needs to cut it out (`extract`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import gates as ov_gates
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import control_flow, ops
from rnnconv.dialects.openvino.extract import layer_alone
from rnnconv.dialects.openvino.fold import fold
from rnnconv.dialects.openvino.gates import CELLS, SEQUENCES
from rnnconv.dialects.openvino.ir_facts import Facts, flag
from rnnconv.dialects.openvino.onnx_builder import Builder
from rnnconv.dialects.openvino.ops import Key
from rnnconv.dialects.openvino.tensor_iterator import one_cell_step
from rnnconv.dialects.openvino.validate import parameter_dims, unsupported_layers
from rnnconv.errors import BadInput, Unsupported
from rnnconv.layer import Cell, Layer

MIN_OPSET = onnx_recurrent.MODERN_SINCE  # the oldest recurrent versions written


@dataclasses.dataclass
class Rewritten:
    """A recurrent layer the conversion mapped, with what a node check needs to cut it out of its graph."""

    path: str  # the layer's name, prefixed by the If / Loop layers and branches it lies in
    layer: ovir.IRLayer
    facts: Facts  # of the graph it lies in
    ins: list[Key]
    x_index: int = 0  # which input is X, and its batch axis (a TensorIterator's X may be time-major)
    batch_axis: int = 0

    def alone(self) -> ovir.IRGraph:
        """The layer as an IR graph of its own (`extract.layer_alone`)."""
        return layer_alone(self.layer, self.facts, self.ins, self.x_index, self.batch_axis)


class Converter:
    """One IR graph to one ONNX model: each layer folded, mapped as a recurrent op, as control flow
    (`control_flow`), or through `ops.REVERSE`. A body (If branch, Loop / TensorIterator body) is converted by a
    sub-converter (`sub`) into a subgraph of the same name space."""

    def __init__(self, graph: ovir.IRGraph, opset: int, layout: int, *, parent: Optional["Converter"] = None,
                 builder: Optional[Builder] = None, path: str = ""):
        self.g = graph
        self.facts = Facts(graph)
        self.layout = layout
        self.path = path
        self.values: dict[Key, ir.Value] = {}
        self.roles: dict[tuple, str] = {}  # (parameter key, axis) -> "N" / "T"
        if parent is None:
            self.output_names = graph.output_names()
            names = set(self.output_names)
            for p in graph.parameters():
                names.add(ovir.parameter_name(p))
            self.b = Builder(opset, names)
            self.rewrites: list[dict] = []
            self.recurrent: list[Rewritten] = []
        else:
            self.b = builder
            self.rewrites, self.recurrent = parent.rewrites, parent.recurrent

    def sub(self, graph: ovir.IRGraph, feeds: dict, builder: Builder, path: str) -> "Converter":
        """`graph` (a body) converted into `builder`'s nodes; `feeds`: body Parameter id -> (ONNX value, or None
        and its constant value)."""
        conv = Converter(graph, self.b.opset, self.layout, parent=self, builder=builder, path=path)
        conv.convert(feeds)
        return conv

    def result_value(self, result_id: int) -> ir.Value:
        """The ONNX value of a body Result (by layer id)."""
        res = self.facts.layers.get(result_id)
        if res is None or res.type != "Result":
            raise BadInput(f"IR body: port_map names layer {result_id}, which is not a Result")
        return self.value(self.facts.input_key(res, 0))

    def result_const(self, result_id: int) -> Optional[np.ndarray]:
        res = self.facts.layers[result_id]
        return self.facts.consts.get(self.facts.input_key(res, 0))

    # values
    def value(self, key: Key) -> ir.Value:
        if key in self.values:
            return self.values[key]
        c = self.facts.consts.get(key)
        if c is None:
            layer = self.facts.layers[key[0]]
            raise BadInput(f"IR layer {layer.name!r}: output port {key[1]} is used before it is computed")
        port = self.facts.port(key)
        hint = port.names[0] if port.names else self.facts.layers[key[0]].name
        v = self.b.const(c, hint)
        self.values[key] = v
        return v

    def run(self) -> ir.Model:
        problems = unsupported_layers(self.g)
        if problems:
            raise Unsupported("cannot convert the IR to ONNX: " + "; ".join(problems) + ". What would work: "
                              "convert those layers in the source framework, or keep this part in OpenVINO")
        self.convert()
        self._tensor_names()
        outputs = self._outputs()
        # Graph inputs in the IR's Parameter order (OpenVINO's model.inputs), not the order they were reached.
        inputs = [self.values[(p.id, p.outputs[0].id)] for p in self.g.parameters()]
        for v in inputs:
            self._name_dims(v)
        graph = ir.Graph(inputs, outputs, nodes=self.b.nodes, initializers=list(self.b.initializers.values()),
                         opset_imports={"": self.b.opset}, name=self.g.name or "model")
        _eliminate_dead(graph)
        return ir.Model(graph, ir_version=max(8, schemas.min_ir_version(self.b.opset)), producer_name="rnnconv")

    def convert(self, feeds: Optional[dict] = None) -> None:
        """Map every layer; `feeds` feeds a body's Parameters (None: the main graph's become graph inputs)."""
        for layer in self.g.topological():
            ins = [self.facts.input_key(layer, i) for i in range(len(layer.inputs))]
            if layer.type == "Parameter":
                if feeds is None:
                    self._parameter(layer)
                else:
                    self._fed(layer, feeds)
            elif layer.type == "Const":
                self.facts.consts[(layer.id, layer.outputs[0].id)] = layer.value
            elif layer.type == "Result":
                continue
            elif self._fold(layer, ins):
                continue
            elif layer.type in SEQUENCES:
                self._sequence(layer, ins)
            elif layer.type in CELLS:
                self._cell(layer, ins)
            elif layer.type == "TensorIterator":
                self._tensor_iterator(layer, ins)
            elif layer.type == "Loop":
                control_flow.loop(self, layer, ins)
            elif layer.type == "If":
                control_flow.if_(self, layer, ins)
            else:
                self.facts.learn(layer, ins)
                outs = ops.REVERSE[layer.type](ops.LayerContext(self.b, layer, ins, self.value, self.facts))
                for port, v in zip(layer.outputs, outs):
                    self.values[(layer.id, port.id)] = v

    def _fed(self, layer: ovir.IRLayer, feeds: dict) -> None:
        if layer.id not in feeds:
            raise BadInput(f"IR body Parameter {layer.name!r} is fed by no port_map input")
        value, const = feeds[layer.id]
        key = (layer.id, layer.outputs[0].id)
        if value is None:
            self.facts.consts[key] = const
        else:
            self.values[key] = value

    def _parameter(self, layer: ovir.IRLayer) -> ir.Value:
        dims = parameter_dims(layer)
        port = layer.outputs[0]
        et = layer.attrs.get("element_type", port.element_type)
        v = ir.Value(name=ovir.parameter_name(layer), type=ir.TensorType(ir.DataType.from_numpy(ovir.numpy_dtype(et))),
                     shape=None if dims is None else ir.Shape([d if d >= 0 else None for d in dims]))
        self.b.taken.add(v.name)
        self.values[(layer.id, port.id)] = v
        return v

    def _name_dims(self, v: ir.Value) -> None:
        """Dynamic dims of a graph input get the symbols N / T where they reach a recurrent op's batch / time."""
        if v.shape is None:
            return
        key = next((k for k, val in self.values.items() if val is v), None)
        dims = []
        for axis, d in enumerate(v.shape):
            if isinstance(d, int):
                dims.append(d)
            else:
                dims.append(self.roles.get((key, axis), f"{v.name}_{axis}"))
        v.shape = ir.Shape(dims)

    def _fold(self, layer: ovir.IRLayer, ins: list[Key]) -> bool:
        """Compute a layer whose inputs are all constant (fp16 decompression, static shape arithmetic)."""
        if layer.type in SEQUENCES or layer.bodies():
            return False
        if layer.type == "ShapeOf":
            dims = self.facts.dims(ins[0])
            if dims is None or any(d < 0 for d in dims):
                return False
            out_t = ovir.numpy_dtype(layer.attrs.get("output_type", "i64"))
            self.facts.consts[(layer.id, layer.outputs[0].id)] = np.array(dims, dtype=out_t)
            return True
        args = [self.facts.consts.get(k) for k in ins]
        if not ins or any(a is None for a in args):
            return False
        results = fold(layer, args)
        if results is None:
            return False
        for port, r in zip(layer.outputs, results):
            self.facts.consts[(layer.id, port.id)] = r
        return True

    def _tensor_names(self) -> None:
        """Each value computed for one IR tensor takes that tensor's (first) name where the name is free: the ONNX
        model keeps the names OpenVINO kept from its source, which a comparison of the two matches tensors by."""
        keys: dict[int, int] = {}
        for v in self.values.values():
            keys[id(v)] = keys.get(id(v), 0) + 1
        for key, v in self.values.items():
            names = self.facts.port(key).names
            if not names or v.producer() is None or keys[id(v)] > 1 or v.name == names[0]:
                continue
            if names[0] in self.b.taken or names[0] in self.b.reserved:
                continue
            self.b.taken.discard(v.name)
            v.name = names[0]
            self.b.taken.add(v.name)

    def _outputs(self) -> list[ir.Value]:
        outputs, used = [], set()
        for res, name in zip(self.g.results(), self.output_names):
            key = self.facts.input_key(res, 0)
            v = self.value(key)
            port = res.inputs[0]
            is_input = v.producer() is None
            # An input that is also an output under its own name (OpenVINO names the tensor once) is both as is.
            if (is_input and v.name != name) or id(v) in used or v.name in self.b.initializers:
                v = self.b.op1("Identity", v, hint=name)
            used.add(id(v))
            if v.name != name:
                self.b.taken.discard(v.name)
                v.name = name
            self.b.taken.add(name)
            dt = ir.DataType.from_numpy(ovir.numpy_dtype(port.element_type))
            v.type = ir.TensorType(dt)
            if port.dims is not None and v.shape is None:
                v.shape = ir.Shape([d if d >= 0 else None for d in port.dims])
            outputs.append(v)
        return outputs

    # recurrent
    def _state(self, key: Key, hint: str) -> Optional[ir.Value]:
        return None if self.facts.is_zero(key) else self.value(key)

    def _mark(self, key: Key, axis: int, role: str) -> None:
        src, a = self.facts.canon(key, axis)
        if self.facts.layers[src[0]].type == "Parameter":
            self.roles.setdefault((src, a), role)

    def _sequence(self, layer: ovir.IRLayer, ins: list[Key]) -> None:
        """GRUSequence-5 / LSTMSequence-5 / RNNSequence-5 -> ONNX GRU / LSTM / RNN."""
        kind = SEQUENCES[layer.type]
        label = f"IR layer {layer.name!r} ({layer.type})"
        if kind == "LSTM" and len(ins) == 8:
            # LSTMSequence-1 may carry peepholes P [D,3H]: only zeros are what opset5 (and ONNX without P) means.
            p = self.facts.consts.get(ins[7])
            if p is None or np.any(p):
                raise Unsupported(f"{label}: nonzero or computed peepholes (P); rnnconv maps LSTMSequence without "
                                  "peepholes")
            ins = ins[:7]
        if flag(layer.attrs, "input_forget"):
            raise Unsupported(f"{label}: input_forget=true; rnnconv maps LSTMSequence without coupled gates")
        if len(ins) != (7 if kind == "LSTM" else 6):
            raise BadInput(f"{label}: expected {7 if kind == 'LSTM' else 6} inputs, got {len(ins)}")
        x, h0 = ins[0], ins[1]
        c0 = ins[2] if kind == "LSTM" else None
        lens, w, r, bias = ins[-4:]
        arrays = [self.facts.consts.get(k) for k in (w, r, bias)]
        if any(a is None for a in arrays):
            arrays = self._runtime_weights(kind, layer.attrs, (w, r, bias), label)
        x_dims = self.facts.dims(x)
        self._mark(x, 0, "N")
        self._mark(x, 1, "T")
        for k in (h0, c0, lens):
            if k is not None:
                self._mark(k, 0, "N")
        full = False
        if x_dims is not None and len(x_dims) == 3:
            full = self.facts.fills_with(lens, self.facts.entry(x, 1))
        lens_v = None
        if not full:
            lens_v = self.value(lens)
            if self.facts.port(lens).element_type != "i32":
                lens_v = self.b.op1("Cast", lens_v, to=int(ir.DataType.INT32), hint="sequence_lens")
        states = [self._state(h0, "initial_h"), self._state(c0, "initial_c") if c0 is not None else None]
        outs = self.emit_recurrent(kind, layer.attrs, *arrays, self.value(x), states, lens_v, layer.name)
        for port, v in zip(layer.outputs, outs):
            self.values[(layer.id, port.id)] = v
        dropped = [n for n, s, k in (("initial_h", states[0], h0), ("initial_c", states[1], c0))
                   if k is not None and s is None] + (["sequence_lengths"] if full else [])
        self._rewritten(layer, ins, f"{layer.type}-5 -> ONNX {kind} (layout {self.layout})"
                        + (f"; synthesized {', '.join(dropped)} -> absent" if dropped else ""))

    def _rewritten(self, layer: ovir.IRLayer, ins: list[Key], what: str, x_index: int = 0,
                   batch_axis: int = 0) -> None:
        self.rewrites.append({"node": self.path + layer.name, "op": layer.type, "what": what})
        self.recurrent.append(Rewritten(self.path + layer.name, layer, self.facts, ins, x_index, batch_axis))

    def _cell(self, layer: ovir.IRLayer, ins: list[Key]) -> None:
        """LSTMCell-1/4, GRUCell-3, RNNCell-0 (one step: X [N,I], states [N,H]) -> an ONNX LSTM / GRU / RNN over a
        sequence of length 1, X and the states given a time or direction axis and the new states taken off it."""
        kind = CELLS[layer.type]
        label = f"IR layer {layer.name!r} ({layer.type})"
        n_state = 2 if kind == "LSTM" else 1
        if kind == "LSTM" and len(ins) == 7:  # LSTMCell-1 peepholes: only zeros are what ONNX without P means
            p = self.facts.consts.get(ins[6])
            if p is None or np.any(p):
                raise Unsupported(f"{label}: nonzero or computed peepholes (P); rnnconv maps LSTMCell without "
                                  "peepholes")
            ins = ins[:6]
        if len(ins) != 1 + n_state + 3:
            raise BadInput(f"{label}: expected {1 + n_state + 3} inputs, got {len(ins)}")
        if flag(layer.attrs, "input_forget"):
            raise Unsupported(f"{label}: input_forget=true; rnnconv maps LSTMCell without coupled gates")
        arrays = [self.facts.consts.get(k) for k in ins[-3:]]
        if any(a is None for a in arrays):
            raise Unsupported(f"{label}: W, R or B computed at run time; rnnconv maps cells with constant weights")
        b = self.b
        for k in ins[:1 + n_state]:
            self._mark(k, 0, "N")
        axis = 1 if self.layout == 1 else 0  # the time axis of X; the direction axis of the states
        x = b.axes_op("Unsqueeze", self.value(ins[0]), [axis])
        states = [None if self.facts.is_zero(k) else b.axes_op("Unsqueeze", self.value(k), [axis])
                  for k in ins[1:1 + n_state]]
        if kind != "LSTM":
            states.append(None)
        attrs = dict(layer.attrs, direction="forward")
        W, R, B = (np.asarray(a)[None] for a in arrays)
        outs = self.emit_recurrent(kind, attrs, W, R, B, x, states, None, layer.name, onnx_form=True)
        for port, o in zip(layer.outputs, outs[1:]):
            self.values[(layer.id, port.id)] = b.axes_op("Squeeze", o, [axis])
        self._rewritten(layer, ins, f"{layer.type} -> ONNX {kind} over one step (layout {self.layout})")

    def emit_recurrent(self, kind: str, attrs: dict, W, R, B, x_ov: ir.Value, states: list,
                       lens: Optional[ir.Value], name: str, *, onnx_form: bool = False) -> list[ir.Value]:
        """The ONNX node for one opset5 Sequence op in OpenVINO form: X [N,T,I], states [N,D,H], W [D,G*H,I],
        R [D,G*H,H], B [D,G*H] (GRU lbr [D,4H]) as arrays (or, computed at run time, ONNX values already in ONNX
        form); returns Y [N,D,T,H], Ho [N,D,H] (, Co) as ONNX values. With `onnx_form` X, states and the results
        are in the ONNX node's own layout instead."""
        b = self.b
        if isinstance(W, ir.Value):
            return self._emit(kind, self._runtime_layer(kind, attrs, name), (W, R, B), x_ov, states, lens, name,
                              onnx_form)
        label = f"IR layer {name!r} ({kind})"
        G = len(ov_gates.ORDER[kind])
        H = int(attrs.get("hidden_size", "0") or 0)
        lbr = flag(attrs, "linear_before_reset")
        if W.ndim != 3 or R.ndim != 3 or B.ndim != 2 or H <= 0:
            raise BadInput(f"{label}: W, R, B must be 3-D, 3-D, 2-D and hidden_size positive")
        D = W.shape[0]
        nb = (4 if kind == "GRU" and lbr else G) * H
        if W.shape[1] != G * H or R.shape != (D, G * H, H) or B.shape != (D, nb):
            raise BadInput(f"{label}: W {list(W.shape)}, R {list(R.shape)}, B {list(B.shape)} do not fit "
                           f"hidden_size={H}{' with linear_before_reset' if lbr else ''}")
        direction = attrs.get("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional") or D != (2 if direction == "bidirectional"
                                                                             else 1):
            raise BadInput(f"{label}: direction {direction!r} does not fit W with {D} direction(s)")
        if W.dtype != R.dtype or W.dtype != B.dtype:
            W, R, B = (a.astype(np.result_type(W, R, B)) for a in (W, R, B))
        layer = ov_gates.layer_from_sequence(kind, attrs, W, R, B)
        layer.layout = self.layout
        layer.name = name
        layer.has_bias = bool(np.any(B))
        tensors = onnx_recurrent.tensors(layer)
        weights = (b.const(tensors["W"], f"{name}/W"), b.const(tensors["R"], f"{name}/R"),
                   None if tensors["B"] is None else b.const(tensors["B"], f"{name}/B"))
        return self._emit(kind, layer, weights, x_ov, states, lens, name, onnx_form)

    def _emit(self, kind, layer, weights, x_ov, states, lens, name, onnx_form) -> list[ir.Value]:
        b = self.b
        version = onnx_recurrent.version_of(kind, b.opset)
        node_attrs = onnx_recurrent.attributes(layer, version)
        batch_first = self.layout == 1
        x = x_ov if batch_first or onnx_form else b.transpose(x_ov, [1, 0, 2])

        def state(v):
            if v is None:
                return None
            return v if batch_first or onnx_form else b.transpose(v, [1, 0, 2])

        args = [x, *weights, lens, state(states[0])]
        if kind == "LSTM":
            args.append(state(states[1]))
        while args and args[-1] is None:
            args.pop()
        n_out = 3 if kind == "LSTM" else 2
        outs = b.op(kind, args, node_attrs, n_out=n_out, hint=name)
        for o, role in zip(outs, onnx_recurrent.OUTPUTS[kind]):
            b.taken.discard(o.name)
            o.name = b.name(f"{name}/{role}")
        if onnx_form:
            return outs
        # Y: layout 0 [T,D,N,H] / layout 1 [N,T,D,H] -> [N,D,T,H]; states [D,N,H] -> [N,D,H].
        y = b.transpose(outs[0], [0, 2, 1, 3] if batch_first else [2, 1, 0, 3])
        rest = [o if batch_first else b.transpose(o, [1, 0, 2]) for o in outs[1:]]
        return [y, *rest]

    def _runtime_layer(self, kind: str, attrs: dict, name: str) -> Layer:
        """The attributes of a Sequence op whose weights are computed at run time (cells hold no arrays)."""
        direction = attrs.get("direction", "forward")
        H = int(attrs.get("hidden_size", "0") or 0)
        if direction not in ("forward", "reverse", "bidirectional") or H <= 0:
            raise BadInput(f"IR layer {name!r} ({kind}Sequence): direction {direction!r} / hidden_size {H}")
        acts = ov_gates.activations_from_attrs(kind, attrs)
        clip = float(attrs.get("clip", "0") or 0)
        lbr = flag(attrs, "linear_before_reset")
        return Layer(kind=kind, direction=direction, hidden_size=H, input_size=None,
                     cells=[Cell(activations=acts) for _ in range(2 if direction == "bidirectional" else 1)],
                     clip=clip if clip > 0 else None, linear_before_reset=lbr, layout=self.layout,
                     weights_constant=False, name=name)

    def _runtime_weights(self, kind: str, attrs: dict, keys, label: str) -> tuple:
        """W, R, B computed at run time, put in ONNX form by graph ops: gates f,i,c,o -> i,o,f,c by Split and
        Concat; B back to [Wb, Rb] by `gates.bias_gates`, the folded sums as Wb."""
        b = self.b
        if b.opset < 9:
            raise Unsupported(f"{label}: weights computed at run time need ConstantOfShape (opset 9)",
                              fixes=("opset=9",))
        order_ov, order_onnx = ov_gates.ORDER[kind], onnx_recurrent.GATES[kind]
        lbr = flag(attrs, "linear_before_reset")

        def split(v: ir.Value, n: int) -> list[ir.Value]:
            return b.op("Split", [v], {"axis": 1, "num_outputs": n if b.opset >= 18 else None}, n_out=n,
                        hint=f"{label}/split")

        def reorder(v: ir.Value) -> ir.Value:
            if order_ov == order_onnx:
                return v
            parts = dict(zip(order_ov, split(v, len(order_ov))))
            return b.op1("Concat", *[parts[g] for g in order_onnx], axis=1)

        def zeros_like(v: ir.Value, dtype) -> ir.Value:
            return b.op1("ConstantOfShape", b.op1("Shape", v), value=ir.tensor(np.zeros(1, dtype=dtype)))

        w, r, bias = (self.value(k) for k in keys)
        dtype = ovir.numpy_dtype(self.facts.port(keys[2]).element_type)
        # The B slots (gates.bias_gates) back to ONNX's [Wb gates, Rb gates], zeros where OpenVINO folded.
        slots = ov_gates.bias_gates(kind, lbr)
        parts = split(bias, len(slots)) if len(slots) > 1 else [bias]
        zero = zeros_like(parts[0], dtype)
        halves = {"Wb": dict.fromkeys(order_onnx, zero), "Rb": dict.fromkeys(order_onnx, zero)}
        for (g, srcs), part in zip(slots, parts):
            halves["Rb" if srcs == ("Rb",) else "Wb"][g] = part
        B = b.op1("Concat", *[halves[half][g] for half in ("Wb", "Rb") for g in order_onnx], axis=1)
        return reorder(w), reorder(r), B

    def _tensor_iterator(self, layer: ovir.IRLayer, ins: list[Key]) -> None:
        """A TensorIterator over one LSTMCell / GRUCell / RNNCell step: one ONNX LSTM / GRU / RNN; any other body:
        an ONNX Loop (`control_flow.loop`)."""
        try:
            step = one_cell_step(layer, self.facts, ins)
        except Unsupported:
            control_flow.loop(self, layer, ins)
            return
        b = self.b
        kind, b_axis = step.kind, step.time_axis
        x_ext = self.value(ins[step.x_port])
        rest = [a for a in range(3) if a != b_axis]
        # One direction: the ONNX node's D axis is added / removed directly (layout 0 [T,1,N,H], 1 [N,T,1,H]).
        batch_first = self.layout == 1
        x = b.transpose(x_ext, [rest[0], b_axis, rest[1]] if batch_first else [b_axis, rest[0], rest[1]])
        self._mark(ins[step.x_port], rest[0], "N")
        self._mark(ins[step.x_port], b_axis, "T")
        d_axis = 1 if batch_first else 0
        states = []
        for port in (step.h_port, step.c_port):
            if port is None or self.facts.is_zero(ins[port]):
                states.append(None)
                continue
            self._mark(ins[port], 0, "N")
            states.append(b.axes_op("Unsqueeze", self.value(ins[port]), [d_axis]))
        attrs = dict(step.cell.attrs)
        attrs["direction"] = "reverse" if step.reverse else "forward"
        W, R, B = (a[None] for a in step.weights)
        outs = self.emit_recurrent(kind, attrs, W, R, B, x, states, None, layer.name, onnx_form=True)
        for port, (role, axis) in step.outputs.items():
            if role == "Y":
                y = b.axes_op("Squeeze", outs[0], [2 if batch_first else 1])  # [N,T,H] or [T,N,H]
                t_axis, others = (1, [0, 2]) if batch_first else (0, [1, 2])
                others.insert(axis, t_axis)
                v = b.transpose(y, others)
            else:
                v = b.axes_op("Squeeze", outs[1 if role == "Ho" else 2], [d_axis])
            self.values[(layer.id, port)] = v
        self._rewritten(layer, ins, f"TensorIterator over one {step.cell.type} step -> ONNX {kind} "
                                    f"({attrs['direction']}, layout {self.layout})", step.x_port, rest[0])


def _eliminate_dead(graph: ir.Graph) -> None:
    """Remove nodes no graph output depends on, then initializers nothing reads (subgraphs read outer values by
    name: every value a subgraph's nodes read counts)."""
    live = {id(v) for v in graph.outputs}
    for node in reversed(list(graph)):
        if any(id(o) in live for o in node.outputs):
            live.update(id(i) for i in _reads(node) if i is not None)
        else:
            graph.remove(node, safe=False)
    for name in [n for n, v in graph.initializers.items() if id(v) not in live]:
        graph.initializers.pop(name)


def _reads(node: ir.Node):
    """The values a node reads: its inputs and, for If / Loop, whatever the nodes of its subgraphs read."""
    yield from node.inputs
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            yield from attr.value.outputs
            for inner in attr.value.all_nodes():
                yield from _reads(inner)
