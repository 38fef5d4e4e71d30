"""Freeing the sequence length an export froze (fuse's opt-in interface change): the graph inputs the recurrent
nodes read their sequence from get a symbolic time axis.

Case 1: every recurrent node's X is a graph input, or one through Transposes (the time axis followed through each
    perm) or through another recurrent node (its Y, squeezed), and all of them have the same static length: that
    axis of each becomes `SEQUENCE`.
Case 2: an X computed otherwise (a Slice of a longer input, steps' inputs stacked, a Conv...) or lengths that differ
    are refused with the node and the reason: the length is then not the model's to free.
Which outputs have a time axis is measured by the caller (commands/fuse.py runs the model at two lengths).
"""

from __future__ import annotations

import onnx_ir as ir

from rnnconv.dialects import onnx_recurrent
from rnnconv.errors import Unsupported

SEQUENCE = "sequence"


def sequence_axes(model: ir.Model) -> list[tuple[ir.Value, int]]:
    """(graph input, time axis) for every recurrent node of the main graph (Case 1), or Unsupported (Case 2)."""
    graph = model.graph
    found: dict[int, tuple[ir.Value, int]] = {}
    refusals = []
    for node in graph:
        if node.op_type not in onnx_recurrent.OPS or node.domain not in ("", "ai.onnx"):
            continue
        x, axis = node.inputs[0], _layout(node)
        while x is not None and x not in graph.inputs:
            p = x.producer()
            below = p.inputs[0].producer() if p is not None and p.op_type == "Squeeze" else None
            if below is not None and below.op_type in onnx_recurrent.OPS and p.inputs[0] is below.outputs[0] \
                    and _axes(p) == [1] and axis == 0 and not _layout(below):
                x = below.inputs[0]  # another recurrent node's Y [T, 1, N, H]: its time axis is its X's
                continue
            if p is None or p.op_type not in ("Transpose", "Identity"):
                source = f"{p.op_type} {onnx_recurrent.node_label(p)}" if p is not None else "a constant"
                refusals.append(f"{onnx_recurrent.node_label(node)} reads its sequence from {source}")
                x = None
                break
            if p.op_type == "Transpose":
                perm = p.attributes.get("perm")
                rank = len(x.shape) if x.shape is not None else None
                perm = list(perm.value) if perm is not None else list(range(rank - 1, -1, -1)) if rank else None
                if perm is None:
                    refusals.append(f"{onnx_recurrent.node_label(p)}: a Transpose of unknown rank")
                    x = None
                    break
                axis = perm[axis]
            x = p.inputs[0]
        if x is not None:
            found[id(x)] = (x, axis)
    if not found and not refusals:
        refusals.append("the model holds no recurrent node")
    lengths = {v.shape[a] if v.shape is not None else None for v, a in found.values()}
    if len(lengths) > 1 or None in lengths or any(not isinstance(t, int) for t in lengths):
        refusals.append(f"the sequences have lengths {sorted(map(str, lengths))}, not one static length")
    if refusals:
        raise Unsupported("cannot free the sequence length: " + "; ".join(refusals))
    return list(found.values())


def _layout(node: ir.Node) -> int:
    layout = node.attributes.get("layout")
    return 1 if layout is not None and layout.value == 1 else 0


def _axes(squeeze: ir.Node):
    if len(squeeze.inputs) > 1 and squeeze.inputs[1] is not None:
        a = onnx_recurrent.constant_array(squeeze.inputs[1])
        return None if a is None else [int(v) for v in a.reshape(-1)]
    axes = squeeze.attributes.get("axes")
    return None if axes is None else list(axes.value)


def free(axes: list[tuple[ir.Value, int]]) -> int:
    """Make each (input, axis) symbolic; returns the length it had."""
    length = axes[0][0].shape[axes[0][1]]
    for value, axis in axes:
        dims = list(value.shape)
        dims[axis] = ir.SymbolicDim(SEQUENCE)
        value.shape = ir.Shape(dims)
    return length
