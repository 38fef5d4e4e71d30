"""Scan and Loop nodes whose body computes one cell step become one ONNX RNN / GRU / LSTM node (part of `fuse`).

Case 1 (Scan, opset 9+): one scan input along axis 0, a body that is exactly one step of a form
    passes/fuse_match.py recognizes: the body's state inputs are the step's hidden (and cell) state in, its
    scanned input is what the step projects by W, its state outputs are the step's state out, and every scan
    output is the step's hidden state out (or an Identity of it). Direction: the scan input's (a reversed input
    needs reversed scan outputs, as a recurrent node's Y is in time order).
Case 2 (Loop): a constant trip count equal to the static length of a sequence X of the enclosing graph, no
    condition (or a constant true one passed through), a body whose input is Gather(X, iteration number) and
    otherwise as in Case 1 (state inputs after the iteration number and the condition).
Case 3: anything else is left as it is; a body holding a step but more than the step is reported (a near-miss).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import onnx_ir as ir

from rnnconv.passes.fuse_match import Step, attr, const, find_steps, producer

BODY_SINCE = 9  # Scan-9: scan inputs without a batch axis, per-input axes and directions


@dataclasses.dataclass
class BodyStep:
    step: Step
    direction: str
    X: ir.Value  # the sequence, [T, N, I], of the enclosing graph
    initial: list  # the initial states, [N, H] each, of the enclosing graph


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
    """The node as Case 1 or 2; a reason string for a near-miss; None when its body holds no step at all."""
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
    found = _scan(node, body, step, states) if node.op_type == "Scan" else _loop(node, body, step, states)
    if isinstance(found, str):
        return found
    found, allowed = found
    if step.h_in is not body.inputs[-states - 1 if node.op_type == "Scan" else 2] or step.h_const is not None or (
            states == 2 and step.c_in is not body.inputs[len(body.inputs) - 2 if node.op_type == "Scan" else 3]):
        return "its body's state inputs are not the step's"
    first = 0 if node.op_type == "Scan" else 1  # a Loop body's first output is the condition
    outs = list(body.outputs)[first:]
    if outs[0] is not step.h_out or (states == 2 and outs[1] is not step.c_out):
        return "its body's state outputs are not the step's"
    copies = [o.producer() for o in outs[states:] if o is not step.h_out and producer(o, "Identity") is not None
              and o.producer().inputs[0] is step.h_out]
    if len([o for o in outs[states:] if o is not step.h_out]) != len(copies):
        return "its scan outputs are not the step's hidden state"
    mine = {id(n) for n in [*step.nodes, *step.feeds, *copies, *allowed]}
    extra = [n for n in body if id(n) not in mine and n.op_type != "Constant"]
    if extra:
        return f"its body computes more than the step ({extra[0].op_type})"
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
    return BodyStep(step, "reverse" if direction else "forward", scan.inputs[states], list(scan.inputs[:states])), []


def _loop(loop: ir.Node, body: ir.Graph, step: Step, states: int):
    if len(loop.inputs) != states + 2 or len(body.inputs) != states + 2:
        return "fuse takes a Loop carrying the cell's state alone"
    cond = loop.inputs[1]
    if cond is not None and cond.name and not bool(_scalar(const(cond))):
        return "its condition is not a constant true"
    cond_out = body.outputs[0]
    passes = [] if cond_out is body.inputs[1] else [cond_out.producer()]
    if passes and (producer(cond_out, "Identity") is None or cond_out.producer().inputs[0] is not body.inputs[1]):
        return "its condition is computed in the body"
    gather = producer(step.x, "Gather")
    if gather is None or gather.inputs[1] is not body.inputs[0] or attr(gather, "axis", 0) != 0:
        return "its body's input is not Gather(sequence, iteration number)"
    X = gather.inputs[0]
    if X.producer() is not None and X.producer().graph is body or X in body.inputs:
        return "the sequence its body reads is computed in the body"
    trips = _scalar(const(loop.inputs[0]))
    T = X.shape[0] if X.shape is not None and len(X.shape) == 3 and isinstance(X.shape[0], int) else None
    if trips is None or T is None or int(trips) != T:
        return f"its trip count ({trips}) is not the static length of the sequence it reads ({T})"
    return BodyStep(step, "forward", X, list(loop.inputs[2:])), [gather, *passes]


def _scalar(a) -> Optional[float]:
    return None if a is None or a.size != 1 else a.reshape(-1)[0]
