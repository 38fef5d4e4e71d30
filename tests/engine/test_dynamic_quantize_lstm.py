"""com.microsoft DynamicQuantizeLSTM: rnnconv's kernel against onnxruntime's, on hypothesis configurations and on
models quantize_dynamic wrote from the float LSTM fixtures.

"To float32 rounding": the kernel performs onnxruntime's float32 operations one at a time in onnxruntime's order,
and its integer GEMM exactly as MLAS accumulates it, so the outputs are expected equal to the bit. The tolerance
allows 4 units in the last place of the largest output (4 * spacing(max |y|): 4.8e-7 for outputs within [-1, 1]),
for last-bit effects such as the double rounding of the emulated FMA, and nothing more: one quantization step
taken differently moves an output by 1e-3 or more and fails.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from rnnconv import io
from rnnconv.activations import PARAMS
from rnnconv.engine import onnxruntime_runtime
from rnnconv.engine.onnx_graph import run_onnx
from rnnconv.engine.op_dynamic_quantize_lstm import (
    ONNXRUNTIME_THREADS,
    dynamic_quantize_lstm,
    mlas_fma,
    mlas_logistic,
    mlas_saturates,
    mlas_tanh,
    quantize,
)
from rnnconv.errors import BadInput, NodeFailed
from tests.conftest import FIXTURES

INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P",
          "W_scale", "W_zero_point", "R_scale", "R_zero_point")
F32 = np.float32


def tolerance(reference: dict) -> float:
    largest = max((float(np.abs(v).max(initial=0)) for v in reference.values()), default=0.0)
    return 4 * float(np.spacing(F32(max(1.0, largest))))


def node_model(inputs: dict, attributes: dict, outputs=("Y", "Y_h", "Y_c")):
    """One DynamicQuantizeLSTM; every input a graph input (onnxruntime runs quantized weights as inputs or
    initializers alike)."""
    names = [k if inputs.get(k) is not None else "" for k in INPUTS]
    while names[-1] == "":
        names.pop()
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")]
    while outs[-1] == "":
        outs.pop()
    node = helper.make_node("DynamicQuantizeLSTM", names, outs, domain="com.microsoft", name="dq", **attributes)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(inputs[k].dtype), inputs[k].shape)
         for k in names if k],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [None] * (4 if o == "Y" else 3)) for o in outs if o])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def ort_run(model, feeds, threads):
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def kernel_run(inputs, attributes, outputs, threads):
    got = dynamic_quantize_lstm(**inputs, **attributes, output_sequence="Y" in outputs, num_threads=threads)
    return {k: v for k, v in zip(("Y", "Y_h", "Y_c"), got) if k in outputs}


def assert_agree(got: dict, want: dict):
    tol = tolerance(want)
    for name, w in want.items():
        assert got[name].shape == w.shape and got[name].dtype == np.float32, name
        np.testing.assert_allclose(got[name], w, rtol=0, atol=tol, err_msg=name)


@st.composite
def configurations(draw):
    T, N, I = draw(st.integers(1, 6)), draw(st.integers(1, 7)), draw(st.integers(1, 19))
    H = draw(st.sampled_from([1, 2, 3, 5, 8, 16, 24]))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    D = 2 if direction == "bidirectional" else 1
    signed, per_channel = draw(st.booleans()), draw(st.booleans())
    half = draw(st.sampled_from([127, 64, 9]))  # full-range (saturates on AVX2), reduce_range, small
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (D, 4 * H) if per_channel else (D,)
    if signed:
        dt = np.int8
        zw = np.zeros(shape, dt) if per_channel else rng.integers(-4, 5, shape).astype(dt)
        zr = np.zeros(shape, dt) if per_channel else rng.integers(-4, 5, shape).astype(dt)
        W = rng.integers(-half, half + 1, (D, I, 4 * H)).astype(dt)
        R = rng.integers(-half, half + 1, (D, H, 4 * H)).astype(dt)
    else:  # per-row uint8 zero points: one value over every direction (onnxruntime's ZeroPointCheck)
        dt = np.uint8
        z = rng.integers(100, 156, D)
        if per_channel:
            z[:] = z[0]
        zw = np.broadcast_to(z.reshape((D,) + (1,) * (len(shape) - 1)), shape).astype(dt)
        zr = zw.copy()
        W = np.clip(rng.integers(-half, half + 1, (D, I, 4 * H)) + z[:, None, None], 0, 255).astype(dt)
        R = np.clip(rng.integers(-half, half + 1, (D, H, 4 * H)) + z[:, None, None], 0, 255).astype(dt)
    scale = lambda: (10 ** rng.uniform(-3, -1.3, shape) * 32 / half).astype(F32)  # noqa: E731
    x_scale = draw(st.sampled_from([0.01, 1.0, 30.0]))
    inputs = {"X": (rng.standard_normal((T, N, I)) * x_scale + draw(st.sampled_from([0.0, 0.7, -2.0]))).astype(F32),
              "W": W, "R": R, "W_scale": scale(), "W_zero_point": np.ascontiguousarray(zw), "R_scale": scale(),
              "R_zero_point": np.ascontiguousarray(zr)}
    if draw(st.booleans()):
        inputs["B"] = (0.5 * rng.standard_normal((D, 8 * H))).astype(F32)
    if draw(st.booleans()):
        inputs["P"] = (0.5 * rng.standard_normal((D, 3 * H))).astype(F32)
    if draw(st.booleans()):
        inputs["initial_h"] = rng.standard_normal((D, N, H)).astype(F32)
    if draw(st.booleans()):
        inputs["initial_c"] = (2 * rng.standard_normal((D, N, H))).astype(F32)
    lens = draw(st.sampled_from([None, "random", "with_zero"]))
    if lens:
        values = rng.integers(0 if lens == "with_zero" else 1, T + 1, N)
        if lens == "with_zero":
            values[rng.integers(0, N)] = 0
        inputs["sequence_lens"] = values.astype(np.int32)
    attributes = {"hidden_size": H, "direction": direction}
    if draw(st.booleans()):
        attributes["clip"] = draw(st.sampled_from([0.5, 3.0]))
    if draw(st.booleans()):
        attributes["input_forget"] = 1
    if draw(st.booleans()):
        names = [draw(st.sampled_from(sorted(PARAMS))) for _ in range(3 * D)]
        attributes["activations"] = names
        for slot, param in enumerate(("alpha", "beta")):
            takers = sum(PARAMS[n][slot] is not None for n in names)
            count = draw(st.integers(0, takers))
            if count:
                attributes[f"activation_{param}"] = [float(v) for v in rng.uniform(0.1, 1.5, count)]
    # Without Y and with some (not all) sequences of length 0, onnxruntime quantizes uninitialised memory.
    want_y = draw(st.booleans()) or lens == "with_zero"
    outputs = ("Y", "Y_h", "Y_c") if want_y else ("Y_h", "Y_c")
    threads = draw(st.sampled_from([ONNXRUNTIME_THREADS, 1, 2, 3]))
    return inputs, attributes, outputs, threads


def test_kernel_matches_onnxruntime():
    compared = []  # configurations that reached the comparison: `assume` discards some, the health checks are off

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(configurations())
    def kernel_matches_onnxruntime(config):
        inputs, attributes, outputs, threads = config
        want = ort_run(node_model(inputs, attributes, outputs), inputs, threads)
        # Unbounded activations (Relu, Affine, ...) for g and h can make the recurrence diverge: onnxruntime's
        # min/max search over NaN depends on operand order (not modelled), and such outputs say nothing anyway.
        assume(all(np.all(np.isfinite(v)) and np.abs(v).max(initial=0) < 1e30 for v in want.values()))
        assert_agree(kernel_run(inputs, attributes, outputs, threads), want)
        compared.append(config)

    kernel_matches_onnxruntime()
    assert len(compared) >= 50, f"only {len(compared)} configurations reached the comparison"


def _config(N=2, H=16, I=32, T=6, seed=5, half=127):
    rng = np.random.default_rng(seed)
    inputs = {"X": rng.standard_normal((T, N, I)).astype(F32),
              "W": rng.integers(-half, half + 1, (1, I, 4 * H)).astype(np.int8),
              "R": rng.integers(-half, half + 1, (1, H, 4 * H)).astype(np.int8),
              "B": (0.5 * rng.standard_normal((1, 8 * H))).astype(F32),
              "W_scale": np.array([0.01], F32), "W_zero_point": np.zeros(1, np.int8),
              "R_scale": np.array([0.02], F32), "R_zero_point": np.zeros(1, np.int8)}
    return inputs, {"hidden_size": H}


def test_thread_count_changes_onnxruntime_and_the_kernel_follows():
    inputs, attributes = _config(N=6)
    outputs = ("Y", "Y_h", "Y_c")
    model = node_model(inputs, attributes)
    by_threads = {t: ort_run(model, inputs, t) for t in (1, 2)}
    assert np.abs(by_threads[1]["Y"] - by_threads[2]["Y"]).max() > 1e-4  # one H scale per thread's rows
    for t, want in by_threads.items():
        assert_agree(kernel_run(inputs, attributes, outputs, t), want)


def test_saturation_is_onnxruntimes_and_the_kernel_follows():
    inputs, attributes = _config()
    want = ort_run(node_model(inputs, attributes), inputs, 1)
    assert_agree(kernel_run(inputs, attributes, ("Y", "Y_h", "Y_c"), 1), want)
    exact = dict(zip(("Y", "Y_h", "Y_c"), dynamic_quantize_lstm(**inputs, **attributes, saturate=False)))
    differs = np.abs(exact["Y"] - want["Y"]).max() > 1e-3
    assert differs == mlas_saturates()  # full-range int8 weights saturate int16 pairs on AVX2 without VNNI


def test_requesting_y_changes_the_result_and_the_kernel_follows():
    inputs, attributes = _config(N=4, T=7)
    inputs["sequence_lens"] = np.array([7, 3, 1, 5], np.int32)
    y_h = {}
    for outputs in (("Y", "Y_h", "Y_c"), ("Y_h", "Y_c")):
        want = ort_run(node_model(inputs, attributes, outputs), inputs, 1)
        assert_agree(kernel_run(inputs, attributes, outputs, 1), want)
        y_h[outputs] = want["Y_h"]
    assert not np.array_equal(*y_h.values())


@pytest.mark.skipif(not mlas_fma(), reason="MLAS's SSE2 kernels: not measured")
@pytest.mark.parametrize("op,ours", [("Sigmoid", mlas_logistic), ("Tanh", mlas_tanh)])
def test_mlas_sigmoid_and_tanh_to_the_bit(op, ours):
    x = np.concatenate([np.random.default_rng(0).standard_normal(50000).astype(F32) * 6,
                        np.array([0, -0.0, 1e-30, 9, -9, 18, -18, 100, -100], F32)])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    np.testing.assert_array_equal(ours(x).view(np.int32), ort_run(model, {"x": x}, 1)["y"].view(np.int32))


def test_activation_quantization_is_dynamic_quantize_linear():
    graph = helper.make_graph([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
                              [helper.make_tensor_value_info(n, t, None) for n, t in
                               (("y", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    rng = np.random.default_rng(1)
    for k in range(50):
        x = (rng.standard_normal(rng.integers(1, 300)) * 10 ** rng.uniform(-3, 2) + rng.uniform(-1, 1)).astype(F32)
        x = np.abs(x) if k % 7 == 0 else np.zeros_like(x) if k % 11 == 0 else x
        want = ort_run(model, {"x": x}, 1)
        q, scale, zero_point = quantize(x)
        assert np.array_equal(q, want["y"]) and scale == want["s"] and zero_point == int(want["z"])


# -- quantize_dynamic on the float LSTM fixtures, whole models ----------------------------------------------------

QUANTIZED = ["lstm7_forward", "lstm7_bidirectional_peepholes_input_forget_seq_lens_initial_states", "lstm7_activations",
             "lstm7_reverse_seq_lens", "lstm14_forward", "lstm7_stacked"]


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    from onnxruntime.quantization import quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic logs a warning per model
    folder = tmp_path_factory.mktemp("quantized")
    made = {}
    for name in QUANTIZED:
        # IR 7 first: quantize_dynamic keeps the IR version, and IR 3 wants every initializer a graph input
        source = onnx.load(str(FIXTURES / f"{name}.onnx"))
        source.ir_version = 7
        onnx.save(source, str(folder / f"{name}.onnx"))
        for per_channel in (False, True):
            for reduce_range in (False, True):
                out = folder / f"{name}_{int(per_channel)}{int(reduce_range)}.onnx"
                quantize_dynamic(str(folder / f"{name}.onnx"), str(out), per_channel=per_channel,
                                 reduce_range=reduce_range)
                made[(name, per_channel, reduce_range)] = out
    return made


@pytest.mark.parametrize("name", QUANTIZED)
@pytest.mark.parametrize("per_channel,reduce_range", [(False, False), (True, False), (False, True), (True, True)])
def test_quantize_dynamic_model_matches_onnxruntime(quantized, name, per_channel, reduce_range):
    model = io.load(quantized[(name, per_channel, reduce_range)])
    assert any(n.op_type == "DynamicQuantizeLSTM" for n in model.graph)
    data = np.load(FIXTURES / f"{name}.npz")
    feeds = {k: data[k] for k in data.files}
    placements = {}
    got = run_onnx(model, feeds, placements=placements)
    # rnnconv's own onnxruntime session: it pins the thread count for models holding the op (N = 3 here)
    assert onnxruntime_runtime.threads_for(model) == ONNXRUNTIME_THREADS
    want = onnxruntime_runtime.run_model(model, feeds)
    assert_agree(got, want)
    assert placements["com.microsoft::DynamicQuantizeLSTM"]["rnnconv"] >= 1


def test_isolated_onnxruntime_pins_threads_too(quantized):
    model = io.load(quantized[("lstm7_forward", False, False)])
    feeds = {"X": np.random.default_rng(3).standard_normal((5, 3, 4)).astype(F32)}  # N = 3, H = 6: per-thread rows
    [(want, why)] = onnxruntime_runtime.run_isolated([model], feeds)
    assert why == ""
    assert_agree(run_onnx(model, feeds), want)


# -- what onnxruntime refuses is refused, naming the node ----------------------------------------------------------

@pytest.mark.parametrize("change,message", [
    (lambda i, a: a.update(layout=1), "no layout attribute"),
    (lambda i, a: i.update(W=np.ascontiguousarray(i["W"].transpose(0, 2, 1))), "W has shape"),
    (lambda i, a: i.update(W_scale=np.ones((1, 64), F32), W_zero_point=np.ones((1, 64), np.int8)), "must be all 0"),
    (lambda i, a: a.update(clip=0.0), "clip must be > 0"),
    (lambda i, a: i.update(R_zero_point=np.zeros(1, np.uint8)), "must match"),
])
def test_refusals(change, message):
    inputs, attributes = _config()
    change(inputs, attributes)
    with pytest.raises(BadInput, match=message):
        dynamic_quantize_lstm(**inputs, **attributes)
    with pytest.raises(NodeFailed, match=message) as info:
        run_onnx(io.load(node_model(inputs, attributes)), inputs)
    assert info.value.node == "dq" and info.value.op == "com.microsoft::DynamicQuantizeLSTM"

