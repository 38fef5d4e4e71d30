"""What transpose folding reads in a graph: Transposes and their perms, the nodes it folds them into (fills,
Slices, Shapes read by Gathers) and the axes a Reshape groups. No edits here; the rules are in `transpose_fold`."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import onnx_ir as ir

from rnnconv.dialects import onnx_recurrent


def shape_cone(u: ir.Node) -> set:
    """Nodes that only compute u's shape/axes input (dynamo exports read Reshape's shape off its own input)."""
    if len(u.inputs) < 2 or u.inputs[1] is None:
        return set()
    cone, stack = set(), [u.inputs[1].producer()]
    while stack:
        n = stack.pop()
        if n is None or n in cone:
            continue
        cone.add(n)
        stack.extend(v.producer() for v in n.inputs if v is not None)
    # keep only nodes whose every output is read by the cone or by u alone
    changed = True
    while changed:
        changed = False
        for n in list(cone):
            if any(o.is_graph_output() or any(c is not u and c not in cone for c in o.consumers()) for o in n.outputs):
                cone.discard(n)
                changed = True
    return cone


def one_element(v: Optional[ir.Value]) -> bool:
    if v is None:
        return False
    if v.shape is not None:
        return tuple(v.shape) == (1,)
    array = onnx_recurrent.constant_array(v)
    return array is not None and array.shape == (1,)


def is_slice(node: Optional[ir.Node]) -> bool:
    return (node is not None and node.op_type == "Slice" and node.domain in ("", "ai.onnx") and len(node.inputs) >= 4
            and node.inputs[3] is not None and onnx_recurrent.constant_array(node.inputs[3]) is not None)


def all_sliced_then_transposed(data: ir.Value, perm: tuple) -> bool:
    """Every reader of `data` is a Slice (constant axes) read only by one Transpose with `perm`, or that Transpose."""
    for sl in data.consumers():
        if is_transpose(sl) and perm_of(sl) == perm:
            continue
        if not is_slice(sl) or sl.inputs[0] is not data or sl.outputs[0].is_graph_output():
            return False
        users = list(sl.outputs[0].consumers())
        if len(users) != 1 or not is_transpose(users[0]) or perm_of(users[0]) != perm:
            return False
    return not data.is_graph_output()


def is_fill(node: Optional[ir.Node]) -> bool:
    """ConstantOfShape, or Expand of a scalar: a tensor whose every element is the same, shaped by one input."""
    if node is None or node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type == "ConstantOfShape":
        return True
    if node.op_type == "Expand" and len(node.inputs) == 2 and node.inputs[0] is not None:
        v = node.inputs[0]
        return v.shape is not None and len(v.shape) == 0
    return False


def shape_gathers(node: ir.Node) -> Optional[list[ir.Node]]:
    """The readers of a Shape node (whole shape) when all are Gathers of constant indices on axis 0; else None."""
    if node.op_type != "Shape" or node.domain not in ("", "ai.onnx") or "start" in node.attributes or \
            "end" in node.attributes or node.outputs[0].is_graph_output():
        return None
    gathers = list(node.outputs[0].consumers())
    ok = gathers and all(g.op_type == "Gather" and g.inputs[0] is node.outputs[0] and len(g.inputs) == 2
                         and onnx_recurrent.constant_array(g.inputs[1]) is not None
                         and int(g.attributes["axis"].value if "axis" in g.attributes else 0) == 0 for g in gathers)
    return gathers if ok else None


def constant_expanded(node: Optional[ir.Node], rank: int) -> Optional[np.ndarray]:
    """The constant an Expand node broadcasts, when it has rank `rank` (or none: a scalar); else None."""
    if node is None or node.op_type != "Expand" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
        return None
    c = onnx_recurrent.constant_array(node.inputs[0])
    return c if c is not None and c.ndim in (0, rank) else None


def is_transpose(node: ir.Node) -> bool:
    return node.op_type == "Transpose" and node.domain in ("", "ai.onnx")


def perm_of(node: ir.Node) -> Optional[tuple]:
    attr = node.attributes.get("perm")
    if attr is not None:
        return tuple(int(p) for p in attr.value)
    x = node.inputs[0]
    if x is not None and x.shape is not None:
        return tuple(reversed(range(len(x.shape))))  # no perm: reverse the axes
    return None


def permuted(shape: Optional[ir.Shape], perm: Sequence[int]) -> Optional[ir.Shape]:
    return None if shape is None or len(shape) != len(perm) else ir.Shape([shape[p] for p in perm])


def tokens(shape: Optional[ir.Shape], rank: int) -> list:
    """Dims to compare: ints and symbol names compare by value; unknown dims only equal themselves."""
    if shape is None or len(shape) != rank:
        return [object() for _ in range(rank)]
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        elif getattr(d, "value", None) is not None:
            out.append(str(d.value))
        else:
            out.append(object())
    return out


def reshape_groups(in_tokens: list, out_shape: Optional[ir.Shape], spec: Optional[np.ndarray],
                    allowzero: int) -> Optional[list[tuple]]:
    """The input axes each output axis of a Reshape is made of, when a row-major reading makes it certain."""
    if spec is not None and spec.ndim == 1:
        out_tokens = []
        for i, s in enumerate(int(v) for v in spec):
            if s == 0 and not allowzero:
                if i >= len(in_tokens):
                    return None
                out_tokens.append(in_tokens[i])
            elif s > 0:
                out_tokens.append(s)
            else:
                out_tokens.append(object())
    elif out_shape is not None:
        out_tokens = tokens(out_shape, len(out_shape))
    else:
        return None
    n_in, n_out = len(in_tokens), len(out_tokens)
    head = 0
    while head < min(n_in, n_out) and same(in_tokens[head], out_tokens[head]):
        head += 1
    tail = 0
    while tail < min(n_in, n_out) - head and same(in_tokens[n_in - 1 - tail], out_tokens[n_out - 1 - tail]):
        tail += 1
    mid_in, mid_out = n_in - head - tail, n_out - head - tail
    if mid_out == 0 and all(tok == 1 for tok in in_tokens[head:n_in - tail]):
        middle = []  # only axes of size 1 dropped (none when mid_in is 0)
    elif mid_out == 1 and mid_in >= 1:
        middle = [tuple(range(head, head + mid_in))]
    else:
        return None
    return ([(i,) for i in range(head)] + middle + [(n_in - tail + i,) for i in range(tail)])


def same(a, b) -> bool:
    return a is b or (type(a) in (int, str) and type(a) is type(b) and a == b)
