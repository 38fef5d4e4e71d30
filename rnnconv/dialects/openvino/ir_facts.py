"""What the IR -> ONNX conversion knows about IR values without running the graph (constants, folded
sub-graphs, shape entries, fills, zeros) and the names OpenVINO gives a model's inputs and outputs."""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.dialects.openvino import ir as ovir
from rnnconv.dialects.openvino import ops
from rnnconv.dialects.openvino.gates import CELLS, SEQUENCES
from rnnconv.dialects.openvino.ops import Key
from rnnconv.errors import BadInput

FOLD_LIMIT = 1 << 24  # elements: constant sub-graphs larger than this stay operations
_SAME_SHAPE = ("Convert", *ops.UNARY.values())  # layers whose output dims are their input's


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


def flag(attrs: dict, name: str) -> bool:
    return str(attrs.get(name, "false")).lower() in ("true", "1")


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


def param_name(layer: ovir.IRLayer) -> str:
    port = layer.outputs[0] if layer.outputs else None
    return port.names[0] if port is not None and port.names else layer.name
