"""Scan nodes whose body computes one cell step become one ONNX RNN / GRU / LSTM node (part of `fuse`; Loop nodes
are read in passes/fuse_loop.py, and both are built here).

Case 1 (Scan, opset 9+): one scan input along axis 0, a body that is exactly one step of a form
    passes/fuse_match.py or fuse_keras.py recognizes: the body's state inputs are the step's hidden (and cell)
    state in, its scanned input is what the step projects by W, its state outputs are the step's state out, and
    every scan output is the step's hidden state out (or an Identity of it). Direction: the scan input's (a
    reversed input needs reversed scan outputs, as a recurrent node's Y is in time order).
Case 2: anything else is left as it is; a body holding a step but more than the step is reported (a near-miss).
"""

from __future__ import annotations

import dataclasses
from typing import Union

import onnx_ir as ir

import numpy as np

from rnnconv.dialects.onnx_recurrent import GATES, node_label
from rnnconv.passes.fuse_keras import find_steps
from rnnconv.passes.fuse_match import Fusion, Step, attr, const, producer

BODY_SINCE = 9  # Scan-9: scan inputs without a batch axis, per-input axes and directions


@dataclasses.dataclass
class BodyStep:
    step: Step
    direction: str
    X: ir.Value  # the sequence, [T, N, I], of the enclosing graph
    initial: list  # the initial states, [N, H] each, of the enclosing graph
    roles: list = dataclasses.field(default_factory=list)  # per node output: "h", "c", "Y", ("pass", value), None
    flip: bool = False  # Y in the node's order is the reverse of the Loop's (a reverse node over a reversed input)
    context: list = dataclasses.field(default_factory=list)  # nodes computing the trip count, a reversed input


def outer_reads(body: ir.Graph) -> list:
    """The values of the enclosing graph that the body reads (captured weights, the sequence of a Loop)."""
    made = {id(v) for v in body.inputs} | {id(o) for n in body for o in n.outputs}
    made |= {id(v) for v in body.initializers.values()}
    out, seen = [], set()
    for n in body:
        for v in n.inputs:
            if v is not None and id(v) not in made and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


def body_step(node: ir.Node, opset: int) -> Union[BodyStep, str, None]:
    """The Scan node as Case 1; a reason string for a near-miss; None when its body holds no step at all."""
    body = attr(node, "body")
    if body is None or opset < BODY_SINCE:
        return None
    steps = find_steps(body)
    if not steps:
        return None
    if len(steps) != 1:
        return f"its body holds {len(steps)} steps"
    step = steps[0]
    states = 2 if step.op == "LSTM" else 1
    found = _scan(node, body, step, states)
    if isinstance(found, str):
        return found
    if step.h_in is not body.inputs[-states - 1] or step.h_const is not None or (
            states == 2 and step.c_in is not body.inputs[len(body.inputs) - 2]):
        return "its body's state inputs are not the step's"
    outs = list(body.outputs)
    if outs[0] is not step.h_out or (states == 2 and outs[1] is not step.c_out):
        return "its body's state outputs are not the step's"
    copies = [o.producer() for o in outs[states:] if o is not step.h_out and producer(o, "Identity") is not None
              and o.producer().inputs[0] is step.h_out]
    if len([o for o in outs[states:] if o is not step.h_out]) != len(copies):
        return "its scan outputs are not the step's hidden state"
    mine = {id(n) for n in [*step.nodes, *step.feeds, *copies]}
    extra = [n for n in body if id(n) not in mine and n.op_type != "Constant"]
    if extra:
        return f"its body computes more than the step ({extra[0].op_type})"
    found.roles = ["h", "c"][:states] + ["Y"] * (len(node.outputs) - states)
    return found


def _scan(scan: ir.Node, body: ir.Graph, step: Step, states: int):
    if attr(scan, "num_scan_inputs", 0) != 1 or len(body.inputs) != states + 1 or len(scan.inputs) != states + 1:
        return "fuse takes a Scan over one input with the cell's state alone"
    if list(attr(scan, "scan_input_axes", [0]) or [0]) != [0] or any(list(attr(scan, "scan_output_axes", []) or [])):
        return "its scan axes are not 0"
    if step.x is not body.inputs[states]:
        return "its body's scanned input is not the step's input"
    direction = list(attr(scan, "scan_input_directions", [0]) or [0])[0]
    n_out = len(body.outputs) - states
    if any(d != direction for d in list(attr(scan, "scan_output_directions", []) or [0] * n_out)):
        return "its scan outputs run in another direction than its input"
    return BodyStep(step, "reverse" if direction else "forward", scan.inputs[states], list(scan.inputs[:states]))


def build(planner, node: ir.Node, found: BodyStep) -> Fusion:
    """The Scan or Loop node as one recurrent node (written with `planner`'s helpers, passes/fuse_cells.py); each
    of its outputs from Y, Y_h, Y_c or the value it passes through."""
    step, direction = found.step, found.direction
    op, lstm = step.op, step.op == "LSTM"
    G, H = len(GATES[op]), step.R.shape[1]
    stem = planner.names(f"{op.lower()}_fused")
    nodes, inits = [], []
    ins = planner._inputs(found.X, step.W, step.Wb, step.R, step.Rb, G, H, stem, inits)
    ins.append(None)  # sequence_lens
    for k, v in enumerate(found.initial):
        zero = const(v)
        ins.append(None if zero is not None and not zero.any() else planner._axes(
            "Unsqueeze", v, [0], f"{stem}_initial_{'hc'[k]}", nodes, inits))
    while ins[-1] is None:
        ins.pop()
    new, outs = planner._node(op, ins, stem, n_out=3 if lstm else 2, **planner._attributes(step, direction, H))
    nodes.append(new)
    replaced = []
    for k, (old, role) in enumerate(zip(node.outputs, found.roles)):
        if old is None or not (old.uses() or old.is_graph_output()) or role is None:
            continue
        if role in ("h", "c"):  # the final state: Y_h, Y_c
            v = planner._axes("Squeeze", outs[1 if role == "h" else 2], [0], f"{stem}_{role}", nodes, inits)
        elif role == "Y":
            v = planner._axes("Squeeze", outs[0], [1], f"{stem}_Y{k}", nodes, inits)
            if found.flip:  # back to the Loop's order
                ends = [planner._const(np.array([x], np.int64), f"{stem}_flip{k}_{w}", inits)
                        for w, x in (("starts", -1), ("ends", -2 ** 63), ("axes", 0), ("steps", -1))]
                flip, (v,) = planner._node("Slice", [v, *ends], f"{stem}_Y{k}_flipped")
                nodes.append(flip)
        else:  # a value the Loop passes through unchanged
            copy, (v,) = planner._node("Identity", [role[1]], f"{stem}_pass{k}")
            nodes.append(copy)
        replaced.append((old, v))
    body = attr(node, "body")
    made = {id(o) for n in found.context for o in n.outputs}
    reads = [v for n in [*found.context, node] for v in n.inputs if v is not None and id(v) not in made]
    reads += [v for v in outer_reads(body) if id(v) not in made]
    reads = list({id(v): v for v in reads}.values())  # captured weights too: the body reads them by name
    dtype = step.W.dtype.name
    what = [f"{node.op_type} of one {op} step -> one {op} node ({direction}, hidden {H}"
            + (f", computing in {dtype}" if dtype != "float32" else "") + ")"]
    return Fusion(op, new.name, [node], nodes, replaced, reads, inits, what, 1, node_label(node),
                  context=list(found.context))
