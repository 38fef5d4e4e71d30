"""Sizes of dynamic input dims that a model's own nodes fix, one op family at a time: inputs drawn with them run
in onnxruntime, where the default sizes do not."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from rnnconv import io
from rnnconv.verification.inputs import random_inputs
from rnnconv.verification.specs import _onnx_specs


def _model(nodes, x_dims, inits, y_rank, opset=17):
    rng = np.random.default_rng(0)
    tensors = [nh.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name) for name, shape in inits.items()]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, x_dims)],
                     [h.make_tensor_value_info("y", TP.FLOAT, [None] * y_rank)], initializer=tensors)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


CASES = {
    # name: (nodes, x dims, initializers, {axis: size}, text naming the cause)
    "gemm_transA": ([h.make_node("Gemm", ["x", "w"], ["y"], transA=1, name="g")], [None, None], {"w": (6, 4)},
                    {0: 6}, "inner size of Gemm 'g'"),
    "matmul_2d": ([h.make_node("MatMul", ["x", "w"], ["y"], name="m")], [None, None, None], {"w": (6, 2)},
                  {2: 6}, "inner size of MatMul 'm'"),
    "matmul_1d": ([h.make_node("MatMul", ["x", "w"], ["y"], name="m")], [None, None, None], {"w": (7,)},
                  {2: 7}, "inner size of MatMul 'm'"),
    "batchnorm": ([h.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y"], name="bn")],
                  [None, None, None], {"s": (5,), "b": (5,), "mu": (5,), "var": (5,)}, {1: 5}, "channels"),
    "layernorm": ([h.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-2, name="ln")], [None, None, None],
                  {"s": (3, 4)}, {1: 3, 2: 4}, "normalized size"),
    "broadcast_add": ([h.make_node("Add", ["x", "c"], ["y"], name="add")], [None, None, None], {"c": (1, 9)},
                      {2: 9}, "broadcast against a constant"),
    "conv_group": ([h.make_node("Conv", ["x", "w"], ["y"], group=3, name="conv")], [None, None, None, None],
                   {"w": (6, 2, 1, 1)}, {1: 6}, "input channels of Conv 'conv'"),
    "after_conv": ([h.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                    h.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 1]),
                    h.make_node("MatMul", ["t", "m"], ["y"], name="m")], [None, None, None],
                   {"w": (8, 3, 1), "m": (8, 2)}, {1: 3}, "input channels"),
    # a state whose batch is fixed (AECMOS-like: h0 [4, 1, 64] sliced per layer) fixes X's batch too
    "gru_state_batch": ([h.make_node("GRU", ["x", "w", "r", "", "", "h0"], ["y"], hidden_size=2, name="gru")],
                        [None, None, None], {"w": (1, 6, 3), "r": (1, 6, 2), "h0": (1, 1, 2)}, {1: 1, 2: 3},
                        "of GRU 'gru'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_drawn_sizes_run_in_onnxruntime(case, tmp_path):
    nodes, x_dims, inits, want, why = CASES[case]
    proto = _model(nodes, x_dims, inits, len(x_dims) + (case == "gru_state_batch") - (case == "matmul_1d"))
    onnx.checker.check_model(proto, full_check=True)
    path = tmp_path / "m.onnx"
    onnx.save(proto, path)
    model = io.load(path)
    spec = _onnx_specs(model)["x"]
    assert {axis: size for axis, (size, _) in spec.sizes.items()} == want
    assert all(why in text for _, text in spec.sizes.values())
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = random_inputs(model)
    assert all(feeds["x"].shape[axis] == size for axis, size in want.items())
    session.run(None, feeds)  # runs at the sizes drawn
    spec.sizes.clear()  # the defaults alone: the model does not run (the sizes above are needed)
    from rnnconv.verification.inputs import draw_inputs
    defaults, _ = draw_inputs({"x": spec}, np.random.default_rng(0), {}, {})
    with pytest.raises(Exception):
        session.run(None, defaults)


def _pooled(path):
    """x [1, 1, F] through three max-pools of 2 (AECMOS' front end in small): F below 8 leaves the last one an
    input shorter than its window."""
    pools = [h.make_node("MaxPool", [f"p{k}"], [f"p{k + 1}"], kernel_shape=[2], strides=[2], name=f"pool{k}")
             for k in range(3)]
    g = h.make_graph([h.make_node("Identity", ["x"], ["p0"]), *pools, h.make_node("Identity", ["p3"], ["y"])], "g",
                     [h.make_tensor_value_info("x", TP.FLOAT, [1, 1, "frames"])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, 1, None])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def test_sizes_below_a_pooling_window_are_not_drawn(tmp_path):
    from rnnconv.verification.checks import CheckOptions, runnable_sets
    from rnnconv.verification.model import open_model
    from rnnconv.verification.sizes import empty_window

    path = tmp_path / "m.onnx"
    _pooled(path)
    model = io.load(path)
    assert "pool2" in empty_window(model, {"x": (1, 1, 4)}) and empty_window(model, {"x": (1, 1, 8)}) is None
    # onnxruntime runs the small size, pooling a window that overhangs its input (so it would pass for a test
    # of a conversion)...
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.zeros((1, 1, 4), np.float32)})[0].shape == (1, 1, 1)
    # ...which the drawing skips for a size every window fits in.
    source = open_model(path)
    sets, ref, note = runnable_sets(source, _onnx_specs(model), CheckOptions(), ["onnxruntime"])
    assert sets[0][0]["x"].shape[2] >= 8 and "window" in note


def test_openvino_refuses_what_onnxruntime_runs_below_a_window(tmp_path):
    """The runtime fact the drawing rests on."""
    ov = pytest.importorskip("openvino")
    path = tmp_path / "m.onnx"
    _pooled(path)
    model = ov.Core().read_model(str(path))
    with pytest.raises(RuntimeError, match="larger than the data shape"):
        model.reshape({model.inputs[0]: [1, 1, 4]})
        ov.Core().compile_model(model, "CPU")
