"""Quantized recurrent models made in the tests, from small float LSTMs, by onnxruntime's own quantizers
(quantize_dynamic: com.microsoft DynamicQuantizeLSTM; quantize_static in QDQ format: DequantizeLinear), and what
the tests read back from them with onnx alone (never with rnnconv)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DOMAIN, OP = "com.microsoft", "DynamicQuantizeLSTM"
F32 = np.float32


def float_lstm(direction: str = "forward", *, I: int = 4, H: int = 8, seed: int = 0, opset: int = 14,
               head: bool = False, name: str = "lstm") -> onnx.ModelProto:
    """X [T, N, I] -> one LSTM-`opset` (Y, Y_h, Y_c); `head`: Y_h also goes through a MatMul to `logits` (which
    quantize_dynamic turns into DynamicQuantizeLinear + MatMulInteger)."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    weights = [numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(F32), key)
               for key, shape in (("W", (D, 4 * H, I)), ("R", (D, 4 * H, H)), ("B", (D, 8 * H)))]
    nodes = [helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=H,
                              direction=direction, name=name)]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["T", D, "N", H]),
               helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [D, "N", H]),
               helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, [D, "N", H])]
    if head:
        weights.append(numpy_helper.from_array((rng.standard_normal((H, 5)) * 0.5).astype(F32), "head_w"))
        nodes.append(helper.make_node("MatMul", ["Y_h", "head_w"], ["logits"], name="head"))
        outputs.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, [D, "N", 5]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", I])],
                              outputs, initializer=weights)
    return checked(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8))


def float_lstm_in_if(*, H: int = 6, seed: int = 1) -> onnx.ModelProto:
    """If `cond`: an LSTM (its weights in the branch, where quantize_dynamic looks for them) else the mean of X over
    time (I = H, so that both branches give [1, N, H])."""
    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(F32), key)
               for key, shape in (("W", (1, 4 * H, H)), ("R", (1, 4 * H, H)), ("B", (1, 8 * H)))]
    dims = [1, "N", H]
    then = helper.make_graph([helper.make_node("LSTM", ["X", "W", "R", "B"], ["", "Y_h_then"], hidden_size=H,
                                               name="lstm")], "then", [],
                             [helper.make_tensor_value_info("Y_h_then", TensorProto.FLOAT, dims)], initializer=weights)
    other = helper.make_graph([helper.make_node("ReduceMean", ["X"], ["Y_h_else"], axes=[0], name="mean")], "else",
                              [], [helper.make_tensor_value_info("Y_h_else", TensorProto.FLOAT, dims)])
    branch = helper.make_node("If", ["cond"], ["Y_h"], then_branch=then, else_branch=other, name="branch")
    graph = helper.make_graph([branch], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", H]),
                                              helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, dims)])
    return checked(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8))


def float_two_lstms(*, I: int = 4, H: int = 8, seed: int = 2) -> onnx.ModelProto:
    """X -> LSTM `lstm_float` -> Squeeze -> LSTM `lstm`: quantize_dynamic told to quantize `lstm` only."""
    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(F32), key)
               for key, shape in (("W1", (1, 4 * H, I)), ("R1", (1, 4 * H, H)), ("B1", (1, 8 * H)),
                                  ("W", (1, 4 * H, H)), ("R", (1, 4 * H, H)), ("B", (1, 8 * H)),
                                  )] + [numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = [helper.make_node("LSTM", ["X", "W1", "R1", "B1"], ["Y1"], hidden_size=H, name="lstm_float"),
             helper.make_node("Squeeze", ["Y1", "axis1"], ["X2"], name="squeeze"),
             helper.make_node("LSTM", ["X2", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H, name="lstm")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", I])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["T", 1, "N", H]),
                               helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, "N", H])],
                              initializer=weights)
    return checked(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8))


def checked(model: onnx.ModelProto) -> onnx.ModelProto:
    onnx.checker.check_model(model, full_check=True)
    return model


def quantize(model: onnx.ModelProto, folder: Path, stem: str, *, as_written: bool = False, **options) -> Path:
    """quantize_dynamic of `model`, written to folder/stem.onnx (the float source beside it, stem.float.onnx);
    the domain import it forgets in subgraphs added, unless `as_written`."""
    from onnxruntime.quantization import quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # quantize_dynamic logs a warning per model
    source, out = folder / f"{stem}.float.onnx", folder / f"{stem}.onnx"
    onnx.save(model, str(source))
    quantize_dynamic(str(source), str(out), **options)
    written = onnx.load(str(out))
    if not as_written and not any(o.domain == DOMAIN for o in written.opset_import):
        # With EnableSubgraph, quantize_dynamic puts the op in the body without importing its domain (onnxruntime
        # runs that, onnx.checker refuses it): the import it forgot.
        written.opset_import.append(helper.make_opsetid(DOMAIN, 1))
        onnx.save(checked(written), str(out))
    return out


def in_function(quantized: Path, out: Path) -> Path:
    """The DynamicQuantizeLSTM of `quantized` (a forward model) moved into a model-local function `local.QLSTM`,
    its tensors as Constant nodes there (a function holds no initializers); the graph calls it."""
    source = onnx.load(str(quantized))
    (node,) = [n for n in source.graph.node if n.op_type == OP]
    tensors = {t.name: t for t in source.graph.initializer}
    constants = [helper.make_node("Constant", [], [name], value=tensors[name], name=f"{name}_constant")
                 for name in node.input if name in tensors]
    function = helper.make_function("local", "QLSTM", ["X"], list(node.output), [*constants, node],
                                    [helper.make_opsetid("", 14), helper.make_opsetid(DOMAIN, 1)])
    call = helper.make_node("QLSTM", ["X"], list(node.output), domain="local", name="call")
    graph = helper.make_graph([call], "g", list(source.graph.input), list(source.graph.output))
    model = helper.make_model(graph, functions=[function], ir_version=8,
                              opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("local", 1),
                                             helper.make_opsetid(DOMAIN, 1)])
    onnx.save(checked(model), str(out))
    return out


def weights_as_inputs(quantized: Path, out: Path) -> Path:
    """`quantized` with its DynamicQuantizeLSTM's W an input of the graph rather than an initializer."""
    model = onnx.load(str(quantized))
    (node,) = [n for n in model.graph.node if n.op_type == OP]
    (w,) = [t for t in model.graph.initializer if t.name == node.input[1]]
    model.graph.initializer.remove(w)
    model.graph.input.append(helper.make_tensor_value_info(w.name, w.data_type, list(w.dims)))
    onnx.save(checked(model), str(out))
    return out


# -- read back with onnx ------------------------------------------------------------------------------------------

def graphs(model: onnx.ModelProto):
    """(path prefix, graph or function, {tensor name: array} it holds) for the main graph, every If/Loop/Scan body
    and every model-local function: rnnconv's paths ("branch/then_branch/", "function QLSTM/")."""
    def walk(graph, prefix):
        tensors = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        yield prefix, graph, tensors
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from walk(attr.g, f"{prefix}{node.name}/{attr.name}/")

    yield from walk(model.graph, "")
    for function in model.functions:
        yield f"function {function.name}/", function, {}


def constants(graph, tensors: dict) -> dict:
    """Every constant a node of `graph` can read: its initializers and its Constant nodes' values."""
    found = dict(tensors)
    for node in graph.node:
        if node.op_type == "Constant":
            found[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return found


def quantized_nodes(model: onnx.ModelProto) -> list[tuple[str, onnx.NodeProto, dict]]:
    """(path, node, the constants its graph holds) of every DynamicQuantizeLSTM."""
    out = []
    for prefix, graph, tensors in graphs(model):
        values = constants(graph, tensors)
        out += [(prefix + node.name, node, values) for node in graph.node
                if node.domain == DOMAIN and node.op_type == OP]
    return out


def domains(model: onnx.ModelProto) -> set[str]:
    return {node.domain for _, graph, _ in graphs(model) for node in graph.node}


def default_opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


# -- runtimes, used directly -------------------------------------------------------------------------------------

def ort_run(path, feeds: dict, threads: int = 1) -> dict:
    """onnxruntime on CPU. One intra-op thread: its DynamicQuantizeLSTM quantizes the hidden state per thread's
    rows, so the thread count changes its numbers (rnnconv's sessions of such models use 1 as well)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return dict(zip([o.name for o in session.get_outputs()],
                    session.run(None, {k: v for k, v in feeds.items() if k in names})))


def openvino_run(path, feeds: dict) -> dict:
    """OpenVINO's own ONNX import, CPU, f32 inference precision (what rnnconv's openvino engine asks for)."""
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    names = {p.any_name for p in compiled.inputs}
    result = compiled({k: v for k, v in feeds.items() if k in names})
    return {o.any_name: np.asarray(result[o]) for o in compiled.outputs}


def max_abs_diff(a: dict, b: dict) -> float:
    """The largest |a - b| over the outputs both have, in float64."""
    return max(float(np.max(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64)), initial=0))
               for k in a if k in b)


def quantize_qdq(model: onnx.ModelProto, folder: Path, stem: str) -> Path:
    """quantize_static in QDQ format (QuantizeLinear / DequantizeLinear pairs around the MatMul head), calibrated on
    a few random inputs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            size = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
            self.sets = iter([{"X": rng.uniform(-1, 1, (5, 2, size)).astype(F32)} for _ in range(4)])

        def get_next(self):
            return next(self.sets, None)

    logging.getLogger().setLevel(logging.ERROR)
    source, out = folder / f"{stem}.float.onnx", folder / f"{stem}.onnx"
    onnx.save(model, str(source))
    quantize_static(str(source), str(out), Reader(), quant_format=QuantFormat.QDQ)
    return out
