"""`layout --to 1` on stacks of recurrent layers as PyTorch writes them (batch_first, 1 to 3 layers, one or two
directions, the legacy exporter's Squeeze chain and the dynamo exporter's Transpose + Reshape chain): no Transpose
is left on the recurrent path and none between two layout-1 layers; `--to 0` back gives no more nodes than the
source; no dead node is left; onnxruntime gives the source's numbers for the model that comes back."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import rnnconv
from rnnconv import io

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
N, T, I, H = 2, 5, 3, 4


def stack(op: str, layers: int, directions: int, chain: str) -> onnx.ModelProto:
    """x [N,T,I] -> Transpose -> (op -> chain) x layers -> Transpose -> y [N,T,D*H]."""
    rng = np.random.default_rng(layers * 10 + directions)
    nodes, inits = [h.make_node("Transpose", ["x"], ["x_tnc"], perm=[1, 0, 2], name="in_T")], []
    inits.append(nh.from_array(np.array([0, 0, -1], np.int64), "merge"))
    inits.append(nh.from_array(np.array([1], np.int64), "axis1"))
    prev, size = "x_tnc", I
    G, D = GATES[op], directions
    for k in range(layers):
        w = {n: rng.uniform(-0.5, 0.5, s).astype(np.float32) for n, s in
             ((f"W{k}", (D, G * H, size)), (f"R{k}", (D, G * H, H)), (f"B{k}", (D, 2 * G * H)))}
        inits += [nh.from_array(v, n) for n, v in w.items()]
        attrs = {"hidden_size": H, **({"direction": "bidirectional"} if D == 2 else {})}
        nodes.append(h.make_node(op, [prev, f"W{k}", f"R{k}", f"B{k}"], [f"Y{k}"], name=f"{op.lower()}{k}", **attrs))
        if chain == "legacy" and D == 1:  # Y [T,1,N,H] -> Squeeze -> [T,N,H]
            nodes.append(h.make_node("Squeeze", [f"Y{k}", "axis1"], [f"o{k}"], name=f"sq{k}"))
        else:  # Y [T,D,N,H] -> Transpose -> [T,N,D,H] -> Reshape [0,0,-1] -> [T,N,D*H]
            nodes.append(h.make_node("Transpose", [f"Y{k}"], [f"t{k}"], perm=[0, 2, 1, 3], name=f"yT{k}"))
            nodes.append(h.make_node("Reshape", [f"t{k}", "merge"], [f"o{k}"], name=f"merge{k}"))
        prev, size = f"o{k}", D * H
    nodes.append(h.make_node("Transpose", [prev], ["y"], perm=[1, 0, 2], name="out_T"))
    g = h.make_graph(nodes, "stack", [h.make_tensor_value_info("x", TP.FLOAT, ["N", "T", I])],
                     [h.make_tensor_value_info("y", TP.FLOAT, ["N", "T", D * H])], initializer=inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 14)], ir_version=8)


def path_transposes(model: onnx.ModelProto) -> int:
    """Transposes on the way from x through the recurrent nodes to y."""
    producer = {o: n for n in model.graph.node for o in n.output}
    count, value, seen = 0, "y", set()
    while value in producer and value not in seen:
        seen.add(value)
        node = producer[value]
        count += node.op_type == "Transpose"
        value = node.input[0]
    return count


def between_layers(model: onnx.ModelProto) -> int:
    """Transposes between one recurrent node's Y and the next one's X."""
    producer = {o: n for n in model.graph.node for o in n.output}
    found = 0
    for node in model.graph.node:
        if node.op_type in GATES:
            value, transposes = node.input[0], 0
            while value in producer and producer[value].op_type not in GATES:
                transposes += producer[value].op_type == "Transpose"
                value = producer[value].input[0]
            found += transposes if value in producer else 0  # the chain starts at another recurrent node
    return found


def dead(model: onnx.ModelProto) -> list:
    used = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    return [n.name for n in model.graph.node if not any(o in used for o in n.output if o)]


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("chain", ["legacy", "dynamo"])
@pytest.mark.parametrize("directions", [1, 2])
@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_batch_first_stack_to_layout_1_and_back(op, layers, directions, chain):
    if chain == "legacy" and directions == 2 and layers == 1:
        pytest.skip("the same graph as the dynamo chain")
    src = stack(op, layers, directions, chain)
    onnx.checker.check_model(src, full_check=True)
    batch_major = rnnconv.convert_layout(src, to=1)
    assert batch_major.report.ok
    l1 = io.to_proto(batch_major.model)
    assert [a.i for n in l1.graph.node if n.op_type == op for a in n.attribute if a.name == "layout"] == [1] * layers
    assert path_transposes(l1) == 0 and between_layers(l1) == 0, collections.Counter(n.op_type for n in l1.graph.node)
    assert dead(l1) == []
    back = rnnconv.convert_layout(l1, to=0)
    l0 = io.to_proto(back.model)
    assert len(l0.graph.node) <= len(src.graph.node) and dead(l0) == []
    assert path_transposes(l0) <= path_transposes(src) and between_layers(l0) <= between_layers(src)
    x = np.random.default_rng(0).uniform(-1, 1, (N, T, I)).astype(np.float32)
    np.testing.assert_allclose(run(l0, x), run(src, x), rtol=1e-5, atol=1e-6)
