"""The ONNX graph the IR -> ONNX conversion builds: unique value and node names, initializers, and Transposes
composed as they are added; `child()` builds a subgraph (If branch, Loop body) in the same name space, its
constants kept as initializers of the main graph (a subgraph reads them from the outer scope)."""

from __future__ import annotations

import itertools
from typing import Optional

import numpy as np
import onnx_ir as ir


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

    def child(self) -> "Builder":
        """A builder for a subgraph: its own nodes; names (unique across nested graphs, as ONNX's SSA rule asks)
        and initializers shared with this one."""
        sub = Builder.__new__(Builder)
        sub.__dict__.update(self.__dict__)
        sub.nodes = []
        return sub

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
        array = np.asarray(array, order="C")  # a scalar stays rank 0 (ascontiguousarray makes it [1])
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
