"""One recurrent layer of an IR graph (or of an If / Loop body) as an IR graph of its own, for node checks: the IR
side of `rnnconv.verification.extract`.

Constant inputs stay constants (the layer is checked on its real weights). An initial state the conversion found
to be zeros, and sequence lengths it found to be the whole sequence, are rebuilt from X's shape the way OpenVINO
writes them (Broadcast of a zero / of ShapeOf(X)[1] to ShapeOf(X)[0]), so the conversion of the layer alone drops
them as the conversion of the model did. Every other input becomes a Parameter.
"""

from __future__ import annotations

import numpy as np

from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino.gates import CELLS, SEQUENCES
from rnnconv.dialects.openvino.ir_facts import Facts
from rnnconv.dialects.openvino.ops import Key


def _batch(g: ovir.IRGraph, x: ovir.Out, axis: int) -> ovir.Out:
    """[X's size on `axis`] as a 1-D i64 tensor."""
    shape = g.op("ShapeOf", x, output_type="i64", version="opset3")
    return g.op("Gather", shape, g.const(np.array([axis], np.int64)), g.const(np.array(0, np.int64)),
                batch_dims=0, version="opset8")


def _zeros(g: ovir.IRGraph, x: ovir.Out, batch_axis: int, dims: list[int], element_type: str) -> ovir.Out:
    """Zeros shaped like a state: its batch axis (0) from X's `batch_axis`, the rest `dims`."""
    target = g.op("Concat", _batch(g, x, batch_axis), g.const(np.array(dims[1:], np.int64)), axis=0)
    return g.op("Broadcast", g.const(np.zeros((), ovir.numpy_dtype(element_type))), target, mode="numpy",
                version="opset3")


def _declared(layer: ovir.IRLayer, facts: Facts, ins: list[Key]) -> dict[int, list[int]]:
    """The dims a Sequence op or cell declares for X, its states and lengths, sizes read from the weights (input
    size from W, directions from W, hidden_size), -1 where only the data can say (batch, time)."""
    cell = layer.type in CELLS
    if not cell and layer.type not in SEQUENCES:
        return {}
    w = facts.dims(ins[len(ins) - 3 if layer.type in SEQUENCES else (3 if CELLS[layer.type] != "LSTM" else 4)])
    H = int(layer.attrs.get("hidden_size", "-1"))
    n_state = 2 if {**SEQUENCES, **CELLS}[layer.type] == "LSTM" else 1
    if cell:
        I = w[-1] if w else -1
        return {0: [-1, I], **{1 + k: [-1, H] for k in range(n_state)}}
    I, D = (w[-1], w[0]) if w and len(w) == 3 else (-1, -1)
    return {0: [-1, -1, I], **{1 + k: [-1, D, H] for k in range(n_state)}, 1 + n_state: [-1]}


def _merged(port_dims, declared):
    if declared is None:
        return port_dims
    if port_dims is None or len(port_dims) != len(declared):
        return declared
    return [d if d >= 0 else w for d, w in zip(port_dims, declared)]


def layer_alone(layer: ovir.IRLayer, facts: Facts, ins: list[Key], x_index: int = 0,
                batch_axis: int = 0) -> ovir.IRGraph:
    """`layer` (a Sequence op, a cell or a TensorIterator over one cell step, inputs `ins` in the graph `facts`
    describes) with Parameters, constants and rebuilt zero states / full lengths as its inputs, and a Result per
    output. `x_index`, `batch_axis`: which input is X, and its batch axis (a TensorIterator's X may be
    time-major)."""
    g = ovir.IRGraph(name=layer.name)
    declared = _declared(layer, facts, ins)
    x_key = ins[x_index]
    x_port = facts.port(x_key)
    # One batch size (axis 0 of X, the states, the lengths) where any of them declares it: the model ties them.
    static = [dims[0] for dims in (facts.port(ins[i]).dims for i in declared) if dims and dims[0] >= 0]
    for dims in declared.values():
        if static and dims:
            dims[0] = static[0]
    x = g.parameter(_name(g, x_port, f"{layer.name}/X"), x_port.element_type,
                    _merged(x_port.dims, declared.get(x_index)))
    sources = []
    lens_at = len(ins) - 4 if layer.type in SEQUENCES else None
    for i, key in enumerate(ins):
        port = facts.port(key)
        const = facts.consts.get(key)
        if i == x_index:
            sources.append(x)
        elif const is not None:
            sources.append(g.const(const))
        elif i == lens_at and facts.fills_with(key, facts.entry(x_key, 1)):
            t = g.op("Gather", g.op("ShapeOf", x, output_type="i64", version="opset3"),
                     g.const(np.array(1, np.int64)), g.const(np.array(0, np.int64)), batch_dims=0, version="opset8")
            lens = g.op("Broadcast", t, _batch(g, x, 0), mode="numpy", version="opset3")
            sources.append(g.op("Convert", lens, destination_type=port.element_type) if port.element_type != "i64"
                           else lens)
        elif facts.is_zero(key) and (dims := _merged(port.dims, declared.get(i))) is not None \
                and all(d >= 0 for d in dims[1:]):
            sources.append(_zeros(g, x, batch_axis, dims, port.element_type))
        else:
            sources.append(g.parameter(_name(g, port, f"{layer.name}/in{i}"), port.element_type,
                                       _merged(port.dims, declared.get(i))))
    for out in g.copy_layer(layer, sources):
        g.result(out, name=f"{layer.name}/out{out.index}")
    return g


def _name(g: ovir.IRGraph, port: ovir.Port, fallback: str) -> str:
    taken = {n for layer in g.layers for p in layer.outputs for n in p.names}
    name = port.names[0] if port.names else fallback
    while name in taken:
        name += "_"
    return name

