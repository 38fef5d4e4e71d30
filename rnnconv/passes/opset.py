"""The opset pass: every node of the model moved to another default-domain opset, through `adapters`.

Case 1: a GRU/LSTM/RNN node steps along its version chain (the registry's recurrent lines) and becomes a Rewrite
(the node at its new version, with Transposes or Casts where a step asks for them), checked like every rewrite.
Case 2: any other node whose schema differs between the two opsets, in the main graph, in If / Loop / Scan bodies
and in model-local functions, steps one schema version at a time: through the registry when it has that step and
its conditions hold, else through onnx's own adapter run on a one-node model holding the node and its small
constant inputs (never the weights). Warnings a step raises name the node and the assumption.
Case 3: an op that does not exist at the target (and that no step of the registry takes below its first version)
is refused, every such node named with the opset where the op first exists, before anything changes; every node
no step can move is named at once likewise.
Other domains (com.microsoft...) are left as they are.
"""

from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects.onnx_recurrent import (
    INPUTS,
    MODERN_SINCE,
    OPS,
    OUTPUTS,
    VERSIONS,
    RecurrentNode,
    constant_array,
    default_opset,
    find,
    node_label,
    version_of,
    walk,
)
from rnnconv.errors import RnnconvWarning, Unsupported
from rnnconv.passes import layout as layout_pass
from rnnconv.passes.adapters import ADAPTERS, NodePlan, NotApplicable, Scope
from rnnconv.passes.base import PassResult, Rewrite, RewritePass
from rnnconv.passes.edit import Names
from rnnconv.passes.fold import fold

SMALL_CONSTANT = 1 << 20  # constant inputs up to this size go into the one-node model (adapters may read them)


def since(op: str, opset: int, domain: str = "") -> Optional[int]:
    return schemas.schema_since_version(op, opset, domain)


def first_opset(op: str, domain: str = "") -> Optional[int]:
    for opset in range(1, schemas.latest_opset() + 1):
        if since(op, opset, domain) is not None:
            return opset
    return None


class OpsetPass(RewritePass):
    """Move the model to default-domain opset `target` (see the module's cases)."""

    def __init__(self, target: int, observe=None):
        super().__init__(observe)
        self.target = target

    def plan(self, model: ir.Model) -> list[Rewrite]:
        names = Names(model.graph)
        rewrites = []
        for rn in find(model):
            version = version_of(rn.op, self.target)
            plan = recurrent_plan(rn, version, self.target)
            if version != rn.version or plan.what:
                rewrites.append(build(plan, names, self.target))
        return rewrites

    def call(self, model: ir.Model) -> PassResult:
        self.source = default_opset(model)
        _missing_ops(model, self.target)  # before any change
        result = super().call(model)
        steps = _GraphSteps(model, self.target)
        result.changes.extend(steps.run())
        model.opset_imports.pop("ai.onnx", None)
        model.opset_imports[""] = self.target
        for function in model.functions.values():  # a function's imports must agree with the model's
            if {"", "ai.onnx"} & set(function.opset_imports):
                function.opset_imports.pop("ai.onnx", None)
                function.opset_imports[""] = self.target
        model.ir_version = max(model.ir_version, schemas.min_ir_version(self.target))
        result.modified = result.modified or steps.modified or self.source != self.target
        return result


# -- recurrent nodes ---------------------------------------------------------------------------------------------

def path(op: str, frm: int, to: int) -> list[tuple[int, int]]:
    chain = VERSIONS[op]
    i, j = chain.index(frm), chain.index(to)
    seq = chain[i: j + 1] if i <= j else chain[j: i + 1][::-1]
    return list(zip(seq, seq[1:]))


def recurrent_plan(rn: RecurrentNode, target_version: int, target_opset: int) -> NodePlan:
    plan = NodePlan.of(rn.node, rn.version, rn)
    for frm, to in path(rn.op, rn.version, target_version):
        ADAPTERS[(rn.op, frm, to)](plan, target_opset)
        plan.version = to
    return plan


def build(p: NodePlan, names: Names, opset: int) -> Rewrite:
    """Graph nodes for a plan: the node at its new version, with Transposes / Casts when the plan asks."""
    rn = p.rn
    old = rn.node
    inputs = list(old.inputs)
    outs = []
    out_names = OUTPUTS[rn.op]
    n_out = len(old.outputs)
    if p.version < MODERN_SINCE and (n_out < 2 or not (old.outputs[1] is not None and old.outputs[1].name)):
        n_out = max(n_out, 2)  # Y_h is required in version 1: give it a name
    for i in range(n_out):
        o = old.outputs[i] if i < len(old.outputs) else None
        if o is not None and o.name:
            outs.append(ir.Value(name=names(o.name + f"_v{p.version}")))
        elif out_names[i] == "Y_h" and p.version < MODERN_SINCE:
            outs.append(ir.Value(name=names(f"{rn.name}_Y_h")))
        else:
            outs.append(ir.Value(name=""))
    what = list(p.what)
    before, after, new_inits = [], [], []
    if p.layout_to_0:
        before, inputs = layout_pass.transpose_inputs(rn, inputs, 0, names)
    if p.cast_to_float32:
        casts, inputs, new_inits = _cast_inputs(rn, inputs, names)
        before += casts
    node = ir.Node("", rn.op, inputs=inputs, outputs=outs, name=old.name, attributes=list(p.attrs.values()))
    replaced = {k: v for k, v in zip(out_names, outs) if rn.outputs.get(k) is not None}
    if p.cast_to_float32:
        for key, inner in list(replaced.items()):
            out = ir.Value(name=names(inner.name + "_bf16"))
            after.append(ir.Node("", "Cast", inputs=[inner], outputs=[out], name=names(f"{inner.name}_cast"),
                                 attributes=[ir.AttrInt64("to", ir.DataType.BFLOAT16.value)]))
            replaced[key] = out
    if p.layout_to_0:
        transposes, replaced = layout_pass.transpose_outputs(rn, replaced, 0, names)
        after += transposes
    what.insert(0, f"{rn.op}-{rn.version} -> {rn.op}-{p.version}")
    return Rewrite(rn, [*before, node, *after], replaced, what, new_inits, opset=opset)


def _cast_inputs(rn: RecurrentNode, inputs, names: Names):
    before, new_inits = [], []
    keys = INPUTS[rn.op]
    out = list(inputs)
    for i, value in enumerate(inputs):
        if value is None or keys[i] == "sequence_lens":
            continue
        if value.const_value is not None:
            arr = value.const_value.numpy().astype(np.float32)
            c = ir.Value(name=names(f"{value.name}_f32"), const_value=ir.tensor(arr, name=None))
            c.const_value.name = c.name
            c.type = ir.TensorType(ir.DataType.FLOAT)
            c.shape = ir.Shape(arr.shape)
            new_inits.append(c)
            out[i] = c
        else:
            c = ir.Value(name=names(f"{value.name}_f32"))
            before.append(ir.Node("", "Cast", inputs=[value], outputs=[c], name=names(f"{value.name}_cast"),
                                  attributes=[ir.AttrInt64("to", ir.DataType.FLOAT.value)]))
            out[i] = c
    return before, out, new_inits


# -- other nodes -------------------------------------------------------------------------------------------------

def _others(model: ir.Model):
    """(node, scope, opset) of every default-domain node that is not recurrent, wherever it lies (`walk`)."""
    return [(n, scope, opset) for n, scope, opset in walk(model)
            if n.domain in ("", "ai.onnx") and n.op_type not in OPS]


def _missing_ops(model: ir.Model, target: int) -> None:
    """Refuse, naming every such node, the ops that do not exist at `target` and that no step takes below."""
    missing: dict[str, list[str]] = {}
    for node, scope, _ in _others(model):
        if since(node.op_type, target) is None and (node.op_type, first_opset(node.op_type), None) not in ADAPTERS:
            missing.setdefault(node.op_type, []).append(scope + node_label(node))
    failures = []
    for op, nodes in missing.items():
        first = first_opset(op)
        where = f"first exists at opset {first}" if first else "does not exist in this onnx"
        failures.append(f"{op} ({len(nodes)} node(s): {', '.join(nodes[:5])}) does not exist at opset {target}; "
                        f"{where}")
    if failures:
        raise Unsupported(f"cannot convert to opset {target}: " + "; ".join(failures))


class _GraphSteps:
    """Case 2 of the module: each node that changes schema, in the main graph, in the bodies of If / Loop / Scan
    and in functions. The nodes go in graph order, each all the way to the target (with the nodes its steps add)
    before the next: a step that folds a constant chain finds the chain already at the target opset."""

    def __init__(self, model: ir.Model, target: int):
        self.model, self.target = model, target
        self.names = Names(model.graph)
        for function in model.functions.values():
            self.names.taken.update(v.name for n in function for v in n.outputs if v.name)
        self.failures: list[str] = []
        self.changes: dict[str, list[str]] = {}  # what a step did -> the nodes it did it to
        self.modified = False

    def run(self) -> list[str]:
        for node, scope, opset in _others(self.model):
            stack = [(node, opset)]
            while stack:
                n, at = stack.pop()
                if n.graph is None or not self._needs(n, at):
                    continue
                try:
                    stack.extend(reversed(self._step(n, at, scope)))
                except Unsupported as err:
                    self.failures.append(f"{n.op_type} node {scope + node_label(n)!r}: {err}")
        if self.failures:
            raise Unsupported(f"cannot convert to opset {self.target}: " + "; ".join(self.failures))
        return [f"{what}: {labels[0]}" if len(labels) == 1 else
                f"{what}: {len(labels)} nodes ({', '.join(labels[:3])}{', ...' if len(labels) > 3 else ''})"
                for what, labels in self.changes.items()]

    def _needs(self, node: ir.Node, opset: int) -> bool:
        return since(node.op_type, opset) != since(node.op_type, self.target)

    def _step(self, node: ir.Node, frm: int, scope: str) -> list[tuple[ir.Node, int]]:
        """One schema step of `node` (valid at opset `frm`) toward the target; returns nodes and their opset."""
        op, to = node.op_type, self.target
        current = since(op, frm)
        if to < frm:
            frm_v, to_v, reached = current, since(op, current - 1) if current > 1 else None, max(to, current - 1)
        else:
            newer = next(o for o in range(frm + 1, to + 1) if since(op, o) == o)
            frm_v, to_v, reached = current, newer, newer
        step = f"{op}-{frm_v} -> " + (f"{op}-{to_v}" if to_v is not None else f"below opset {current}")
        adapter = ADAPTERS.get((op, frm_v, to_v))
        why = ""
        if adapter is not None:
            plan = NodePlan.of(node, frm_v)
            plan.label, plan.opset = f"{op} node {scope + node_label(node)!r}", reached
            plan.scope = Scope(self.names, lambda v: fold(v, self.target), _in_function(node, self.model))
            try:
                adapter(plan, to)
            except NotApplicable as err:
                why = f"{err}; "
            else:
                self.modified = self.modified or plan.changed
                return [(n, reached) for n in self._apply(node, plan, step)]
        if to_v is None:
            raise Unsupported(f"{why}{op} does not exist below opset {current}")
        new_nodes, outputs = self._onnx_step(node, frm, reached, why)
        self._replace(node, new_nodes, outputs)
        self.modified = True
        return [(n, reached) for n in new_nodes]

    def _apply(self, node: ir.Node, plan: NodePlan, step: str) -> list[ir.Node]:
        """Put the plan in the graph; returns the nodes that continue toward the target."""
        for message in plan.warnings:
            warnings.warn(RnnconvWarning(message))
        if not plan.changed and not plan.before:
            return [node]
        graph = node.graph
        replaced = [v for v in node.inputs if v is not None]
        for value in plan.initializers:
            self._register(value)
        if plan.replacement is not None:
            new_nodes, outputs = plan.replacement, plan.outputs
        else:
            inputs = list(plan.inputs)
            while inputs and inputs[-1] is None:
                inputs.pop()
            new = ir.Node(node.domain, node.op_type, inputs=inputs, attributes=list(plan.attrs.values()),
                          outputs=[ir.Value(name=o.name) for o in node.outputs], name=node.name)
            new_nodes, outputs = [new], list(new.outputs)
        if plan.before:
            graph.insert_before(node, plan.before)
        self._replace(node, new_nodes, outputs)
        for n in reversed(plan.folded):  # the chain a fold read, where nothing else reads it
            if n.graph is not None and not any(o.uses() or o.is_graph_output() for o in n.outputs):
                n.graph.remove(n, safe=True)
        for v in replaced:  # constants the step replaced (normalised indices, re-typed exponents...)
            if v.is_initializer() and not (v.uses() or v.is_graph_input() or v.is_graph_output()):
                v.graph.initializers.pop(v.name)
        for what in plan.what:
            self.changes.setdefault(f"{step}: {what}", []).append(plan.label)
        return [*plan.before, *new_nodes]

    def _onnx_step(self, node: ir.Node, frm: int, to: int, why: str) -> tuple[list[ir.Node], list[ir.Value]]:
        inputs, inits = [], []
        mini_values: dict[str, ir.Value] = {}
        for v in node.inputs:
            if v is None or v.name in mini_values:
                continue
            c = ir.Value(name=v.name, type=v.type, shape=v.shape)
            arr = constant_array(v)
            if arr is not None and arr.nbytes <= SMALL_CONSTANT:
                c.const_value = ir.tensor(arr, name=v.name)
                inits.append(c)
            else:
                c.type = v.type or ir.TensorType(ir.DataType.FLOAT)
                inputs.append(c)
            mini_values[v.name] = c
        outs = [ir.Value(name=o.name or f"rnnconv_output_{i}", type=o.type, shape=o.shape)
                for i, o in enumerate(node.outputs)]
        clone = ir.Node(node.domain, node.op_type,
                        inputs=[mini_values.get(v.name) if v is not None else None for v in node.inputs],
                        outputs=outs, name=node.name, attributes=list(node.attributes.values()))
        graph = ir.Graph(inputs + (inits if frm < 4 else []), outs, nodes=[clone], initializers=inits,
                         opset_imports={"": frm})
        mini = ir.Model(graph, ir_version=schemas.min_ir_version(max(frm, to)))
        try:
            converted = schemas.convert_version(mini, to)
        except Unsupported as err:
            raise Unsupported(f"{why}no adapter from opset {frm} to {to} ({err})") from err
        return self._adopt(converted, node)

    def _adopt(self, converted: ir.Model, node: ir.Node) -> tuple[list[ir.Node], list[ir.Value]]:
        """The converted one-node model's nodes, wired to the main graph's values; plus its outputs in order."""
        by_name = {v.name: v for v in node.inputs if v is not None}
        g = converted.graph
        mapped: dict[int, ir.Value] = {}

        def fresh(v: ir.Value) -> ir.Value:
            if id(v) not in mapped:
                mapped[id(v)] = ir.Value(name=self.names(v.name or "rnnconv_value"), type=v.type, shape=v.shape)
            return mapped[id(v)]

        for name, init in g.initializers.items():
            if name in by_name:
                mapped[id(init)] = by_name[name]
            else:
                value = fresh(init)
                value.const_value = init.const_value
                value.const_value.name = value.name
                self._register(value)
        for v in g.inputs:
            if id(v) not in mapped:
                mapped[id(v)] = by_name[v.name]
        new_nodes = []
        keep = node.name  # the node being replaced gives up its name: the step keeps it, not name_1, name_1_3...
        for n in g:
            ins = [None if v is None else fresh(v) if id(v) not in mapped else mapped[id(v)] for v in n.inputs]
            outs = [fresh(o) for o in n.outputs]
            name = keep if keep and n.name == keep else self.names(n.name or n.op_type)
            keep = keep if name != keep else None
            new_nodes.append(ir.Node(n.domain, n.op_type, inputs=ins, outputs=outs, name=name,
                                     attributes=list(n.attributes.values())))
        return new_nodes, [mapped[id(o)] for o in g.outputs]

    def _register(self, value: ir.Value) -> None:
        """A new initializer of the main graph (visible in every body)."""
        self.model.graph.register_initializer(value)
        if self.model.ir_version < 4:  # before IR 4 every initializer is a graph input as well
            self.model.graph.inputs.append(value)

    def _replace(self, node: ir.Node, replacement: list[ir.Node], outputs: list[ir.Value]) -> None:
        graph = node.graph
        for old, new in zip(node.outputs, outputs):
            name = old.name
            old.name = None
            new.name = name
            if old.is_graph_output():  # the interface keeps what the source declared, unset dims included
                new.type, new.shape = old.type, old.shape
            else:
                new.type = new.type or old.type
                new.shape = new.shape or old.shape
        ir.convenience.replace_all_uses_with(list(node.outputs), outputs, replace_graph_outputs=True)
        if replacement:
            graph.insert_after(node, replacement)
        graph.remove(node, safe=True)


def _in_function(node: ir.Node, model: ir.Model) -> bool:
    return any(node.graph is function.graph for function in model.functions.values())
