"""OpenVINO If-8, Loop-5 and TensorIterator-1 with any body, as ONNX If and Loop (for `to_onnx.Converter`).

Specs: OpenVINO If-8, Loop-5, TensorIterator-1 (docs.openvino.ai, Operation Specifications, Infrastructure);
ONNX If and Loop (onnx.ai/onnx/operators/onnx__If.html, onnx__Loop.html).

- If: each branch becomes an ONNX subgraph; a body Parameter is the outer value its port_map input names (ONNX
  subgraphs read outer values by name), each If output the branch Result its port_map output names. A constant
  condition (shape arithmetic on static shapes) inlines the branch it selects.
- Loop / TensorIterator: an ONNX Loop. Merged inputs (those with a back edge) are its loop-carried values;
  invariant inputs are read from the outer scope; a sliced input (axis, part_size, stride 1 from the start or -1
  from the end, over the whole axis) is sliced in the body at the iteration number; `current_iteration` is the
  iteration number, `execution_condition` the condition output. A concatenated output is an ONNX scan output
  (stacked on a new axis 0, then reversed for stride -1 and merged into `axis`); a last-value output is the loop's
  final carried value when a back edge carries it, else the last entry of a scan output. The trip count is
  Loop's input, or the sliced length over part_size (TensorIterator).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino.ops import Key
from rnnconv.errors import BadInput, Unsupported


def _port_index(layer: ovir.IRLayer) -> dict[int, int]:
    return {p.id: i for i, p in enumerate(layer.inputs)}


def _feeds(conv, layer: ovir.IRLayer, port_map, ins: list[Key]) -> dict:
    """Body Parameter id -> (outer ONNX value, None) or (None, constant) for the port_map inputs without axis."""
    index = _port_index(layer)
    feeds = {}
    for kind, pm in port_map:
        ext = int(pm.get("external_port_id", "-1"))
        if kind != "input" or "axis" in pm or ext < 0:
            continue
        if ext not in index:
            raise BadInput(f"IR layer {layer.name!r} ({layer.type}): port_map input names port {ext}, which it "
                           "does not have")
        key = ins[index[ext]]
        const = conv.facts.consts.get(key)
        feeds[int(pm["internal_layer_id"])] = (None, const) if const is not None else (conv.value(key), None)
    return feeds


def _typed(v: ir.Value, port: ovir.Port) -> None:
    """Declare a subgraph output's type (and shape, where the IR knows it)."""
    v.type = ir.TensorType(ir.DataType.from_numpy(ovir.numpy_dtype(port.element_type)))
    if v.shape is None and port.dims is not None:
        v.shape = ir.Shape([d if d >= 0 else None for d in port.dims])


def _own(b, v: ir.Value, taken: set) -> ir.Value:
    """`v` as a value computed inside the subgraph `b` builds, and not yet one of its outputs."""
    if v.producer() is None or v.producer() not in b.nodes or id(v) in taken:
        v = b.op1("Identity", v)
    taken.add(id(v))
    return v


def if_(conv, layer: ovir.IRLayer, ins: list[Key]) -> None:
    """If-8 -> ONNX If (then_branch / else_branch), or the selected branch inlined when the condition is constant."""
    if set(layer.branches) != {"then", "else"}:
        raise BadInput(f"IR If {layer.name!r}: expected a then_body and an else_body")
    outputs = {}
    for branch, (_, port_map) in layer.branches.items():
        outputs[branch] = {int(pm["external_port_id"]): int(pm["internal_layer_id"]) for kind, pm in port_map
                           if kind == "output"}
        missing = [p.id for p in layer.outputs if p.id not in outputs[branch]]
        if missing:
            raise BadInput(f"IR If {layer.name!r}: the {branch} branch gives no value for output port(s) {missing}")
    cond = conv.facts.consts.get(ins[0])
    b = conv.b
    if cond is not None:
        branch = "then" if bool(np.asarray(cond).reshape(-1)[0]) else "else"
        body, port_map = layer.branches[branch]
        sub = conv.sub(body, _feeds(conv, layer, port_map, ins), b, f"{conv.path}{layer.name}/{branch}/")
        for port in layer.outputs:
            rid = outputs[branch][port.id]
            const = sub.result_const(rid)
            if const is not None:
                conv.facts.consts[(layer.id, port.id)] = const
            else:
                conv.values[(layer.id, port.id)] = sub.result_value(rid)
        return
    graphs = {}
    for branch in ("then", "else"):
        body, port_map = layer.branches[branch]
        child = b.child()
        sub = conv.sub(body, _feeds(conv, layer, port_map, ins), child, f"{conv.path}{layer.name}/{branch}/")
        outs, taken = [], set()
        for port in layer.outputs:
            v = _own(child, sub.result_value(outputs[branch][port.id]), taken)
            _typed(v, port)
            outs.append(v)
        graphs[branch] = ir.Graph([], outs, nodes=child.nodes, name=f"{layer.name}_{branch}")
    c = conv.value(ins[0])
    if conv.facts.port(ins[0]).element_type != "boolean":
        c = b.op1("Cast", c, to=int(ir.DataType.BOOL))
    results = b.op("If", [c], {"then_branch": graphs["then"], "else_branch": graphs["else"]},
                   n_out=len(layer.outputs), hint=layer.name)
    for port, v in zip(layer.outputs, results):
        conv.values[(layer.id, port.id)] = v


def _scalar_i64(b, v: ir.Value, element_type: str, dims: Optional[list[int]]) -> ir.Value:
    if element_type != "i64":
        v = b.op1("Cast", v, to=int(ir.DataType.INT64))
    if dims != []:
        v = b.op1("Reshape", v, b.i64([], "scalar"))
    return v


def _slice_bounds(layer: ovir.IRLayer, pm: dict) -> tuple[int, int, int]:
    """(axis, part_size, stride) of a sliced input or concatenated output that walks the whole axis."""
    axis, part, stride = int(pm["axis"]), int(pm.get("part_size", "1")), int(pm.get("stride", "1"))
    start, end = int(pm.get("start", "0")), int(pm.get("end", "-1"))
    if part < 1 or (stride, start, end) not in ((1, 0, -1), (-1, -1, 0)):
        raise Unsupported(f"IR layer {layer.name!r} ({layer.type}): a port_map slicing with stride {stride}, "
                          f"start {start}, end {end}, part_size {part}; rnnconv maps slicing over the whole axis, "
                          "forward (stride 1) or backward (stride -1)")
    return axis, part, stride


def loop(conv, layer: ovir.IRLayer, ins: list[Key]) -> None:
    """Loop-5 / TensorIterator-1 -> ONNX Loop (see the module docstring)."""
    label = f"IR layer {layer.name!r} ({layer.type})"
    body = layer.body
    if body is None:
        raise BadInput(f"{label}: no <body>")
    b = conv.b
    if b.opset < 11:
        raise Unsupported(f"{label}: an ONNX Loop with loop-carried shapes that may change needs opset 11",
                          fixes=("opset=11",))
    index = _port_index(layer)
    by_id = body.by_id()
    back = {int(e["to-layer"]): int(e["from-layer"]) for e in layer.back_edges}
    inputs = [pm for kind, pm in layer.port_map if kind == "input"]
    outputs = [pm for kind, pm in layer.port_map if kind == "output"]
    special = {pm.get("purpose"): int(pm["internal_layer_id"]) for pm in inputs + outputs if pm.get("purpose")}
    is_loop = layer.type == "Loop"

    def outer(pm) -> Key:
        ext = int(pm["external_port_id"])
        if ext not in index:
            raise BadInput(f"{label}: port_map input names port {ext}, which it does not have")
        return ins[index[ext]]

    sliced = [pm for pm in inputs if "axis" in pm]
    merged = [pm for pm in inputs if "axis" not in pm and int(pm["internal_layer_id"]) in back
              and pm.get("purpose") is None]

    # The trip count: Loop's input (negative: until the condition fails), else the sliced length / part_size.
    trip = None
    if is_loop:
        c = conv.facts.consts.get(ins[0])
        if c is None:
            trip = _scalar_i64(b, conv.value(ins[0]), conv.facts.port(ins[0]).element_type, conv.facts.dims(ins[0]))
        elif int(np.asarray(c).reshape(-1)[0]) >= 0:
            trip = b.i64(int(np.asarray(c).reshape(-1)[0]), "trip_count")
    lengths = {}
    for pm in sliced:
        axis, part, _ = _slice_bounds(layer, pm)
        key = outer(pm)
        dims = conv.facts.dims(key)
        if dims is None:
            raise Unsupported(f"{label}: a sliced input of unknown rank")
        axis = axis + len(dims) if axis < 0 else axis
        if dims[axis] >= 0:
            lengths[id(pm)] = b.i64(dims[axis], "length")
        else:
            shape = b.op1("Shape", conv.value(key))
            lengths[id(pm)] = b.op1("Gather", shape, b.i64(axis, "axis"), axis=0)
        if trip is None:
            count = lengths[id(pm)] if part == 1 else b.op1("Div", lengths[id(pm)], b.i64(part, "part_size"))
            trip = count
    if trip is None and not is_loop:
        raise Unsupported(f"{label}: a TensorIterator without a sliced input has no trip count")
    if is_loop:
        cond0 = conv.value(ins[1])
        if conv.facts.port(ins[1]).element_type != "boolean":
            cond0 = b.op1("Cast", cond0, to=int(ir.DataType.BOOL))
        if conv.facts.dims(ins[1]) != []:
            cond0 = b.op1("Reshape", cond0, b.i64([], "scalar"))
    else:
        cond0 = b.const(np.array(True), "cond")

    child = b.child()
    iteration = ir.Value(name=child.name(f"{layer.name}/iteration"), type=ir.TensorType(ir.DataType.INT64),
                         shape=ir.Shape([]))
    cond_in = ir.Value(name=child.name(f"{layer.name}/cond"), type=ir.TensorType(ir.DataType.BOOL),
                       shape=ir.Shape([]))
    feeds = _feeds(conv, layer, [("input", pm) for pm in inputs if pm not in merged], ins)
    carried, initial = [], []
    for pm in merged:
        param = by_id[int(pm["internal_layer_id"])]
        port = param.outputs[0]
        v = ir.Value(name=child.name(ovir.parameter_name(param)),
                     type=ir.TensorType(ir.DataType.from_numpy(ovir.numpy_dtype(port.element_type))))
        carried.append(v)
        initial.append(conv.value(outer(pm)))
        feeds[param.id] = (v, None)
    if "current_iteration" in special:
        param = by_id[special["current_iteration"]]
        port = param.outputs[0]
        it = iteration if port.element_type == "i64" else child.op1(
            "Cast", iteration, to=int(ir.DataType.from_numpy(ovir.numpy_dtype(port.element_type))))
        if port.dims:
            it = child.op1("Reshape", it, child.i64(port.dims, "shape"))
        feeds[param.id] = (it, None)
    for pm in sliced:
        axis, part, stride = _slice_bounds(layer, pm)
        x = conv.value(outer(pm))
        start = child.op1("Mul", iteration, child.i64(part, "part_size")) if part != 1 else iteration
        if stride < 0:  # from the end: [L - (i+1)p, L - ip)
            start = child.op1("Sub", child.op1("Sub", lengths[id(pm)], start), child.i64(part, "part_size"))
        end = child.op1("Add", start, child.i64(part, "part_size"))
        piece = child.op1("Slice", x, child.op1("Reshape", start, child.i64([1], "shape")),
                          child.op1("Reshape", end, child.i64([1], "shape")), child.i64([axis], "axes"))
        feeds[int(pm["internal_layer_id"])] = (piece, None)

    sub = conv.sub(body, feeds, child, f"{conv.path}{layer.name}/body/")
    taken: set = set()
    if "execution_condition" in special:
        cond_out = sub.result_value(special["execution_condition"])
        if sub.facts.port(sub.facts.input_key(by_id[special["execution_condition"]], 0)).element_type != "boolean":
            cond_out = child.op1("Cast", cond_out, to=int(ir.DataType.BOOL))
        cond_out = child.op1("Reshape", cond_out, child.i64([], "scalar"))
    else:
        cond_out = child.op1("Identity", cond_in)
    taken.add(id(cond_out))
    cond_out.type = ir.TensorType(ir.DataType.BOOL)
    carried_out = []
    for pm, v in zip(merged, carried):
        out = _own(child, sub.result_value(back[int(pm["internal_layer_id"])]), taken)
        out.type = v.type
        carried_out.append(out)
    # Outputs: a carried value's final value, or a scan output (its last entry for a last-value output).
    scans, plan = [], []
    carried_by_result = {back[int(pm["internal_layer_id"])]: k for k, pm in enumerate(merged)}
    for pm in outputs:
        if pm.get("purpose"):
            continue
        ext, rid = int(pm["external_port_id"]), int(pm["internal_layer_id"])
        res_port = by_id[rid].inputs[0]
        if "axis" not in pm and rid in carried_by_result:
            plan.append((ext, "carried", carried_by_result[rid], None))
            continue
        v = _own(child, sub.result_value(rid), taken)
        _typed(v, res_port)
        plan.append((ext, "scan", len(scans), pm if "axis" in pm else None))
        scans.append((v, res_port))
    graph = ir.Graph([iteration, cond_in, *carried], [cond_out, *carried_out, *[v for v, _ in scans]],
                     nodes=child.nodes, name=f"{layer.name}_body")
    results = b.op("Loop", [trip, cond0, *initial], {"body": graph}, n_out=len(carried) + len(scans),
                   hint=layer.name)
    for ext, what, k, pm in plan:
        if what == "carried":
            v = results[k]
        else:
            stacked = results[len(carried) + k]
            v = (b.op1("Gather", stacked, b.i64(-1, "last"), axis=0) if pm is None
                 else _concatenated(b, layer, stacked, scans[k][1], pm))
        conv.values[(layer.id, ext)] = v


def _concatenated(b, layer: ovir.IRLayer, stacked: ir.Value, piece: ovir.Port, pm: dict) -> ir.Value:
    """A scan output [n, *piece] as OpenVINO's concatenation of the pieces along `axis` (stride -1: last first)."""
    axis, _, stride = _slice_bounds(layer, pm)
    if piece.dims is None:
        raise Unsupported(f"IR layer {layer.name!r} ({layer.type}): a concatenated output of unknown rank")
    rank = len(piece.dims)
    axis = axis + rank if axis < 0 else axis
    if stride < 0:
        big = np.iinfo(np.int64)
        stacked = b.op1("Slice", stacked, b.i64([-1], "starts"), b.i64([big.min], "ends"), b.i64([0], "axes"),
                        b.i64([-1], "steps"))
    # [n, p0, .., p(axis), ..] -> [p0, .., n, p(axis), ..] -> n and p(axis) merged.
    perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank + 1))
    moved = b.transpose(stacked, perm)
    if piece.dims[axis] == 1:
        return b.axes_op("Squeeze", moved, [axis + 1])
    shape = b.op1("Shape", moved)
    head = b.op1("Slice", shape, b.i64([0], "starts"), b.i64([axis], "ends"), b.i64([0], "axes"))
    tail = b.op1("Slice", shape, b.i64([axis + 2], "starts"), b.i64([rank + 1], "ends"), b.i64([0], "axes"))
    target = b.op1("Concat", head, b.i64([-1], "merged"), tail, axis=0)
    return b.op1("Reshape", moved, target)
