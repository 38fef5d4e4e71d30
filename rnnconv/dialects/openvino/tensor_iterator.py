"""TensorIterator-1 whose body is exactly one LSTMCell-1/4 / GRUCell-3 / RNNCell-0 step (what Model Optimizer
emitted for recurrent layers): recognised, with everything the ONNX sequence op needs, or refused with the reason."""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino.fold import FOLDERS, fold
from rnnconv.dialects.openvino.gates import CELLS
from rnnconv.dialects.openvino.ir_facts import Facts, flag
from rnnconv.dialects.openvino.ops import Key
from rnnconv.errors import BadInput, Unsupported


class CellStep:
    def __init__(self):
        self.kind = ""
        self.cell: Optional[ovir.IRLayer] = None
        self.x_port = 0
        self.time_axis = 0
        self.reverse = False
        self.h_port: Optional[int] = None
        self.c_port: Optional[int] = None
        self.weights: tuple = ()
        self.outputs: dict[int, tuple[str, int]] = {}  # TI output port id -> ("Y", time axis) | ("Ho"|"Co", 0)


SHAPE_ONLY = ("Squeeze", "Unsqueeze", "Reshape")


def _shape_after(layer: ovir.IRLayer, dims: list[int], facts: Facts):
    """Output shape of a Squeeze / Unsqueeze / Reshape for an example input shape (None: not constant)."""
    args = [np.zeros(dims, dtype=np.float32)]
    for i in range(1, len(layer.inputs)):
        c = facts.consts.get(facts.input_key(layer, i))
        if c is None:
            return None
        args.append(c)
    try:
        return list(np.asarray(FOLDERS[layer.type](layer, *args)).shape)
    except Exception:
        return None


def _example(dims: Optional[list[int]]) -> Optional[list[int]]:
    # Distinct primes for dynamic dims so a reshape that mixes them up is caught.
    if dims is None:
        return None
    primes = iter((7, 11, 13, 17, 19, 23))
    return [d if d >= 0 else next(primes) for d in dims]


def one_cell_step(ti: ovir.IRLayer, outer: Facts, ins: list[Key]) -> CellStep:
    """Recognise a TensorIterator-1 whose body is exactly one LSTMCell / GRUCell / RNNCell step; else Unsupported
    with the reason. Sliced input: X along one axis (stride 1 forward, -1 reverse, part_size 1, full range);
    merged inputs: H (and C) with back edges from the cell's outputs; outputs: the cell's H concatenated along
    the time axis and/or the last H / C."""
    label = f"TensorIterator {ti.name!r}"
    body = ti.body
    if body is None:
        raise BadInput(f"{label}: no <body>")

    def refuse(why: str) -> Unsupported:
        return Unsupported(f"{label}: {why}; rnnconv converts a TensorIterator only when its body is exactly one "
                           "LSTMCell/GRUCell/RNNCell step over the whole sequence (what Model Optimizer emitted)")

    facts = Facts(body)
    in_map = {int(pm["internal_layer_id"]): (int(pm["external_port_id"]), pm) for kind, pm in ti.port_map
              if kind == "input"}
    out_map = [(int(pm["external_port_id"]), int(pm["internal_layer_id"]), pm) for kind, pm in ti.port_map
               if kind == "output"]
    back = {int(e["to-layer"]): int(e["from-layer"]) for e in ti.back_edges}
    ext_port_index = {p.id: i for i, p in enumerate(ti.inputs)}
    by_id = body.by_id()
    cells, others = [], []
    for layer in body.topological():
        bins = [facts.input_key(layer, i) for i in range(len(layer.inputs))]
        out = (layer.id, layer.outputs[0].id) if layer.outputs else None
        if layer.type == "Const":
            facts.consts[out] = layer.value
        elif layer.type == "Parameter":
            ext = in_map.get(layer.id)
            if ext is None:
                raise BadInput(f"{label}: body Parameter {layer.name!r} is fed by no port_map input")
            outer_key = ins[ext_port_index[ext[0]]]
            if "axis" not in ext[1] and layer.id not in back and outer_key in outer.consts:
                facts.consts[out] = outer.consts[outer_key]
        elif layer.type == "Result":
            continue
        elif layer.type in CELLS:
            cells.append(layer)
        elif bins and all(k in facts.consts for k in bins) and layer.type not in SHAPE_ONLY:
            results = fold(layer, [facts.consts[k] for k in bins])
            if results is None:
                others.append(layer)
                continue
            for port, r in zip(layer.outputs, results):
                facts.consts[(layer.id, port.id)] = r
        elif layer.type not in SHAPE_ONLY:
            others.append(layer)
    if len(cells) != 1 or others:
        cell_text = "no LSTMCell/GRUCell/RNNCell" if not cells else f"{len(cells)} cells" if len(cells) > 1 else ""
        other_text = ", ".join(sorted({layer.type for layer in others}))
        raise refuse("its body holds " + "; ".join(t for t in (cell_text, other_text and "other operations "
                                                                + other_text) if t))
    cell = cells[0]
    step = CellStep()
    step.cell, step.kind = cell, CELLS[cell.type]
    n_state = 2 if step.kind == "LSTM" else 1
    cins = [facts.input_key(cell, i) for i in range(len(cell.inputs))]
    n_in = 1 + n_state + 3
    if len(cins) == n_in + 1 and step.kind == "LSTM":
        p = facts.consts.get(cins[-1])
        if p is None or np.any(p):
            raise refuse("the LSTMCell has peepholes (P), which ONNX LSTM holds but OpenVINO's cell semantics "
                         "rnnconv does not map")
        cins = cins[:-1]
    if len(cins) != n_in:
        raise refuse(f"{cell.type} has {len(cins)} inputs")
    if flag(cell.attrs, "input_forget"):
        raise refuse("the LSTMCell has input_forget")
    weights = tuple(facts.consts.get(k) for k in cins[-3:])
    if any(w is None for w in weights):
        raise refuse("the cell's W, R or B is computed at run time")
    step.weights = weights

    # X: a sliced body Parameter, its size-1 axis removed by Squeeze / Reshape.
    xl = by_id[cins[0][0]]
    if xl.type not in SHAPE_ONLY:
        raise refuse("the cell's X is not the sliced input with its time axis removed")
    param = by_id[facts.input_key(xl, 0)[0]]
    ext = in_map.get(param.id)
    if param.type != "Parameter" or ext is None or "axis" not in ext[1]:
        raise refuse("the cell's X does not come from a sliced input")
    pm = ext[1]
    b_axis, stride = int(pm["axis"]), int(pm.get("stride", "1"))
    start, end = int(pm.get("start", "0")), int(pm.get("end", "-1"))
    if int(pm.get("part_size", "1")) != 1 or (stride, start, end) not in ((1, 0, -1), (-1, -1, 0)):
        raise refuse(f"the input slicing (stride {stride}, start {start}, end {end}, part_size "
                     f"{pm.get('part_size', '1')}) is not one step over the whole sequence")
    pdims = param.outputs[0].dims
    if pdims is None or len(pdims) != 3:
        raise refuse("the sliced input is not 3-D")
    b_axis = b_axis + 3 if b_axis < 0 else b_axis
    example = _example(pdims)
    example[b_axis] = 1
    want = [d for a, d in enumerate(example) if a != b_axis]
    if _shape_after(xl, example, facts) != want:
        raise refuse("the cell's X is not the sliced input with its time axis removed")
    step.x_port, step.time_axis, step.reverse = ext_port_index[ext[0]], b_axis, stride < 0

    # States: merged inputs whose back edges come from Results of the cell's outputs.
    def result_source(rid: int):
        res = by_id.get(rid)
        if res is None or res.type != "Result":
            return None
        return facts.input_key(res, 0)

    for k in range(n_state):
        src = by_id[cins[1 + k][0]]
        ext = in_map.get(src.id)
        if src.type != "Parameter" or ext is None or "axis" in ext[1]:
            raise refuse(f"the cell's {'HC'[k]} input is not a merged input")
        if result_source(back.get(src.id, -1)) != (cell.id, cell.outputs[k].id):
            raise refuse(f"the back edge into the cell's {'HC'[k]} input does not carry the cell's new state")
        if k == 0:
            step.h_port = ext_port_index[ext[0]]
        else:
            step.c_port = ext_port_index[ext[0]]

    # Outputs: H concatenated over time along one axis, or the last H / C.
    for ext_id, rid, pm in out_map:
        src = result_source(rid)
        if src is None:
            raise BadInput(f"{label}: output port_map names body layer {rid}, which is not a Result")
        if "axis" not in pm:
            if src == (cell.id, cell.outputs[0].id):
                step.outputs[ext_id] = ("Ho", 0)
            elif n_state == 2 and src == (cell.id, cell.outputs[1].id):
                step.outputs[ext_id] = ("Co", 0)
            else:
                raise refuse("an output is the last value of something other than the cell's H or C")
            continue
        ol = by_id[src[0]]
        a = int(pm["axis"])
        a = a + 3 if a < 0 else a
        o_stride, o_start, o_end = int(pm.get("stride", "1")), int(pm.get("start", "0")), int(pm.get("end", "-1"))
        if ol.type not in SHAPE_ONLY or facts.input_key(ol, 0) != (cell.id, cell.outputs[0].id):
            raise refuse("a concatenated output is not the cell's H with a time axis added")
        if int(pm.get("part_size", "1")) != 1 or (o_stride, o_start, o_end) != (stride, start, end):
            raise refuse("a concatenated output is not collected in the order the input is read")
        hdims = _example([d for i, d in enumerate(pdims) if i != b_axis][:1] + [int(cell.attrs["hidden_size"])])
        hdims = [hdims[0], hdims[1]]
        want = list(hdims)
        want.insert(a, 1)
        if _shape_after(ol, hdims, facts) != want:
            raise refuse("a concatenated output is not the cell's H with a time axis added")
        step.outputs[ext_id] = ("Y", a)
    return step
