"""Cleanups on the IR graph after conversion: Transposes that cancel or chain are folded.

Spec: OpenVINO Transpose-1 (output axis i is input axis order[i]). Mirrors cases 1 and 2 of
rnnconv.passes.transpose_fold.FoldTransposes, at IR level, where the Transposes around Sequence ops are made.
A port that holds a graph output's name, or feeds a Result, is never bypassed. Ports are re-inferred after a fold
(IRGraph.reinfer): both ends of every edge keep the same dims and element type.
"""

from __future__ import annotations

import numpy as np

from rnnconv.dialects.openvino.graph import Edge, IRGraph
from rnnconv.passes.base import Pass, PassResult


class FoldIRTransposes(Pass):
    """Case 1: Transpose(Transpose(x, p1), p2) reads x with p1 then p2. Case 2: an identity Transpose whose output
    feeds no Result is bypassed (its tensor names move to the source port). Case 3: layers left without users are
    removed (ONNX-order weights replaced by their reordered copies, say)."""

    def call(self, graph: IRGraph) -> PassResult:
        changed = fold_transposes(graph)
        removed = remove_dead(graph)
        if changed:  # a Transpose now reads another source: its input port (and what follows) must say so
            graph.reinfer()
        return PassResult(graph, changed or removed)


def fold_transposes(graph: IRGraph) -> bool:
    """Cases 1 and 2 of FoldIRTransposes; whether anything changed."""
    changed_any = False
    while True:
        changed = False
        by_id = graph.by_id()
        producers = graph.producers()
        consumers: dict[tuple[int, int], list[Edge]] = {}
        for e in graph.edges:
            consumers.setdefault((e.from_layer, e.from_port), []).append(e)
        for t in graph.layers:
            if t.type != "Transpose":
                continue
            order = _order(graph, by_id, producers, t)
            src = producers.get((t.id, 0))
            if order is None or src is None:
                continue
            inner = by_id[src[0]]
            if inner.type == "Transpose" and _order(graph, by_id, producers, inner) is not None \
                    and len(_order(graph, by_id, producers, inner)) == len(order):
                p1 = _order(graph, by_id, producers, inner)
                composed = [p1[j] for j in order]
                new_src = producers[(inner.id, 0)]
                new_order = graph.const(np.array(composed, dtype=np.int64))
                graph.edges = [e for e in graph.edges if e.to_layer != t.id]
                graph.edges += [Edge(new_src[0], new_src[1], t.id, 0),
                                Edge(new_order.layer.id, new_order.port.id, t.id, 1)]
                changed = True
                break
            if order == list(range(len(order))):
                out_port = t.outputs[0]
                users = consumers.get((t.id, out_port.id), [])
                if any(by_id[e.to_layer].type == "Result" for e in users):
                    continue
                src_layer = by_id[src[0]]
                src_port = next(p for p in src_layer.outputs if p.id == src[1])
                for n in out_port.names:
                    if n not in src_port.names:
                        src_port.names.append(n)
                graph.edges = [Edge(src[0], src[1], e.to_layer, e.to_port) if (e.from_layer, e.from_port) ==
                               (t.id, out_port.id) else e for e in graph.edges]
                graph.edges = [e for e in graph.edges if e.to_layer != t.id]
                changed = True
                break
        if not changed:
            break
        changed_any = True
        remove_dead(graph)
    return changed_any


def _order(graph, by_id, producers, t):
    src = producers.get((t.id, 1))
    if src is None or by_id[src[0]].type != "Const":
        return None
    return [int(v) for v in by_id[src[0]].value.reshape(-1)]


def remove_dead(graph: IRGraph) -> bool:
    """Drop layers whose outputs feed nothing (Parameters and Results stay), then renumber ids densely; whether
    any was dropped."""
    removed = False
    while True:
        used = {e.from_layer for e in graph.edges}
        dead = {layer.id for layer in graph.layers
                if layer.type not in ("Parameter", "Result") and layer.id not in used}
        if not dead:
            break
        graph.layers = [layer for layer in graph.layers if layer.id not in dead]
        graph.edges = [e for e in graph.edges if e.to_layer not in dead]
        removed = True
    remap = {layer.id: i for i, layer in enumerate(graph.layers)}
    for layer in graph.layers:
        layer.id = remap[layer.id]
    graph.edges = [Edge(remap[e.from_layer], e.from_port, remap[e.to_layer], e.to_port) for e in graph.edges]
    return removed
