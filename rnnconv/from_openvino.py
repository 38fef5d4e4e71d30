"""`from_openvino`: OpenVINO IR (versions 10 and 11) back to ONNX, recurrent layers as ONNX GRU / LSTM / RNN.

Specs: OpenVINO GRUSequence-5, LSTMSequence-5, RNNSequence-5, GRUCell-3, LSTMCell-1/4, RNNCell-0,
TensorIterator-1 (docs.openvino.ai, Operation Specifications; ../shared/spec/) and ONNX GRU / LSTM / RNN
(onnx.ai/onnx/operators/onnx__GRU.html etc.). The mapping is the inverse of `rnnconv.dialects.openvino.convert`:

1. Sequence ops: gates f,i,c,o -> i,o,f,c (`gates.layer_from_sequence`); the folded bias comes back as
   B = [Wb, Rb] with Rb = 0, exact because only the sum enters the equations (GRU linear_before_reset's 4H bias:
   Wb = [bz, br, Wbh], Rb = [0, 0, Rbh]); X [N,T,I] / Y [N,D,T,H] / states [N,D,H] are transposed to layout 0
   (default) or fed as layout 1.
2. Inputs OpenVINO synthesized: an initial state that is provably zero becomes absent, and sequence_lengths that
   provably equal T for every batch entry (a constant, or Broadcast of Gather(ShapeOf(X), 1)) becomes absent;
   anything else is kept.
3. TensorIterator whose body is exactly one LSTMCell / GRUCell / RNNCell step: the ONNX sequence op.
4. Every other layer through the reverse half of the shared op table (`ops.REVERSE`, keyed by IR type); constant
   sub-graphs (fp16 weights with their decompression Convert, shape arithmetic on static shapes) are folded.

Nothing is written unless the ONNX model passes onnx.checker's full check and matches the IR: the IR run by
rnnconv's IR interpreter against the ONNX model in rnnconv's engine (float64), and the IR in the OpenVINO runtime
(CPU, f32) against the ONNX model in onnxruntime.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import io
from rnnconv import verify as verification
from rnnconv.convert import Result
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import gates as ov_gates
from rnnconv.dialects.openvino import ir as ovir
from rnnconv.dialects.openvino import ops
from rnnconv.dialects.openvino.ops import Key
from rnnconv.errors import BadInput, RnnconvError, Unsupported, UsageError, VerificationFailed
from rnnconv.layer import Cell, Layer

SEQUENCES = {"GRUSequence": "GRU", "LSTMSequence": "LSTM", "RNNSequence": "RNN"}
CELLS = {"GRUCell": "GRU", "LSTMCell": "LSTM", "RNNCell": "RNN"}
MIN_OPSET = 7
FOLD_LIMIT = 1 << 24  # elements: constant sub-graphs larger than this stay operations
_SAME_SHAPE = ("Convert", *ops.UNARY.values())  # layers whose output dims are their input's


# -- the ONNX graph under construction -----------------------------------------------------------------------
class Builder:
    """Nodes, initializers and names of the ONNX graph; folds Transpose chains as it goes."""

    def __init__(self, opset: int, reserved: set[str]):
        self.opset = opset
        self.nodes: list[ir.Node] = []
        self.initializers: dict[str, ir.Value] = {}
        self.reserved = set(reserved)
        self.taken: set[str] = set()
        self.node_names: set[str] = set()
        self._n = itertools.count()

    def name(self, hint: str) -> str:
        hint = hint or "v"
        name = hint
        while name in self.taken or name in self.reserved:
            name = f"{hint}_{next(self._n)}"
        self.taken.add(name)
        return name

    def node_name(self, hint: str) -> str:
        # Node names are their own namespace in ONNX: the recurrent node keeps the IR layer's name.
        name, i = hint, 0
        while name in self.node_names:
            i += 1
            name = f"{hint}_{i}"
        self.node_names.add(name)
        return name

    def const(self, array: np.ndarray, hint: str = "const") -> ir.Value:
        array = np.ascontiguousarray(array)
        name = self.name(hint)
        value = ir.Value(name=name, shape=ir.Shape(array.shape),
                         type=ir.TensorType(ir.DataType.from_numpy(array.dtype)), const_value=ir.tensor(array,
                                                                                                         name=name))
        self.initializers[name] = value
        return value

    def i64(self, values, hint="axes") -> ir.Value:
        return self.const(np.asarray(values, dtype=np.int64), hint)

    def op(self, op_type: str, inputs, attrs: Optional[dict] = None, *, n_out: int = 1, hint: str = "") -> list:
        hint = hint or op_type
        outs = [ir.Value(name=self.name(hint if n_out == 1 else f"{hint}:{k}")) for k in range(n_out)]
        attrs = {k: v for k, v in (attrs or {}).items() if v is not None}
        node = ir.node(op_type, list(inputs), attrs, outputs=outs, name=self.node_name(hint))
        self.nodes.append(node)
        return outs

    def op1(self, op_type, *inputs, hint="", **attrs) -> ir.Value:
        return self.op(op_type, inputs, attrs, hint=hint)[0]

    def transpose(self, value: ir.Value, perm, hint="Transpose") -> ir.Value:
        """Transpose, composed with the Transpose that produced `value` (an identity gives `value` back)."""
        perm = [int(p) for p in perm]
        src = value.producer()
        if src is not None and src.op_type == "Transpose" and "perm" in src.attributes:
            inner = list(src.attributes["perm"].value)
            if len(inner) == len(perm):
                value, perm = src.inputs[0], [inner[p] for p in perm]
        if perm == list(range(len(perm))):
            return value
        return self.op1("Transpose", value, perm=perm, hint=hint)

    def axes_op(self, op_type: str, value: ir.Value, axes, hint="") -> ir.Value:
        """Squeeze / Unsqueeze with constant axes: an input from opset 13, an attribute before."""
        axes = [int(a) for a in axes]
        if self.opset >= 13:
            return self.op1(op_type, value, self.i64(axes), hint=hint)
        return self.op1(op_type, value, axes=axes, hint=hint)


# -- symbolic facts about IR values --------------------------------------------------------------------------
class Facts:
    """What is known about IR outputs without running the graph: constant values, entries of shape vectors
    (static ints or "dim a of tensor k"), tensors filled with one such entry, tensors that are all zeros."""

    def __init__(self, graph: ovir.IRGraph):
        self.graph = graph
        self.layers = graph.by_id()
        self.producers = graph.producers()
        self.consts: dict[Key, np.ndarray] = {}
        self.shape_entries: dict[Key, list] = {}
        self.fill: dict[Key, tuple] = {}
        self.zeros: set[Key] = set()

    def input_key(self, layer: ovir.IRLayer, i: int) -> Key:
        port = layer.inputs[i]
        src = self.producers.get((layer.id, port.id))
        if src is None:
            raise BadInput(f"IR layer {layer.name!r} ({layer.type}): input port {port.id} is not connected")
        return src

    def port(self, key: Key) -> ovir.Port:
        layer = self.layers[key[0]]
        port = ovir._port(layer.outputs, key[1])
        if port is None:
            raise BadInput(f"IR edge from layer {layer.name!r} names output port {key[1]}, which it does not have")
        return port

    def dims(self, key: Key) -> Optional[list[int]]:
        return self.port(key).dims

    def canon(self, key: Key, axis: int) -> tuple:
        """Dim `axis` of tensor `key`, followed back through Transposes and Converts to where it starts."""
        for _ in range(1000):
            layer = self.layers[key[0]]
            if layer.type == "Transpose" and len(layer.inputs) == 2:
                perm = self.consts.get(self.input_key(layer, 1))
                if perm is None or perm.size == 0:
                    break
                key, axis = self.input_key(layer, 0), int(perm.reshape(-1)[axis])
            elif layer.type in _SAME_SHAPE and layer.inputs:
                key = self.input_key(layer, 0)
            elif layer.type == "Slice" and len(layer.inputs) >= 4:
                # Slice-8: axes not sliced keep their size.
                start = self.consts.get(self.input_key(layer, 1))
                axes = self.consts.get(self.input_key(layer, 4)) if len(layer.inputs) > 4 else (
                    None if start is None else np.arange(start.size))
                dims = self.dims(key)
                if axes is None or dims is None:
                    break
                if axis in [int(a) + len(dims) if a < 0 else int(a) for a in axes.reshape(-1)]:
                    break
                key = self.input_key(layer, 0)
            else:
                break
        return key, axis

    def entry(self, key: Key, axis: int) -> tuple:
        dims = self.dims(key)
        if dims is not None and axis < len(dims) and dims[axis] >= 0:
            return ("int", int(dims[axis]))
        return ("dim", *self.canon(key, axis))

    def is_zero(self, key: Key) -> bool:
        c = self.consts.get(key)
        if c is not None:
            return c.size > 0 and not np.any(c)
        return key in self.zeros

    def fills_with(self, key: Key, entry: tuple) -> bool:
        c = self.consts.get(key)
        if c is not None:
            return entry[0] == "int" and c.size > 0 and bool(np.all(c == entry[1]))
        return self.fill.get(key) == entry

    def learn(self, layer: ovir.IRLayer, ins: list[Key]) -> None:
        """Record shape entries, fills and zeros for a layer that was not folded."""
        out = (layer.id, layer.outputs[0].id) if layer.outputs else None
        t = layer.type
        if t == "ShapeOf":
            dims = self.dims(ins[0])
            if dims is not None:
                self.shape_entries[out] = [self.entry(ins[0], a) for a in range(len(dims))]
        elif t == "Gather" and ins[0] in self.shape_entries:
            idx, axis = self.consts.get(ins[1]), self.consts.get(ins[2])
            entries = self.shape_entries[ins[0]]
            if idx is not None and axis is not None and int(axis.reshape(-1)[0]) == 0:
                try:
                    self.shape_entries[out] = [entries[int(i)] for i in idx.reshape(-1)]
                except IndexError:
                    pass
        elif t == "Concat" and int(layer.attrs.get("axis", "0")) == 0:
            entries = []
            for k in ins:
                if k in self.shape_entries:
                    entries += self.shape_entries[k]
                elif k in self.consts and self.consts[k].ndim <= 1 and self.consts[k].dtype.kind in "iu":
                    entries += [("int", int(v)) for v in self.consts[k].reshape(-1)]
                else:
                    return
            self.shape_entries[out] = entries
        elif t in ("Convert", "Squeeze", "Unsqueeze", "Reshape") and ins:
            if ins[0] in self.shape_entries and (t != "Convert" or
                                                  layer.attrs.get("destination_type", "")[:1] in "iu"):
                self.shape_entries[out] = self.shape_entries[ins[0]]
            if ins[0] in self.fill:
                self.fill[out] = self.fill[ins[0]]
            if self.is_zero(ins[0]):
                self.zeros.add(out)
        elif t == "Broadcast" and ins:
            data = ins[0]
            entries = self.shape_entries.get(data)
            if entries is not None and len(entries) == 1:
                self.fill[out] = entries[0]
            elif data in self.consts:
                c = self.consts[data]
                if c.size and np.all(c == c.reshape(-1)[0]) and c.dtype.kind in "iu":
                    self.fill[out] = ("int", int(c.reshape(-1)[0]))
            elif data in self.fill:
                self.fill[out] = self.fill[data]
            if self.is_zero(data):
                self.zeros.add(out)


# -- the converter -----------------------------------------------------------------------------------------
class Converter:
    def __init__(self, graph: ovir.IRGraph, opset: int, layout: int, ir_version: int = 11):
        self.g = graph
        self.facts = Facts(graph)
        self.layout = layout
        self.output_names = output_names(graph, ir_version)
        names = set(self.output_names)
        for p in graph.parameters():
            names.add(_param_name(p))
        self.b = Builder(opset, names)
        self.values: dict[Key, ir.Value] = {}
        self.rewrites: list[dict] = []
        self.roles: dict[tuple, str] = {}  # (parameter key, axis) -> "N" / "T"
        self.lengths: dict[Key, int] = {}  # parameters that feed sequence lengths -> the T they count up to

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
        for layer in self.g.topological():
            ins = [self.facts.input_key(layer, i) for i in range(len(layer.inputs))]
            if layer.type == "Parameter":
                self._parameter(layer)
            elif layer.type == "Const":
                self.facts.consts[(layer.id, layer.outputs[0].id)] = layer.value
            elif layer.type == "Result":
                continue
            elif self._fold(layer, ins):
                continue
            elif layer.type in SEQUENCES:
                self._sequence(layer, ins)
            elif layer.type == "TensorIterator":
                self._tensor_iterator(layer, ins)
            else:
                self.facts.learn(layer, ins)
                outs = ops.REVERSE[layer.type](ops.LayerContext(self.b, layer, ins, self.value, self.facts))
                for port, v in zip(layer.outputs, outs):
                    self.values[(layer.id, port.id)] = v
        outputs = self._outputs()
        # Graph inputs in the IR's Parameter order (OpenVINO's model.inputs), not the order they were reached.
        inputs = [self.values[(p.id, p.outputs[0].id)] for p in self.g.parameters()]
        for v in inputs:
            self._name_dims(v)
        graph = ir.Graph(inputs, outputs, nodes=self.b.nodes, initializers=list(self.b.initializers.values()),
                         opset_imports={"": self.b.opset}, name=self.g.name or "model")
        _eliminate_dead(graph)
        return ir.Model(graph, ir_version=max(8, io.min_ir_version(self.b.opset)), producer_name="rnnconv")

    def _parameter(self, layer: ovir.IRLayer) -> ir.Value:
        dims = _parameter_dims(layer)
        port = layer.outputs[0]
        et = layer.attrs.get("element_type", port.element_type)
        v = ir.Value(name=_param_name(layer), type=ir.TensorType(ir.DataType.from_numpy(ovir.numpy_dtype(et))),
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
        if layer.type in SEQUENCES or layer.type == "TensorIterator" or layer.body is not None:
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

    def _outputs(self) -> list[ir.Value]:
        outputs, used = [], set()
        for res, name in zip(self.g.results(), self.output_names):
            key = self.facts.input_key(res, 0)
            v = self.value(key)
            port = res.inputs[0]
            is_input = v.producer() is None
            if is_input or id(v) in used or v.name in self.b.initializers:
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
        if _flag(layer.attrs, "input_forget"):
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
            src, _ = self.facts.canon(lens, 0)
            if self.facts.layers[src[0]].type == "Parameter":
                t = x_dims[1] if x_dims is not None and len(x_dims) == 3 and x_dims[1] >= 0 else None
                self.lengths[src] = min(self.lengths.get(src, t or verification.DEFAULT_DIM["sequence"]),
                                        t or verification.DEFAULT_DIM["sequence"])
        states = [self._state(h0, "initial_h"), self._state(c0, "initial_c") if c0 is not None else None]
        outs = self.emit_recurrent(kind, layer.attrs, *arrays, self.value(x), states, lens_v, layer.name)
        for port, v in zip(layer.outputs, outs):
            self.values[(layer.id, port.id)] = v
        dropped = [n for n, s, k in (("initial_h", states[0], h0), ("initial_c", states[1], c0))
                   if k is not None and s is None] + (["sequence_lengths"] if full else [])
        self.rewrites.append({"node": layer.name, "op": layer.type,
                              "what": f"{layer.type}-5 -> ONNX {kind} (layout {self.layout})"
                                      + (f"; synthesized {', '.join(dropped)} -> absent" if dropped else "")})

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
        lbr = _flag(attrs, "linear_before_reset")
        attrs = _trim_activations(kind, attrs)
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
        attrs = _trim_activations(kind, attrs)
        direction = attrs.get("direction", "forward")
        H = int(attrs.get("hidden_size", "0") or 0)
        if direction not in ("forward", "reverse", "bidirectional") or H <= 0:
            raise BadInput(f"IR layer {name!r} ({kind}Sequence): direction {direction!r} / hidden_size {H}")
        acts = ov_gates.activations_from_attrs(kind, attrs)
        clip = float(attrs.get("clip", "0") or 0)
        lbr = _flag(attrs, "linear_before_reset")
        return Layer(kind=kind, direction=direction, hidden_size=H, input_size=None,
                     cells=[Cell(activations=acts) for _ in range(2 if direction == "bidirectional" else 1)],
                     clip=clip if clip > 0 else None, linear_before_reset=lbr, layout=self.layout,
                     weights_constant=False, name=name)

    def _runtime_weights(self, kind: str, attrs: dict, keys, label: str) -> tuple:
        """W, R, B computed at run time, put in ONNX form by graph ops: gates f,i,c,o -> i,o,f,c by Split and
        Concat; B = [B, zeros] (GRU linear_before_reset: Wb = [bz, br, Wbh], Rb = [0, 0, Rbh])."""
        b = self.b
        if b.opset < 9:
            raise Unsupported(f"{label}: weights computed at run time need ConstantOfShape (opset 9); use --opset 9 "
                              "or newer")
        order_ov, order_onnx = ov_gates.ORDER[kind], onnx_recurrent.GATES[kind]
        lbr = _flag(attrs, "linear_before_reset")

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
        if kind == "GRU" and lbr:
            bz, br, wbh, rbh = split(bias, 4)
            zero = zeros_like(bz, dtype)
            B = b.op1("Concat", bz, br, wbh, zero, zero, rbh, axis=1)
        else:
            folded = reorder(bias)
            B = b.op1("Concat", folded, zeros_like(folded, dtype), axis=1)
        return reorder(w), reorder(r), B

    def _tensor_iterator(self, layer: ovir.IRLayer, ins: list[Key]) -> None:
        step = one_cell_step(layer, self.facts, ins)
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
        self.rewrites.append({"node": layer.name, "op": "TensorIterator",
                              "what": f"TensorIterator over one {step.cell.type} step -> ONNX {kind} "
                                      f"({attrs['direction']}, layout {self.layout})"})


def fold(layer: ovir.IRLayer, args: list[np.ndarray]) -> Optional[list[np.ndarray]]:
    """The outputs of a layer whose inputs are all constants, computed by the IR interpreter's kernels; None when
    it cannot be (no kernel, an error, or a result too large to store as a constant)."""
    from rnnconv.engine.ir_graph import KERNELS

    try:
        if layer.type == "Convert":
            results = [args[0].astype(ovir.numpy_dtype(layer.attrs["destination_type"]))]
        elif layer.type in KERNELS and layer.type not in CELLS and layer.type not in SEQUENCES:
            results = KERNELS[layer.type](layer, args, np.dtype(np.float32))
            results = list(results) if isinstance(results, (list, tuple)) else [results]
        else:
            return None
    except Exception:
        return None
    if len(results) != len(layer.outputs) or any(np.asarray(r).size > FOLD_LIMIT for r in results):
        return None
    out = []
    for port, r in zip(layer.outputs, results):
        r = np.asarray(r)
        want = ovir.ELEMENT_TYPES.get(port.element_type)
        out.append(r.astype(want[1]) if want is not None and r.dtype != want[1] else r)
    return out


def _flag(attrs: dict, name: str) -> bool:
    return str(attrs.get(name, "false")).lower() in ("true", "1")


def _trim_activations(kind: str, attrs: dict) -> dict:
    """OpenVINO reads the first 1 / 2 / 3 activations of an RNN / GRU / LSTM op and ignores the rest (its ONNX
    import copies a bidirectional ONNX list, e.g. "tanh, tanh", into RNNSequence); ONNX wants exactly that many
    per direction."""
    text = attrs.get("activations")
    if not text:
        return attrs
    names = [n.strip() for n in text.split(",") if n.strip()]
    need = len(ov_gates.DEFAULT_ACTIVATIONS[kind])
    if len(names) <= need:
        return attrs
    return {**attrs, "activations": ", ".join(names[:need])}


def output_names(graph: ovir.IRGraph, ir_version: int = 11) -> list[str]:
    """The ONNX name of each Result, as OpenVINO names that output. IR 11: the Result's `output_names` (which of
    the port's tensor names it is), else the port's first tensor name, else the Result's name. IR 10: the port's
    first tensor name, else the producing layer's name with ".<output index>" when it has several outputs."""
    producers, by_id = graph.producers(), graph.by_id()
    names = []
    for res in graph.results():
        src = producers.get((res.id, res.inputs[0].id if res.inputs else 0))
        layer = by_id.get(src[0]) if src else None
        port = ovir._port(layer.outputs, src[1]) if layer is not None else None
        chosen = _output_names_attr(res)
        if ir_version != 10 and chosen:
            names.append(chosen[0])
        elif port is not None and port.names:
            names.append(port.names[0])
        elif ir_version == 10 and layer is not None:
            index = next(i for i, q in enumerate(layer.outputs) if q.id == src[1])
            names.append(layer.name if len(layer.outputs) == 1 else f"{layer.name}.{index}")
        else:
            names.append(res.name)
    return names


def _output_names_attr(res: ovir.IRLayer) -> list[str]:
    """The tensor names an IR 11 Result's `output_names` picks from its input port."""
    return ovir._split_names(getattr(res, "element_attrs", {}).get("output_names", ""))


def interpreter_names(graph: ovir.IRGraph) -> list[str]:
    """The key under which rnnconv's IR interpreter returns each Result (`output_names`, port name, Result name)."""
    producers, by_id = graph.producers(), graph.by_id()
    out = []
    for res in graph.results():
        src = producers[(res.id, 0)]
        port = ovir._port(by_id[src[0]].outputs, src[1])
        chosen = _output_names_attr(res)
        out.append(chosen[0] if chosen else port.names[0] if port is not None and port.names else res.name)
    return out


def _param_name(layer: ovir.IRLayer) -> str:
    port = layer.outputs[0] if layer.outputs else None
    return port.names[0] if port is not None and port.names else layer.name


def _eliminate_dead(graph: ir.Graph) -> None:
    """Remove nodes no graph output depends on, then initializers nothing reads."""
    live = {id(v) for v in graph.outputs}
    for node in reversed(list(graph)):
        if any(id(o) in live for o in node.outputs):
            live.update(id(i) for i in node.inputs if i is not None)
        else:
            graph.remove(node, safe=False)
    for name in [n for n, v in graph.initializers.items() if id(v) not in live]:
        graph.initializers.pop(name)


# -- TensorIterator with one cell step ---------------------------------------------------------------------
class CellStep:
    def __init__(self):
        self.kind = ""
        self.cell: Optional[ovir.IRLayer] = None
        self.x_port = 0
        self.time_axis = 0
        self.reverse = False
        self.h_port: Optional[int] = None
        self.c_port: Optional[int] = None
        self.weights: tuple = ()
        self.outputs: dict[int, tuple[str, int]] = {}  # TI output port id -> ("Y", time axis) | ("Ho"|"Co", 0)


SHAPE_ONLY = ("Squeeze", "Unsqueeze", "Reshape")


def _shape_after(layer: ovir.IRLayer, dims: list[int], facts: Facts):
    """Output shape of a Squeeze / Unsqueeze / Reshape for an example input shape (None: not constant)."""
    from rnnconv.engine.ir_graph import KERNELS

    args = [np.zeros(dims, dtype=np.float32)]
    for i in range(1, len(layer.inputs)):
        c = facts.consts.get(facts.input_key(layer, i))
        if c is None:
            return None
        args.append(c)
    try:
        return list(np.asarray(KERNELS[layer.type](layer, args, np.dtype(np.float32))).shape)
    except Exception:
        return None


def _example(dims: Optional[list[int]]) -> Optional[list[int]]:
    # Distinct primes for dynamic dims so a reshape that mixes them up is caught.
    if dims is None:
        return None
    primes = iter((7, 11, 13, 17, 19, 23))
    return [d if d >= 0 else next(primes) for d in dims]


def one_cell_step(ti: ovir.IRLayer, outer: Facts, ins: list[Key]) -> CellStep:
    """Recognise a TensorIterator-1 whose body is exactly one LSTMCell / GRUCell / RNNCell step; else Unsupported
    with the reason. Sliced input: X along one axis (stride 1 forward, -1 reverse, part_size 1, full range);
    merged inputs: H (and C) with back edges from the cell's outputs; outputs: the cell's H concatenated along
    the time axis and/or the last H / C."""
    label = f"TensorIterator {ti.name!r}"
    body = ti.body
    if body is None:
        raise BadInput(f"{label}: no <body>")

    def refuse(why: str) -> Unsupported:
        return Unsupported(f"{label}: {why}; rnnconv converts a TensorIterator only when its body is exactly one "
                           "LSTMCell/GRUCell/RNNCell step over the whole sequence (what Model Optimizer emitted)")

    facts = Facts(body)
    in_map = {int(pm["internal_layer_id"]): (int(pm["external_port_id"]), pm) for kind, pm in ti.port_map
              if kind == "input"}
    out_map = [(int(pm["external_port_id"]), int(pm["internal_layer_id"]), pm) for kind, pm in ti.port_map
               if kind == "output"]
    back = {int(e["to-layer"]): int(e["from-layer"]) for e in ti.back_edges}
    ext_port_index = {p.id: i for i, p in enumerate(ti.inputs)}
    by_id = body.by_id()
    cells, others = [], []
    for layer in body.topological():
        bins = [facts.input_key(layer, i) for i in range(len(layer.inputs))]
        out = (layer.id, layer.outputs[0].id) if layer.outputs else None
        if layer.type == "Const":
            facts.consts[out] = layer.value
        elif layer.type == "Parameter":
            ext = in_map.get(layer.id)
            if ext is None:
                raise BadInput(f"{label}: body Parameter {layer.name!r} is fed by no port_map input")
            outer_key = ins[ext_port_index[ext[0]]]
            if "axis" not in ext[1] and layer.id not in back and outer_key in outer.consts:
                facts.consts[out] = outer.consts[outer_key]
        elif layer.type == "Result":
            continue
        elif layer.type in CELLS:
            cells.append(layer)
        elif bins and all(k in facts.consts for k in bins) and layer.type not in SHAPE_ONLY:
            results = fold(layer, [facts.consts[k] for k in bins])
            if results is None:
                others.append(layer)
                continue
            for port, r in zip(layer.outputs, results):
                facts.consts[(layer.id, port.id)] = r
        elif layer.type not in SHAPE_ONLY:
            others.append(layer)
    if len(cells) != 1 or others:
        cell_text = "no LSTMCell/GRUCell/RNNCell" if not cells else f"{len(cells)} cells" if len(cells) > 1 else ""
        other_text = ", ".join(sorted({layer.type for layer in others}))
        raise refuse("its body holds " + "; ".join(t for t in (cell_text, other_text and "other operations "
                                                                + other_text) if t))
    cell = cells[0]
    step = CellStep()
    step.cell, step.kind = cell, CELLS[cell.type]
    n_state = 2 if step.kind == "LSTM" else 1
    cins = [facts.input_key(cell, i) for i in range(len(cell.inputs))]
    n_in = 1 + n_state + 3
    if len(cins) == n_in + 1 and step.kind == "LSTM":
        p = facts.consts.get(cins[-1])
        if p is None or np.any(p):
            raise refuse("the LSTMCell has peepholes (P), which ONNX LSTM holds but OpenVINO's cell semantics "
                         "rnnconv does not map")
        cins = cins[:-1]
    if len(cins) != n_in:
        raise refuse(f"{cell.type} has {len(cins)} inputs")
    if _flag(cell.attrs, "input_forget"):
        raise refuse("the LSTMCell has input_forget")
    weights = tuple(facts.consts.get(k) for k in cins[-3:])
    if any(w is None for w in weights):
        raise refuse("the cell's W, R or B is computed at run time")
    step.weights = weights

    # X: a sliced body Parameter, its size-1 axis removed by Squeeze / Reshape.
    xl = by_id[cins[0][0]]
    if xl.type not in SHAPE_ONLY:
        raise refuse("the cell's X is not the sliced input with its time axis removed")
    param = by_id[facts.input_key(xl, 0)[0]]
    ext = in_map.get(param.id)
    if param.type != "Parameter" or ext is None or "axis" not in ext[1]:
        raise refuse("the cell's X does not come from a sliced input")
    pm = ext[1]
    b_axis, stride = int(pm["axis"]), int(pm.get("stride", "1"))
    start, end = int(pm.get("start", "0")), int(pm.get("end", "-1"))
    if int(pm.get("part_size", "1")) != 1 or (stride, start, end) not in ((1, 0, -1), (-1, -1, 0)):
        raise refuse(f"the input slicing (stride {stride}, start {start}, end {end}, part_size "
                     f"{pm.get('part_size', '1')}) is not one step over the whole sequence")
    pdims = param.outputs[0].dims
    if pdims is None or len(pdims) != 3:
        raise refuse("the sliced input is not 3-D")
    b_axis = b_axis + 3 if b_axis < 0 else b_axis
    example = _example(pdims)
    example[b_axis] = 1
    want = [d for a, d in enumerate(example) if a != b_axis]
    if _shape_after(xl, example, facts) != want:
        raise refuse("the cell's X is not the sliced input with its time axis removed")
    step.x_port, step.time_axis, step.reverse = ext_port_index[ext[0]], b_axis, stride < 0

    # States: merged inputs whose back edges come from Results of the cell's outputs.
    def result_source(rid: int):
        res = by_id.get(rid)
        if res is None or res.type != "Result":
            return None
        return facts.input_key(res, 0)

    for k in range(n_state):
        src = by_id[cins[1 + k][0]]
        ext = in_map.get(src.id)
        if src.type != "Parameter" or ext is None or "axis" in ext[1]:
            raise refuse(f"the cell's {'HC'[k]} input is not a merged input")
        if result_source(back.get(src.id, -1)) != (cell.id, cell.outputs[k].id):
            raise refuse(f"the back edge into the cell's {'HC'[k]} input does not carry the cell's new state")
        if k == 0:
            step.h_port = ext_port_index[ext[0]]
        else:
            step.c_port = ext_port_index[ext[0]]

    # Outputs: H concatenated over time along one axis, or the last H / C.
    for ext_id, rid, pm in out_map:
        src = result_source(rid)
        if src is None:
            raise BadInput(f"{label}: output port_map names body layer {rid}, which is not a Result")
        if "axis" not in pm:
            if src == (cell.id, cell.outputs[0].id):
                step.outputs[ext_id] = ("Ho", 0)
            elif n_state == 2 and src == (cell.id, cell.outputs[1].id):
                step.outputs[ext_id] = ("Co", 0)
            else:
                raise refuse("an output is the last value of something other than the cell's H or C")
            continue
        ol = by_id[src[0]]
        a = int(pm["axis"])
        a = a + 3 if a < 0 else a
        o_stride, o_start, o_end = int(pm.get("stride", "1")), int(pm.get("start", "0")), int(pm.get("end", "-1"))
        if ol.type not in SHAPE_ONLY or facts.input_key(ol, 0) != (cell.id, cell.outputs[0].id):
            raise refuse("a concatenated output is not the cell's H with a time axis added")
        if int(pm.get("part_size", "1")) != 1 or (o_stride, o_start, o_end) != (stride, start, end):
            raise refuse("a concatenated output is not collected in the order the input is read")
        hdims = _example([d for i, d in enumerate(pdims) if i != b_axis][:1] + [int(cell.attrs["hidden_size"])])
        hdims = [hdims[0], hdims[1]]
        want = list(hdims)
        want.insert(a, 1)
        if _shape_after(ol, hdims, facts) != want:
            raise refuse("a concatenated output is not the cell's H with a time axis added")
        step.outputs[ext_id] = ("Y", a)
    return step


# -- support checks ----------------------------------------------------------------------------------------
def validate(graph: ovir.IRGraph, where: str = "IR") -> None:
    """Refuse an IR whose layers contradict each other, before converting: Parameters without an output port or
    too large to feed, edges to layers or ports that do not exist, cycles, two ports with one id, input ports fed
    by no edge or by several, and edges whose two ends declare different ranks or static dims (every IR OpenVINO
    writes agrees there); bodies too."""
    by_id = graph.by_id()
    if len(by_id) != len(graph.layers):
        raise BadInput(f"{where}: two layers share an id")
    for layer in graph.parameters():
        _parameter_dims(layer)
    for e in graph.edges:
        src, dst = by_id.get(e.from_layer), by_id.get(e.to_layer)
        if src is None or dst is None:
            raise BadInput(f"IR edge {e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port} names no layer")
        if ovir._port(src.outputs, e.from_port) is None:
            raise BadInput(f"IR edge from layer {src.name!r} names output port {e.from_port}, which it does not "
                           "have")
        if ovir._port(dst.inputs, e.to_port) is None:
            raise BadInput(f"IR edge into layer {dst.name!r} names input port {e.to_port}, which it does not have")
    graph.topological()
    fed: dict[tuple[int, int], int] = {}
    for e in graph.edges:
        fed[(e.to_layer, e.to_port)] = fed.get((e.to_layer, e.to_port), 0) + 1
    for layer in graph.layers:
        ids = [p.id for p in layer.inputs + layer.outputs]
        if len(ids) != len(set(ids)):
            raise BadInput(f"{where}: layer {layer.name!r} ({layer.type}) has two ports with the same id")
        for p in layer.inputs:
            n = fed.get((layer.id, p.id), 0)
            if n != 1:
                raise BadInput(f"{where}: input port {p.id} of layer {layer.name!r} ({layer.type}) is fed by {n} "
                               "edges, expected 1")
        if layer.body is not None:
            validate(layer.body, f"{where}: body of {layer.name!r}")
    for e in graph.edges:
        src, dst = by_id[e.from_layer], by_id[e.to_layer]
        a, b = ovir._port(src.outputs, e.from_port), ovir._port(dst.inputs, e.to_port)
        if src.type in ("Parameter", "Const") and not a.dims:
            continue  # dims left out of the port (rank from the shape attribute or the data)
        if len(a.dims) != len(b.dims) or any(x >= 0 and y >= 0 and x != y for x, y in zip(a.dims, b.dims)):
            raise BadInput(f"{where}: edge {src.name!r}:{e.from_port} -> {dst.name!r}:{e.to_port} joins shapes "
                           f"{a.dims} and {b.dims}")


def _parameter_dims(layer: ovir.IRLayer) -> Optional[list[int]]:
    """A Parameter's dims (-1 dynamic, None for a dynamic rank), refusing absurd sizes before any allocation."""
    if not layer.outputs:
        raise BadInput(f"IR Parameter {layer.name!r} has no <output> port")
    port = layer.outputs[0]
    et = layer.attrs.get("element_type", port.element_type)
    dims = port.dims
    if "shape" in layer.attrs and not port.dims:
        text = layer.attrs["shape"].strip()
        try:
            dims = None if text == "..." else [(-1 if s.strip() in ("?", "-1") or ".." in s else int(s))
                                                for s in text.split(",") if s.strip()]
        except ValueError:
            raise BadInput(f"IR Parameter {layer.name!r}: shape {text!r} is not a list of dims") from None
    n = float(np.prod([d for d in dims or () if d >= 0], dtype=np.float64))
    if n > PARAMETER_LIMIT:
        nbytes = n * ovir.numpy_dtype(et).itemsize
        raise BadInput(f"IR Parameter {_param_name(layer)!r} declares {n:.4g} elements "
                       f"({verification._human(nbytes)}); refusing a model no input could be fed to")
    return dims


STRUCTURAL = {"Parameter", "Const", "Result", "TensorIterator", *SEQUENCES}


def unsupported_layers(graph: ovir.IRGraph) -> list[str]:
    """Every layer type (top level) neither the recurrent mapping nor the reverse op table handles."""
    bad: dict[str, list[str]] = {}
    for layer in graph.layers:
        if layer.type not in STRUCTURAL and layer.type not in ops.REVERSE:
            bad.setdefault(f"{layer.type}-{layer.version}", []).append(layer.name)
    return [f"layer type {t} has no ONNX mapping (layers {', '.join(repr(n) for n in names[:3])}"
            + (f" and {len(names) - 3} more" if len(names) > 3 else "") + ")" for t, names in sorted(bad.items())]


# -- IR interpreter kernels the verification needs (cells of TensorIterator bodies) -------------------------------
def _cell_kernel(layer, a, fdt):
    """LSTMCell-1/4, GRUCell-3, RNNCell-0 (OpenVINO specs): one step, X [N,I], H [N,H] (, C), W [G*H,I], R, B."""
    from rnnconv.engine.recurrence import run_direction

    kind = CELLS[layer.type]
    n_state = 2 if kind == "LSTM" else 1
    X, states, (W, R, B) = a[0], a[1:1 + n_state], a[1 + n_state:4 + n_state]
    lbr = _flag(layer.attrs, "linear_before_reset")
    Wd, Rd, Wb, Rb = ov_gates.split_direction(kind, W, R, B, lbr)
    clip = float(layer.attrs.get("clip", "0") or 0)
    acts = ov_gates.activations_from_attrs(kind, layer.attrs)
    _, Yh, Yc = run_direction(kind, X[None], Wd, Rd, Wb, Rb, {}, acts, clip=clip if clip > 0 else None,
                              linear_before_reset=lbr, sequence_lens=None, initial_h=states[0],
                              initial_c=states[1] if kind == "LSTM" else None, dtype=fdt)
    return [Yh.astype(fdt)] + ([Yc.astype(fdt)] if kind == "LSTM" else [])


def _register_kernels() -> None:
    from rnnconv.engine import ir_graph

    for t in CELLS:
        ir_graph.KERNELS.setdefault(t, _cell_kernel)


# -- verification ------------------------------------------------------------------------------------------
PARAMETER_LIMIT = 1 << 34  # elements: a declared input larger than this is refused before anything is allocated


def _feeds(model: ir.Model, lengths: dict[str, int], seed: int, uniform: bool = False) -> dict[str, np.ndarray]:
    """Random inputs: N and T where the converter traced batch and time axes, 2 elsewhere; `uniform` gives every
    dynamic dim the same size (for graphs whose dynamic dims are tied in ways the tracing did not see)."""
    dims = {"N": verification.DEFAULT_DIM["batch"], "T": verification.DEFAULT_DIM["sequence"]}
    if uniform:
        size = verification.DEFAULT_DIM["batch"]
        dims = {d.value: size for v in model.graph.inputs for d in (v.shape or ()) if not isinstance(d, int)}
        lengths = {k: min(t, size) for k, t in lengths.items()}
    # random_inputs refuses, with its estimate, inputs too large for memory.
    return verification.random_inputs(model, seed=seed, dims=dims, lengths=lengths)


def _run_checked(fn, what: str):
    try:
        return fn(), ""
    except RnnconvError:
        raise
    except Exception as err:  # a runtime refusing the model is a failed check, reported, not a crash
        return None, f"{what} failed: {type(err).__name__}: {str(err).strip().splitlines()[0] if str(err) else ''}"


def _ov_run(xml: Path, bin_path: Optional[Path], graph: ovir.IRGraph, onnx_names: list[str], feeds: dict
            ) -> dict[str, np.ndarray]:
    """The IR in the OpenVINO runtime (CPU, f32), reshaped to the feeds' static shapes, outputs by ONNX name."""
    from rnnconv.engine import openvino_runtime

    outputs = openvino_runtime.infer(openvino_runtime.read(xml, bin_path), feeds, reshape=True)
    wanted = dict(zip([r.name for r in graph.results()], onnx_names))
    out = {}
    for o in outputs:
        name = wanted.get(o.result) or next((n for n in o.names if n in wanted.values()), None)
        if name is not None:
            out[name] = o.value
    return out


def _check(subject, engines, ref, cand, names, atol, rtol, note=""):
    """Compare at the tolerance of each output's dtype (float32 at most as tight: the runtimes compute in f32)."""
    outputs = []
    for n in names:
        if n not in cand or n not in ref:
            outputs.append(verification.OutputComparison(n, (), float("inf"), float("inf"), float("inf"), 1, 1.0,
                                                         None, problem="missing from one side"))
            continue
        r, c = np.asarray(ref[n]), np.asarray(cand[n])
        dt = r.dtype if r.dtype.kind == "f" and r.dtype.itemsize < 4 else np.dtype(np.float32)
        a_def, r_def = verification.default_tolerances(dt)
        if r.dtype.kind == "f":
            r, c = r.astype(np.float64), c.astype(np.float64)
        outputs.append(verification.compare(n, r, c, a_def if atol is None else atol, r_def if rtol is None else rtol))
    return verification.Check(subject, engines, outputs, note)


def check(model: ir.Model, graph: ovir.IRGraph, xml: Path, bin_path: Optional[Path], lengths: dict[str, int],
          seed: int, atol, rtol, *, runtime: Optional[bool] = None, onnx_names: Optional[list[str]] = None
          ) -> list[verification.Check]:
    """The IR against the ONNX model: interpreter vs engine (float64); OpenVINO runtime vs onnxruntime (f32)."""
    from rnnconv.convert import onnxruntime_outputs
    from rnnconv.engine.graph import run_onnx
    from rnnconv.engine.ir_graph import run_ir

    _register_kernels()
    names = [v.name for v in model.graph.outputs]
    onnx_names = onnx_names or output_names(graph)
    rename = dict(zip(interpreter_names(graph), onnx_names))
    checks = []
    for uniform in (False, True):
        feeds = _feeds(model, lengths, seed, uniform)
        interp, why_i = _run_checked(lambda: {rename.get(k, k): v for k, v in run_ir(graph, feeds, "float64").items()},
                                     "IR interpreter")
        engine, why_e = _run_checked(lambda: run_onnx(model, feeds, "float64"), "ONNX engine")
        if engine is not None and interp is not None:
            break
    if engine is None:
        raise VerificationFailed(f"from-openvino: the converted model does not run: {why_e}")
    if interp is not None:
        checks.append(_check("whole model", "IR interpreter vs ONNX engine (float64)", interp, engine, names, atol,
                             rtol))
    if runtime is None:
        try:
            import openvino  # noqa: F401

            runtime = True
        except ImportError:
            runtime = False
    ov_out, why_ov = (None, "openvino not installed")
    if runtime:
        ov_out, why_ov = _run_checked(lambda: _ov_run(xml, bin_path, graph, onnx_names, feeds), "OpenVINO runtime")
    ort_out, _ = onnxruntime_outputs(model, feeds)
    if ov_out is not None:
        if ort_out is not None:
            checks.append(_check("whole model", "OpenVINO runtime (CPU, f32) vs onnxruntime", ov_out, ort_out,
                                 names, atol, rtol))
        else:
            checks.append(_check("whole model", "OpenVINO runtime (CPU, f32) vs ONNX engine", ov_out, engine, names,
                                 atol, rtol, note="onnxruntime does not run this model (layout 1?)"))
    elif interp is not None and ort_out is not None:
        checks.append(_check("whole model", "IR interpreter vs onnxruntime", interp, ort_out, names, atol, rtol,
                             note=why_ov))
    if not checks:
        raise VerificationFailed(f"from-openvino: nothing could run the IR to check against ({why_i}; {why_ov})")
    return checks


# -- the API -----------------------------------------------------------------------------------------------
def _ir_version(xml: Path) -> int:
    import re

    try:
        with open(xml, "rb") as f:
            head = f.read(4096)
    except OSError:
        return 11
    m = re.search(rb"<net\b[^>]*\bversion=\"(\d+)\"", head)
    return int(m.group(1)) if m else 11



def from_openvino(xml, output=None, *, bin=None, opset: Optional[int] = None, layout: int = 0,
                  verify: str = "full", atol: Optional[float] = None, rtol: Optional[float] = None, seed: int = 0,
                  force: bool = False, runtime: Optional[bool] = None) -> Result:
    """Convert OpenVINO IR `xml` (+ its .bin, beside it or `bin`) to ONNX; verify; write `output` when given.

    `opset`: default-domain opset of the result (default: the newest onnx and onnxruntime both run);
    `layout`: 0 (time-major, Transposes around each recurrent node; onnxruntime runs it) or 1 (batch-major,
    opset >= 14); `verify`: "full" or "none"; `runtime`: also run the OpenVINO runtime (default: when installed).
    """
    from rnnconv.opset import newest_common_opset

    xml = Path(os.fspath(xml))
    bin_path = Path(os.fspath(bin)) if bin is not None else ovir.bin_path_for(xml)
    if verify not in ("full", "none"):
        raise UsageError(f"verify must be 'full' or 'none', got {verify!r}")
    if layout not in (0, 1):
        raise UsageError(f"--layout must be 0 or 1, got {layout}")
    opset = newest_common_opset() if opset is None else int(opset)
    if opset < MIN_OPSET or opset > io.latest_opset():
        raise UsageError(f"--opset must be in {MIN_OPSET}..{io.latest_opset()}, got {opset}")
    if layout == 1 and opset < 14:
        raise UsageError("--layout 1 needs --opset 14 or newer (the layout attribute is new in GRU/LSTM/RNN-14)")
    if not xml.exists():
        raise BadInput(f"{xml}: no such file")
    if bin is not None and not bin_path.exists():
        raise BadInput(f"{bin_path}: no such file")
    if output is not None:
        io.guard_output(Path(output), force=force, inputs=(xml, bin_path))
    graph = ovir.read(xml, bin_path)
    try:
        validate(graph, str(xml))
        conv = Converter(graph, opset, layout, _ir_version(xml))
        model = conv.run()
    except (KeyError, IndexError, ValueError, TypeError, AttributeError, OverflowError) as err:
        # The reader checked the XML and the .bin; what is left is an IR whose layers contradict each other.
        raise BadInput(f"{xml}: malformed IR ({type(err).__name__}: {err})") from err
    report = verification.Report("from-openvino", rewrites=conv.rewrites, verified=verify)
    try:
        io.check_full(model)
    except RnnconvError as err:
        raise VerificationFailed(f"from-openvino: the converted model fails onnx.checker: {err}", report) from err
    if verify == "full":
        lengths = {}
        for key, t in conv.lengths.items():
            v = conv.values.get(key)
            if v is not None:
                lengths[v.name] = t
        report.checks.extend(check(model, graph, xml, bin_path if bin_path.exists() else None, lengths, seed, atol,
                                   rtol, runtime=runtime, onnx_names=conv.output_names))
        if not report.ok:
            raise VerificationFailed(f"from-openvino: {report.verdict()}; nothing written", report)
    if output is not None:
        io.save(model, output, force=force, inputs=(xml, bin_path))
        report.output = str(output)
    return Result(model, report)
