"""On request (`rnnconv.fuse(..., bidirectional=True)`), a forward and a reverse fusion over the same sequence
become one bidirectional node (the form an ONNX exporter writes for a bidirectional layer, one node per layer).

Not the default: one node per direction was chosen when OpenVINO's CPU plugin seemed to run it slightly faster
(it splits a bidirectional node into its two directions again); those timings were of wrong numbers, as OpenVINO
2026.4's ONNX import computes two recurrent nodes reading one sequence wrongly at batch above 1 (measured, see
rnnconv.commands.fuse: fuse's report says so). One bidirectional node it computes right; onnxruntime runs both
alike.

ONNX's bidirectional node is its two directions side by side: W, R, B and the initial states stacked along the
direction axis, Y's axis 1 and Y_h / Y_c's axis 0 holding the forward then the reverse result. So each old node's
output is the Slice of its direction, and the merged fusion is checked like any other (the matched nodes of both
chains against the new ones). Two fusions are merged only when that is all that changes: a forward and a reverse
one (or two of one step, which run alike either way), the same op, X (the same value, or the same glue over the
same values), hidden size and attributes but the direction, the same initial states given (both or neither), neither
reading what the other computes; otherwise they stay two nodes, which is as exact.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import GATES, constant_array
from rnnconv.passes.fuse_match import Fusion, in_order


def merge(planner, fusions: list) -> list:
    """`fusions` with each forward/reverse pair over the same X replaced by one bidirectional fusion."""
    out, used = [], set()
    for k, a in enumerate(fusions):
        if k in used:
            continue
        partner = next((j for j in range(k + 1, len(fusions)) if j not in used
                        and _mergeable(a, fusions[j])), None)
        if partner is None:
            out.append(a)
            continue
        used.add(partner)
        b = fusions[partner]
        forward, reverse = (b, a) if _direction(_node(a)) == "reverse" else (a, b)
        out.append(_merged(planner, forward, reverse))
    return out


def _node(f) -> ir.Node:
    return next(n for n in f.nodes if n.name == f.name)


def _direction(node: ir.Node) -> str:
    a = node.attributes.get("direction")
    return a.value if a is not None else "forward"


def _others(node: ir.Node) -> dict:
    return {k: (a.value if not isinstance(a.value, (list, tuple)) else list(a.value))
            for k, a in node.attributes.items() if k != "direction"}


def _inputs(node: ir.Node, k: int):
    return node.inputs[k] if len(node.inputs) > k else None


def _mergeable(a, b) -> bool:
    na, nb = _node(a), _node(b)
    if na.op_type != nb.op_type:
        return False
    if {_direction(na), _direction(nb)} != {"forward", "reverse"} and not (_one_step(a) and _one_step(b)):
        return False
    if _signature(na.inputs[0], a.nodes) != _signature(nb.inputs[0], b.nodes) or _others(na) != _others(nb):
        return False
    if any(_inputs(n, 4) is not None for n in (na, nb)):  # sequence_lens
        return False
    for k in (5, 6, 7):  # initial_h, initial_c, P: given in both or neither
        if (_inputs(na, k) is None) != (_inputs(nb, k) is None) or (k == 7 and _inputs(na, k) is not None):
            return False
    if any(constant_array(_inputs(n, k)) is None for n in (na, nb) for k in (1, 2)):
        return False
    return not _downstream(a, b.inputs) and not _downstream(b, a.inputs)


def _one_step(f) -> bool:
    """A chain of one step: it runs the same forward or reverse (Scan and Loop bodies run any number)."""
    return f.steps == 1 and not any(n.op_type in ("Scan", "Loop") for n in f.matched)


def _signature(v, made: list):
    """What X is, for comparing two fusions' X: the value itself, or the glue a fusion wrote for it (the steps'
    inputs stacked, or the sequence sliced to the steps) as ops over the same values and constants."""
    array = constant_array(v)
    if array is not None:
        return (array.dtype.str, array.shape, array.tobytes())
    node = v.producer()
    if node is None or not any(node is n for n in made):
        return id(v)
    attrs = tuple(sorted((k, str(a.value)) for k, a in node.attributes.items()))
    return (node.op_type, attrs, tuple(None if i is None else _signature(i, made) for i in node.inputs))


def _feeding(v, made: list) -> list:
    """The fusion's own nodes that compute `v` (the glue of its X)."""
    node = v.producer()
    if node is None or not any(node is n for n in made):
        return []
    return [node] + [m for i in node.inputs if i is not None for m in _feeding(i, made)]


def _downstream(f, values) -> bool:
    """Whether any of `values` is computed from what the fusion's matched nodes compute."""
    want = {id(v) for v in values}
    seen, todo = set(), [o for n in f.matched for o in n.outputs]
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if id(v) in want:
            return True
        todo.extend(o for u in v.uses() for o in u.node.outputs)
    return False


def _merged(planner, fw, rv):
    nf, nr = _node(fw), _node(rv)
    op = nf.op_type
    G, H = len(GATES[op]), nf.attributes["hidden_size"].value
    stem = planner.names(f"{op.lower()}_fused")
    inits = [v for f in (fw, rv) for v in f.new_initializers
             if not any(v is _inputs(n, k) for n in (nf, nr) for k in (1, 2, 3))]
    pre = [n for f, node in ((fw, nf), (rv, nr)) for n in f.nodes[:f.nodes.index(node)]]
    dropped = [nf, nr] + (_feeding(nr.inputs[0], rv.nodes) if nr.inputs[0] is not nf.inputs[0] else [])
    pre = [n for n in pre if not any(n is m for m in dropped)]  # the same glue twice: the reverse's X goes
    post = [n for f, node in ((fw, nf), (rv, nr)) for n in f.nodes[f.nodes.index(node) + 1:]]
    stacked = []
    for k, name in ((1, "W"), (2, "R"), (3, "B")):
        arrays = [constant_array(_inputs(n, k)) for n in (nf, nr)]
        if all(a is None for a in arrays):
            stacked.append(None)
            continue
        dtype = next(a.dtype for a in arrays if a is not None)
        arrays = [np.zeros((1, 2 * G * H), dtype) if a is None else a for a in arrays]
        stacked.append(planner._const(np.concatenate(arrays, axis=0), f"{stem}_{name}", inits))
    glue = []
    ins = [nf.inputs[0], *stacked, None]
    for k in range(5, min(len(nf.inputs), 7)):
        if _inputs(nf, k) is None:
            ins.append(None)
            continue
        cat, (v,) = planner._node("Concat", [nf.inputs[k], nr.inputs[k]], f"{stem}_initial_{'hc'[k - 5]}", axis=0)
        glue.append(cat)
        ins.append(v)
    while ins[-1] is None:
        ins.pop()
    attrs = _others(nf)
    if "activations" in attrs:  # one list for both directions: the forward's, then the reverse's
        attrs["activations"] = attrs["activations"] * 2
    node, outs = planner._node(op, ins, stem, n_out=max(len(nf.outputs), len(nr.outputs)),
                               direction="bidirectional", **attrs)
    glue.append(node)
    swap = {}
    for d, old in enumerate((nf, nr)):
        for k, o in enumerate(old.outputs):
            if o is None or not o.uses() and not any(o is new for _, new in fw.replaced + rv.replaced):
                continue
            axis = 1 if k == 0 else 0  # Y [T, D, N, H]; Y_h, Y_c [D, N, H]
            hint = f"{stem}_{'Y' if k == 0 else 'hc'[k - 1]}_{('forward', 'reverse')[d]}"
            if planner.opset >= 10:
                ends = [planner._const(np.array([x], np.int64), f"{hint}_{w}", inits)
                        for w, x in (("starts", d), ("ends", d + 1), ("axes", axis))]
                s, (v,) = planner._node("Slice", [outs[k], *ends], hint)
            else:
                s, (v,) = planner._node("Slice", [outs[k]], hint, starts=[d], ends=[d + 1], axes=[axis])
            glue.append(s)
            ir.convenience.replace_all_uses_with(o, v)
            swap[id(o)] = v
    for old in dropped:  # they read nothing more
        for k in range(len(old.inputs)):
            old.replace_input_with(k, None)
    replaced = [(old, swap.get(id(new), new)) for f in (fw, rv) for old, new in f.replaced]
    matched = in_order(planner.graph, fw.matched + rv.matched)
    nodes = pre + glue + post
    inits = [v for v in inits if any(v is i for n in nodes for i in n.inputs)]
    reads = list({id(v): v for v in fw.inputs + rv.inputs}.values())
    dtype = stacked[0].dtype.name.lower() if stacked[0].dtype is not None else "float"
    what = (f"{fw.what[0].split(' -> ')[0]} (forward) and {rv.what[0].split(' -> ')[0]} (reverse) -> one {op} node "
            f"(bidirectional, hidden {H}" + (f", computing in {dtype}" if dtype == "float16" else "") + ")")
    context = in_order(planner.graph, list({id(n): n for n in fw.context + rv.context}.values()))
    return Fusion(op, node.name, matched, nodes, replaced, reads, inits, [what], fw.steps + rv.steps,
                  f"{fw.where}, {rv.where}", context)
