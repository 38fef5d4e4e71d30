"""Transpose folding: the cleanup after every rewrite that adds Transposes (layout, downgrade, to-openvino).

Spec: onnx Operators.md Transpose (perm: output axis i is input axis perm[i]), Squeeze, Reshape, ConstantOfShape.
The graph's interface is never touched: a Transpose whose output is a graph output keeps producing that name,
or hands the name to the value that now holds the same data.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import numpy as np
import onnx_ir as ir

from rnnconv.dialects import onnx_recurrent
from rnnconv.passes import edit
from rnnconv.passes.transpose_match import (
    all_sliced_then_transposed,
    constant_expanded,
    is_fill,
    is_slice,
    is_transpose,
    one_element,
    perm_of,
    permuted,
    reshape_groups,
    shape_cone,
    shape_gathers,
    tokens,
)
from rnnconv.passes.base import Pass, PassResult

BATCH_FIRST_X = (1, 0, 2)
MAX_ROUNDS = 100  # every rule removes a Transpose or moves one towards another; this only guards against a bug


class FoldTransposes(Pass):
    """Cancel, merge and fold Transposes until nothing changes.

    Case 1: a Transpose with the identity perm is removed.
    Case 2: Transpose(Transpose(x, p1), p2) becomes Transpose(x, p1 then p2), removed by case 1 when that is identity.
    Case 3: a Transpose of a constant (initializer or Constant node) becomes a new initializer; shared initializers
            are never modified in place.
    Case 4: a Transpose of ConstantOfShape(shape) or Expand(scalar, shape) becomes the same with the permuted
            shape, when shape is a constant or a Concat of one-element pieces (exporters' zero initial states).
    Case 5: Transposes of the same value with the same perm become one.
    Case 6: a Transpose followed by a Squeeze or Reshape whose result only feeds Transposes is moved below it, so
            that case 2 can meet the next Transpose (Y [T,D,N,H] -> Squeeze/Reshape -> Transpose exports). When the
            Reshape merges axes that the Transpose had brought together, a Transpose that groups them stays above
            it, ordered so that what moves below cancels the Transposes there (bidirectional stacks in layout 0).
    Case 7: a Transpose of Slice(fill) with constant axes is moved above the Slice, so that case 4 folds it
            (zero initial states sliced out of an Expand, as torch.export writes them), or when every Slice of the
            same value is transposed alike (per-layer states sliced out of one graph input: one Transpose left).
    Case 8: Concat of Transposes that share one perm (and feed nothing else) becomes one Transpose of a Concat
            on the matching axis (per-layer final states concatenated into one graph output).
    Case 9 (within case 6): a Shape of the value a Transpose would move below, read only by Gathers of constant
            indices, reads that Transpose's output instead, the indices permuted.
    Case 10: a Transpose read only by such Shapes is removed: they read its input, the indices permuted.

    `scope`: when given, only Transposes among these nodes (and the ones created here, and the ones they feed) are
    folded, so a command cleans up after its own rewrites without rewriting the rest of the model. Each graph is
    folded on its own (the main graph, then the bodies of If / Loop / Scan).
    Nodes left without users by a fold are removed; other dead nodes are left alone.
    """

    def __init__(self, scope: Optional[Iterable[ir.Node]] = None):
        super().__init__()
        self.scope = None if scope is None else set(scope)

    def call(self, model: ir.Model) -> PassResult:
        names = edit.Names(model.graph)  # one name space: subgraphs see the outer graphs' values
        modified = False
        for graph in model.graphs():  # the main graph, then every If / Loop / Scan body
            modified = _Folder(model, graph, self.scope, names).run() or modified
        return PassResult(model, modified)


class _Folder:
    def __init__(self, model: ir.Model, graph: ir.Graph, scope: Optional[set], names: edit.Names):
        self.model = model
        self.graph = graph
        self.scope = scope
        self.names = names
        self.modified = False

    # ---- driver ------------------------------------------------------------------------------------------

    def run(self) -> bool:
        changed, rounds = True, 0
        while changed and rounds < MAX_ROUNDS:
            changed, rounds = False, rounds + 1
            for node in list(self.graph):
                if node.graph is not self.graph or not is_transpose(node) or not self._in_scope(node):
                    continue
                if perm_of(node) is None:
                    continue
                for rule in (self._identity, self._duplicate, self._merge, self._constant, self._constant_of_shape,
                             self._sink, self._hoist, self._concat, self._shapes_only):
                    if rule(node):
                        changed = self.modified = True
                        break
        if self.modified:
            self.graph.sort()
        return self.modified

    def _in_scope(self, node: ir.Node) -> bool:
        if self.scope is None or node in self.scope:
            return True
        producer = node.inputs[0].producer() if node.inputs and node.inputs[0] is not None else None
        return producer is not None and producer in self.scope

    def _created(self, *nodes: ir.Node) -> None:
        if self.scope is not None:
            self.scope.update(nodes)

    # ---- cases -------------------------------------------------------------------------------------------

    def _identity(self, t: ir.Node) -> bool:
        """Case 1."""
        perm = perm_of(t)
        if perm != tuple(range(len(perm))):
            return False
        return self._bypass(t, t.inputs[0])

    def _merge(self, t: ir.Node) -> bool:
        """Case 2."""
        x = t.inputs[0]
        inner = x.producer()
        if inner is None or not is_transpose(inner) or perm_of(inner) is None or len(perm_of(inner)) != len(perm_of(t)):
            return False
        p1, p2 = perm_of(inner), perm_of(t)
        composed = tuple(p1[j] for j in p2)
        t.replace_input_with(0, inner.inputs[0])
        t.attributes["perm"] = ir.AttrInt64s("perm", list(composed))
        if not self._shapes_only(inner):  # case 10 also for the inner one, though it may lie outside the scope
            self._remove_dead(inner)
        return True

    def _constant(self, t: ir.Node) -> bool:
        """Case 3."""
        x, y = t.inputs[0], t.outputs[0]
        array = onnx_recurrent.constant_array(x)
        if array is None or y.is_graph_output() or array.ndim != len(perm_of(t)):
            return False
        value = self._initializer(np.ascontiguousarray(np.transpose(array, perm_of(t))), f"{x.name}_transposed")
        y.replace_all_uses_with(value)
        self._remove_dead(t)
        return True

    def _constant_of_shape(self, t: ir.Node) -> bool:
        """Case 4: ConstantOfShape(shape), or Expand(scalar, shape), built with the permuted shape; Expand(c, shape)
        of a constant c of the Transpose's rank with c transposed too (broadcasting goes axis by axis)."""
        x, y = t.inputs[0], t.outputs[0]
        fill = x.producer()
        perm = perm_of(t)
        expanded = constant_expanded(fill, len(perm))
        if y.is_graph_output() or not (is_fill(fill) or expanded is not None):
            return False
        shape_value = fill.inputs[-1]
        shape = onnx_recurrent.constant_array(shape_value)
        new_nodes = []
        if shape is not None:
            if shape.shape != (len(perm),):
                return False
            new_shape = self._initializer(shape[list(perm)].astype(np.int64), f"{shape_value.name}_transposed")
        else:
            concat = shape_value.producer()
            if concat is None or concat.op_type != "Concat" or len(concat.inputs) != len(perm):
                return False
            if not all(one_element(v) for v in concat.inputs):
                return False
            new_shape = ir.Value(name=self.names(f"{shape_value.name}_transposed"), type=shape_value.type,
                                 shape=shape_value.shape)
            new_nodes.append(ir.Node("", "Concat", [concat.inputs[p] for p in perm], outputs=[new_shape],
                                     attributes=list(concat.attributes.values()),
                                     name=self.names(f"{concat.name or 'Concat'}_transposed")))
        out = ir.Value(name=self.names(f"{x.name}_transposed"), type=y.type or x.type, shape=permuted(x.shape, perm))
        data = list(fill.inputs[:-1])
        if expanded is not None and expanded.ndim:
            data = [self._initializer(np.ascontiguousarray(np.transpose(expanded, perm)),
                                      f"{fill.inputs[0].name}_transposed")]
        new_nodes.append(ir.Node("", fill.op_type, [*data, new_shape], outputs=[out],
                                 attributes=list(fill.attributes.values()),
                                 name=self.names(f"{fill.name or fill.op_type}_transposed")))
        self.graph.insert_before(t, new_nodes)
        self._created(*new_nodes)
        y.replace_all_uses_with(out)
        self._remove_dead(t)
        return True

    def _hoist(self, t: ir.Node) -> bool:
        """Case 7: Transpose(Slice(x)) becomes Slice(Transpose(x)) when case 4 then folds it (x a fill) or when
        every Slice of x is transposed the same way (case 5 then leaves one Transpose of x)."""
        x, perm = t.inputs[0], perm_of(t)
        sl = x.producer()
        if not is_slice(sl) or len(x.consumers()) != 1 or x.is_graph_output():
            return False
        data = sl.inputs[0]
        # a lone Slice of a plain value: moving the Transpose up would gain nothing
        shared = len(data.consumers()) > 1 and all_sliced_then_transposed(data, perm)
        if not is_fill(data.producer()) and not shared:
            return False
        axes = onnx_recurrent.constant_array(sl.inputs[3])
        inverse = [perm.index(a) for a in range(len(perm))]
        new_axes = np.array([inverse[int(a) % len(perm)] for a in np.atleast_1d(axes)], dtype=np.int64)
        inner, moved = edit.transpose(data, perm, self.names, f"{data.name}_transposed")
        axes_value = self._initializer(new_axes, f"{sl.inputs[3].name}_transposed")
        out = ir.Value(name=self.names(f"{x.name}_transposed"), type=t.outputs[0].type or x.type,
                       shape=t.outputs[0].shape)
        new_slice = ir.Node("", "Slice", [moved, sl.inputs[1], sl.inputs[2], axes_value, *sl.inputs[4:]],
                            outputs=[out], name=self.names(sl.name or "Slice"))
        self.graph.insert_before(t, [inner, new_slice])
        self._created(inner, new_slice)
        t.outputs[0].replace_all_uses_with(out)
        self._remove_dead(t)
        return True

    def _concat(self, t: ir.Node) -> bool:
        """Case 8: Concat of Transposes with one perm becomes one Transpose of the Concat (on the mapped axis)."""
        y, perm = t.outputs[0], perm_of(t)
        users = list(y.consumers())
        if y.is_graph_output() or len(users) != 1 or users[0].op_type != "Concat" \
                or users[0].domain not in ("", "ai.onnx"):
            return False
        concat = users[0]
        parts = [v.producer() for v in concat.inputs]
        if len(parts) < 2 or any(p is None or not is_transpose(p) or perm_of(p) != perm or len(p.outputs[0].uses()) != 1
                                 or p.outputs[0].is_graph_output() for p in parts):
            return False
        axis = int(concat.attributes["axis"].value) % len(perm)
        z = concat.outputs[0]
        mid_shape = None if z.shape is None else ir.Shape([z.shape[perm.index(a)] for a in range(len(perm))])
        mid = ir.Value(name=self.names(f"{z.name}_concat"), type=z.type, shape=mid_shape)
        new_concat = ir.Node("", "Concat", [p.inputs[0] for p in parts], outputs=[mid],
                             attributes=[ir.AttrInt64("axis", perm[axis])], name=self.names(concat.name or "Concat"))
        new_t = self._transpose(mid, perm, z)
        self.graph.insert_before(concat, [new_concat, new_t])
        self._created(new_concat, new_t)
        if z.is_graph_output():
            # the graph output name stays on the value the new Transpose produces
            name = z.name
            z.name = None
            new_t.outputs[0].name = name
            ir.convenience.replace_all_uses_with(z, new_t.outputs[0], replace_graph_outputs=True)
        else:
            z.replace_all_uses_with(new_t.outputs[0])
        self._remove_dead(concat)
        return True

    def _duplicate(self, t: ir.Node) -> bool:
        """Case 5: the other Transposes of the same value with the same perm hand their users to `t`."""
        x, perm = t.inputs[0], perm_of(t)
        done = False
        for other in list(x.consumers()):
            if other is t or not is_transpose(other) or other.graph is not self.graph or perm_of(other) != perm:
                continue
            if other.outputs[0].is_graph_output():
                continue
            other.outputs[0].replace_all_uses_with(t.outputs[0])
            self._remove_dead(other)
            done = True
        return done

    def _sink(self, t: ir.Node) -> bool:
        """Case 6."""
        y = t.outputs[0]
        users = [n for n in y.consumers() if n.op_type in ("Squeeze", "Reshape") and n.domain in ("", "ai.onnx")]
        if y.is_graph_output() or len(users) != 1 or users[0].inputs[0] is not y:
            return False
        u = users[0]
        cone = shape_cone(u)
        if any(n is not u and n not in cone for n in y.consumers()):
            return False
        z = u.outputs[0]
        self._shape_after_transpose(z)
        after = list(z.consumers())
        if z.is_graph_output() or not after or not all(is_transpose(n) for n in after):
            return False
        moved = self._sink_squeeze(t, u) if u.op_type == "Squeeze" else self._sink_reshape(t, u)
        if moved is None:
            return False
        new_nodes = list(moved)
        self.graph.insert_before(u, new_nodes)
        self._created(*new_nodes)
        new_t = new_nodes[-1]
        z.replace_all_uses_with(new_t.outputs[0])
        self._remove_dead(u)
        return True

    def _shape_after_transpose(self, z: ir.Value) -> None:
        """Case 9: Shape(z) read only by Gathers of constant indices, where a Transpose also reads z, reads that
        Transpose's output with the indices permuted, so that z feeds Transposes only (the legacy exporter reads
        the batch size off each layer's input for the next layer's zero initial state)."""
        q = next((n for n in z.consumers() if is_transpose(n) and perm_of(n) is not None), None)
        if q is None:
            return
        for shape in [n for n in z.consumers() if shape_gathers(n) is not None]:
            self._regather(shape, q.outputs[0], np.argsort(perm_of(q)))

    def _shapes_only(self, t: ir.Node) -> bool:
        """Case 10: a Transpose read only by Shapes that Gathers of constant indices read: the Shapes read its
        input, the indices permuted."""
        y = t.outputs[0]
        users = list(y.consumers())
        if y.is_graph_output() or not users or any(shape_gathers(n) is None for n in users):
            return False
        for shape in users:
            self._regather(shape, t.inputs[0], np.asarray(perm_of(t)))
        self._remove_dead(t)
        return True

    def _drop_unused(self, value: ir.Value) -> None:
        """A constant nothing reads any more: its Constant node or initializer goes."""
        if value.uses() or value.is_graph_input() or value.is_graph_output():
            return
        if value.producer() is not None:
            self._remove_dead(value.producer())
        elif value.is_initializer():
            self.graph.initializers.pop(value.name, None)

    def _regather(self, shape: ir.Node, source: ir.Value, index_map: np.ndarray) -> None:
        """`shape` reads `source`; each Gather of its output takes index i as index_map[i]."""
        for g in shape_gathers(shape):
            indices = onnx_recurrent.constant_array(g.inputs[1])
            mapped = index_map[indices.astype(np.int64) % len(index_map)].astype(indices.dtype)
            old = g.inputs[1]
            g.replace_input_with(1, self._initializer(mapped, f"{g.name or 'Gather'}_indices"))
            self._drop_unused(old)
        shape.replace_input_with(0, source)
        self.modified = True

    # ---- case 6 per op -----------------------------------------------------------------------------------

    def _sink_squeeze(self, t: ir.Node, u: ir.Node):
        perm = perm_of(t)
        rank = len(perm)
        if len(u.inputs) > 1 and u.inputs[1] is not None:
            axes = onnx_recurrent.constant_array(u.inputs[1])
            if axes is None:
                return None
            axes = [int(a) for a in np.atleast_1d(axes)]
        elif "axes" in u.attributes:
            axes = list(u.attributes["axes"].value)
        else:
            return None  # squeeze-all depends on run-time shapes
        axes = sorted({a % rank for a in axes})
        removed = sorted(perm[a] for a in axes)
        kept = [perm[i] for i in range(rank) if i not in axes]
        new_perm = [k - sum(r < k for r in removed) for k in kept]
        x = t.inputs[0]
        mid_shape = None if x.shape is None else ir.Shape([d for i, d in enumerate(x.shape) if i not in removed])
        mid = ir.Value(name=self.names(f"{u.outputs[0].name}_squeezed"), type=u.outputs[0].type or x.type,
                       shape=mid_shape)
        if len(u.inputs) > 1:
            axes_value = self._initializer(np.array(removed, dtype=np.int64), f"{u.name or 'Squeeze'}_axes")
            new_u = ir.Node("", "Squeeze", [x, axes_value], outputs=[mid], name=self.names(u.name or "Squeeze"))
        else:
            new_u = ir.Node("", "Squeeze", [x], outputs=[mid], name=self.names(u.name or "Squeeze"),
                            attributes=[ir.AttrInt64s("axes", removed)])
        return [new_u, self._transpose(mid, new_perm, u.outputs[0])]

    def _sink_reshape(self, t: ir.Node, u: ir.Node):
        perm = perm_of(t)
        x, y, z = t.inputs[0], t.outputs[0], u.outputs[0]
        allowzero = int(u.attributes["allowzero"].value) if "allowzero" in u.attributes else 0
        # Below opset 5 Reshape holds its shape as an attribute, not as a second input.
        shape_attribute = len(u.inputs) < 2
        if shape_attribute:
            spec = np.array(u.attributes["shape"].value, dtype=np.int64) if "shape" in u.attributes else None
        else:
            spec = onnx_recurrent.constant_array(u.inputs[1])
        groups = reshape_groups(tokens(y.shape, len(perm)), z.shape, spec, allowzero)
        if groups is None:
            return None
        x_dims = list(x.shape) if x.shape is not None else [None] * len(perm)
        if x.shape is None and y.shape is not None:  # a value a rewrite just made: its dims are y's, unpermuted
            for i, a in enumerate(perm):
                x_dims[a] = y.shape[i]
        original = [tuple(perm[a] for a in g) for g in groups]
        # Axes of size 1 merged into a group take no room: [T,1,N,H] -> [N,T,1*H] is [T,N,H] transposed.
        original = [tuple(a for a in g if x_dims[a] != 1) or g[:1] if len(g) > 1 else g for g in original]
        if any(not g for g in original):
            return None
        before = []
        if any(list(g) != list(range(g[0], g[0] + len(g))) for g in original):
            # A merged group is not contiguous in the untransposed tensor: first a Transpose that brings each
            # group together, in the order the Transposes below the Reshape read them, so that what moves below
            # cancels them ([T,D,N,H] -> [N,T,D,H] -> [N,T,D*H] -> [T,N,D*H] becomes one Transpose to [T,N,D,H]).
            wanted = {perm_of(n) for n in z.consumers()}
            if len(wanted) != 1 or None in wanted or len(next(iter(wanted))) != len(original):
                return None
            reads = next(iter(wanted))  # the groups in the order the Transposes below read them
            grouping = [a for j in reads for a in original[j]]
            grouping += [a for a in range(len(perm)) if a not in grouping]  # axes of size 1, dropped by the Reshape
            if grouping == list(perm):
                return None
            s = self._transpose(x, grouping, None)
            before, x = [s], s.outputs[0]
            x_dims = [x_dims[a] for a in grouping]
            position = {a: k for k, a in enumerate(grouping)}
            original = [tuple(position[a] for a in g) for g in original]
        order = sorted(range(len(original)), key=lambda j: original[j][0])
        new_spec, unknown = [], 0
        for k, j in enumerate(order):
            g = original[j]
            if len(g) == 1 and g[0] == k and not allowzero:
                new_spec.append(0)
            elif len(g) == 1 and isinstance(x_dims[g[0]], int):
                new_spec.append(x_dims[g[0]])
            elif len(g) > 1 and all(isinstance(x_dims[a], int) for a in g):
                new_spec.append(int(np.prod([x_dims[a] for a in g])))
            else:
                new_spec.append(-1)
                unknown += 1
        if unknown > 1:
            return None
        new_perm = [order.index(j) for j in range(len(original))]
        mid_shape = None
        if z.shape is not None:
            mid_shape = ir.Shape([z.shape[j] for j in order])
        mid = ir.Value(name=self.names(f"{z.name}_reshaped"), type=z.type or x.type, shape=mid_shape)
        if shape_attribute:
            attributes = [a for a in u.attributes.values() if a.name != "shape"] + [ir.AttrInt64s("shape", new_spec)]
            new_u = ir.Node("", "Reshape", [x], outputs=[mid], name=self.names(u.name or "Reshape"),
                            attributes=attributes)
        else:
            spec_value = self._initializer(np.array(new_spec, dtype=np.int64), f"{u.name or 'Reshape'}_shape")
            new_u = ir.Node("", "Reshape", [x, spec_value], outputs=[mid], name=self.names(u.name or "Reshape"),
                            attributes=list(u.attributes.values()))
        return [*before, new_u, self._transpose(mid, new_perm, z)]

    # ---- helpers -----------------------------------------------------------------------------------------

    def _transpose(self, value: ir.Value, perm: Sequence[int], like: Optional[ir.Value]) -> ir.Node:
        """A Transpose of `value`; its output takes `like`'s type and shape (None: `value`'s, permuted)."""
        node, _ = edit.transpose(value, perm, self.names, f"{(like or value).name}_transposed")
        out = node.outputs[0]
        if like is None:
            return node
        out.type = like.type or out.type
        if like.shape is not None:
            out.shape = like.shape
        return node

    def _initializer(self, array: np.ndarray, hint: str) -> ir.Value:
        name = self.names(hint)
        value = ir.val(name, const_value=ir.tensor(array, name=name))
        self.graph.register_initializer(value)
        if self.model.ir_version < 4:  # IR < 4: every initializer is also a graph input
            self.graph.inputs.append(value)
        return value

    def _bypass(self, t: ir.Node, x: ir.Value) -> bool:
        """Users of t's output read x instead; a graph output name moves to x when x can carry it."""
        y = t.outputs[0]
        if y.is_graph_output():
            if x.producer() is None or x.is_graph_input() or x.is_graph_output() or x.is_initializer():
                return False
            name = y.name
            y.name = None
            x.name = name
            x.type = y.type or x.type
            x.shape = y.shape if y.shape is not None else x.shape
            ir.convenience.replace_all_uses_with(y, x, replace_graph_outputs=True)
        else:
            y.replace_all_uses_with(x)
        self._remove_dead(t)
        return True

    def _remove_dead(self, node: ir.Node) -> None:
        """Remove `node` when nothing reads its outputs, then its producers that became dead the same way."""
        stack = [node]
        while stack:
            n = stack.pop()
            if n.graph is not self.graph:
                continue
            if any(o.uses() or o.is_graph_output() for o in n.outputs):
                continue
            inputs = [v for v in n.inputs if v is not None]
            self.graph.remove(n, safe=True)
            stack.extend(v.producer() for v in inputs if v.producer() is not None)
            for v in inputs:  # an initializer nothing reads any more (never one that is also a graph input)
                if v.is_initializer() and not v.uses() and not v.is_graph_input() and not v.is_graph_output():
                    self.graph.initializers.pop(v.name, None)
