"""Where time is in each output that carries a recurrent node's Y: per-step errors and --plot use it."""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.onnx_recurrent import constant_array
from rnnconv.verification.model import Model
from rnnconv.verification.specs import _PASS_THROUGH, SEQUENCE_OPS, _ir_const

_ELEMENTWISE_UNARY = {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "Elu", "Gelu", "Dropout", "Softmax", "LogSoftmax"}
_ELEMENTWISE_BINARY = {"Add", "Sub", "Mul", "Div"}


def time_axes(model: Model) -> dict[str, int]:
    """Outputs that carry a recurrent node's Y (through Transpose/Squeeze/Unsqueeze/Identity/Cast), with the
    axis that is time there."""
    return _onnx_time_axes(model.onnx) if model.format == "onnx" else _ir_time_axes(model.graph)


def _onnx_time_axes(model: ir.Model) -> dict[str, int]:
    outputs = {v.name for v in model.graph.outputs}
    found: dict[str, int] = {}

    def follow(value: ir.Value, axis: int, rank: int, depth: int = 0):
        if value is None or depth > 16:
            return
        if value.name in outputs:
            found.setdefault(value.name, axis)
        for node, index in value.uses():
            if index != 0 or not node.outputs:
                continue
            op = node.op_type
            if op in _PASS_THROUGH or op in _ELEMENTWISE_UNARY:
                follow(node.outputs[0], axis, rank, depth + 1)
            elif op in _ELEMENTWISE_BINARY or op == "MatMul":
                # a head (x @ W + b): the time axis stays when the other operand is a constant that
                # broadcasts into x's trailing axes without reaching the time axis
                other = constant_array(node.inputs[1]) if len(node.inputs) > 1 else None
                keep = axis <= rank - 3 if op == "MatMul" else axis < rank - (np.ndim(other) if other is not None
                                                                              else rank)
                if other is not None and np.ndim(other) <= 2 and keep:
                    follow(node.outputs[0], axis, rank, depth + 1)
            elif op == "Transpose" and "perm" in node.attributes:
                follow(node.outputs[0], list(node.attributes["perm"].value).index(axis), rank, depth + 1)
            elif op in ("Squeeze", "Unsqueeze"):
                axes = _onnx_axes(node)
                if axes is None:
                    continue
                if op == "Squeeze":
                    axes = sorted({a % rank for a in axes})
                    if axis not in axes:
                        follow(node.outputs[0], axis - sum(a < axis for a in axes), rank - len(axes), depth + 1)
                else:
                    new_rank = rank + len(axes)
                    a = axis
                    for ax in sorted(x % new_rank for x in axes):
                        if ax <= a:
                            a += 1
                    follow(node.outputs[0], a, new_rank, depth + 1)

    for rn in onnx_recurrent.find(model):
        y = rn.outputs.get("Y")
        if y is not None:
            follow(y, 1 if rn.layer.layout else 0, 4)
    return found


def _onnx_axes(node: ir.Node) -> Optional[list[int]]:
    if "axes" in node.attributes:
        return [int(a) for a in node.attributes["axes"].value]
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        arr = constant_array(node.inputs[1])
        return None if arr is None else [int(a) for a in np.asarray(arr).reshape(-1)]
    return None


def _ir_time_axes(graph) -> dict[str, int]:
    by_id = graph.by_id()
    consumers: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in graph.edges:
        consumers.setdefault((e.from_layer, e.from_port), []).append((e.to_layer, e.to_port))
    found: dict[str, int] = {}
    result_names = {res.id: name for res, name in zip(graph.results(), graph.output_names())}

    def follow(layer, port_id: int, axis: int, depth=0):
        if depth > 16:
            return
        for to_layer, to_port in consumers.get((layer.id, port_id), []):
            nxt = by_id[to_layer]
            if nxt.type == "Result":
                found.setdefault(result_names.get(nxt.id, nxt.name), axis)
            elif not nxt.outputs or to_port != nxt.inputs[0].id:
                continue
            elif nxt.type == "Convert":
                follow(nxt, nxt.outputs[0].id, axis, depth + 1)
            elif nxt.type == "Transpose":
                perm = _ir_const(graph, nxt, 1)
                order = [] if perm is None else [int(p) for p in np.asarray(perm).reshape(-1)]
                if axis in order:  # not a permutation (malformed IR): the runs themselves report it
                    follow(nxt, nxt.outputs[0].id, order.index(axis), depth + 1)
            elif nxt.type == "Squeeze":
                axes = _ir_const(graph, nxt, 1)
                rank = len(nxt.inputs[0].dims or [])
                if axes is not None and rank:
                    axes = sorted(int(a) % rank for a in np.asarray(axes).reshape(-1))
                    if axis not in axes:
                        follow(nxt, nxt.outputs[0].id, axis - sum(a < axis for a in axes), depth + 1)

    for layer in graph.layers:
        if layer.type in SEQUENCE_OPS and layer.outputs:
            follow(layer, layer.outputs[0].id, 2)  # Y is [N, D, T, H]
    return found
