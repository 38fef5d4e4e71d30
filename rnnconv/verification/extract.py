"""One node (or the nodes that replaced it) as a model of its own, with what it reads: node checks run these.

Inputs that are constants (initializers or Constant nodes, of this graph or an enclosing one) stay constants, so a
node is checked on its real weights; every other value it reads becomes a graph input. Weights are shared, never
copied.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects import onnx_recurrent


def extract(nodes: Sequence[ir.Node], inputs: Sequence[Optional[ir.Value]], outputs: Sequence[ir.Value],
            opset_imports: Mapping[str, int], ir_version: int, *, output_names: Optional[Sequence[str]] = None,
            shapes: Optional[Mapping[str, ir.Shape]] = None) -> ir.Model:
    """A standalone model holding clones of `nodes`, reading `inputs` (graph inputs, or initializers when
    constant) and giving `outputs` (named `output_names` when given). `shapes`: the shape of an input that
    becomes a graph input, by value name, where the graph does not say it."""
    mapping: dict[int, ir.Value] = {}
    graph_inputs, initializers = [], []
    shapes = shapes or {}

    def lookup(v: Optional[ir.Value]) -> Optional[ir.Value]:
        if v is None:
            return None
        if id(v) in mapping:
            return mapping[id(v)]
        c = ir.Value(name=v.name, type=v.type, shape=v.shape)
        mapping[id(v)] = c
        array = onnx_recurrent.constant_array(v)
        if v.const_value is not None:
            c.const_value = v.const_value
            initializers.append(c)
        elif array is not None:  # a Constant node's output
            c.const_value = ir.tensor(array, name=v.name)
            initializers.append(c)
        else:
            if v.name in shapes:
                c.shape = shapes[v.name]
            graph_inputs.append(c)
        if c.const_value is not None:
            c.type = c.type or ir.TensorType(c.const_value.dtype)
            c.shape = c.shape or ir.Shape(c.const_value.shape)
        return c

    for v in inputs:
        lookup(v)
    new_nodes = []
    for node in nodes:
        ins = [lookup(v) for v in node.inputs]
        outs = [ir.Value(name=o.name, type=o.type, shape=o.shape) for o in node.outputs]
        for o, c in zip(node.outputs, outs):
            mapping[id(o)] = c
        new_nodes.append(ir.Node(node.domain, node.op_type, inputs=ins, outputs=outs, name=node.name,
                                 attributes=list(node.attributes.values()), version=node.version))
    graph_outputs = [mapping[id(o)] for o in outputs]
    for value, name in zip(graph_outputs, output_names or ()):
        value.name = name
    graph = ir.Graph(graph_inputs, graph_outputs, nodes=new_nodes, initializers=initializers,
                     opset_imports=dict(opset_imports), name="rnnconv-extract")
    if ir_version < 4:  # IR 3: every initializer is also a graph input
        graph.inputs.extend(v for v in initializers if v not in graph.inputs)
    return ir.Model(graph, ir_version=ir_version, producer_name="rnnconv")


def recurrent_shapes(rn: onnx_recurrent.RecurrentNode) -> dict[str, ir.Shape]:
    """The spec's shapes of a recurrent node's X, states and lengths, by value name: static where X's dims are,
    else named N and T (so X, the states and the lengths agree when they are computed inside the graph)."""
    layer = rn.layer
    D, H = layer.num_directions, layer.hidden_size
    x = rn.inputs["X"]
    size = layer.input_size
    if size is None and x.shape is not None and isinstance(x.shape[-1], int):
        size = x.shape[-1]
    xs = list(x.shape) if x.shape is not None and len(x.shape) == 3 else [None, None, size]
    n_axis, t_axis = (0, 1) if layer.layout == 1 else (1, 0)
    n = xs[n_axis] if isinstance(xs[n_axis], int) else "N"
    t = xs[t_axis] if isinstance(xs[t_axis], int) else "T"
    state = [n, D, H] if layer.layout == 1 else [D, n, H]
    spec = {"X": [n, t, size] if layer.layout == 1 else [t, n, size], "initial_h": state, "initial_c": state,
            "sequence_lens": [n]}
    return {value.name: ir.Shape(spec[role]) for role, value in rn.inputs.items()
            if value is not None and role in spec}


def recurrent_node(rn: onnx_recurrent.RecurrentNode, opset_imports: Mapping[str, int], ir_version: int
                   ) -> ir.Model:
    """The recurrent node alone; inputs computed at run time get the spec's shapes (recurrent_shapes)."""
    x = rn.inputs["X"]
    outputs = [v for v in rn.node.outputs if v is not None and v.name]
    model = extract([rn.node], list(rn.node.inputs), outputs, opset_imports,
                    max(ir_version, schemas.min_ir_version(opset_imports.get("", 1)), 4), shapes=recurrent_shapes(rn))
    float_type = x.type or rn.inputs["W"].type or ir.TensorType(ir.DataType.FLOAT)
    lens = rn.inputs.get("sequence_lens")
    for v in [*model.graph.inputs, *model.graph.outputs]:  # values inside a graph may carry no type
        if v.type is None:
            v.type = ir.TensorType(ir.DataType.INT32) if lens is not None and v.name == lens.name else float_type
    return model
