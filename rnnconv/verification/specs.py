"""What each model input is: dtype, dims, which axes are batch and sequence, and the valid range of integer inputs
(sequence lengths, token ids), read from ONNX or OpenVINO IR."""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.dialects.onnx_recurrent import constant_array
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino.gates import SEQUENCES
from rnnconv.errors import BadInput
from rnnconv.verification.model import Model, numpy_dtype
from rnnconv.verification.sizes import IR_BROADCAST, IR_SAME_AXES, ir_sizes, onnx_sizes

SEQUENCE_OPS = {op: 3 if kind == "LSTM" else 2 for op, kind in SEQUENCES.items()}  # IR op -> sequence_lengths port
_PASS_THROUGH = {"Identity", "Cast", "Convert"}
_SAME_AXES = {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "Elu", "Selu", "Gelu", "Dropout", "Softmax", "LogSoftmax",
              "HardSigmoid", "HardSwish", "Softplus", "Abs", "Neg", "Exp", "Sqrt", "Erf", "Clip"}
_WITH_CONSTANT = {"Add", "Sub", "Mul", "Div", "MatMul"}
_KEEP_BATCH = {"Conv", "ConvTranspose", "BatchNormalization", "InstanceNormalization", "LayerNormalization",
               "MaxPool", "AveragePool"}  # axis 0 of their output is axis 0 of their input
_IR_KEEP_BATCH = {"Convolution", "GroupConvolution", "ConvolutionBackpropData", "BatchNormInference", "MVN",
                  "MaxPool", "AvgPool"}


@dataclasses.dataclass
class InputSpec:
    """A graph input: dims are ints, symbol names (str) or None (unnamed dynamic); roles name axes."""

    name: str
    dtype: np.dtype
    dims: list
    roles: dict = dataclasses.field(default_factory=dict)  # axis -> "batch" | "sequence"
    int_range: Optional[tuple] = None  # inclusive valid range read from the graph
    int_source: str = ""
    role: str = ""  # "sequence_lens" or "token ids": values given in an inputs file are checked against it
    lengths_of: Optional[tuple] = None  # sequence_lens: (input, axis) whose size is T; values in 1..T
    sizes: dict = dataclasses.field(default_factory=dict)  # dynamic axis -> (size, why): what the model fixes


def _onnx_specs(model: ir.Model) -> dict[str, InputSpec]:
    """The graph inputs' specs: roles traced from the recurrent nodes, valid integer ranges, one batch size."""
    graph = model.graph
    specs = {}
    for v in graph.inputs:
        if v.name in graph.initializers:
            continue
        dims = []
        for d in (v.shape or ()):
            if isinstance(d, int):
                dims.append(d if d >= 0 else None)
            else:
                sym = getattr(d, "value", None)
                dims.append(sym if isinstance(sym, str) and sym else None)
        specs[v.name] = InputSpec(v.name, numpy_dtype(v.dtype) or np.dtype(np.float32), dims)

    for rn in [*onnx_recurrent.find(model), *onnx_quantized.find(model)]:  # DynamicQuantizeLSTM: LSTM's inputs
        t_axis, n_axis = (1, 0) if rn.layer.layout else (0, 1)
        x = rn.inputs["X"]
        batch_axes = []  # every (input, axis) this node's batch is read from
        for axis, role in ((t_axis, "sequence"), (n_axis, "batch")):
            src = _trace_back(x, axis, rank=3)
            if src is not None and src[0] in specs:
                specs[src[0]].roles.setdefault(src[1], role)
                if role == "batch":
                    batch_axes.append(src)
        for key in ("initial_h", "initial_c"):
            src = _trace_back(rn.inputs.get(key), n_axis, rank=3)
            if src is not None and src[0] in specs:
                specs[src[0]].roles.setdefault(src[1], "batch")
                batch_axes.append(src)
        _one_batch(specs, batch_axes + ([_trace_back(rn.inputs.get("sequence_lens"), 0)]
                                        if rn.inputs.get("sequence_lens") is not None else []))
        lens = rn.inputs.get("sequence_lens")
        src = _trace_back(lens, 0)
        if src is None or src[0] not in specs:
            continue
        spec = specs[src[0]]
        spec.roles.setdefault(src[1], "batch")
        t = x.shape[t_axis] if x.shape is not None and len(x.shape) > t_axis else None
        where = f"sequence_lens of {rn.op} {rn.name!r}"
        if isinstance(t, int):
            _narrow(spec, (1, t), where)
            spec.role = "sequence_lens"
        else:
            x_src = _trace_back(x, t_axis, rank=3)
            if x_src is not None and x_src[0] in specs:
                spec.lengths_of, spec.int_source, spec.role = x_src, where, "sequence_lens"
    for v in graph.inputs:
        if v.name in specs and specs[v.name].dtype.kind in "iu":
            _token_range(v, specs[v.name])
            _compared_with(v, specs[v.name])
    dynamic = [(s.name, axis, d) for s in specs.values() for axis, d in enumerate(s.dims) if not isinstance(d, int)]
    if dynamic:
        for (name, axis), found in onnx_sizes(model, dynamic).items():
            specs[name].sizes[axis] = found
    return specs


def _one_batch(specs: dict[str, InputSpec], axes: list) -> None:
    """The batch axes of one recurrent node's X, states and lengths are one size: a static one (a state input of
    fixed batch, say) fixes the others, symbol or unnamed."""
    axes = [a for a in axes if a is not None and a[0] in specs and a[1] < len(specs[a[0]].dims)]
    fixed = {specs[name].dims[axis] for name, axis in axes if isinstance(specs[name].dims[axis], int)}
    if len(fixed) != 1:
        return
    size = fixed.pop()
    symbols = {specs[name].dims[axis] for name, axis in axes if isinstance(specs[name].dims[axis], str)}
    for name, axis in axes:
        if not isinstance(specs[name].dims[axis], int):
            specs[name].dims[axis] = size
    for spec in specs.values():  # the symbol is that size wherever it stands
        spec.dims = [size if d in symbols else d for d in spec.dims]


_COMPARE = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}


def _compared_with(value: ir.Value, spec: InputSpec) -> None:
    """An integer input compared with a constant (a sample rate tested against 16000, a mode flag) is drawn
    from the values it is compared with: other values take branches the model is not meant to take."""
    if spec.int_range is not None or spec.dims:
        return
    found = []
    for node, index in value.uses():
        if node.op_type in _COMPARE and len(node.inputs) == 2:
            other = constant_array(node.inputs[1 - index])
            if other is not None and other.size == 1 and other.dtype.kind in "iu":
                found.append((int(other.reshape(-1)[0]), node))
    if found:
        v, node = found[0]
        spec.int_range, spec.int_source = (v, v), f"compared with {v} in {node.op_type} {node.name or ''}".rstrip()


def told_sizes(model: "ir.Model | Model") -> list[int]:
    """Sizes the model itself states: the positive entries of constant Reshape targets (an exporter that baked a
    sequence length into a view), largest first; ONNX or IR. Dynamic dims are tried at these sizes when the model
    does not run at the default ones."""
    targets = []
    if isinstance(model, Model) and model.format != "onnx":
        targets = [_ir_const(model.graph, layer, 1) for layer in model.graph.layers if layer.type == "Reshape"]
    else:
        for node, _, _ in onnx_recurrent.walk(model.onnx if isinstance(model, Model) else model):
            if node.op_type == "Reshape" and len(node.inputs) > 1:
                targets.append(constant_array(node.inputs[1]))
    sizes = set()
    for target in targets:
        if target is not None and np.asarray(target).dtype.kind in "iu":
            sizes.update(int(s) for s in np.asarray(target).reshape(-1) if 1 < s <= 4096)
    return sorted(sizes, reverse=True)


def _narrow(spec: InputSpec, rng: tuple, why: str) -> None:
    if spec.int_range is None:
        spec.int_range, spec.int_source = rng, why
    else:
        lo, hi = max(spec.int_range[0], rng[0]), min(spec.int_range[1], rng[1])
        spec.int_range = (lo, max(lo, hi))
        if why not in spec.int_source:
            spec.int_source = f"{spec.int_source}; {why}"


def _trace_back(value: Optional[ir.Value], axis: int, depth: int = 0, rank: Optional[int] = None
                ) -> Optional[tuple[str, int]]:
    """The graph input and axis that `value`'s `axis` comes from, through Transpose, Cast, Identity, Gather, ops
    of one input that keep its axes, and (when `rank`, the value's rank, is known) a constant added, multiplied or
    MatMul'ed into the trailing axes (a Linear front end)."""
    if value is None or depth > 16:
        return None
    if value.is_graph_input():
        return value.name, axis
    node = value.producer()
    if node is None:
        return None
    if node.op_type in _PASS_THROUGH or node.op_type in _SAME_AXES or (node.op_type in _KEEP_BATCH and axis == 0):
        return _trace_back(node.inputs[0], axis, depth + 1, rank)
    if node.op_type == "Transpose":
        perm = node.attributes.get("perm")
        if perm is None:
            return None
        return _trace_back(node.inputs[0], list(perm.value)[axis], depth + 1, rank)
    if node.op_type == "Gather":  # embedding lookup: ids axes come first when gathering along axis 0
        g_axis = node.attributes["axis"].value if "axis" in node.attributes else 0
        ids = node.inputs[1]
        if g_axis == 0 and ids is not None and ids.shape is not None and axis < len(ids.shape):
            return _trace_back(ids, axis, depth + 1)
    if rank is not None and node.op_type in _WITH_CONSTANT and len(node.inputs) == 2:
        consts = [constant_array(v) for v in node.inputs]
        if sum(c is None for c in consts) != 1:
            return None
        data = 0 if consts[0] is None else 1
        other = consts[1 - data]
        reach = 1 if node.op_type == "MatMul" else np.ndim(other)  # trailing axes the constant touches
        if node.op_type == "MatMul" and (data != 0 or np.ndim(other) != 2):
            return None
        if axis < rank - reach:
            return _trace_back(node.inputs[data], axis, depth + 1, rank)
    return None


def _token_range(value: ir.Value, spec: InputSpec, depth: int = 0) -> None:
    """Ids that index a constant table through Gather are drawn below the table's size on that axis."""
    if depth > 8:
        return
    for node, index in value.uses():
        if node.op_type in _PASS_THROUGH | {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose"}:
            if index == 0:
                for out in node.outputs:
                    _token_range(out, spec, depth + 1)
        elif node.op_type == "Gather" and index == 1:
            data = node.inputs[0]
            axis = node.attributes["axis"].value if "axis" in node.attributes else 0
            size = None
            table = constant_array(data)
            if table is not None:
                size = table.shape[axis]
            elif data is not None and data.shape is not None and isinstance(data.shape[axis], int):
                size = data.shape[axis]
            if size:
                _narrow(spec, (0, size - 1), f"ids into {node.op_type} {node.name or data.name!r} "
                                             f"(table size {size})")
                spec.role = spec.role or "token ids"


def _ir_specs(graph) -> dict[str, InputSpec]:
    by_id = graph.by_id()
    producers = graph.producers()
    consumers: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for e in graph.edges:
        consumers.setdefault((e.from_layer, e.from_port), []).append((e.to_layer, e.to_port))
    specs, param_of = {}, {}
    for p in graph.parameters():
        if not p.outputs:
            raise BadInput(f"IR Parameter {p.name!r} has no <output> port")
        port = p.outputs[0]
        name = ovir.parameter_name(p)
        dims = None if port.dims is None else [None if d < 0 else int(d) for d in port.dims]
        specs[name] = InputSpec(name, ovir.numpy_dtype(p.attrs.get("element_type", port.element_type)), dims or [])
        param_of[p.id] = name

    def back(layer_id: int, port: int, axis: int, depth=0):
        """(parameter name, axis) feeding input `port` of `layer_id` at `axis`, through layers that keep axes
        (Convert, Transpose, elementwise ones with a constant, a Linear's MatMul)."""
        src = producers.get((layer_id, port))
        if src is None or depth > 16:
            return None
        layer = by_id[src[0]]
        if layer.type == "Parameter":
            return param_of.get(layer.id), axis
        if layer.type in IR_SAME_AXES and layer.inputs and len(layer.outputs) == 1:
            data = [i for i in range(len(layer.inputs)) if _ir_const(graph, layer, i) is None]
            out_dims = layer.outputs[0].dims
            if (len(data) == 1 and out_dims is not None and layer.inputs[data[0]].dims is not None
                    and len(layer.inputs[data[0]].dims) == len(out_dims)):
                return back(layer.id, layer.inputs[data[0]].id, axis, depth + 1)
            return None
        if layer.type == "Transpose":
            perm = _ir_const(graph, layer, 1)
            if perm is None:
                return None
            return back(layer.id, layer.inputs[0].id, int(np.asarray(perm).reshape(-1)[axis]), depth + 1)
        if layer.type in _IR_KEEP_BATCH and axis == 0 and layer.inputs:
            return back(layer.id, layer.inputs[0].id, axis, depth + 1)
        if layer.type in ("Unsqueeze", "Squeeze") and len(layer.inputs) == 2:
            axes, rank = _ir_const(graph, layer, 1), len(layer.outputs[0].dims or [])
            if axes is None or not rank:
                return None
            inner = _moved_axis(layer.type, [int(a) for a in np.ravel(axes)], axis, rank)
            return None if inner is None else back(layer.id, layer.inputs[0].id, inner, depth + 1)
        if layer.type in SEQUENCE_OPS and layer.inputs:
            index = next((k for k, q in enumerate(layer.outputs) if q.id == src[1]), None)
            x_axis = {0: {0: 0, 2: 1}}.get(index, {0: 0}).get(axis)  # Y [N, D, T, H]; Ho, Co [N, D, H]
            return None if x_axis is None else back(layer.id, layer.inputs[0].id, x_axis, depth + 1)
        if layer.type in ("Split", "VariadicSplit") and len(layer.inputs) >= 2:
            split_axis, dims = _ir_const(graph, layer, 1), layer.inputs[0].dims
            if split_axis is not None and dims and axis != int(np.asarray(split_axis).reshape(-1)[0]) % len(dims):
                return back(layer.id, layer.inputs[0].id, axis, depth + 1)  # the other axes keep their sizes
            return None
        if layer.type == "MatMul" and len(layer.inputs) == 2 and layer.attrs.get("transpose_a", "false") == "false":
            weight, dims = _ir_const(graph, layer, 1), layer.inputs[0].dims
            if weight is not None and np.ndim(weight) == 2 and dims is not None and axis < len(dims) - 1:
                return back(layer.id, layer.inputs[0].id, axis, depth + 1)  # a Linear keeps the leading axes
        return None

    for layer in graph.layers:
        if layer.type in SEQUENCE_OPS:
            ports = [p.id for p in layer.inputs]
            for axis, role in ((0, "batch"), (1, "sequence")):
                src = back(layer.id, ports[0], axis)
                if src and src[0] in specs:
                    specs[src[0]].roles.setdefault(src[1], role)
            lens_port = SEQUENCE_OPS[layer.type]
            for port in ports[1:lens_port + 1]:
                src = back(layer.id, port, 0)
                if src and src[0] in specs:
                    specs[src[0]].roles.setdefault(src[1], "batch")
            src = back(layer.id, ports[lens_port], 0)
            if src and src[0] in specs:
                x_dims = layer.inputs[0].dims
                where = f"sequence_lengths of {layer.type} {layer.name!r}"
                if x_dims and len(x_dims) > 1 and x_dims[1] > 0:
                    _narrow(specs[src[0]], (1, int(x_dims[1])), where)
                    specs[src[0]].role = "sequence_lens"
                else:
                    x_src = back(layer.id, ports[0], 1)
                    if x_src and x_src[0] in specs:
                        specs[src[0]].lengths_of, specs[src[0]].int_source = x_src, where
                        specs[src[0]].role = "sequence_lens"
        elif layer.type == "Gather" and len(layer.inputs) >= 2:
            src = back(layer.id, layer.inputs[1].id, 0)
            table = _ir_const(graph, layer, 0)
            axis = _ir_const(graph, layer, 2)
            if src and src[0] in specs and table is not None:
                ax = int(np.asarray(axis).reshape(-1)[0]) if axis is not None else 0
                size = np.asarray(table).shape[ax]
                _narrow(specs[src[0]], (0, size - 1), f"ids into Gather {layer.name!r} (table size {size})")
                specs[src[0]].role = specs[src[0]].role or "token ids"
    _ir_ties(graph, specs, back)
    for (name, axis), found in ir_sizes(graph, back, lambda layer, i: _ir_const(graph, layer, i)).items():
        if name in specs and axis < len(specs[name].dims) and not isinstance(specs[name].dims[axis], int):
            specs[name].sizes.setdefault(axis, found)
    return specs


def _moved_axis(op: str, axes: list[int], axis: int, out_rank: int) -> Optional[int]:
    """The input axis an Unsqueeze's or Squeeze's output `axis` comes from (None: an axis the Unsqueeze added)."""
    if op == "Unsqueeze":
        added = {a % out_rank for a in axes}
        return None if axis in added else axis - sum(a < axis for a in added)
    in_rank = out_rank + len(axes)
    removed = sorted(a % in_rank for a in axes)
    for a in removed:
        if a <= axis:
            axis += 1
    return axis


def _ir_ties(graph, specs: dict[str, InputSpec], back) -> None:
    """Dynamic dims that are one size: IR carries no dim names (OpenVINO drops ONNX's symbols), so a mask
    [batch, time] multiplied into an LSTM's output [batch, time, hidden] would be drawn at other sizes than the
    LSTM's input. Parameter axes met in a broadcasting operation (traced back as `back` does) get one name."""
    parent: dict[tuple, tuple] = {}

    def find(a):
        while parent.get(a, a) != a:
            a = parent[a]
        return a

    for layer in graph.layers:
        if layer.type not in IR_BROADCAST or len(layer.inputs) < 2:
            continue
        ports = [p for p in layer.inputs[-2:] if p.dims]
        if len(ports) != 2:
            continue
        for k in range(1, min(len(p.dims) for p in ports) + 1):
            if any(p.dims[-k] == 1 for p in ports):
                continue  # broadcast from 1: no tie
            a, b = (back(layer.id, p.id, len(p.dims) - k) for p in ports)
            if a and b and a[0] in specs and b[0] in specs and a != b:
                parent[find(b)] = find(a)
    classes: dict[tuple, list] = {}
    for member in parent:
        classes.setdefault(find(member), []).append(member)
    for root, members in classes.items():
        members = sorted({root, *members})
        if any(axis >= len(specs[n].dims) or specs[n].dims[axis] is not None for n, axis in members):
            continue  # a static or named dim: the draw already holds it
        role = next((specs[n].roles[axis] for n, axis in members if axis in specs[n].roles), None)
        for n, axis in members:
            specs[n].dims[axis] = f"{members[0][0]}_{members[0][1]}"
            if role is not None:
                specs[n].roles.setdefault(axis, role)


def _ir_const(graph, layer, port_index: int):
    """The constant on input `port_index` of `layer` (through Convert, as fp16-compressed weights are), or None."""
    producers, by_id = graph.producers(), graph.by_id()
    if port_index >= len(layer.inputs):
        return None
    src = producers.get((layer.id, layer.inputs[port_index].id))
    for _ in range(4):
        if src is None:
            return None
        prod = by_id[src[0]]
        if prod.type == "Const":
            return prod.value
        if prod.type != "Convert":
            return None
        src = producers.get((prod.id, prod.inputs[0].id))
    return None


def input_specs(model: Model) -> dict[str, InputSpec]:
    return _onnx_specs(model.onnx) if model.format == "onnx" else _ir_specs(model.graph)


def merge_specs(reference: Model, candidate: Model) -> dict[str, InputSpec]:
    """The reference's inputs, with what the candidate knows added (symbol names, valid ranges, static sizes)."""
    ref, cand = input_specs(reference), input_specs(candidate)
    extra = sorted(set(cand) - set(ref))
    if extra:
        raise BadInput(f"the candidate needs input(s) {extra} that the reference does not have "
                       f"(reference inputs: {sorted(ref)})")
    for name, c in cand.items():
        r = ref[name]
        if r.dims and c.dims and len(r.dims) != len(c.dims):
            raise BadInput(f"input {name!r}: rank {len(r.dims)} in the reference, {len(c.dims)} in the candidate")
        if not r.dims:
            r.dims = list(c.dims)
        for axis, (a, b) in enumerate(zip(r.dims, c.dims)):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise BadInput(f"input {name!r} axis {axis}: size {a} in the reference, {b} in the candidate")
            if isinstance(b, int) or (a is None and isinstance(b, str)):
                r.dims[axis] = b
        for axis, role in c.roles.items():
            r.roles.setdefault(axis, role)
        if c.int_range is not None:
            _narrow(r, c.int_range, c.int_source)
        r.role = r.role or c.role
        for axis, found in c.sizes.items():
            if axis < len(r.dims) and not isinstance(r.dims[axis], int):
                r.sizes.setdefault(axis, found)
        if r.lengths_of is None and c.lengths_of is not None:
            r.lengths_of = c.lengths_of
            r.int_source = r.int_source or c.int_source
    return ref
