"""The two directions' registrations, and what their mapping functions see.

`TABLE`: ONNX op -> `OpMapping` (the IR operations it becomes and `to_openvino`). The IR -> ONNX direction is
part of each IR type's entry in `registry.IR_OPS` (with its shape rule and kernel); `REVERSE` reads it: IR type
(without version) -> the function turning such a layer into ONNX nodes. The op family modules register both
directions of each op side by side.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino import registry
from rnnconv.dialects.openvino.graph import IRGraph, IRLayer, Out, known_types, numpy_dtype
from rnnconv.errors import BadInput, Unsupported

Key = tuple[int, int]  # (layer id, output port id) of an IR graph


# -- ONNX -> OpenVINO ----------------------------------------------------------------------------------------
class Context:
    """What a mapping function sees: the IR graph being built and the ONNX value -> IR port map."""

    def __init__(self, graph: IRGraph, opset: int):
        self.g = graph
        self.opset = opset
        self.values: dict[str, Out] = {}

    def inp(self, node: ir.Node, i: int) -> Optional[Out]:
        """The IR port of ONNX input i (None when absent or empty)."""
        if i >= len(node.inputs) or node.inputs[i] is None or node.inputs[i].name == "":
            return None
        v = node.inputs[i]
        if v.name not in self.values:
            raise BadInput(f"{node.op_type} node {node.name!r}: input {v.name!r} is produced by no earlier node")
        return self.values[v.name]

    def const_input(self, node: ir.Node, i: int) -> Optional[np.ndarray]:
        out = self.inp(node, i)
        return None if out is None else out.const

    def const(self, array, dtype=None) -> Out:
        return self.g.const(np.asarray(array, dtype=dtype))

    def i64(self, values) -> Out:
        return self.g.const(np.asarray(values, dtype=np.int64))


def attr(node: ir.Node, name: str, default=None):
    a = node.attributes.get(name)
    return default if a is None else a.value


def ints_attr(node: ir.Node, name: str, default=None) -> Optional[list[int]]:
    v = attr(node, name, default)
    return None if v is None else [int(x) for x in v]


def np_type(out: Out) -> np.dtype:
    return numpy_dtype(out.element_type)


@dataclasses.dataclass(frozen=True)
class OpMapping:
    onnx: str
    openvino: tuple[str, ...]  # IR types emitted, "Type-version"
    to_openvino: Callable[[Context, ir.Node], list[Out]]
    # The IR type maps back to this ONNX op 1:1 (the first entry of `reverse_index()`).
    reversible: bool = False


TABLE: dict[str, OpMapping] = {}


def mapping(onnx_op: str, *openvino: str, reversible: bool = False):
    def register(fn):
        TABLE[onnx_op] = OpMapping(onnx_op, openvino, fn, reversible)
        for t in openvino:
            e = registry.entry(t.split("-")[0])
            if onnx_op not in e.onnx:
                e.onnx += (onnx_op,)
        return fn

    return register


def reverse_index() -> dict[str, list[OpMapping]]:
    """IR type (without version) -> the table entries that emit it; the first is the 1:1 one when reversible."""
    out: dict[str, list[OpMapping]] = {}
    for m in TABLE.values():
        for t in m.openvino:
            out.setdefault(t.split("-")[0], []).append(m)
    for v in out.values():
        v.sort(key=lambda m: not m.reversible)
    return out


# -- OpenVINO -> ONNX ----------------------------------------------------------------------------------------
class LayerContext:
    """What a reverse mapping sees: the IR layer, its inputs (as ONNX values, or constants when known), and `b`,
    the ONNX graph under construction (`op1`, `op`, `const`, `i64`, `transpose`, `opset`).

    `value(key)` gives the ONNX value of an IR output; `facts` knows constants (`consts`), `dims(key)` and
    `port(key)` of IR outputs."""

    def __init__(self, b, layer: IRLayer, keys: list[Key], value: Callable[[Key], ir.Value], facts):
        self.b, self.layer, self.keys = b, layer, keys
        self.opset = b.opset
        self._value, self._facts = value, facts

    def v(self, i: int) -> ir.Value:
        return self._value(self.keys[i])

    def c(self, i: int) -> Optional[np.ndarray]:
        return self._facts.consts.get(self.keys[i]) if i < len(self.keys) else None

    def need_const(self, i: int, what: str) -> np.ndarray:
        c = self.c(i)
        if c is None:
            raise Unsupported(f"IR layer {self.layer.name!r} ({self.layer.type}): {what} is computed at run time; "
                              "rnnconv maps it only when it is constant")
        return c

    def dims(self, i: int) -> Optional[list[int]]:
        return self._facts.dims(self.keys[i])

    def used(self, j: int) -> bool:
        """Whether output j of the layer is read by anything."""
        return self._facts.consumed((self.layer.id, self.layer.outputs[j].id))

    def producer(self, i: int) -> tuple[IRLayer, list[Key]]:
        """The layer whose output is input i, and the keys of its own inputs."""
        return self.producer_of(self.keys[i])

    def producer_of(self, key: Key) -> tuple[IRLayer, list[Key]]:
        layer = self._facts.layers[key[0]]
        return layer, [self._facts.input_key(layer, j) for j in range(len(layer.inputs))]

    def key_value(self, key: Key) -> ir.Value:
        """The ONNX value of any IR output (`producer` gives keys)."""
        return self._value(key)

    def key_const(self, key: Key) -> Optional[np.ndarray]:
        return self._facts.consts.get(key)

    def key_dims(self, key: Key) -> Optional[list[int]]:
        return self._facts.dims(key)

    def key_type(self, key: Key) -> str:
        return self._facts.port(key).element_type

    def element_type(self, i: int) -> str:
        return self._facts.port(self.keys[i]).element_type

    def np_type(self, i: int) -> np.dtype:
        return numpy_dtype(self.element_type(i))

    def as_i64(self, i: int, hint: str = "slice") -> ir.Value:
        """Input i as int64 (ONNX index inputs are int64 where OpenVINO accepts any integer type)."""
        c = self.c(i)
        if c is not None:
            return self.b.i64(c.astype(np.int64), hint)
        return self.v_i64(i)

    def axes(self, i: int) -> ir.Value:
        """Input i as ONNX's axes input: int64 and 1-D (OpenVINO also takes a scalar)."""
        c = self.c(i)
        if c is not None:
            return self.b.i64(np.asarray(c).astype(np.int64).reshape(-1), "axes")
        v = self.v_i64(i)
        return v if self.dims(i) != [] else self.b.op1("Reshape", v, self.b.i64([1], "shape"))

    def v_i64(self, i: int) -> ir.Value:
        """The ONNX value of input i, with a Cast when its element type is not i64."""
        v = self.v(i)
        if self.element_type(i) != "i64":
            v = self.b.op1("Cast", v, to=int(ir.DataType.INT64))
        return v

    def attr(self, key: str, default=None):
        return self.layer.attrs.get(key, default)

    def flag(self, key: str, default=False) -> bool:
        v = self.layer.attrs.get(key)
        return default if v is None else v.strip().lower() in ("true", "1")

    @property
    def hint(self) -> str:
        return self.layer.name

    def unsupported(self, what: str, *, opset: Optional[int] = None) -> Unsupported:
        """`opset`: the ONNX opset from which the layer can be expressed."""
        return Unsupported(f"IR layer {self.layer.name!r} ({self.layer.type}-{self.layer.version}): {what}",
                           fixes=(f"opset={opset}",) if opset else ())

    def broadcast_numpy(self) -> None:
        """Refuse an auto_broadcast other than numpy / none: ONNX broadcasts numpy-style only."""
        mode = self.attr("auto_broadcast", "numpy").lower()
        if mode not in ("numpy", "none"):
            raise self.unsupported(f"auto_broadcast={mode!r}; ONNX broadcasts numpy-style only")


REVERSE: registry.Functions = registry.Functions("to_onnx")  # IR type -> (LayerContext) -> ONNX values


def reverse(*ir_types: str):
    """Register the IR -> ONNX direction of these IR types (one spelling each: the reader canonicalizes)."""
    def register(fn):
        registry.register("to_onnx", *ir_types)(fn)
        known_types(*ir_types)
        return fn

    return register
