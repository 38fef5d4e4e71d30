"""Inputs that exercise every recurrent node: at least 8 time steps and a batch of 2 wherever the model allows it,
the report saying how many steps and which batch each node ran (text and JSON), and where the model fixes them.
Each rule is held against an independent oracle: the model's own arithmetic written here (a strided Conv's output
width), onnxruntime running the source at the drawn sizes, the OpenVINO runtime on OpenVINO's own IR."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from tests.conftest import run_cli

H = 4
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _arr(rng, *shape):
    return rng.uniform(-0.5, 0.5, shape).astype(np.float32)


def conv_width(w: int, strides: int = 3) -> int:
    """The width after `strides` Convs of kernel 3, pad 1, stride 2 (onnx Operators.md Conv:
    floor((W + pad_begin + pad_end - kernel) / stride) + 1)."""
    for _ in range(strides):
        w = (w + 1 + 1 - 3) // 2 + 1
    return w


def crnn(path, batch=None, height=8):
    """An OCR recognizer in small: image [batch, 1, height, W] -> three stride-2 Convs (the width divided by 8) ->
    mean over height -> [W/8, batch, C] -> bidirectional LSTM. ddddocr's shape, W dynamic."""
    rng = np.random.default_rng(0)
    c = 3
    inits, nodes, x = [], [], "image"
    for k in range(3):
        inits += [nh.from_array(_arr(rng, c, 1 if k == 0 else c, 3, 3), f"cw{k}")]
        nodes.append(h.make_node("Conv", [x, f"cw{k}"], [f"c{k}"], pads=[1, 1, 1, 1], strides=[2, 2], name=f"conv{k}"))
        x = f"c{k}"
    inits += [nh.from_array(_arr(rng, 2, 4 * H, c), "W"), nh.from_array(_arr(rng, 2, 4 * H, H), "R")]
    nodes += [h.make_node("ReduceMean", [x], ["m"], axes=[2], keepdims=0),
              h.make_node("Transpose", ["m"], ["t"], perm=[2, 0, 1]),
              h.make_node("LSTM", ["t", "W", "R"], ["Y"], hidden_size=H, direction="bidirectional", name="lstm")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("image", TP.FLOAT, [batch or "N", 1, height, "width"])],
                     [h.make_tensor_value_info("Y", TP.FLOAT, [None, 2, None, H])], initializer=inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)
    return path


def _report(argv) -> tuple[dict, str]:
    code, out, err = run_cli([*argv, "--json"])
    assert code == 0, out + err
    return json.loads(out), out


def test_a_strided_front_end_gets_the_smallest_width_that_gives_8_steps(tmp_path):
    src = crnn(tmp_path / "ocr.onnx")
    report, _ = _report(["verify", src, src, "--engine", "onnxruntime"])
    (image,) = report["inputs"][0]
    width = image["shape"][3]
    # the model's own arithmetic: 8 steps, and one column fewer would give 7
    assert conv_width(width) == 8 and conv_width(width - 1) == 7, width
    # onnxruntime running the source at the drawn sizes: the LSTM's Y has 8 steps
    feeds = {"image": np.zeros(image["shape"], np.float32)}
    y = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert report["exercised"] == [{"node": "lstm", "op_type": "LSTM", "steps": y.shape[0], "batch": y.shape[2]}]
    assert y.shape[0] == 8 and y.shape[2] >= 2
    # every converting command draws alike, and says so in text
    code, out, err = run_cli(["upgrade", src, "-o", tmp_path / "up.onnx"])
    assert code == 0, out + err
    assert f"  exercised: lstm LSTM 8 steps, batch {y.shape[2]}\n" in out


def test_a_batch_the_model_fixes_at_1_is_said(tmp_path):
    src = crnn(tmp_path / "ocr.onnx", batch=1)
    report, out = _report(["upgrade", src, "-o", tmp_path / "up.onnx"])
    assert report["exercised"] == [{"node": "lstm", "op_type": "LSTM", "steps": 8, "batch": 1,
                                    "why": "the model fixes batch at 1"}]
    code, out, _ = run_cli(["upgrade", src, "-o", tmp_path / "up2.onnx"])
    assert "  exercised: lstm LSTM 8 steps, batch 1 (the model fixes batch at 1)" in out


def test_the_steps_a_user_gives_are_kept_and_said(tmp_path):
    src = crnn(tmp_path / "ocr.onnx")
    report, _ = _report(["verify", src, src, "--engine", "onnxruntime", "--dim", "width=16"])
    assert report["inputs"][0][0]["shape"][3] == 16
    assert report["exercised"][0]["steps"] == conv_width(16) == 2
    assert report["exercised"][0]["why"] == "time steps 2: the sizes given"


@pytest.mark.slow  # ~15 s: every size before 1 is tried first, each a failed run of the model
def test_a_model_that_runs_only_at_time_1_is_tried_there(tmp_path):
    """fixtures/settle_ifs' LSTMCell pattern (x [batch, 4, time], squeezed after a Conv): onnxruntime runs it at
    time 1 only; rnnconv tried 2, 3, 16 and 64 and exited 4."""
    src = str(FIXTURES / "settle_ifs" / "if_squeeze_lstmcell_legacy16.onnx")
    session = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    state = np.zeros((2, 3, 8), np.float32)
    session.run(None, {"x": np.zeros((3, 4, 1), np.float32), "state": state})
    with pytest.raises(Exception):
        session.run(None, {"x": np.zeros((3, 4, 2), np.float32), "state": state})
    report, _ = _report(["upgrade", src, "-o", tmp_path / "up.onnx"])
    assert {e["steps"] for e in report["exercised"]} == {1}
    assert all(e["why"] == "the model fixes time steps at 1" for e in report["exercised"])


def stacked_lstm(path, cut: str):
    """A 2-layer bidirectional LSTM called with (h0, c0) [layers * directions, batch, hidden], the states' first
    dim dynamic and unnamed, cut per layer as torch's exporter cuts them (Slice [2l, 2l + 2)) or by a Split."""
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    if cut == "split":
        inits.append(nh.from_array(np.array([2, 2], np.int64), "sp"))
        nodes += [h.make_node("Split", [s, "sp"], [f"{s[0]}_0", f"{s[0]}_1"], axis=0) for s in ("h0", "c0")]
    for layer in range(2):
        inits += [nh.from_array(_arr(rng, 2, 4 * H, 3 if layer == 0 else 2 * H), f"W{layer}"),
                  nh.from_array(_arr(rng, 2, 4 * H, H), f"R{layer}")]
        if cut == "slice":
            inits += [nh.from_array(np.array([v], np.int64), f"{k}{layer}")
                      for k, v in (("s", 2 * layer), ("e", 2 * layer + 2), ("a", 0))]
            nodes += [h.make_node("Slice", [s, f"s{layer}", f"e{layer}", f"a{layer}"], [f"{s[0]}_{layer}"])
                      for s in ("h0", "c0")]
        inits.append(nh.from_array(np.array([0, 0, -1], np.int64), f"shape{layer}"))
        nodes += [h.make_node("LSTM", [x, f"W{layer}", f"R{layer}", "", "", f"h_{layer}", f"c_{layer}"],
                              [f"Y{layer}", f"Yh{layer}"], hidden_size=H, direction="bidirectional",
                              name=f"lstm_{layer}"),
                  h.make_node("Transpose", [f"Y{layer}"], [f"Yt{layer}"], perm=[0, 2, 1, 3]),
                  h.make_node("Reshape", [f"Yt{layer}", f"shape{layer}"], [f"y{layer}"])]
        x = f"y{layer}"
    nodes.append(h.make_node("Concat", ["Yh0", "Yh1"], ["hn"], axis=0))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["T", "N", 3]),
                                  *(h.make_tensor_value_info(n, TP.FLOAT, [None, "N", H]) for n in ("h0", "c0"))],
                     [h.make_tensor_value_info("y1", TP.FLOAT, [None, None, 2 * H]),
                      h.make_tensor_value_info("hn", TP.FLOAT, [None, None, H])],
                     initializer=inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), path)
    return path


@pytest.mark.parametrize("cut", ["slice", "split"])
def test_a_state_split_per_layer_is_drawn_at_the_sum_of_its_pieces(cut, tmp_path):
    src = stacked_lstm(tmp_path / "m.onnx", cut)
    report, _ = _report(["verify", src, src, "--engine", "onnxruntime"])
    shapes = {i["name"]: i["shape"] for i in report["inputs"][0]}
    assert shapes["h0"][0] == shapes["c0"][0] == 2 * 2  # layers x directions, as torch's nn.LSTM takes it
    # onnxruntime runs the source at those sizes: both layers take their halves, and hand back 4 states
    feeds = {n: np.zeros(s, np.float32) for n, s in shapes.items()}
    hn = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(["hn"], feeds)[0]
    assert hn.shape[0] == 4
    assert [e["steps"] for e in report["exercised"]] == [8, 8]
    code, out, err = run_cli(["upgrade", src, "-o", tmp_path / "up.onnx"])
    assert code == 0 and "skipped" not in out and "inputs drawn with" not in out, out + err


def test_openvinos_ir_of_a_state_split_per_layer_converts_back(tmp_path):
    """OpenVINO's own IR of the Split model: every dim dynamic, the states cut by VariadicSplit; rnnconv drew the
    state at [16, 3, 4], both runtimes refused it, and from-openvino said "verification FAILED: model" (exit 1)."""
    ov = pytest.importorskip("openvino")
    src = stacked_lstm(tmp_path / "m.onnx", "split")
    xml = tmp_path / "m.xml"
    ov.save_model(ov.convert_model(str(src)), str(xml), compress_to_fp16=False)
    report, _ = _report(["from-openvino", xml, "-o", tmp_path / "back.onnx"])
    assert report["ok"] and not report["skipped"], report
    assert [e["steps"] for e in report["exercised"]] == [8, 8]
    # the OpenVINO runtime runs the IR at the size drawn: 4 states
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU")
    feeds = {"x": np.zeros((8, 3, 3), np.float32), "h0": np.zeros((4, 3, H), np.float32),
             "c0": np.zeros((4, 3, H), np.float32)}
    assert compiled(feeds)[compiled.output("hn")].shape[0] == 4


def masked_lstm(path):
    """x [N, T, F] -> LSTM (batch first, through Transposes), its output times a mask [N, T]: in ONNX the two T's are
    one symbol, in OpenVINO's IR two unnamed dims."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(_arr(rng, 1, 4 * H, 3), "W"), nh.from_array(_arr(rng, 1, 4 * H, H), "R"),
             nh.from_array(np.array([2], np.int64), "ax2"), nh.from_array(np.array([1], np.int64), "ax1")]
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             h.make_node("LSTM", ["xt", "W", "R"], ["Y"], hidden_size=H, name="lstm"),
             h.make_node("Squeeze", ["Y", "ax1"], ["ys"]),
             h.make_node("Transpose", ["ys"], ["yb"], perm=[1, 0, 2]),
             h.make_node("Unsqueeze", ["mask", "ax2"], ["m3"]),
             h.make_node("Mul", ["yb", "m3"], ["out"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["N", "T", 3]),
                                  h.make_tensor_value_info("mask", TP.FLOAT, ["N", "T"])],
                     [h.make_tensor_value_info("out", TP.FLOAT, ["N", "T", H])], initializer=inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), path)
    return path


def test_an_ir_without_dim_names_draws_tied_dims_alike(tmp_path):
    """OpenVINO's IR drops ONNX's dim names: rnnconv drew the mask's time apart from x's, its interpreter refused
    the broadcast ("operands could not be broadcast"), and the check fell back to every dim at 3 (3 steps)."""
    ov = pytest.importorskip("openvino")
    src = masked_lstm(tmp_path / "m.onnx")
    xml = tmp_path / "m.xml"
    ov.save_model(ov.convert_model(str(src)), str(xml), compress_to_fp16=False)
    report, out = _report(["from-openvino", xml, "-o", tmp_path / "back.onnx"])
    assert not any("inputs drawn with" in n for n in report["notes"]), report["notes"]
    assert report["exercised"][0]["steps"] == 8 and report["exercised"][0]["batch"] >= 2
    # `verify SRC IR`: the source's names hold the sizes; onnxruntime runs the source at them
    report, _ = _report(["verify", src, xml, "--engine", "onnxruntime", "--cand-engine", "openvino"])
    shapes = {i["name"]: i["shape"] for i in report["inputs"][0]}
    assert shapes["x"][:2] == shapes["mask"] and shapes["x"][1] == 8
    feeds = {n: np.ones(s, np.float32) for n, s in shapes.items()}
    assert ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feeds)[0].shape[1] == 8


def test_an_ir_dim_a_constant_broadcasts_against_is_read_from_the_weights(tmp_path):
    """x [T, N] times a window [10, 1] before an LSTM: N can only be 10. OpenVINO's IR has every dim dynamic and no
    names; the size is read from the constant, as from ONNX, and the OpenVINO runtime runs the IR there."""
    ov = pytest.importorskip("openvino")
    from rnnconv.verification.model import open_model
    from rnnconv.verification.specs import input_specs

    rng = np.random.default_rng(0)
    inits = [nh.from_array(_arr(rng, 1, 4 * H, 1), "W"), nh.from_array(_arr(rng, 1, 4 * H, H), "R"),
             nh.from_array(_arr(rng, 10, 1), "window"), nh.from_array(np.array([2], np.int64), "ax2")]
    nodes = [h.make_node("Unsqueeze", ["x", "ax2"], ["x3"]), h.make_node("Mul", ["x3", "window"], ["xw"]),
             h.make_node("LSTM", ["xw", "W", "R"], ["Y"], hidden_size=H, name="lstm")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["T", "N"])],
                     [h.make_tensor_value_info("Y", TP.FLOAT, ["T", 1, "N", H])], initializer=inits)
    src, xml = tmp_path / "m.onnx", tmp_path / "m.xml"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), src)
    ov.save_model(ov.convert_model(str(src)), str(xml), compress_to_fp16=False)
    spec = input_specs(open_model(xml))["x"]
    assert spec.sizes[1][0] == 10 and "a broadcast against a constant" in spec.sizes[1][1], spec
    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU")
    assert compiled({"x": np.ones((8, 10), np.float32)})[0].shape == (8, 1, 10, H)
