"""rnnconv's executor for whole ONNX models. Run `partitioned` (whole-model checks), it splits each graph between
two providers (engine/partition.py): onnxruntime runs maximal subgraphs of the nodes it runs as the spec says, one
session each (the whole model in one session when it runs every node), and rnnconv runs the rest itself:

- rnnconv's kernels: GRU, LSTM and RNN of every version (KERNELS) where onnxruntime refuses them or has no kernel;
- rnnconv itself: If, Loop and Scan (their bodies see the values of every scope around them, and are partitioned in
  turn), calls of model-local functions, Constant.

Not partitioned (node checks: a recurrent node against its replacement), every recurrent node runs in rnnconv's
kernels (com.microsoft DynamicQuantizeLSTM too, computed as onnxruntime does) and every other node alone in
onnxruntime (`onnxruntime_runtime.NodeSession`). onnx's reference implementation (`reference.op`) computes only a
node onnxruntime cannot run, alone or in a segment, and the placements say so.

Weights stay the (memory-mapped) arrays they are, never copied into protobuf; a value is dropped once no later
node of its graph needs it. The recurrent kernels compute in `precision` (float64 by default, or float32) and
return the model's types. A node that fails raises NodeFailed with its path (scope + name, as
`dialects.onnx_recurrent.walk` spells it), op, inputs and the reason, in one line.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Mapping, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.dialects import onnx_quantized
from rnnconv.dialects.onnx_recurrent import node_label
from rnnconv.engine import ONNXRUNTIME, RNNCONV, partition, reference
from rnnconv.engine.onnxruntime_runtime import (
    ISOLATE_WEIGHT_BYTES,
    Crashed,
    NodeSession,
    Session,
    external_bytes,
    max_ir_version,
    run_isolated,
)
from rnnconv.engine.op_dynamic_quantize_lstm import ONNXRUNTIME_THREADS, dynamic_quantize_lstm
from rnnconv.engine.op_gru import gru
from rnnconv.engine.op_lstm import lstm
from rnnconv.engine.op_rnn import rnn
from rnnconv.errors import BadInput, IOFailure, NodeFailed, Unsupported
from rnnconv.io.mapping import release_external

KERNELS = {"LSTM": lstm, "GRU": gru, "RNN": rnn}
PRECISIONS = {"float64": np.float64, "float32": np.float32}
# Attributes that are not kernel arguments: output_sequence (v1..6) only says whether Y is requested.
_NOT_KERNEL_ARGS = ("output_sequence",)

Placements = dict  # op ("LSTM", or "domain::op" outside the default domain) -> {place: number of nodes}
REFERENCE = "onnx reference"


def run_onnx(model: ir.Model, feeds: Mapping[str, np.ndarray], precision: str = "float64",
             placements: Optional[Placements] = None, *, partitioned: bool = False) -> dict[str, np.ndarray]:
    """Run the whole model; returns every graph output by name. `partitioned`: onnxruntime runs what it runs as
    the spec says, in as few sessions as it can (see the module's docstring). `placements`, when given, is filled
    with where each node ran: op -> {"rnnconv" | "onnx reference" | "onnxruntime": number of nodes} (each node
    counted once however often a loop ran it; branches not taken, and nodes inside the bodies of a node
    onnxruntime ran, are not counted). Memory-mapped weights it read leave the resident set afterwards."""
    try:
        return Executor(model, precision, partitioned=partitioned).run(feeds, placements)
    finally:
        release_external(model)


class _Scope:
    """The values of one graph run, in front of those of the graphs around it (If / Loop / Scan bodies see them)."""

    __slots__ = ("values", "parent")

    def __init__(self, parent: Optional["_Scope"] = None):
        self.values: dict[ir.Value, object] = {}
        self.parent = parent

    def get(self, value: ir.Value):
        scope = self
        while scope is not None:
            if value in scope.values:
                return scope.values[value]
            scope = scope.parent
        raise KeyError(value)


@dataclasses.dataclass(frozen=True)
class _Frame:
    """Where a graph runs: the path prefix of its nodes, its opsets, the attributes of the function call it runs
    for (what its attribute references resolve to) and the chain of those calls (nodes compile once per chain)."""

    scope: str
    opsets: Mapping[str, int]
    attributes: Mapping[str, ir.Attr]
    calls: tuple = ()

    def body(self, node: ir.Node, attribute: str) -> "_Frame":
        return dataclasses.replace(self, scope=f"{self.scope}{node_label(node)}/{attribute}/")


_Compute = Callable[[list, _Scope], list]


def whole_in_onnxruntime(model: ir.Model) -> Optional[Placements]:
    """Where a partitioned run places `model`'s nodes when it hands the model to onnxruntime whole (it does unless
    onnxruntime then fails it); None when it does not: a node onnxruntime does not run as the spec says, or a
    bfloat16 input or output, which onnxruntime's Python API does not move."""
    graph = model.graph
    opsets = _opsets(model.opset_imports, {})
    functions = {(f.domain, f.name, f.overload): f for f in model.functions.values()}
    memo: dict = {}
    if len(graph) == 0 or any(partition.rnnconv_reason(node, opsets, functions, memo) for node in graph):
        return None
    if any(v.dtype == ir.DataType.BFLOAT16 for v in [*graph.inputs, *graph.outputs]):
        return None
    placed: Placements = {}
    for node in graph:
        counts = placed.setdefault(_op(node), {})
        counts[ONNXRUNTIME] = counts.get(ONNXRUNTIME, 0) + 1
    return placed


class Executor:
    """One model, its nodes compiled at their first run (reference ops and onnxruntime sessions are kept)."""

    def __init__(self, model: ir.Model, precision: str = "float64", *, partitioned: bool = False):
        self.model = model
        self.dtype = PRECISIONS[precision]
        self.partitioned = partitioned
        self.functions = {(f.domain, f.name, f.overload): f for f in model.functions.values()}
        self._compiled: dict[tuple, list] = {}
        self._drops: dict[int, list[list[ir.Value]]] = {}
        self._segments: dict[tuple, tuple[list[partition.Segment], list[list[ir.Value]]]] = {}
        self._sessions: dict[tuple, object] = {}  # (segment, input kinds) -> Session, or the reason it failed
        self._one_by_one: set = set()  # segments whose session failed on these inputs
        self._placed: set = set()
        self._placements: Optional[Placements] = None

    def run(self, feeds: Mapping[str, np.ndarray], placements: Optional[Placements] = None) -> dict[str, np.ndarray]:
        graph = self.model.graph
        scope = _Scope()
        for value in graph.inputs:
            if value.name in feeds:
                scope.values[value] = feeds[value.name]
            elif value.const_value is None:
                raise BadInput(f"the model's input {value.name!r} is not given")
        self._placed, self._placements = set(), placements
        frame = _Frame("", _opsets(self.model.opset_imports, {}), {})
        if self.partitioned:
            whole = self._whole(frame, feeds)
            if whole is not None:
                return whole
        return dict(zip((v.name for v in graph.outputs), self._graph(graph, frame, scope)))

    def _whole(self, frame: _Frame, feeds: Mapping[str, np.ndarray]) -> Optional[dict[str, np.ndarray]]:
        """The whole model in one onnxruntime session, as onnxruntime's own run makes it, when onnxruntime runs
        every node (None otherwise, or when that session fails: the segments then find the node)."""
        graph = self.model.graph
        if whole_in_onnxruntime(self.model) is None:
            return None
        if external_bytes(self.model) > ISOLATE_WEIGHT_BYTES:
            got = self._whole_isolated(feeds)
            if got is None:
                return None
        else:
            try:
                session = Session(self.model)
            except Exception:  # the segments' way finds the node onnxruntime lacks
                return None
            try:
                wanted = {i.name for i in session.inputs()}
                got = session.run({k: v for k, v in feeds.items() if k in wanted})
            except Exception:  # these inputs: node by node, the node that fails says why
                segments, _ = self._segments_of(graph, frame)
                self._one_by_one.add(segments[0])
                return None
        for node in graph:
            self._place(node, frame, ONNXRUNTIME)
        return {v.name: got[v.name] for v in graph.outputs}

    def _whole_isolated(self, feeds: Mapping[str, np.ndarray]) -> Optional[dict[str, np.ndarray]]:
        """A big model's whole run in onnxruntime's own process, as its whole-model check runs it: this process
        maps none of its weights, and the check is answered from this run (run_isolated). None where onnxruntime
        refuses or fails it (the segments' way, in this process, then finds the node)."""
        wanted = {v.name for v in self.model.graph.inputs}
        try:
            [(got, _)] = run_isolated([self.model], {k: v for k, v in feeds.items() if k in wanted})
        except Crashed:
            return None
        return got

    def _place(self, node: ir.Node, frame: _Frame, place: str) -> None:
        key = (node, frame.calls)
        if self._placements is not None and key not in self._placed:
            self._placed.add(key)
            counts = self._placements.setdefault(_op(node), {})
            counts[place] = counts.get(place, 0) + 1

    # -- graphs and nodes ---------------------------------------------------------------------------------------

    def _graph(self, graph, frame: _Frame, scope: _Scope) -> list:
        """Run `graph` (a graph, a body or a function) in `scope`, which holds its inputs; its outputs in order."""
        for value in getattr(graph, "initializers", {}).values():
            if value not in scope.values and value.const_value is not None:
                scope.values[value] = value.const_value.numpy()
        if self.partitioned:
            segments, drops = self._segments_of(graph, frame)
            for segment, dead in zip(segments, drops):
                if segment.place == partition.ONNXRUNTIME:
                    self._segment(segment, frame, scope)
                else:
                    for node in segment.nodes:
                        self._node(node, frame, scope)
                for value in dead:
                    scope.values.pop(value, None)
            return [scope.get(v) for v in graph.outputs]
        drops = self._drops_of(graph)
        for node, dead in zip(graph, drops):
            self._node(node, frame, scope)
            for value in dead:
                scope.values.pop(value, None)
        return [scope.get(v) for v in graph.outputs]

    def _drops_of(self, graph) -> list[list[ir.Value]]:
        """Per node, the values of this graph no later node needs (a body's uses count for the node holding it)."""
        if id(graph) not in self._drops:
            self._drops[id(graph)] = _drops([[node] for node in graph], graph)
        return self._drops[id(graph)]

    def _segments_of(self, graph, frame: _Frame) -> tuple[list[partition.Segment], list[list[ir.Value]]]:
        key = (id(graph), frame.calls)
        if key not in self._segments:
            segments = partition.split(graph, frame.opsets, self.functions)
            self._segments[key] = segments, _drops([s.nodes for s in segments], graph)
        return self._segments[key]

    def _segment(self, segment: partition.Segment, frame: _Frame, scope: _Scope) -> None:
        """An onnxruntime segment in one session (built at its first run, per input types); its nodes one by one
        when onnxruntime cannot build that session, or fails on these inputs (then the node that fails says
        why)."""
        if not segment.outputs:
            return
        if segment in self._one_by_one:
            for node in segment.nodes:
                self._node(node, frame, scope)
            return
        arrays = [scope.get(v) for v in segment.inputs]
        kinds = tuple(_kind(a) for a in arrays)
        key = (segment, frame.calls, kinds)
        if key not in self._sessions:
            try:
                model = partition.segment_model(segment, arrays, frame.opsets, self.functions, max_ir_version())
                self._sessions[key] = Session(model, weights_inside=True)
            except Exception as err:  # an op or a version onnxruntime lacks: its nodes one by one
                self._sessions[key] = reason(err)
        session = self._sessions[key]
        if not isinstance(session, str):
            try:
                got = session.run(segment.fed(arrays))
            except Exception:  # the node that fails on these inputs, found and named below
                session = None
            else:
                for value in segment.outputs:
                    scope.values[value] = got[value.name]
                for node in segment.nodes:
                    self._place(node, frame, ONNXRUNTIME)
                return
        for node in segment.nodes:
            self._node(node, frame, scope)

    def _node(self, node: ir.Node, frame: _Frame, scope: _Scope) -> None:
        path = frame.scope + node_label(node)
        inputs: list = []
        try:
            for value in node.inputs:
                inputs.append(None if value is None else scope.get(value))
        except KeyError as err:
            raise NodeFailed(path, _op(node), [describe(a) for a in inputs],
                             f"its input {err.args[0].name!r} has no value (computed later, or nowhere)") from None
        try:
            place, compute = self._compile(node, frame, path, inputs)
            outputs = compute(inputs, scope)
        except (NodeFailed, Unsupported, IOFailure, MemoryError):
            raise
        except Exception as err:
            raise NodeFailed(path, _op(node), [describe(a) for a in inputs], reason(err)) from err
        self._place(node, frame, place[0])
        for value, output in zip(node.outputs, outputs):
            if value.name:
                scope.values[value] = output

    def _compile(self, node: ir.Node, frame: _Frame, path: str, inputs: list) -> tuple[list, _Compute]:
        """([where the node runs], how): the place is a list, which a node onnxruntime fails on updates."""
        key = (node, frame.calls)
        if key not in self._compiled:
            place, compute = self._choose(node, frame, path, inputs)
            self._compiled[key] = [place] if isinstance(place, str) else place, compute
        return self._compiled[key]

    def _choose(self, node: ir.Node, frame: _Frame, path: str, inputs: list) -> tuple:
        domain, op = _domain(node.domain), node.op_type
        attributes = _resolve(node, frame)
        if domain == "" and op in KERNELS:
            kwargs = {a.name: a.value for a in attributes if a.name not in _NOT_KERNEL_ARGS}
            return RNNCONV, lambda ins, _: KERNELS[op](*ins, dtype=self.dtype, **kwargs)
        if onnx_quantized.is_quantized_lstm(node) and not self.partitioned:
            kwargs = {a.name: a.value for a in attributes}
            with_y = bool(node.outputs) and bool(node.outputs[0].name)
            return RNNCONV, lambda ins, _: dynamic_quantize_lstm(*ins, output_sequence=with_y,
                                                                   num_threads=ONNXRUNTIME_THREADS, **kwargs)
        if domain == "" and op in _CONTROL_FLOW:
            run = _CONTROL_FLOW[op]
            by_name = {a.name: a for a in attributes}
            return RNNCONV, lambda ins, scope: run(self, node, frame, by_name, ins, scope)
        function = self.functions.get((node.domain, op, node.overload))
        if function is not None:
            return RNNCONV, lambda ins, _: self._call(function, node, frame, attributes, ins)
        if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in attributes):
            raise Unsupported(f"node {path!r} ({_op(node)}): rnnconv's engine runs the bodies of If, Loop and Scan "
                              f"only, not those of {op}")
        if domain == "" and op == "Constant" and [a.name for a in attributes] == ["value"]:
            value = attributes[0].value.numpy()
            return RNNCONV, lambda ins, _: [value]
        place = [ONNXRUNTIME]
        return place, self._alone(node, frame, attributes, place)

    def _alone(self, node: ir.Node, frame: _Frame, attributes: list, place: list) -> _Compute:
        """The node alone in onnxruntime; in onnx's reference where onnxruntime cannot run it (no kernel, or none
        for these types): `place` says which ran it last."""
        sessions: dict[tuple, Callable] = {}
        constants = {k: v.const_value.numpy() for k, v in enumerate(node.inputs)
                     if v is not None and v.const_value is not None}
        wanted = [bool(v.name) for v in node.outputs]
        domain = _domain(node.domain)

        def referenced(err: Exception) -> Callable:
            if domain != "":
                raise err
            try:
                run = reference.op(node.op_type, frame.opsets.get("", 1), attributes, len(node.inputs),
                                   len(node.outputs), frame.opsets)
            except reference.NoReference:
                raise err from None
            place[0] = REFERENCE
            return lambda *ins: run(*ins)

        def compute(inputs, _):
            # one session per input types (a loop body may see other types than the first run's: rare)
            kinds = tuple(_kind(a) for a in inputs)
            if kinds not in sessions:
                try:
                    sessions[kinds] = NodeSession(node.domain, node.op_type, attributes, inputs, wanted,
                                                  frame.opsets, constants).run
                    place[0] = ONNXRUNTIME
                except Exception as err:
                    sessions[kinds] = referenced(err)
            try:
                return sessions[kinds](*inputs)
            except Exception as err:
                if place[0] == REFERENCE:
                    raise
                try:
                    run = referenced(err)
                    outputs = run(*inputs)
                except Exception:
                    place[0] = ONNXRUNTIME
                    raise err from None
                sessions[kinds] = run
                return outputs

        return compute

    def _call(self, function: ir.Function, node: ir.Node, frame: _Frame, attributes: list, inputs: list) -> list:
        """A model-local function: its body in a scope of its own (functions see no outer values)."""
        bound = {name: a for name, a in function.attributes.items() if a.value is not None}
        bound.update({a.name: a for a in attributes})
        inner = _Frame(f"function {function.name}/", _opsets(function.opset_imports, frame.opsets), bound,
                       frame.calls + (node,))
        scope = _Scope()
        for value, array in zip(function.inputs, inputs):
            scope.values[value] = array
        return self._graph(function, inner, scope)

    # -- control flow (https://onnx.ai/onnx/operators/onnx__If.html, onnx__Loop.html, onnx__Scan.html) -------

    def _if(self, node: ir.Node, frame: _Frame, attributes: dict, inputs: list, scope: _Scope) -> list:
        branch = "then_branch" if _flag(inputs[0], "cond") else "else_branch"
        return self._graph(attributes[branch].value, frame.body(node, branch), _Scope(scope))

    def _loop(self, node: ir.Node, frame: _Frame, attributes: dict, inputs: list, scope: _Scope) -> list:
        body = attributes["body"].value
        trip_count, cond, carried = inputs[0], inputs[1], list(inputs[2:])
        trips = None if trip_count is None else int(np.asarray(trip_count).reshape(-1)[0])
        going = True if cond is None else _flag(cond, "cond")
        n_scan = len(body.outputs) - 1 - len(carried)
        scans: list[list] = [[] for _ in range(n_scan)]
        inner, i = frame.body(node, "body"), 0
        while (trips is None or i < trips) and going:
            local = _Scope(scope)
            local.values[body.inputs[0]] = np.array(i, np.int64)
            local.values[body.inputs[1]] = np.array(going)
            for value, array in zip(body.inputs[2:], carried):
                local.values[value] = array
            outputs = self._graph(body, inner, local)
            if cond is not None:  # with no cond input, the body's condition output is ignored
                going = _flag(outputs[0], "the body's condition")
            carried = outputs[1:1 + len(carried)]
            for k, array in enumerate(outputs[1 + len(carried):]):
                scans[k].append(array)
            i += 1
        outs = body.outputs[1 + len(carried):]
        return carried + [_stack(s, 0, v) for s, v in zip(scans, outs)]

    def _scan(self, node: ir.Node, frame: _Frame, attributes: dict, inputs: list, scope: _Scope) -> list:
        if frame.opsets.get("", 1) < 9:
            return self._scan8(node, frame, attributes, inputs, scope)
        body = attributes["body"].value
        m = attributes["num_scan_inputs"].value
        n = len(inputs) - m
        k_out = len(body.outputs) - n

        def ints(name, count, default=0):
            a = attributes.get(name)
            return list(a.value) if a is not None else [default] * count

        xs = [np.asarray(x) for x in inputs[n:]]
        in_axes = [ax + x.ndim if ax < 0 else ax for ax, x in zip(ints("scan_input_axes", m), xs)]
        in_dirs = ints("scan_input_directions", m)
        lengths = {x.shape[ax] for x, ax in zip(xs, in_axes)}
        if len(lengths) != 1:
            raise BadInput(f"the scan inputs have different lengths on their scan axes: {sorted(lengths)}")
        (length,) = lengths
        states, scans = list(inputs[:n]), [[] for _ in range(k_out)]
        inner = frame.body(node, "body")
        for t in range(length):
            local = _Scope(scope)
            for value, array in zip(body.inputs[:n], states):
                local.values[value] = array
            for value, x, ax, d in zip(body.inputs[n:], xs, in_axes, in_dirs):
                local.values[value] = np.take(x, length - 1 - t if d else t, axis=ax)
            outputs = self._graph(body, inner, local)
            states = outputs[:n]
            for k, array in enumerate(outputs[n:]):
                scans[k].append(array)
        result = list(states)
        for k, (s, ax, d) in enumerate(zip(scans, ints("scan_output_axes", k_out), ints("scan_output_directions",
                                                                                          k_out))):
            rank = np.ndim(s[0]) + 1 if s else len(body.outputs[n + k].shape or ()) + 1
            result.append(_stack(s[::-1] if d else s, ax + rank if ax < 0 else ax, body.outputs[n + k]))
        return result

    def _scan8(self, node: ir.Node, frame: _Frame, attributes: dict, inputs: list, scope: _Scope) -> list:
        """Scan-8: axis 0 is the batch, axis 1 the sequence; sequence_lens per batch row; outputs padded with 0."""
        body = attributes["body"].value
        m = attributes["num_scan_inputs"].value
        lens, states_in, xs = inputs[0], inputs[1:len(inputs) - m], [np.asarray(x) for x in inputs[len(inputs) - m:]]
        n = len(states_in)
        directions = list(attributes["directions"].value) if "directions" in attributes else [0] * m
        batch, longest = xs[0].shape[0], xs[0].shape[1]
        lens = np.full(batch, longest) if lens is None else np.asarray(lens).reshape(batch)
        inner = frame.body(node, "body")
        finals: list[list] = [[] for _ in range(n)]
        scans: list[list] = [[] for _ in range(len(body.outputs) - n)]
        for b in range(batch):
            states = [np.asarray(s)[b] for s in states_in]
            steps: list[list] = [[] for _ in scans]
            for t in range(int(lens[b])):
                local = _Scope(scope)
                for value, array in zip(body.inputs[:n], states):
                    local.values[value] = array
                for value, x, d in zip(body.inputs[n:], xs, directions):
                    local.values[value] = x[b, int(lens[b]) - 1 - t if d else t]
                outputs = self._graph(body, inner, local)
                states = outputs[:n]
                for k, array in enumerate(outputs[n:]):
                    steps[k].append(array)
            for k, s in enumerate(states):
                finals[k].append(s)
            for k, s in enumerate(steps):
                scans[k].append(s)
        result = [np.stack(f) for f in finals]
        for k, per_batch in enumerate(scans):
            out = body.outputs[n + k]
            first = next((np.asarray(s[0]) for s in per_batch if s), None)
            padded = (np.zeros((batch, longest) + first.shape, first.dtype) if first is not None else
                      np.zeros((batch, longest) + _static_shape(out), _value_dtype(out)))
            for b, s in enumerate(per_batch):
                if s:
                    padded[b, :len(s)] = np.stack(s)
            result.append(padded)
        return result


_CONTROL_FLOW = {"If": Executor._if, "Loop": Executor._loop, "Scan": Executor._scan}


def _drops(groups: list[list[ir.Node]], graph) -> list[list[ir.Value]]:
    """Per group of nodes run together, the values of this graph no later group needs."""
    last: dict[ir.Value, int] = {}
    for i, nodes in enumerate(groups):
        for node in nodes:
            for value in partition.uses(node):
                last[value] = i
    drops: list[list[ir.Value]] = [[] for _ in groups]
    outputs = set(graph.outputs)
    for value, i in last.items():
        if value not in outputs:
            drops[i].append(value)
    return drops


def _kind(array) -> Optional[tuple]:
    if array is None:
        return None
    if isinstance(array, list):
        return ("sequence", len(array) and np.asarray(array[0]).dtype)
    return np.asarray(array).dtype, np.ndim(array)


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def _opsets(imports: Mapping[str, int], outer: Mapping[str, int]) -> dict[str, int]:
    out = dict(outer)
    out.update({_domain(d): v for d, v in imports.items()})
    return out


def _op(node: ir.Node) -> str:
    domain = _domain(node.domain)
    return f"{domain}::{node.op_type}" if domain else node.op_type


def _resolve(node: ir.Node, frame: _Frame) -> list[ir.Attr]:
    """The node's attributes, a reference to an attribute of the function being run replaced by its value (left
    out when the call gives none and the function has no default)."""
    out = []
    for name, attr in node.attributes.items():
        if attr.is_ref():
            bound = frame.attributes.get(attr.ref_attr_name)
            if bound is not None:
                out.append(ir.Attr(name, bound.type, bound.value))
        else:
            out.append(attr)
    return out


def _flag(value, what: str) -> bool:
    array = np.asarray(value)
    if array.size != 1:
        raise BadInput(f"{what} must hold one element, got shape {list(array.shape)}")
    return bool(array.reshape(-1)[0])


def _static_shape(value: ir.Value) -> tuple:
    shape = value.shape
    return tuple(d if isinstance(d, int) else 0 for d in shape) if shape is not None else ()


def _stack(steps: list, axis: int, value: ir.Value) -> np.ndarray:
    """Per-iteration values stacked on a new `axis`; no iteration gives an empty array of the body output's type."""
    if steps:
        return np.stack([np.asarray(s) for s in steps], axis=axis)
    shape = list(_static_shape(value))
    shape.insert(axis, 0)
    return np.zeros(shape, _value_dtype(value))


def _value_dtype(value: ir.Value) -> np.dtype:
    return value.dtype.numpy() if value.dtype is not None else np.dtype(np.float32)


def describe(value) -> str:
    """An input as NodeFailed lists it: float32[1,576], sequence(3), - (absent)."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return f"sequence({len(value)})"
    array = np.asarray(value)
    return f"{array.dtype}[{','.join(map(str, array.shape))}]"


_ORT_SOURCE = re.compile(r"^\S+\.(?:cc|h|cpp|hpp):\d+ [^ ]+(?: \S+)? (?:\S+ was false\. )?|^.* was false\. ")


def reason(err: BaseException) -> str:
    """The underlying error in one line: onnxruntime's status message without its source location."""
    text = str(err)
    if "Status Message: " in text:
        text = text.split("Status Message: ", 1)[1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = _ORT_SOURCE.sub("", lines[0]) if lines else ""
    if isinstance(err, BadInput):
        return line[:300]
    return f"{type(err).__name__}: {line}"[:300]
