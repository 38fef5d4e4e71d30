"""Scan nodes whose body computes one cell step become one ONNX RNN / GRU / LSTM node (a part of the fuse pass).

Case 1: a Scan (opset 9+) with one scan input along axis 0 and a body that is exactly one step of a form
    passes/fuse_match.py recognizes: the body's state inputs are the step's hidden (and cell) state in, its scanned
    input is what the step projects by W, its state outputs are the step's state out, and every scan output is
    the step's hidden state out. Direction: the scan input's (a reversed input needs reversed scan outputs, as a
    recurrent node's Y is in time order).
Case 2: anything else (other scan axes, several scan inputs, a body with more than the step, weights computed at
    run time) is left as it is; a body holding a step but not only the step is reported (a near-miss).
"""

from __future__ import annotations

import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import node_label
from rnnconv.passes.fuse_match import attr, find_steps

SCAN_SINCE = 9  # Scan-9: scan inputs without a batch axis, per-input axes and directions


def outer_reads(body: ir.Graph) -> list:
    """The values of the enclosing graph that the body reads (captured weights)."""
    made = {id(v) for v in body.inputs} | {id(o) for n in body for o in n.outputs}
    made |= {id(v) for v in body.initializers.values()}
    out, seen = [], set()
    for n in body:
        for v in n.inputs:
            if v is not None and id(v) not in made and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


def scan_step(scan: ir.Node, opset: int):
    """(the body's one step, the direction) when the Scan is Case 1; a reason string for a near-miss; None when
    the Scan holds no step at all."""
    body = attr(scan, "body")
    if body is None or opset < SCAN_SINCE:
        return None
    steps = find_steps(body)
    if not steps:
        return None
    if len(steps) != 1:
        return f"its body holds {len(steps)} steps"
    step = steps[0]
    n_scan = attr(scan, "num_scan_inputs", 0)
    states = 2 if step.op == "LSTM" else 1
    if n_scan != 1 or len(body.inputs) != states + 1 or len(scan.inputs) != states + 1:
        return "fuse takes a Scan over one input with the cell's state alone"
    if list(attr(scan, "scan_input_axes", [0]) or [0]) != [0] or any(list(attr(scan, "scan_output_axes", []) or [])):
        return "its scan axes are not 0"
    if step.x is not body.inputs[states] or step.h_in is not body.inputs[0] or step.h_const is not None or (
            states == 2 and step.c_in is not body.inputs[1]):
        return "its body's inputs are not the step's state and input"
    outs = list(body.outputs)
    if outs[0] is not step.h_out or (states == 2 and outs[1] is not step.c_out):
        return "its body's state outputs are not the step's"
    copies = [o.producer() for o in outs[states:] if o is not step.h_out and o.producer() is not None
              and o.producer().op_type == "Identity" and o.producer().inputs[0] is step.h_out]
    if len([o for o in outs[states:] if o is not step.h_out]) != len(copies):
        return "its scan outputs are not the step's hidden state"
    mine = {id(n) for n in [*step.nodes, *step.feeds, *copies]}
    extra = [n for n in body if id(n) not in mine and n.op_type != "Constant"]
    if extra:
        return f"its body computes more than the step ({extra[0].op_type} {node_label(extra[0])})"
    directions = list(attr(scan, "scan_input_directions", [0]) or [0])
    out_dirs = list(attr(scan, "scan_output_directions", []) or [0] * (len(outs) - states))
    if any(d != directions[0] for d in out_dirs):
        return "its scan outputs run in another direction than its input"
    return step, "reverse" if directions[0] else "forward"
