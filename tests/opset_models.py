"""Recurrent test models built with onnx.helper only (independent of rnnconv's own writers)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}
T, N, I, H = 4, 3, 5, 6


def recurrent_model(op: str, version: int, *, direction: str = "forward", layout: int = 0, optional: bool = True,
                    seq_lens: bool | None = None, lbr: int = 0, seed: int = 0, dtype=np.float32,
                    y_used: bool = True) -> onnx.ModelProto:
    """One recurrent node at `version` (opset = version); optional=True adds B, sequence_lens, initial states."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def init(name, shape):
        return helper.make_tensor(name, elem, shape, rng.uniform(-0.5, 0.5, size=shape).astype(dtype).ravel())

    inits = [init("W", [D, G * H, I]), init("R", [D, G * H, H])]
    inputs = ["X", "W", "R"]
    graph_inputs = [helper.make_tensor_value_info("X", elem, [N, T, I] if layout else [T, N, I])]
    seq_lens = optional if seq_lens is None else seq_lens
    state = [N, D, H] if layout else [D, N, H]
    if optional:
        inits.append(init("B", [D, 2 * G * H]))
        inputs.append("B")
        if seq_lens:
            inputs.append("sequence_lens")
            graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [N]))
        else:
            inputs.append("")
        inputs.append("initial_h")
        graph_inputs.append(helper.make_tensor_value_info("initial_h", elem, state))
        if op == "LSTM":
            inputs.append("initial_c")
            graph_inputs.append(helper.make_tensor_value_info("initial_c", elem, state))
            inits.append(init("P", [D, 3 * H]))
            inputs.append("P")
    attrs = {"hidden_size": H}
    if direction != "forward":
        attrs["direction"] = direction
    if layout:
        attrs["layout"] = 1
    if lbr:
        attrs["linear_before_reset"] = 1
    if version < 7 and y_used:
        attrs["output_sequence"] = 1
    outputs = ["Y" if y_used else "", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, inputs, outputs, name=f"{op.lower()}_node", **attrs)
    y_shape = [N, T, D, H] if layout else [T, D, N, H]
    graph_outputs = ([helper.make_tensor_value_info("Y", elem, y_shape)] if y_used else []) + [
        helper.make_tensor_value_info("Y_h", elem, state)]
    if op == "LSTM":
        graph_outputs.append(helper.make_tensor_value_info("Y_c", elem, state))
    graph = helper.make_graph([node], f"{op}{version}", graph_inputs, graph_outputs, inits)
    ir_version = 3 if version < 7 else 7 if version < 22 else 10
    if ir_version < 4:
        graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims) for t in inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)], ir_version=ir_version)


def feeds_for(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        np_dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if vi.name == "sequence_lens":
            feeds[vi.name] = rng.integers(1, T + 1, size=shape).astype(np_dtype)
        else:
            feeds[vi.name] = rng.uniform(-1, 1, size=shape).astype(np_dtype)
    return feeds
