"""What the tests share: recurrent test models built with onnx.helper only (never rnnconv's own writers), inputs
for them (and the fixtures' own), the runtimes that judge rnnconv (onnxruntime, the OpenVINO runtime at f32, and
rnnconv's engine, itself held against the first two in tests/engine/; never an expectation), and the CLI run in
this process. Expectations come from tests/oracle.py's `reference`: onnxruntime, on a re-expression it runs where
it does not run the model as it is (layout 1, versions below 7, float64/bfloat16).

Every OpenVINO IR a test writes is checked as it is written (the autouse fixture at the end): by rnnconv's own
writer (every path to it goes through `writer.write_to`) and by OpenVINO's save on to-openvino's OpenVINO route
(`frontend.save`, read back). Both ends of every edge must agree in element type and dims
(`validate.edge_mismatches`) and the reader-side checks must pass (`validate.validate`): stale port shapes are what
OpenVINO's reader and rnnconv's own refuse.

Tests import these by name (`from tests.conftest import recurrent_model, run_onnxruntime`); pytest loads this
module as `tests.conftest`, so both are the same module.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io as _io
import json
import os
from pathlib import Path
from typing import Mapping, Optional

# As the rnnconv command runs (rnnconv.cli.main), before numpy and the runtimes load in this process: numpy's BLAS on
# one thread (idle OpenBLAS threads spin on the cores the other test worker uses), and the runtimes' usage
# telemetry off (with the openvino_telemetry package importable, every ov.convert_model forks this whole process to
# send an event: most of the CPU time of the tests that write IR through OpenVINO). Child processes the tests start
# inherit the variables; tests/cli/test_blas_threads.py and the quiet-run test remove them.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from rnnconv.engine import telemetry  # noqa: E402

telemetry.switch_off()

import numpy as np  # noqa: E402
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.oracle import reference, run_onnxruntime  # noqa: F401 (tests import them from here)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
TORCH = FIXTURES / "torch"

# The ONNX spec's facts, written here rather than imported from rnnconv, so that a wrong fact there fails tests.
GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}
OUTPUTS = {"GRU": ("Y", "Y_h"), "LSTM": ("Y", "Y_h", "Y_c"), "RNN": ("Y", "Y_h")}
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
RECURRENT = tuple(GATES)

# Every optional input present (initial_c and P count for LSTM only), or none (not even B).
ALL_OPTIONAL = dict(bias=True, sequence_lens=True, initial_h=True, initial_c=True, peepholes=True)
NO_OPTIONAL = dict(bias=False)


# -- models -------------------------------------------------------------------------------------------------

def recurrent_model(op: str = "LSTM", *, opset: int = 14, direction: str = "forward", layout: int = 0, T: int = 4,
                    N: int = 2, I: int = 3, H: int = 5, dynamic: bool = False, x_shape=None, bias: bool = True,
                    sequence_lens=False, initial_h=False, initial_c=False, peepholes: bool = False,
                    weights_as_inputs: bool = False, weights: Optional[dict] = None, lbr: int = 0,
                    clip: Optional[float] = None, activations=None, input_forget: int = 0,
                    attrs: Optional[dict] = None, outputs=None, dtype=np.float32, seed: int = 0,
                    name: Optional[str] = None) -> onnx.ModelProto:
    """One GRU/LSTM/RNN node named `name` (default: the op in lower case), X [T,N,I] (layout 1: [N,T,I]).

    W, R, then B and P (when present) are drawn in that order from `seed`, uniform in [-0.5, 0.5]: the same seed
    gives the same weights whatever the layout, direction aside. `weights` replaces them by name (None: absent).
    sequence_lens, initial_h, initial_c: False (absent), True (a graph input) or an array (an initializer).
    `dynamic` names T and N "T" and "N"; `x_shape` overrides X's shape outright. `weights_as_inputs` makes W, R,
    B, P graph inputs. `attrs` is applied last, over everything else. `outputs`: which of Y, Y_h(, Y_c) the node
    computes and the graph returns (default: all). Below opset 7, output_sequence is 1 when Y is used.
    IR version: 3 below opset 7 (initializers also listed as graph inputs, as IR 3 requires), 10 from opset 22,
    else 8 (what every opset up to 18 accepts)."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    lstm = op == "LSTM"
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    t, n = ("T", "N") if dynamic else (T, N)
    if x_shape is None:
        x_shape = [n, t, I] if layout else [t, n, I]
    else:
        t = x_shape[1 if layout and len(x_shape) > 2 else 0]
    state = [n, D, H] if layout else [D, n, H]

    values = {"W": rng.uniform(-0.5, 0.5, (D, G * H, I)), "R": rng.uniform(-0.5, 0.5, (D, G * H, H))}
    if bias:
        values["B"] = rng.uniform(-0.5, 0.5, (D, 2 * G * H))
    if peepholes and lstm:
        values["P"] = rng.uniform(-0.5, 0.5, (D, 3 * H))
    values = {k: v.astype(dtype) for k, v in values.items()}
    for k, v in (weights or {}).items():
        values[k] = v
    values = {k: np.asarray(v) for k, v in values.items() if v is not None}

    graph_inputs = [helper.make_tensor_value_info("X", elem, x_shape)]
    initializers = []
    present = {"X"}

    def optional(key, value, shape, elem_type, cast):
        if value is None or value is False:
            return
        present.add(key)
        if value is True:
            graph_inputs.append(helper.make_tensor_value_info(key, elem_type, shape))
        else:
            initializers.append(numpy_helper.from_array(np.asarray(value, dtype=cast), key))

    optional("sequence_lens", sequence_lens, [n], TensorProto.INT32, None)
    optional("initial_h", initial_h, state, elem, dtype)
    if lstm:
        optional("initial_c", initial_c, state, elem, dtype)
    for k, v in values.items():
        present.add(k)
        if weights_as_inputs:
            graph_inputs.append(helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                              list(v.shape)))
        else:
            initializers.append(numpy_helper.from_array(v, k))
    node_inputs = _trimmed([k if k in present else "" for k in INPUTS[:8 if lstm else 6]])

    used = OUTPUTS[op] if outputs is None else tuple(outputs)
    attributes = {"hidden_size": H}
    if direction != "forward":
        attributes["direction"] = direction
    if layout:
        attributes["layout"] = 1
    if lbr:
        attributes["linear_before_reset"] = 1
    if clip is not None:
        attributes["clip"] = clip
    if input_forget:
        attributes["input_forget"] = 1
    if activations:
        attributes["activations"] = list(activations)
    if opset < 7 and "Y" in used:
        attributes["output_sequence"] = 1
    attributes.update(attrs or {})
    node = helper.make_node(op, node_inputs, _trimmed([o if o in used else "" for o in OUTPUTS[op]]),
                            name=name or op.lower(), **attributes)
    y_shape = [n, t, D, H] if layout else [t, D, n, H]
    graph_outputs = [helper.make_tensor_value_info(o, elem, y_shape if o == "Y" else state)
                     for o in OUTPUTS[op] if o in used]
    ir = 3 if opset < 7 else 10 if opset >= 22 else 8
    if ir < 4:  # IR 3: every initializer is also a graph input
        graph_inputs += [helper.make_tensor_value_info(i.name, i.data_type, list(i.dims)) for i in initializers]
    graph = helper.make_graph([node], f"{op}{opset}", graph_inputs, graph_outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


def recurrent_cases():
    """A hypothesis strategy for random recurrent nodes: (op, recurrent_model keywords, T, N) over direction,
    layout, every optional input, weights as inputs, dynamic dims, clip, linear_before_reset, peepholes,
    input_forget and activations (those OpenVINO's Sequence ops run and those it does not), at small sizes."""
    from hypothesis import strategies as st

    functions = {"LSTM": 3, "GRU": 2, "RNN": 1}
    names = ["Sigmoid", "Tanh", "Relu", "HardSigmoid", "Softsign", "Elu", "Affine", "ScaledTanh", "LeakyRelu"]

    @st.composite
    def cases(draw):
        op = draw(st.sampled_from(RECURRENT))
        direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
        D = 2 if direction == "bidirectional" else 1
        kw = dict(direction=direction, layout=draw(st.sampled_from([0, 1])), bias=draw(st.booleans()),
                  sequence_lens=draw(st.booleans()), initial_h=draw(st.booleans()), dynamic=draw(st.booleans()),
                  weights_as_inputs=draw(st.booleans()), clip=draw(st.sampled_from([None, 0.5, 3.0])),
                  H=draw(st.integers(1, 4)), I=draw(st.integers(1, 3)), seed=draw(st.integers(0, 99)))
        if op == "GRU":
            kw["lbr"] = draw(st.sampled_from([0, 1]))
        if op == "LSTM":
            kw.update(initial_c=draw(st.booleans()), peepholes=draw(st.booleans()),
                      input_forget=draw(st.sampled_from([0, 1])))
        if draw(st.booleans()):
            count = functions[op] * D
            kw["activations"] = draw(st.lists(st.sampled_from(names), min_size=count, max_size=count))
        return op, kw, draw(st.integers(1, 5)), draw(st.integers(1, 3))

    return cases()


def with_transposed_y(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its output Y transposed [T,D,N,H] -> [N,D,T,H] by a Transpose after the node: the same
    declared shape when T == N, other numbers in every place."""
    node = model.graph.node[0]
    node.output[0] = "Y_raw"
    model.graph.node.append(helper.make_node("Transpose", ["Y_raw"], ["Y"], perm=[2, 1, 0, 3]))
    return model


def _trimmed(names: list) -> list:
    while names and not names[-1]:
        names.pop()
    return names


def write_model(model: onnx.ModelProto, path: Path, *, external: Optional[str] = None,
                one_file: bool = True) -> Path:
    """Save `model` at `path` (folders made); every initializer in external data at `external` when given
    (one file, or one file per tensor)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if external:
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
                  location=external, size_threshold=0)
    else:
        onnx.save(model, str(path))
    return path


def lstm_file(path: Path, *, external: Optional[str] = "w.data", one_file: bool = True, H: int = 8, I: int = 5,
              opset: int = 14, layout: int = 0, direction: str = "bidirectional") -> Path:
    """An LSTM (dynamic T and N; Y and Y_h) written to `path`, its W, R, B (each > 256 bytes) in the `external`
    data file beside it (None: inside the model file)."""
    model = recurrent_model("LSTM", opset=opset, direction=direction, layout=layout, H=H, I=I, dynamic=True,
                            outputs=("Y", "Y_h"), seed=1)
    return write_model(model, path, external=external, one_file=one_file)


def initializers(model) -> dict[str, np.ndarray]:
    """A model's (ModelProto or path) initializers by name, external data read."""
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    return {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}


def recurrent_node(path) -> tuple[onnx.ModelProto, onnx.NodeProto, dict]:
    """The model at `path` (after onnx.checker's full check), its one GRU/LSTM/RNN node and that node's
    attributes."""
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    nodes = [n for n in model.graph.node if n.op_type in GATES]
    assert len(nodes) == 1, [n.op_type for n in model.graph.node]
    return model, nodes[0], {a.name: helper.get_attribute_value(a) for a in nodes[0].attribute}


def interface(model) -> tuple[list, list]:
    """Names, element types and shapes (dim_value, dim_param or None; None for no shape) of a model's inputs
    (initializers left out) and outputs, as written in the file."""
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model), load_external_data=False)
    inits = {t.name for t in proto.graph.initializer}

    def sig(vi):
        tt = vi.type.tensor_type
        dims = tuple(d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else None
                     for d in tt.shape.dim)
        return vi.name, tt.elem_type, dims if tt.HasField("shape") else None

    return [sig(v) for v in proto.graph.input if v.name not in inits], [sig(v) for v in proto.graph.output]


def openvino_ir(model, xml: Path, *, compress: bool = False) -> Path:
    """IR of an ONNX model (ModelProto, saved beside as NAME.onnx, or a path) written by OpenVINO itself:
    ov.convert_model + ov.save_model, weights compressed to fp16 or not."""
    import openvino as ov

    xml = Path(xml)
    if isinstance(model, onnx.ModelProto):
        onnx.save(model, str(xml.with_suffix(".onnx")))
        model = xml.with_suffix(".onnx")
    ov.save_model(ov.convert_model(str(model)), str(xml), compress_to_fp16=compress)
    return xml


def tensor_iterator_ir(kind: str, *, reverse: bool = False, time_axis: int = 1, lbr: bool = False, clip: float = 0.0,
                       zero_state: bool = False, extra_op: bool = False, T: int = 4, N: int = 2, I: int = 3,
                       H: int = 5, seed: int = 0):
    """An ov.Model: a TensorIterator whose body is one LSTMCell / GRUCell / RNNCell step (what Model Optimizer
    emitted), outputs named as the ONNX node's; `extra_op` puts a Multiply in the body too."""
    import openvino as ov
    import openvino.opset8 as op8
    import openvino.opset13 as ops

    rng = np.random.default_rng(seed)
    G = GATES[kind]
    x_shape = [N, T, I] if time_axis == 1 else [T, N, I]
    X = ops.parameter(x_shape, np.float32, name="X")
    params = [X]
    states = []
    for s in (["H0", "C0"] if kind == "LSTM" else ["H0"]):
        if zero_state:
            states.append(ops.constant(np.zeros((N, H), np.float32)))
        else:
            p = ops.parameter([N, H], np.float32, name=s)
            params.append(p)
            states.append(p)
    slice_shape = list(x_shape)
    slice_shape[time_axis] = 1
    xi = ops.parameter(slice_shape, np.float32, name="xi")
    inner = [ops.parameter([N, H], np.float32, name=f"s{k}") for k in range(len(states))]
    x2 = ops.squeeze(xi, ops.constant(np.array([time_axis], np.int64)))
    if extra_op:
        x2 = ops.multiply(x2, ops.constant(np.float32(2.0)))
    W = ops.constant(rng.uniform(-.5, .5, (G * H, I)).astype(np.float32))
    R = ops.constant(rng.uniform(-.5, .5, (G * H, H)).astype(np.float32))
    B = ops.constant(rng.uniform(-.5, .5, ((4 if lbr else G) * H,)).astype(np.float32))
    if kind == "LSTM":
        cell = ops.lstm_cell(x2, inner[0], inner[1], W, R, B, H, clip=clip)
    elif kind == "GRU":
        cell = ops.gru_cell(x2, inner[0], W, R, B, H, clip=clip, linear_before_reset=lbr)
    else:
        cell = ops.rnn_cell(x2, inner[0], W, R, B, H, ["tanh"], [], [], clip)
    new = [cell.output(k) for k in range(len(states))]
    y = ops.unsqueeze(new[0], ops.constant(np.array([time_axis], np.int64)))
    results = [ops.result(v) for v in new] + [ops.result(y)]
    body = ov.Model(results, [xi, *inner], "body")
    ti = op8.tensor_iterator()
    ti.set_body(body)
    if reverse:
        ti.set_sliced_input(xi, X.output(0), -1, -1, 1, 0, time_axis)
    else:
        ti.set_sliced_input(xi, X.output(0), 0, 1, 1, -1, time_axis)
    for p, s, r in zip(inner, states, results):
        ti.set_merged_input(p, s.output(0), r.output(0))
    # (start, stride, part_size, end, axis), as OpenVINO's Python API orders them.
    outs = [ti.get_concatenated_slices(results[-1].output(0), *((-1, -1, 1, 0) if reverse else (0, 1, 1, -1)),
                                       time_axis)]
    outs += [ti.get_iter_value(r.output(0), -1) for r in results[:-1]]
    res = []
    for o, out_name in zip(outs, OUTPUTS[kind]):
        o.get_tensor().set_names({out_name})
        res.append(ops.result(o))
    return ov.Model(res, params, "ti")


def _init(rng, name: str, shape, scale: float = 0.5):
    return numpy_helper.from_array(rng.uniform(-scale, scale, size=shape).astype(np.float32), name)


def lstm_node(rng, name: str, x: str, I: int, H: int, *, prefix: str = "", bidirectional: bool = False,
              peepholes: bool = False, input_forget: bool = False, outputs=("Y", "Y_h", "Y_c")):
    """An LSTM node reading `x` [T, N, I] and its initializers (named `prefix` + W/R/B/P), for graphs built
    around it."""
    D = 2 if bidirectional else 1
    inits = [_init(rng, prefix + "W", [D, 4 * H, I]), _init(rng, prefix + "R", [D, 4 * H, H]),
             _init(rng, prefix + "B", [D, 8 * H])]
    inputs = [x, prefix + "W", prefix + "R", prefix + "B"]
    if peepholes:
        inits.append(_init(rng, prefix + "P", [D, 3 * H]))
        inputs += ["", "", "", prefix + "P"]
    attrs = {"hidden_size": H}
    if bidirectional:
        attrs["direction"] = "bidirectional"
    if input_forget:
        attrs["input_forget"] = 1
    return helper.make_node("LSTM", inputs, list(outputs), name=name, **attrs), inits


def conv_lstm(conv: str = "1d", *, peepholes: bool = True, input_forget: bool = True, bidirectional: bool = True,
              H: int = 6, seed: int = 0) -> onnx.ModelProto:
    """A convolutional front end and an LSTM, as speech and OCR models are: audio [N, 3, L] through Conv1d
    (kernel 3, 4 channels), or an image [N, 1, 4, L] through Conv2d (kernel 3x3, padding 1, 2 channels, the
    height folded into features); InstanceNormalization (outside rnnconv's own table); Relu; [L, N, F]; the LSTM;
    Y back to [L, N, D*H]; a MatMul head."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    if conv == "1d":
        x = helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["N", 3, "L"])
        inits.append(_init(rng, "conv_w", [4, 3, 3]))
        nodes.append(helper.make_node("Conv", ["audio", "conv_w"], ["conv"], pads=[1, 1], name="conv"))
        F = 4
        nodes += _norm(rng, inits, 4)
        nodes.append(helper.make_node("Relu", ["norm"], ["act"]))
        feats = "act"
    else:
        x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 4, "L"])
        inits.append(_init(rng, "conv_w", [2, 1, 3, 3]))
        nodes.append(helper.make_node("Conv", ["image", "conv_w"], ["conv"], pads=[1, 1, 1, 1], name="conv"))
        nodes += _norm(rng, inits, 2)
        nodes.append(helper.make_node("Relu", ["norm"], ["act"]))
        F = 8
        inits.append(numpy_helper.from_array(np.array([0, F, -1], np.int64), "fold"))
        nodes.append(helper.make_node("Reshape", ["act", "fold"], ["feats"]))
        feats = "feats"
    nodes.append(helper.make_node("Transpose", [feats], ["seq"], perm=[2, 0, 1]))
    node, lstm_inits = lstm_node(rng, "lstm", "seq", F, H, bidirectional=bidirectional, peepholes=peepholes,
                                 input_forget=input_forget)
    nodes.append(node)
    inits += lstm_inits
    D = 2 if bidirectional else 1
    nodes.append(helper.make_node("Transpose", ["Y"], ["y_t"], perm=[0, 2, 1, 3]))
    inits.append(numpy_helper.from_array(np.array([0, 0, D * H], np.int64), "flat"))
    nodes.append(helper.make_node("Reshape", ["y_t", "flat"], ["y_flat"]))
    inits.append(_init(rng, "head", [D * H, 5]))
    nodes.append(helper.make_node("MatMul", ["y_flat", "head"], ["logits"]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["L", "N", 5]),
               helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [D, "N", H])]
    graph = helper.make_graph(nodes, f"conv{conv}_lstm", [x], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _norm(rng, inits: list, channels: int) -> list:
    """InstanceNormalization after the Conv: an op outside rnnconv's own OpenVINO table (OpenVINO imports it)."""
    inits += [_init(rng, "norm_scale", [channels]), _init(rng, "norm_bias", [channels])]
    return [helper.make_node("InstanceNormalization", ["conv", "norm_scale", "norm_bias"], ["norm"], name="norm")]


def if_lstm(H: int = 5, I: int = 4, seed: int = 0) -> onnx.ModelProto:
    """An If choosing between an LSTM with peepholes and input_forget (then) and a plain bidirectional LSTM
    (else), both on the outer X; the else branch reads an outer initializer."""
    rng = np.random.default_rng(seed)
    then_node, then_inits = lstm_node(rng, "lstm_then", "X", I, H, prefix="then_", peepholes=True,
                                      input_forget=True, outputs=["then_Y", "then_Y_h", ""])
    then_out = helper.make_node("Squeeze", ["then_Y", "axis1"], ["then_y"])
    else_node, else_inits = lstm_node(rng, "lstm_else", "X", I, H, prefix="else_", bidirectional=True,
                                      outputs=["else_Y", "else_Y_h", ""])
    else_out = helper.make_node("ReduceSum", ["else_Y", "axis1"], ["else_y"], keepdims=0)
    axis = numpy_helper.from_array(np.array([1], np.int64), "axis1")
    out = helper.make_tensor_value_info
    then_graph = helper.make_graph([then_node, then_out], "then", [], [out("then_y", TensorProto.FLOAT, None)],
                                   then_inits)
    else_graph = helper.make_graph([else_node, else_out], "else", [], [out("else_y", TensorProto.FLOAT, None)],
                                   [i for i in else_inits if i.name != "else_W"])
    outer_w = next(i for i in else_inits if i.name == "else_W")
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph, name="if")
    graph = helper.make_graph([node], "if_lstm", [out("X", TensorProto.FLOAT, [5, 3, I]),
                                                  out("cond", TensorProto.BOOL, [])],
                              [out("y", TensorProto.FLOAT, [5, 3, H])], [axis, outer_w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def dynamic_quantize_lstm(H: int = 4, I: int = 3) -> onnx.ModelProto:
    """com.microsoft DynamicQuantizeLSTM as onnxruntime's quantize_dynamic writes it: int8 W [D, I, 4H] and R
    [D, H, 4H] with per-direction scales and zero points."""
    rng = np.random.default_rng(0)
    q = lambda name, shape: numpy_helper.from_array(rng.integers(-100, 100, shape).astype(np.int8), name)  # noqa
    inits = [q("W_q", [1, I, 4 * H]), q("R_q", [1, H, 4 * H]), _init(rng, "B", [1, 8 * H]),
             numpy_helper.from_array(np.array([0.01], np.float32), "W_scale"),
             numpy_helper.from_array(np.array([0], np.int8), "W_zp"),
             numpy_helper.from_array(np.array([0.02], np.float32), "R_scale"),
             numpy_helper.from_array(np.array([0], np.int8), "R_zp")]
    node = helper.make_node("DynamicQuantizeLSTM", ["X", "W_q", "R_q", "B", "", "", "", "", "W_scale", "W_zp",
                                                    "R_scale", "R_zp"], ["Y"], domain="com.microsoft",
                            hidden_size=H, name="lstm_quant")
    graph = helper.make_graph([node], "dq", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, 2, I])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [5, 1, 2, H])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid(
        "com.microsoft", 1)], ir_version=8)


# -- the fixtures -------------------------------------------------------------------------------------------

def fixture_cases() -> list[str]:
    """Every synthetic fixture and PyTorch export, as paths relative to fixtures/."""
    index = json.loads((FIXTURES / "index.json").read_text())["fixtures"]
    return [f["file"] for f in index] + [f"torch/{p.name}" for p in sorted(TORCH.glob("*.onnx"))]


def fixture_feeds(path: Path) -> dict[str, np.ndarray]:
    """A fixture's sample inputs (its .npz; bfloat16 stored as its bits), by graph input name."""
    import ml_dtypes

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    data = np.load(Path(path).with_suffix(".npz"))
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        value = data[vi.name]
        if vi.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            value = value.view(ml_dtypes.bfloat16)
        out[vi.name] = value
    return out


# -- inputs -------------------------------------------------------------------------------------------------

def feeds(model: onnx.ModelProto, *, seed: int = 1, dims: Optional[Mapping[str, int]] = None) -> dict[str, np.ndarray]:
    """Random values for every graph input that is not an initializer.

    Symbolic dims take their size from `dims` (T=4 and N=2 unless given; any other 2). int32 inputs are
    sequence lengths in [1, the recurrent node's sequence length]; int64 inputs lie in [0, 5] (indices); float
    inputs are uniform in [-1, 1] in their own element type."""
    sizes = {"T": 4, "N": 2, **(dims or {})}
    rng = np.random.default_rng(seed)
    out = {}
    inits = {t.name for t in model.graph.initializer}
    steps = _time_steps(model, sizes)
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [_size(d, sizes) for d in tt.shape.dim]
        if tt.elem_type == TensorProto.INT32:
            out[vi.name] = rng.integers(1, steps + 1, size=shape).astype(np.int32)
        elif tt.elem_type == TensorProto.INT64:
            out[vi.name] = rng.integers(0, 6, size=shape).astype(np.int64)
        else:
            out[vi.name] = rng.uniform(-1, 1, size=shape).astype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
    return out


def _size(dim, sizes: Mapping[str, int]) -> int:
    return dim.dim_value if dim.HasField("dim_value") else sizes.get(dim.dim_param, 2)


def _time_steps(model: onnx.ModelProto, sizes: Mapping[str, int]) -> int:
    """The sequence length of the first recurrent node whose X is a graph input, else sizes["T"]."""
    graph_inputs = {vi.name: vi for vi in model.graph.input}
    for node in model.graph.node:
        if node.op_type in GATES and node.input[0] in graph_inputs:
            layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
            dims = graph_inputs[node.input[0]].type.tensor_type.shape.dim
            if len(dims) == 3:
                return _size(dims[1 if layout else 0], sizes)
    return sizes["T"]


# -- runtimes -----------------------------------------------------------------------------------------------

_OPENVINO_CORE: list = []


def openvino_compile(model, *, shapes: Optional[Mapping[str, tuple]] = None):
    """The OpenVINO runtime's CPU plugin, f32 precision set explicitly, on an .xml (IR), an .onnx (OpenVINO's own
    ONNX import) or an ov.Model; `shapes` fixes dynamic input dims first."""
    import openvino as ov

    if not _OPENVINO_CORE:
        _OPENVINO_CORE.append(ov.Core())
    core = _OPENVINO_CORE[0]
    if isinstance(model, (str, os.PathLike)):
        model = core.read_model(str(model))
    if shapes:
        model.reshape({p: ov.PartialShape(list(shapes[p.get_any_name()])) for p in model.inputs})
    return core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})


def run_openvino(model, inputs: Mapping[str, np.ndarray], *, reshape: bool = False) -> dict[str, np.ndarray]:
    """Run a compiled model, or compile `model` (see openvino_compile; `reshape`: to the inputs' shapes) and run
    it; every output under each of its tensor names."""
    compiled = model if hasattr(model, "create_infer_request") else openvino_compile(
        model, shapes={k: v.shape for k, v in inputs.items()} if reshape else None)
    by_name = {n: p for p in compiled.inputs for n in p.get_names()}
    result = compiled.create_infer_request().infer({by_name[k]: v for k, v in inputs.items()})
    return {n: np.asarray(result[p]) for p in compiled.outputs for n in p.get_names()}


def run_engine(model, inputs: Mapping[str, np.ndarray], precision: str = "float64") -> dict[str, np.ndarray]:
    """rnnconv's engine on a ModelProto, path or onnx_ir Model: every output by name. What it computes is the
    product's answer, never an expectation: expectations come from `reference` (tests/oracle.py)."""
    from rnnconv import io
    from rnnconv.engine.onnx_graph import run_onnx

    return run_onnx(io.load(model), inputs, precision)


def whole_model(before, after, options=None, **whole):
    """The report of verification's runner on a plan of `before` against `after` (verification Models) alone,
    as a conversion's whole-model check runs it (`whole`: WholeModel's other fields)."""
    from rnnconv.verification.options import CheckOptions
    from rnnconv.verification.plan import CheckPlan, WholeModel
    from rnnconv.verification.report import Report
    from rnnconv.verification.runner import verify_plan

    plan = CheckPlan(whole=WholeModel(before, after, **whole))
    return verify_plan(plan, options or CheckOptions(), Report("test"))


# The openvino package is optional (README): what needs it skips without it, saying so.
OPENVINO = importlib.util.find_spec("openvino") is not None
NO_OPENVINO = "the openvino package is not installed (pip install -e '.[test]' installs it)"
needs_openvino = pytest.mark.skipif(not OPENVINO, reason=NO_OPENVINO)


def ir_outputs(xml: Path, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """An IR rnnconv wrote, run where a test holds it against onnxruntime: the OpenVINO runtime
    (`openvino_outputs`), or without the openvino package rnnconv's IR interpreter (its product run, the oracle
    still onnxruntime), so that the test keeps checking the numbers the IR computes."""
    if OPENVINO:
        return openvino_outputs(xml, inputs)
    from rnnconv.engine.ir_graph import run_ir

    return run_ir(xml, inputs)


def openvino_outputs(xml: Path, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The IR in the OpenVINO runtime through rnnconv's own runner (engine/openvino_runtime.py: CPU, f32
    precision, dynamic dims fixed to the inputs', bfloat16 passed as its bits), every output under each of its
    tensor names."""
    from rnnconv.engine import openvino_runtime

    return {n: o.value for o in openvino_runtime.run_files(xml, inputs, reshape=True) for n in o.names}


OPENVINO_TOL = 1e-4  # the OpenVINO runtime (CPU, f32) against onnxruntime, float32 models
LOW_PRECISION_TOL = {"float16": 2e-3, "bfloat16": 2e-2}  # at least this when either side is of that type


def assert_close(want: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], names=None, tol: float = 1e-5):
    """Each output (all of `want`'s, or `names`): the same shape, and equal to atol = rtol = tol (widened to
    LOW_PRECISION_TOL where `want` or `got` holds float16 or bfloat16)."""
    for name in want if names is None else names:
        a, b = np.asarray(got[name]), np.asarray(want[name])
        assert a.shape == b.shape, (name, a.shape, b.shape)
        tol_n = max(tol, LOW_PRECISION_TOL.get(a.dtype.name, 0.0), LOW_PRECISION_TOL.get(b.dtype.name, 0.0))
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=tol_n, rtol=tol_n, err_msg=name)


def to_openvino_and_check(folder: Path, model: onnx.ModelProto, *, shapes=((4, 2),), name: str = "m"):
    """`rnnconv to-openvino` on `model` (verified, the OpenVINO runtime among its checks), then the IR it wrote
    run in the OpenVINO runtime and in rnnconv's IR interpreter against the ONNX model in onnxruntime (`reference`:
    layout 1 re-expressed for it), to 1e-5, at each (T, N) of `shapes` (without openvino: the interpreter only).
    Returns (xml, report)."""
    from rnnconv.commands.to_openvino import to_openvino
    from rnnconv.engine.ir_graph import run_ir

    openvino = OPENVINO
    xml = Path(folder) / f"{name}.xml"
    report = to_openvino(model, xml).report
    assert report.ok and xml.exists() and xml.with_suffix(".bin").exists()
    assert not openvino or any("OpenVINO runtime" in c.engines for c in report.checks)
    compiled = openvino_compile(xml) if openvino else None
    names = [o.name for o in model.graph.output]
    for t, n in shapes:
        inputs = feeds(model, dims={"T": t, "N": n})
        want = reference(model, inputs)
        if compiled is not None:
            assert_close(want, run_openvino(compiled, inputs), names)
        assert_close(want, run_ir(xml, inputs), names)
    return xml, report


# -- the CLI ------------------------------------------------------------------------------------------------

def run_cli(argv) -> tuple[int, str, str]:
    """`rnnconv ARGV` in this process, through rnnconv.cli.main as the console script runs it:
    (exit code, stdout, stderr)."""
    from rnnconv.cli import main

    out, err = _io.StringIO(), _io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
        else:
            code = 0
    return code, out.getvalue(), err.getvalue()


# -- every IR a test writes ---------------------------------------------------------------------------------

def check_ir(graph, where: str = "IR") -> None:
    """The reader-side checks (`validate.validate`) and both ends of every edge agreeing (`edge_mismatches`)."""
    from rnnconv.dialects.openvino import validate

    validate.validate(graph, where)
    bad = validate.edge_mismatches(graph, where)
    assert not bad, "\n".join(bad[:5])


@pytest.fixture(autouse=True)
def _every_written_ir_is_checked(monkeypatch):
    from rnnconv.dialects.openvino import frontend, reader, writer

    write_to, save = writer.write_to, frontend.save

    def checked_write_to(graph, *args, **kwargs):
        check_ir(graph, f"IR {graph.name!r} as rnnconv writes it")
        return write_to(graph, *args, **kwargs)

    def checked_save(converted, xml_path, bin_path, **kwargs):
        save(converted, xml_path, bin_path, **kwargs)
        check_ir(reader.read(xml_path, bin_path), f"{xml_path} as OpenVINO saved it")

    monkeypatch.setattr(writer, "write_to", checked_write_to)
    monkeypatch.setattr(frontend, "save", checked_save)


# -- the sample CI's wheel and lowest-versions jobs run --------------------------------------------------------
# `-m sample`: the first test of every test file (slow and real-model ones aside), marked here at collection, so
# that a new file joins it without a word. The run fails when the sample leaves a module of rnnconv/ unimported
# (its workers, under pytest-xdist, each write what they imported to RNNCONV_SAMPLE_DIR).
SAMPLE = "sample"
# Modules that run only as a child process's main (`python -m`), and the module that starts them: imported, it
# counts for them.
CHILD_MAINS = {"rnnconv.engine.ort_worker": "rnnconv.engine.onnxruntime_runtime"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config, items):
    seen = set()
    for item in items:
        where = item.nodeid.split("::")[0]
        if where not in seen and "real" not in item.keywords and item.get_closest_marker("slow") is None:
            seen.add(where)
            item.add_marker(SAMPLE)
    # the slow ones first, longest first (`slow(seconds=N)`, on a quiet machine): pytest-xdist hands tests out in
    # this order, so none starts last on its own
    def order(item):
        slow = item.get_closest_marker("slow")
        return (slow is None, -(slow.kwargs.get("seconds", 0) if slow else 0))

    items.sort(key=order)


def _sampling(config) -> bool:
    return (config.getoption("markexpr") or "").strip() == SAMPLE


def pytest_configure(config):
    if _sampling(config) and not hasattr(config, "workerinput"):
        import tempfile

        os.environ["RNNCONV_SAMPLE_DIR"] = tempfile.mkdtemp(prefix="rnnconv-sample-")  # workers inherit it


def _imported() -> set:
    return {name for name in list(__import__("sys").modules) if name == "rnnconv" or name.startswith("rnnconv.")}


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if not _sampling(config) or "RNNCONV_SAMPLE_DIR" not in os.environ:
        return
    folder = Path(os.environ["RNNCONV_SAMPLE_DIR"])
    if hasattr(config, "workerinput"):
        (folder / f"{config.workerinput['workerid']}.txt").write_text("\n".join(sorted(_imported())))
        return
    import pkgutil
    import rnnconv

    imported = _imported()
    for part in folder.glob("*.txt"):
        imported |= set(part.read_text().split())
    modules = {m.name for m in pkgutil.walk_packages(rnnconv.__path__, "rnnconv.")
               if not m.name.rsplit(".", 1)[-1].startswith("__")}
    imported |= {child for child, parent in CHILD_MAINS.items() if parent in imported}
    missing = sorted(modules - imported)
    if missing:
        print(f"\nthe sample (-m {SAMPLE}) imports no test of {len(missing)} module(s) of rnnconv/: "
              + ", ".join(missing) + " (the first test of some test file must use each)")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
