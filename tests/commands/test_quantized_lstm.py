"""com.microsoft DynamicQuantizeLSTM through every command, from the command line, on models onnxruntime's
quantize_dynamic writes here from small float LSTMs: forward and bidirectional, per_channel and reduce_range, one
inside an If body, one inside a model-local function (built from quantize_dynamic's tensors), one beside a float
LSTM. Every expected value is read with onnx or computed with onnxruntime and OpenVINO directly, never by rnnconv.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from rnnconv.dialects.mlas import mlas_saturates
from tests.conftest import run_cli
from tests.quantized_models import (
    DOMAIN,
    OP,
    constants,
    default_opset,
    domains,
    float_lstm,
    float_lstm_in_if,
    float_two_lstms,
    graphs,
    in_function,
    max_abs_diff,
    openvino_run,
    ort_run,
    quantize,
    quantized_nodes,
    weights_as_inputs,
)

# name: (float model, quantize_dynamic options, how rnnconv names the node: its path)
VARIANTS = {
    "forward": (lambda: float_lstm("forward"), {}, "lstm_quant"),
    "bidirectional": (lambda: float_lstm("bidirectional", seed=3), {}, "lstm_quant"),
    "per_channel": (lambda: float_lstm("bidirectional", seed=4), {"per_channel": True}, "lstm_quant"),
    "reduce_range": (lambda: float_lstm("forward", seed=5), {"reduce_range": True}, "lstm_quant"),
    "reduce_range_per_channel": (lambda: float_lstm("bidirectional", seed=6),
                                 {"reduce_range": True, "per_channel": True}, "lstm_quant"),
    "if_body": (float_lstm_in_if, {"extra_options": {"EnableSubgraph": True}}, "branch/then_branch/lstm_quant"),
    "mixed": (float_two_lstms, {"nodes_to_quantize": ["lstm"]}, "lstm_quant"),
}
PATHS = {**{k: v[2] for k, v in VARIANTS.items()}, "function": "function QLSTM/lstm_quant"}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("quantized")
    made = {name: quantize(build(), folder, name, **options) for name, (build, options, _) in VARIANTS.items()}
    made["function"] = in_function(made["forward"], folder / "function.onnx")
    return made


def feeds(path: Path, T: int = 7, N: int = 2, seed: int = 0) -> dict:
    """X [T, N, I] in [-1, 1] and, for the If model, the condition that takes the quantized branch."""
    model = onnx.load(str(path))
    x = next(i for i in model.graph.input if i.name == "X")
    size = x.type.tensor_type.shape.dim[2].dim_value
    out = {"X": np.random.default_rng(seed).uniform(-1, 1, (T, N, size)).astype(np.float32)}
    if any(i.name == "cond" for i in model.graph.input):
        out["cond"] = np.array(True)
    return out


def save_feeds(path: Path, folder: Path) -> tuple[Path, dict]:
    given = feeds(path)
    npz = folder / "inputs.npz"
    np.savez(npz, **given)
    return npz, given


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rnnconv: error: "), err
    return lines[0]


# -- inspect ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PATHS))
def test_inspect_has_a_row_per_quantized_lstm(models, name):
    model = onnx.load(str(models[name]))
    [(path, node, values)] = quantized_nodes(model)
    assert path == PATHS[name]
    code, out, err = run_cli(["inspect", models[name], "--json"])
    assert code == 0, err
    rows = [r for r in json.loads(out)["nodes"] if r["op"] == OP]
    assert [r["name"] for r in rows] == [path]
    (row,) = rows
    w, w_scale = values[node.input[1]], values[node.input[8]]
    assert (row["domain"], row["weights"], row["per_channel"]) == (DOMAIN, w.dtype.name, w_scale.ndim == 2)
    assert row["per_channel"] == VARIANTS.get(name, (None, {}))[1].get("per_channel", False)
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert row["hidden_size"] == attributes["hidden_size"] and row["input_size"] == w.shape[1]
    assert row["direction"] == attributes.get("direction", b"forward").decode()
    floats = [n.name for _, g, _ in graphs(model) for n in g.node if n.op_type == "LSTM"]
    assert sorted(r["name"] for r in json.loads(out)["nodes"] if r["op"] == "LSTM") == sorted(floats)
    code, out, _ = run_cli(["inspect", models[name]])
    assert code == 0 and re.search(rf"^{re.escape(path)}\s+{OP}-1\s", out, re.M), out
    scaled = "gate row" if w_scale.ndim == 2 else "direction"
    assert f"\n  {path}: {DOMAIN}, {w.dtype.name} weights, one scale per {scaled}\n" in out, out


# -- check -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["forward", "if_body", "function"])
def test_check_onnxruntime_and_onnx_reference(models, name):
    from onnx.reference import ReferenceEvaluator

    given = feeds(models[name])
    ort_run(models[name], given)  # onnxruntime runs it: nothing to report
    code, out, err = run_cli(["check", models[name], "--target", "onnxruntime", "--json"])
    assert code == 0 and json.loads(out)["findings"] == [], out + err
    with pytest.raises(Exception):  # onnx's reference has no com.microsoft op: it refuses the model
        ReferenceEvaluator(str(models[name])).run(None, given)
    code, out, err = run_cli(["check", models[name], "--target", "onnx-reference", "--json"])
    assert code == 1, err
    (finding,) = json.loads(out)["findings"]
    assert (finding["node"], finding["op"], finding["effect"]) == (PATHS[name], OP, "refuses")
    assert "rnnconv dequantize" in finding["fix"]


@pytest.mark.parametrize("name", ["forward", "bidirectional", "per_channel", "reduce_range"])
def test_check_openvino_reports_the_difference_it_measured(models, name):
    pytest.importorskip("openvino")
    from rnnconv import io as rnnconv_io
    from rnnconv.verification.checks import CheckOptions, input_sets
    from rnnconv.verification.model import onnx_model
    from rnnconv.verification.specs import input_specs

    code, out, err = run_cli(["check", models[name], "--target", "openvino", "--json"])
    assert code == 1, err
    (finding,) = json.loads(out)["findings"]
    assert (finding["node"], finding["effect"]) == (PATHS[name], "computes differently")
    # The node alone: these models are that node already (X -> Y, Y_h, Y_c). Its random inputs are drawn as every
    # rnnconv check draws them (seed 0): the draw is shared, the runs and the difference are not.
    (given, _), = input_sets(input_specs(onnx_model(rnnconv_io.load(models[name]))), CheckOptions())
    measured = max_abs_diff(openvino_run(models[name], given), ort_run(models[name], given))
    assert measured > 1e-4  # the finding is true: OpenVINO's numbers are not onnxruntime's
    print(f"check --target openvino {name}: max |OpenVINO - onnxruntime| {measured:.4g} on the node alone")
    assert finding["max_abs_diff"] == pytest.approx(measured, abs=1e-6)
    assert f"max |diff| {measured:.3g}" in finding["problem"]
    # and the IR to-openvino writes, as onnxruntime computes it (test_to_openvino_quantized: independently)
    ours = re.search(r"rnnconv to-openvino's IR: max \|diff\| ([0-9.e+-]+)\)", finding["problem"])
    assert ours is not None and float(ours.group(1)) <= (2e-2 if mlas_saturates() else 1e-5), finding["problem"]
    whole = feeds(models[name])
    assert max_abs_diff(openvino_run(models[name], whole), ort_run(models[name], whole)) > 1e-4


# -- upgrade and downgrade ---------------------------------------------------------------------------------------------

def quantized_tensors(model: onnx.ModelProto) -> list:
    """Every DynamicQuantizeLSTM with the constants it reads, by path: (path, node bytes, {input: array})."""
    return [(path, node.SerializeToString(), {k: values[k] for k in node.input if k in values})
            for path, node, values in quantized_nodes(model)]


@pytest.mark.parametrize("command", ["upgrade", "downgrade"])
@pytest.mark.parametrize("name", ["forward", "bidirectional", "per_channel", "if_body", "function", "mixed"])
def test_opset_moves_keep_the_quantized_node(models, name, command, tmp_path):
    source = onnx.load(str(models[name]))
    out = tmp_path / "out.onnx"
    argv = [command, models[name], "-o", out] + (["--opset", "11"] if command == "downgrade" else [])
    code, _, err = run_cli([*argv])
    assert code == 0, err
    result = onnx.load(str(out))
    onnx.checker.check_model(result, full_check=True)
    opset = default_opset(result)
    assert opset == 11 if command == "downgrade" else opset > default_opset(source)
    before, after = quantized_tensors(source), quantized_tensors(result)
    assert [(p, n) for p, n, _ in after] == [(p, n) for p, n, _ in before]  # the node, byte for byte
    for (_, _, want), (_, _, got) in zip(before, after):
        assert want.keys() == got.keys() and all(np.array_equal(want[k], got[k]) for k in want)
    imports = [{o.domain: o.version for o in m.opset_import} for m in (result, *result.functions)]
    assert all(i.get(DOMAIN) == 1 for i in imports if DOMAIN in i) and imports[0][DOMAIN] == 1
    given = feeds(models[name])
    want, got = ort_run(models[name], given), ort_run(out, given)
    assert want.keys() == got.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_checks_draw_sequence_and_batch_of_different_sizes(models, tmp_path):
    """X [T, N, I] read by a DynamicQuantizeLSTM only: its axes have roles, drawn at different sizes, so that a
    conversion that swapped them would show."""
    code, text, err = run_cli(["upgrade", models["forward"], "-o", tmp_path / "out.onnx", "--json"])
    assert code == 0, err
    shapes = {tuple(o["shape"]) for c in json.loads(text)["checks"] for o in c["outputs"] if o["name"] == "Y"}
    ((T, _, N, _),) = shapes
    assert T != N


# -- layout ------------------------------------------------------------------------------------------------------------

def test_layout_1_refuses_the_quantized_node(models, tmp_path):
    out = tmp_path / "out.onnx"
    code, _, err = run_cli(["layout", models["forward"], "-o", out, "--to", "1"])
    assert code == 3 and not out.exists()
    line = one_error_line(err)
    assert "'lstm_quant'" in line and "rnnconv dequantize" in line


def test_layout_1_on_both_kinds_names_the_quantized_node_and_the_float_one(models, tmp_path):
    code, _, err = run_cli(["layout", models["mixed"], "-o", tmp_path / "out.onnx", "--to", "1"])
    assert code == 3
    line = one_error_line(err)
    assert "'lstm_quant'" in line and "lstm_float" in line and "--node lstm_float" in line


@pytest.mark.parametrize("name", ["forward", "mixed"])
def test_layout_0_has_nothing_to_do(models, name, tmp_path):
    out = tmp_path / "out.onnx"
    code, text, err = run_cli(["layout", models[name], "-o", out, "--to", "0"])
    assert code == 0 and "rewrote" not in text, text + err
    result = onnx.load(str(out))
    assert quantized_tensors(result)[0][:2] == quantized_tensors(onnx.load(str(models[name])))[0][:2]
    given = feeds(models[name])
    want, got = ort_run(models[name], given), ort_run(out, given)
    assert all(np.array_equal(got[k], want[k]) for k in want)


def test_layout_1_of_the_float_node_beside_a_quantized_one(models, tmp_path):
    out, back = tmp_path / "out.onnx", tmp_path / "back.onnx"
    code, text, err = run_cli(["layout", models["mixed"], "-o", out, "--to", "1", "--node", "lstm_float"])
    assert code == 0, err
    assert "rewrote lstm_float: layout 0 -> 1" in text and "rewrote lstm_quant" not in text
    result = onnx.load(str(out))
    onnx.checker.check_model(result, full_check=True)
    layouts = {n.name: {a.name: a.i for a in n.attribute}.get("layout", 0) for n in result.graph.node
               if n.op_type == "LSTM"}
    assert layouts == {"lstm_float": 1}
    assert quantized_tensors(result)[0][:2] == quantized_tensors(onnx.load(str(models["mixed"])))[0][:2]
    # onnxruntime refuses layout 1: back to 0, and then it must compute what it computed on the source
    code, _, err = run_cli(["layout", out, "-o", back, "--to", "0"])
    assert code == 0, err
    given = feeds(models["mixed"])
    want, got = ort_run(models["mixed"], given), ort_run(back, given)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-6, err_msg=k)


# -- dequantize --------------------------------------------------------------------------------------------------------

def float_weights(values: dict, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray]:
    """ONNX LSTM's W [D, 4H, I] and R [D, 4H, H] from the quantized ones, as onnxruntime's contrib op docs define
    them: (q - zero_point) * scale, per direction or per gate row, transposed."""
    out = []
    for q, scale, zero in ((1, 8, 9), (2, 10, 11)):
        weights = values[node.input[q]].astype(np.int32)  # [D, I or H, 4H]
        scale, zero = values[node.input[scale]], values[node.input[zero]].astype(np.int32)
        D = weights.shape[0]
        scale = scale.reshape(D, 1, -1)
        zero = zero.reshape(D, -1)[:, :1].reshape(D, 1, 1)  # onnxruntime's kernel reads one zero point per direction
        out.append(((weights - zero).astype(np.float32) * scale).transpose(0, 2, 1))
    return out[0], out[1]


@pytest.mark.parametrize("name", ["forward", "bidirectional", "per_channel", "reduce_range", "reduce_range_per_channel",
                                  "if_body", "function", "mixed"])
def test_dequantize(models, name, tmp_path):
    source = onnx.load(str(models[name]))
    npz, given = save_feeds(models[name], tmp_path)
    out = tmp_path / "out.onnx"
    code, text, err = run_cli(["dequantize", models[name], "-o", out, "--inputs", npz, "--json"])
    assert code == 0, text + err
    report = json.loads(text)
    result = onnx.load(str(out))
    onnx.checker.check_model(result, full_check=True)
    assert DOMAIN not in domains(result)
    assert all(o.domain != DOMAIN for m in (result, *result.functions) for o in m.opset_import)
    # Each quantized node is now an LSTM of its name, in its place, with the weights the op's definition gives.
    lstms = {prefix + n.name: (n, constants(g, t)) for prefix, g, t in graphs(result) for n in g.node
             if n.op_type == "LSTM"}
    for path, node, values in quantized_nodes(source):
        lstm, held = lstms[path]
        W, R = float_weights(values, node)
        np.testing.assert_array_equal(held[lstm.input[1]], W)
        np.testing.assert_array_equal(held[lstm.input[2]], R)
        np.testing.assert_array_equal(held[lstm.input[3]], values[node.input[3]])  # B as it was
    # The report's onnxruntime row is onnxruntime's quantized run against its run of the float model. rnnconv's
    # sessions feed weights at run time, and onnxruntime computes a float LSTM so a few float32 units in the last
    # place away from one whose weights it prepacked (as here): 1e-7 measured, hence 1e-6.
    measured = max_abs_diff(ort_run(models[name], given), ort_run(out, given))
    (row,) = [c for c in report["checks"] if c["subject"] == "model" and c["engines"] == "onnxruntime"]
    assert row["max_abs"] == pytest.approx(measured, rel=0, abs=1e-6)
    assert measured > 0  # an approximation: never exact
    print(f"dequantize {name}: max |onnxruntime(quantized) - onnxruntime(float)| {measured:.4g}")  # pytest -s


def test_dequantize_keeps_the_domain_another_node_uses(models, tmp_path):
    """com.microsoft stays imported while another of its ops is left in the model (a Gelu after the LSTM)."""
    from onnx import helper

    model = onnx.load(str(models["forward"]))
    model.graph.node.append(helper.make_node("Gelu", ["Y_h"], ["gelu"], domain=DOMAIN, name="gelu"))
    model.graph.output.append(helper.make_tensor_value_info("gelu", onnx.TensorProto.FLOAT, [1, "N", 8]))
    source, out = tmp_path / "gelu.onnx", tmp_path / "out.onnx"
    onnx.save(model, str(source))
    code, text, err = run_cli(["dequantize", source, "-o", out])
    assert code == 0, text + err
    result = onnx.load(str(out))
    onnx.checker.check_model(result, full_check=True)
    assert [(n.domain, n.op_type) for n in result.graph.node if n.domain] == [(DOMAIN, "Gelu")]
    assert {o.domain: o.version for o in result.opset_import}[DOMAIN] == 1
    ort_run(out, feeds(source))


def test_dequantize_outside_tolerance_writes_nothing(models, tmp_path):
    out = tmp_path / "out.onnx"
    code, text, err = run_cli(["dequantize", models["forward"], "-o", out, "--atol", "1e-6", "--rtol", "0"])
    assert code == 1, text + err
    assert "FAIL model [onnxruntime]" in err and not out.exists() and list(tmp_path.iterdir()) == []
    assert "LSTM is an approximation" in text + err  # why it may fail is in the failure's report


def test_dequantize_without_a_quantized_lstm(models, tmp_path):
    code, _, err = run_cli(["dequantize", models["forward"].with_suffix(".float.onnx"), "-o", tmp_path / "out.onnx"])
    assert code == 3
    line = one_error_line(err)
    assert "nothing to dequantize" in line and "lstm (LSTM)" in line and "use the model as it is" in line


def test_dequantize_refuses_weights_given_at_run_time(models, tmp_path):
    model = weights_as_inputs(models["forward"], tmp_path / "inputs.onnx")
    code, _, err = run_cli(["dequantize", model, "-o", tmp_path / "out.onnx"])
    assert code == 3 and not (tmp_path / "out.onnx").exists()
    line = one_error_line(err)
    assert "'lstm_quant'" in line and "computed at run time" in line


# -- upgrade's default opset on a QDQ model; node names through opset steps ------------------------------------------

def ort_lacks(op: str, opset: int) -> bool:
    """Whether onnxruntime refuses a one-node model of `op` (QuantizeLinear / DequantizeLinear) at `opset`."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    kind = {"QuantizeLinear": (TensorProto.FLOAT, TensorProto.UINT8),
            "DequantizeLinear": (TensorProto.UINT8, TensorProto.FLOAT)}[op]
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "scale", "zero"], ["y"])], "g",
        [helper.make_tensor_value_info("x", kind[0], [3])], [helper.make_tensor_value_info("y", kind[1], [3])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "scale"), numpy_helper.from_array(np.array(3, np.uint8),
                                                                                             "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return False
    except Exception as err:
        assert "Could not find an implementation" in str(err), err
        return True


def test_upgrade_default_steps_below_an_op_version_onnxruntime_lacks(tmp_path):
    from rnnconv.engine.onnxruntime_runtime import newest_common_opset  # the documented default
    from tests.quantized_models import quantize_qdq

    newest = newest_common_opset()
    expected = next(o for o in range(newest, 13, -1) if not any(ort_lacks(op, o) for op in ("QuantizeLinear",
                                                                                               "DequantizeLinear")))
    if expected == newest:
        pytest.skip(f"onnxruntime has QuantizeLinear / DequantizeLinear kernels at opset {newest}: no step down")
    source = quantize_qdq(float_lstm("forward", head=True), tmp_path, "qdq")
    out = tmp_path / "out.onnx"
    code, text, err = run_cli(["upgrade", source, "-o", out, "--json"])
    assert code == 0, text + err
    result = onnx.load(str(out))
    onnx.checker.check_model(result, full_check=True)
    assert default_opset(result) == expected
    notes = [n for n in json.loads(text)["notes"] if n.startswith("not opset")]
    assert notes and notes[0].startswith(f"not opset {newest}: onnxruntime has no kernel for ")
    assert re.search(rf"(Quantize|Dequantize)Linear-{newest}\b", notes[0]) and f"opset {expected}" in notes[-1]
    given = feeds(source)
    want, got = ort_run(source, given), ort_run(out, given)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def named_export() -> onnx.ModelProto:
    """A model whose nodes carry names as exporters write them (`/rnn/LSTM`, `/Squeeze`...), at opset 11, with ops
    whose steps up and down go through onnx's adapters and rnnconv's own table."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(7)
    I, H = 4, 5
    tensors = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(np.float32), k)
               for k, s in (("W", (1, 4 * H, I)), ("R", (1, 4 * H, H)), ("fc.weight", (3, H)), ("fc.bias", (3,)))]
    nodes = [helper.make_node("LSTM", ["X", "W", "R"], ["Y", "Y_h"], hidden_size=H, name="/rnn/LSTM"),
             helper.make_node("Squeeze", ["Y"], ["y"], axes=[1], name="/rnn/Squeeze"),
             helper.make_node("ReduceMean", ["y"], ["pooled"], axes=[0], keepdims=0, name="/ReduceMean"),
             helper.make_node("Gemm", ["pooled", "fc.weight", "fc.bias"], ["logits"], transB=1, name="/fc/Gemm"),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="/Softmax"),
             helper.make_node("Unsqueeze", ["probs"], ["out"], axes=[0], name="/Unsqueeze")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", I])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "N", 3])], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_node_names_survive_opset_steps(tmp_path):
    source, up, down = tmp_path / "export.onnx", tmp_path / "up.onnx", tmp_path / "down.onnx"
    onnx.save(named_export(), str(source))
    names = [n.name for n in onnx.load(str(source)).graph.node]
    code, _, err = run_cli(["upgrade", source, "-o", up])
    assert code == 0, err
    code, _, err = run_cli(["downgrade", up, "-o", down, "--opset", "11"])
    assert code == 0, err
    for path in (up, down):
        got = [n.name for n in onnx.load(str(path)).graph.node]
        assert all(got.count(name) == 1 for name in names), got  # each under its own name, once
        renamed = [g for g in got if g not in names and any(g.startswith(name + "_") for name in names)]
        assert not renamed, renamed  # no `/rnn/Squeeze_1_3`


def test_the_domain_import_quantize_dynamic_forgets_in_a_body_is_added(tmp_path):
    """quantize_dynamic writes a DynamicQuantizeLSTM into an If body without importing com.microsoft: onnx.checker
    refuses that, onnxruntime runs it; rnnconv reads it with a warning and writes the import."""
    build, options, _ = VARIANTS["if_body"]
    path = quantize(build(), tmp_path, "raw", as_written=True, **options)
    assert DOMAIN not in {o.domain for o in onnx.load(str(path)).opset_import}
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(onnx.load(str(path)))
    out = tmp_path / "up.onnx"
    code, _, err = run_cli(["upgrade", path, "-o", out])
    assert code == 0, err
    assert "no import of it" in err and "com.microsoft version 1" in err
    result = onnx.load(str(out))
    onnx.checker.check_model(result, full_check=True)
    assert {o.domain: o.version for o in result.opset_import}[DOMAIN] == 1
    given = feeds(path)
    want, got = ort_run(path, given), ort_run(out, given)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
