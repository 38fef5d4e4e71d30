"""Known gaps of rnnconv's ONNX engine while it borrows onnx's reference ops (its own executor is on the way):
each found by running a tiny model in the engine and in onnxruntime, so a test skipped for it runs again by
itself once the engine computes the op right."""

from __future__ import annotations

import functools

import numpy as np
import onnx_ir as ir
from onnx import helper, numpy_helper

from rnnconv.engine.onnx_graph import run_onnx


def _agrees(nodes, inputs, inits, feeds) -> bool:
    import onnxruntime as ort

    graph = helper.make_graph(
        nodes,
        "gap",
        inputs,
        [helper.make_tensor_value_info("y", 1, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    try:
        got = run_onnx(ir.serde.deserialize_model(proto), feeds)["y"]
    except Exception:
        return False
    return got.shape == want.shape and np.allclose(got, want, atol=1e-5)


@functools.cache
def loop_scan_outputs() -> bool:
    """Loop stacks each iteration's scan output on a new axis (onnx's reference concatenates 2-D ones)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["co"]), helper.make_node("Identity", ["x"], ["s"])],
        "body",
        [helper.make_tensor_value_info("i", 7, []), helper.make_tensor_value_info("c", 9, [])],
        [helper.make_tensor_value_info("co", 9, []), helper.make_tensor_value_info("s", 1, [2, 3])],
    )
    loop = helper.make_node("Loop", ["n", ""], ["y"], body=body)
    return _agrees(
        [loop],
        [helper.make_tensor_value_info("x", 1, [2, 3])],
        {"n": np.array(3, np.int64)},
        {"x": np.ones((2, 3), np.float32)},
    )


@functools.cache
def grouped_conv_transpose() -> bool:
    """ConvTranspose with group > 1 and several output channels per group."""
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=2)
    return _agrees(
        [node],
        [helper.make_tensor_value_info("x", 1, [1, 4, 3, 3])],
        {"w": np.ones((4, 3, 2, 2), np.float32)},
        {"x": np.ones((1, 4, 3, 3), np.float32)},
    )
