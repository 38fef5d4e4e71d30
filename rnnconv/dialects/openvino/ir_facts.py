"""What the IR -> ONNX conversion knows about IR values without running the graph (constants, folded
sub-graphs, shape entries, fills, zeros) and the names OpenVINO gives a model's inputs and outputs."""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import ops
from rnnconv.dialects.openvino.ops import Key
from rnnconv.errors import BadInput

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
        self._consumed: Optional[set[Key]] = None

    def consumed(self, key: Key) -> bool:
        """Whether some layer (a Result included) reads output `key`."""
        if self._consumed is None:
            self._consumed = {(e.from_layer, e.from_port) for e in self.graph.edges}
        return key in self._consumed

    def input_key(self, layer: ovir.IRLayer, i: int) -> Key:
        port = layer.inputs[i]
        src = self.producers.get((layer.id, port.id))
        if src is None:
            raise BadInput(f"IR layer {layer.name!r} ({layer.type}): input port {port.id} is not connected")
        return src

    def port(self, key: Key) -> ovir.Port:
        layer = self.layers[key[0]]
        port = ovir.find_port(layer.outputs, key[1])
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


def flag(attrs: dict, name: str) -> bool:
    return str(attrs.get(name, "false")).lower() in ("true", "1")
