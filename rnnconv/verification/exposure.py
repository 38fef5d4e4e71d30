"""The models localization runs (`localize`), ONNX or OpenVINO IR alike: a model as nodes in topological order with
named tensors between them (`view`), the model with chosen intermediate tensors made outputs (`exposed`,
Polygraphy's `--onnx-outputs mark all`), and the model cut at chosen tensors (`cut`): each becomes an input fed a
given value, so that what lies between the cuts runs alone on those values (Polygraphy's `debug reduce`, every
node at once).

Copies, never the caller's model: ONNX through onnx_ir's clone (weights shared), IR as new layer and port records
(Const data shared). Only the main graph's tensors take part: a node holding a body is one node.
"""

from __future__ import annotations

import dataclasses
from typing import Hashable, Mapping, Optional, Sequence

import numpy as np
import onnx_ir as ir

from rnnconv.dialects.onnx_recurrent import bodies, node_label
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.verification.model import Model, numpy_dtype

ALONE = "::alone"  # suffix of a cut tensor's own computation, beside the input that now carries its name


@dataclasses.dataclass
class Node:
    name: str
    op: str
    inputs: list  # tensor keys, implicit inputs of bodies included
    outputs: list
    ops: tuple  # op types of the node and of its bodies


@dataclasses.dataclass
class View:
    """Nodes in topological order; tensors by key (ONNX: the value's name; IR: (layer id, port id))."""

    nodes: list[Node]
    names: dict  # key -> tensor names
    producer: dict  # key -> index into nodes
    inputs: set  # keys of graph inputs
    constants: set  # keys of constants and of what constants alone compute

    def named(self) -> dict[str, Hashable]:
        """Tensor name -> key, for the tensors nodes compute from the inputs (in topological order)."""
        out: dict[str, Hashable] = {}
        for node in self.nodes:
            for key in node.outputs:
                if key not in self.constants and key not in self.inputs:
                    for name in self.names.get(key, ()):
                        out.setdefault(name, key)
        return out

    def region(self, key, cuts: set) -> tuple[list[Node], set]:
        """The nodes that compute `key` back to the `cuts` (keys), the inputs and the constants, and the cut keys
        they read."""
        nodes, reads, seen = [], set(), set()
        stack = [self.producer[key]] if key in self.producer else []
        while stack:
            index = stack.pop()
            if index in seen:
                continue
            seen.add(index)
            nodes.append(self.nodes[index])
            for k in self.nodes[index].inputs:
                if k in cuts:
                    reads.add(k)
                elif k in self.producer and k not in self.constants:
                    stack.append(self.producer[k])
        return nodes, reads


def view(model: Model) -> View:
    return _onnx_view(model.onnx) if model.format == "onnx" else _ir_view(model.graph)


def static_bytes(model: Model, key) -> Optional[int]:
    """The size of a tensor where the model states its shape and type, else None."""
    if model.format == "onnx":
        value = _values(model.onnx.graph).get(key)
        shape, dtype = (value.shape, numpy_dtype(value.dtype)) if value is not None else (None, None)
        dims = None if shape is None else list(shape)
    else:
        layer = model.graph.by_id().get(key[0])
        port = ovir.find_port(layer.outputs, key[1]) if layer is not None else None
        dims = port.dims if port is not None else None
        dtype = ovir.ELEMENT_TYPES.get(port.element_type, (None, None))[1] if port is not None else None
    if dims is None or dtype is None or not all(isinstance(d, int) and d >= 0 for d in dims):
        return None
    return int(np.prod(dims, dtype=np.int64)) * dtype.itemsize


def exposed(model: Model, names: Sequence[str]) -> Model:
    """A copy of `model` whose outputs are its own and the tensors `names` (each under that name)."""
    if model.format == "onnx":
        copy = model.onnx.clone()
        values = _values(copy.graph)
        have = {v.name for v in copy.graph.outputs}
        copy.graph.outputs.extend(values[n] for n in names if n not in have and n in values)
        return Model(f"{model.label} (exposed)", "onnx", onnx=copy)
    graph = _ir_copy(model.graph)
    keys = _ir_view(graph).named()
    for name in names:
        if name in keys:
            _ir_result(graph, keys[name], name)
    return Model(f"{model.label} (exposed)", "ir", graph=graph)


def cut(model: Model, values: Mapping[str, np.ndarray], wanted: Sequence[str],
        dtypes: Optional[Mapping[str, np.dtype]] = None) -> tuple[Model, dict]:
    """A copy of `model` where each tensor of `values` is an input of that name (the feeds it gets are returned,
    in the type the model gives that tensor, or `dtypes`), and whose outputs are the tensors `wanted`, each as the
    nodes before it compute it from those inputs, under its name + ALONE. Nodes no output needs are left out."""
    dtypes = dtypes or {}
    feeds = {}
    if model.format == "onnx":
        copy = model.onnx.clone()
        graph = copy.graph
        by_name = _values(graph)
        graph.outputs.clear()  # (a graph output's uses cannot move to an input)
        for name, array in values.items():
            value = by_name.get(name)
            if value is None:
                continue
            want = numpy_dtype(value.dtype) or dtypes.get(name) or np.asarray(array).dtype
            feeds[name] = np.asarray(array).astype(want, copy=False)
            fed = ir.Value(name=name, type=ir.TensorType(ir.DataType.from_numpy(feeds[name].dtype)),
                           shape=ir.Shape(feeds[name].shape))
            value.name = name + ALONE
            value.replace_all_uses_with(fed)
            graph.inputs.append(fed)
        outputs = [by_name[n] for n in wanted if n in by_name]
        for value in outputs:
            value.name = value.name if value.name.endswith(ALONE) else value.name + ALONE
        graph.outputs.extend(outputs)
        for node in reversed(list(graph)):  # consumers first: a node left with no use goes, then its producers
            if not any(o.uses() or o in outputs for o in node.outputs):
                graph.remove(node, safe=True)
        return Model(f"{model.label} (cut)", "onnx", onnx=copy), feeds
    graph = _ir_copy(model.graph)
    keys = _ir_view(graph).named()
    by_id = graph.by_id()
    for name, array in values.items():
        if name not in keys:
            continue
        layer_id, port_id = keys[name]
        port = ovir.find_port(by_id[layer_id].outputs, port_id)
        feeds[name] = np.asarray(array).astype(ovir.numpy_dtype(port.element_type), copy=False)
        param = _ir_layer(graph, "Parameter", name, {"shape": ",".join(map(str, feeds[name].shape)),
                                                     "element_type": port.element_type})
        param.outputs.append(ovir.Port(0, port.element_type, list(feeds[name].shape), [name]))
        port.names = [name + ALONE]
        graph.edges = [ovir.Edge(param.id, 0, e.to_layer, e.to_port) if (e.from_layer, e.from_port) == keys[name]
                       else e for e in graph.edges]
    for layer in graph.results():
        _ir_drop(graph, layer.id)
    for name in wanted:
        if name in keys:
            _ir_result(graph, keys[name], name + ALONE)
    _ir_prune(graph)
    return Model(f"{model.label} (cut)", "ir", graph=graph), feeds


# -- ONNX ------------------------------------------------------------------------------------------------------

def _values(graph: ir.Graph) -> dict[str, ir.Value]:
    out = {v.name: v for v in graph.inputs}
    for node in graph:
        out.update({v.name: v for v in node.outputs if v.name})
    return out


def _onnx_view(model: ir.Model) -> View:
    graph = model.graph
    inputs = {v.name for v in graph.inputs if v.const_value is None}
    constants = {v.name for v in graph.initializers.values()} | {v.name for v in graph.inputs
                                                                 if v.const_value is not None}
    top = {id(v) for v in graph.inputs} | {id(v) for v in graph.initializers.values()}
    top |= {id(v) for node in graph for v in node.outputs}
    nodes, producer, names = [], {}, {}
    for node in graph:
        reads = [v.name for v in node.inputs if v is not None]
        ops = [node.op_type]
        for body in bodies(node):
            for inner in body.all_nodes():
                ops.append(inner.op_type)
                reads += [v.name for v in inner.inputs if v is not None and id(v) in top]
        outputs = [v.name for v in node.outputs if v.name]
        if all(r in constants for r in reads):  # Constant nodes, and what constants alone compute
            constants.update(outputs)
        for key in outputs:
            producer[key] = len(nodes)
            names[key] = [key]
        nodes.append(Node(node_label(node), node.op_type, list(dict.fromkeys(reads)), outputs, tuple(ops)))
    return View(nodes, names, producer, inputs, constants)


# -- OpenVINO IR -------------------------------------------------------------------------------------------------

def _ir_view(graph: ovir.IRGraph) -> View:
    producers = graph.producers()
    nodes, producer, names, inputs, constants = [], {}, {}, set(), set()
    for layer in graph.topological():
        if layer.type == "Result":
            continue
        reads = [producers.get((layer.id, p.id)) for p in layer.inputs]
        outputs = [(layer.id, p.id) for p in layer.outputs]
        if layer.type == "Parameter":
            inputs.update(outputs)
        elif layer.type == "Const" or all(r in constants for r in reads):
            constants.update(outputs)
        for key, port in zip(outputs, layer.outputs):
            producer[key] = len(nodes)
            names[key] = list(port.names)
        ops = (layer.type, *(inner.type for body in layer.bodies() for inner in body.all_layers()))
        nodes.append(Node(layer.name, layer.type, [r for r in reads if r is not None], outputs, ops))
    return View(nodes, names, producer, inputs, constants)


def _ir_copy(graph: ovir.IRGraph) -> ovir.IRGraph:
    """New layer and port records (what cut and exposed change); Const data, bodies and port maps shared."""
    copy = ovir.IRGraph(graph.name, 11)  # written as IR 11: Results named by their output_names
    copy.layers = [dataclasses.replace(
        layer, attrs=dict(layer.attrs), element_attrs=dict(layer.element_attrs),
        inputs=[dataclasses.replace(p) for p in layer.inputs],
        outputs=[dataclasses.replace(p, names=list(p.names)) for p in layer.outputs]) for layer in graph.layers]
    copy.edges = list(graph.edges)
    copy._names = {layer.name for layer in copy.layers}
    return copy


def _ir_layer(graph: ovir.IRGraph, type_: str, name: str, attrs: dict) -> ovir.IRLayer:
    layer = ovir.IRLayer(max((x.id for x in graph.layers), default=-1) + 1, graph._unique(name), type_, "opset1",
                         attrs)
    graph.layers.append(layer)
    return layer


def _ir_result(graph: ovir.IRGraph, key, output_name: str) -> None:
    src = ovir.find_port(graph.by_id()[key[0]].outputs, key[1])
    result = _ir_layer(graph, "Result", f"{output_name}/result", {})
    result.element_attrs["output_names"] = output_name.replace(",", "\\,")
    result.inputs.append(ovir.Port(0, src.element_type, None if src.dims is None else list(src.dims)))
    graph.edges.append(ovir.Edge(key[0], key[1], result.id, 0))


def _ir_drop(graph: ovir.IRGraph, layer_id: int) -> None:
    graph.layers = [x for x in graph.layers if x.id != layer_id]
    graph.edges = [e for e in graph.edges if layer_id not in (e.from_layer, e.to_layer)]


def _ir_prune(graph: ovir.IRGraph) -> None:
    """Only the layers the Results need."""
    into: dict[int, list[int]] = {}
    for e in graph.edges:
        into.setdefault(e.to_layer, []).append(e.from_layer)
    keep, stack = set(), [x.id for x in graph.results()]
    while stack:
        lid = stack.pop()
        if lid not in keep:
            keep.add(lid)
            stack.extend(into.get(lid, ()))
    graph.layers = [x for x in graph.layers if x.id in keep]
    graph.edges = [e for e in graph.edges if e.to_layer in keep and e.from_layer in keep]
