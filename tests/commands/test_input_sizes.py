"""Inputs a model can take: dims declared -1 or unset are dynamic, other negative dims are refused naming the
input, a huge static dim is refused cleanly, and dynamic sizes the model fixes (the feature size its weights
read, a state's hidden size) are read from the model, ONNX and OpenVINO IR (the PyTorch frontend's) alike.
Outputs are held against onnxruntime and the OpenVINO runtime on the same inputs."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from tests.conftest import OPENVINO_TOL, assert_close, ir_outputs, run_cli, run_onnxruntime

H, C = 5, 4


def _arr(rng, *shape):
    return rng.uniform(-0.5, 0.5, shape).astype(np.float32)


def crnn(path, x_dims=(-1, 3, None, None), out_dims=(None, -1, H)):
    """The shape of a paddle2onnx OCR recognizer, small: x [-1, 3, ?, ?] -> Conv -> Relu -> mean over height ->
    [W, N, C] -> GRU-7 -> Y squeezed. Opset 11."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(_arr(rng, C, 3, 3, 3), "cw"), nh.from_array(_arr(rng, C), "cb"),
             nh.from_array(_arr(rng, 1, 3 * H, C), "W"), nh.from_array(_arr(rng, 1, 3 * H, H), "R")]
    nodes = [h.make_node("Conv", ["x", "cw", "cb"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("Relu", ["c"], ["r"]),
             h.make_node("ReduceMean", ["r"], ["m"], axes=[2], keepdims=0, name="mean"),
             h.make_node("Transpose", ["m"], ["t"], perm=[2, 0, 1]),
             h.make_node("GRU", ["t", "W", "R"], ["Y", "Y_h"], hidden_size=H, name="gru"),
             h.make_node("Squeeze", ["Y"], ["out"], axes=[1])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, list(x_dims))],
                     [h.make_tensor_value_info("out", TP.FLOAT, list(out_dims))], initializer=inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 11)]), path)
    return path


def lstm_with_states(path, x_dims, state_dims, *, front=None, opset=14):
    """A bidirectional LSTM reading x (through a Linear `front` [F, I] when given) and states h0, c0."""
    rng = np.random.default_rng(1)
    inits = [nh.from_array(_arr(rng, 2, 4 * H, C), "W"), nh.from_array(_arr(rng, 2, 4 * H, H), "R")]
    nodes, x = [], "x"
    if front is not None:
        inits += [nh.from_array(_arr(rng, front, C), "lw"), nh.from_array(_arr(rng, C), "lb")]
        nodes += [h.make_node("MatMul", ["x", "lw"], ["l"], name="linear"), h.make_node("Add", ["l", "lb"], ["la"]),
                  h.make_node("Tanh", ["la"], ["lt"])]
        x = "lt"
    nodes.append(h.make_node("LSTM", [x, "W", "R", "", "", "h0", "c0"], ["Y", "Y_h", "Y_c"], hidden_size=H,
                             direction="bidirectional", name="lstm"))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, list(x_dims)),
                                  h.make_tensor_value_info("h0", TP.FLOAT, list(state_dims)),
                                  h.make_tensor_value_info("c0", TP.FLOAT, list(state_dims))],
                     [h.make_tensor_value_info(n, TP.FLOAT, [None, 2, None, H] if n == "Y" else [2, None, H])
                      for n in ("Y", "Y_h", "Y_c")], initializer=inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), path)
    return path


def _dims(value) -> list:
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in value.type.tensor_type.shape.dim]


def _inputs(out: str) -> list[dict]:
    return json.loads(out)["inputs"][0]


# -- -1 dims ---------------------------------------------------------------------------------------------------

def test_minus_one_dim_verify_every_engine(tmp_path):
    src = crnn(tmp_path / "m.onnx")
    code, out, err = run_cli(["verify", src, src, "--engine", "all"])
    assert code == 0, out + err
    code, out, err = run_cli(["verify", src, src, "--engine", "onnxruntime", "--dim", "x:0=1", "--json"])
    assert code == 0, out + err
    assert _inputs(out)[0]["shape"][0] == 1


@pytest.mark.parametrize("argv", [["upgrade"], ["layout", "--to", "1", "--opset", "14"], ["downgrade", "--opset", "7"]])
def test_minus_one_dim_converted_keeps_its_interface(tmp_path, argv):
    src = crnn(tmp_path / "m.onnx")
    out_path = tmp_path / "out.onnx"
    code, out, err = run_cli([argv[0], src, "-o", out_path, *argv[1:]])
    assert code == 0, out + err
    written = onnx.load(out_path)
    onnx.checker.check_model(written, full_check=True)
    assert _dims(written.graph.input[0]) == [-1, 3, None, None]  # -1 written back as the source declared it
    assert _dims(written.graph.output[0]) == [None, None, H]  # unset: what onnx's full check accepts
    if argv[0] == "upgrade":  # the one onnxruntime runs (layout 1 it refuses): equal to the source there
        feeds = {"x": np.random.default_rng(3).uniform(-1, 1, (2, 3, 6, 7)).astype(np.float32)}
        assert_close(run_onnxruntime(str(src), feeds), run_onnxruntime(str(out_path), feeds))


def test_minus_one_declared_where_inference_finds_a_size(tmp_path):
    """An output and a value_info declared -1 where onnx infers a size (GRU's num_directions, H): onnxruntime runs
    the source; the upgraded model passes onnx's full check and equals the source in onnxruntime."""
    src = crnn(tmp_path / "m.onnx", out_dims=(None, -1, -1))
    m = onnx.load(src)
    m.graph.value_info.append(h.make_tensor_value_info("Y", TP.FLOAT, [-1, -1, -1, -1]))
    onnx.save(m, src)
    code, out, err = run_cli(["upgrade", src, "-o", tmp_path / "out.onnx"])
    assert code == 0, out + err
    written = onnx.load(tmp_path / "out.onnx")
    onnx.checker.check_model(written, full_check=True)
    feeds = {"x": np.random.default_rng(3).uniform(-1, 1, (2, 3, 5, 6)).astype(np.float32)}
    assert_close(run_onnxruntime(str(src), feeds), run_onnxruntime(str(tmp_path / "out.onnx"), feeds))


def test_minus_one_dim_to_openvino(tmp_path):
    src = crnn(tmp_path / "m.onnx")
    code, out, err = run_cli(["to-openvino", src, "-o", tmp_path / "m.xml"])
    assert code == 0, out + err
    feeds = {"x": np.random.default_rng(4).uniform(-1, 1, (1, 3, 4, 9)).astype(np.float32)}
    assert_close(run_onnxruntime(str(src), feeds), ir_outputs(tmp_path / "m.xml", feeds), tol=OPENVINO_TOL)


# -- other negative dims, huge dims -------------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["x", "h0"])
@pytest.mark.parametrize("argv", [["verify"], ["upgrade"], ["downgrade", "--opset", "7"], ["layout", "--to", "1"],
                                  ["to-openvino"]])
def test_negative_dim_is_exit_4_naming_the_input(tmp_path, which, argv):
    dims = {"x": [5, 2, C], "h0": [2, 2, H]}
    dims[which][1] = -7
    src = lstm_with_states(tmp_path / "m.onnx", dims["x"], dims["h0"])
    out_path = tmp_path / ("m.xml" if argv[0] == "to-openvino" else "out.onnx")
    cmd = [argv[0], src, src] if argv[0] == "verify" else [argv[0], src, "-o", out_path, *argv[1:]]
    code, out, err = run_cli(cmd)
    assert code == 4, out + err
    assert len(err.strip().splitlines()) == 1
    assert f"input {which!r} declares dim -7 at axis 1" in err
    assert not out_path.exists()


def test_huge_static_batch_is_refused_cleanly(tmp_path):
    src = lstm_with_states(tmp_path / "m.onnx", [5, 2 ** 62, C], [2, 2 ** 62, H])
    for argv in (["to-openvino", src, "-o", tmp_path / "m.xml"], ["upgrade", src, "-o", tmp_path / "o.onnx"],
                 ["verify", src, src]):
        code, out, err = run_cli(argv)
        assert code in (4, 5), out + err
        assert len(err.strip().splitlines()) == 1 and "internal error" not in err
    assert not (tmp_path / "m.xml").exists()


# -- sizes the model fixes -----------------------------------------------------------------------------------

def test_sizes_read_from_weights_onnx(tmp_path):
    """Every dim unset or -1: x's feature size is the Linear's (7), the states' are num_directions and H."""
    src = lstm_with_states(tmp_path / "m.onnx", [None, None, None], [-1, -1, -1], front=7)
    code, out, err = run_cli(["verify", src, src, "--engine", "all", "--json"])
    assert code == 0, out + err
    x, h0, c0 = _inputs(out)
    assert x["shape"][2] == 7 and "MatMul 'linear'" in x["sizes"]["2"]
    assert h0["shape"][0] == 2 and h0["shape"][2] == H and "hidden_size of LSTM 'lstm'" in h0["sizes"]["2"]
    assert x["shape"][1] == h0["shape"][1] == c0["shape"][1]  # one batch
    assert x["shape"][0] != x["shape"][1]  # time and batch told apart through the Linear
    code, out, err = run_cli(["to-openvino", src, "-o", tmp_path / "m.xml"])
    assert code == 0, out + err
    rng = np.random.default_rng(5)
    feeds = {"x": rng.uniform(-1, 1, (6, 2, 7)).astype(np.float32),
             "h0": rng.uniform(-1, 1, (2, 2, H)).astype(np.float32),
             "c0": rng.uniform(-1, 1, (2, 2, H)).astype(np.float32)}
    assert_close(run_onnxruntime(str(src), feeds), ir_outputs(tmp_path / "m.xml", feeds), tol=OPENVINO_TOL)


def conv_front(path, *, gemm: bool = False):
    """x [?, ?, ?] -> Conv1d (6 channels in, group 2) -> [T, N, 8] -> GRU; or, `gemm`, a Gemm (transB) of
    x [?, ?] before a GRU of one step."""
    rng = np.random.default_rng(2)
    if gemm:
        inits = [nh.from_array(_arr(rng, C, 9), "gw"), nh.from_array(_arr(rng, 1, 3 * H, C), "W"),
                 nh.from_array(_arr(rng, 1, 3 * H, H), "R"), nh.from_array(np.array([0], np.int64), "ax")]
        nodes = [h.make_node("Gemm", ["x", "gw"], ["g"], transB=1, name="gemm"),
                 h.make_node("Unsqueeze", ["g", "ax"], ["u"]),
                 h.make_node("GRU", ["u", "W", "R"], ["Y", "Y_h"], hidden_size=H, name="gru")]
        x_dims = [None, None]
    else:
        inits = [nh.from_array(_arr(rng, 8, 3, 3), "cw"), nh.from_array(_arr(rng, 1, 3 * H, 8), "W"),
                 nh.from_array(_arr(rng, 1, 3 * H, H), "R")]
        nodes = [h.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1], group=2, name="conv"),
                 h.make_node("Transpose", ["c"], ["t"], perm=[2, 0, 1]),
                 h.make_node("GRU", ["t", "W", "R"], ["Y", "Y_h"], hidden_size=H, name="gru")]
        x_dims = [None, None, None]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, x_dims)],
                     [h.make_tensor_value_info("Y_h", TP.FLOAT, [1, None, H])], initializer=inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), path)
    return path


@pytest.mark.parametrize("gemm", [False, True], ids=["conv", "gemm"])
def test_sizes_read_from_conv_and_gemm_weights(tmp_path, gemm):
    src = conv_front(tmp_path / "m.onnx", gemm=gemm)
    code, out, err = run_cli(["verify", src, src, "--engine", "all", "--json"])
    assert code == 0, out + err
    x = _inputs(out)[0]
    axis, size, by = ("1", 9, "Gemm 'gemm'") if gemm else ("1", 6, "Conv 'conv'")
    assert x["shape"][int(axis)] == size and by in x["sizes"][axis]
    for argv in (["upgrade", src, "-o", tmp_path / "o.onnx"], ["to-openvino", src, "-o", tmp_path / "m.xml"]):
        code, out, err = run_cli(argv)
        assert code == 0, out + err


def test_given_dim_wins_and_exit_4_names_every_size_tried(tmp_path):
    src = lstm_with_states(tmp_path / "m.onnx", [None, None, None], [-1, -1, -1], front=7)
    code, out, err = run_cli(["upgrade", src, "-o", tmp_path / "o.onnx", "--dim", "x:2=3"])
    assert code == 4, out + err
    assert len(err.strip().splitlines()) == 1
    assert "(x float32[8,3,3]; h0 float32[2,3,5]; c0 float32[2,3,5]; also tried x[1,3,3]," in err  # the rest known
    assert not (tmp_path / "o.onnx").exists()
    src = conv_front(tmp_path / "c.onnx")  # 5 channels where the Conv reads 6; the width no node explains
    code, out, err = run_cli(["upgrade", src, "-o", tmp_path / "o.onnx", "--dim", "x:1=5"])
    assert code == 4, out + err
    assert len(err.strip().splitlines()) == 1
    # first the width that gives the GRU 8 steps, then the sizes drawn before it
    assert "(x float32[3,5,8]; also tried x[3,5,2] | x[3,5,16] | x[3,5,64] | x[3,5,1]):" in err


# -- OpenVINO IR written by the PyTorch frontend, every input dim dynamic -------------------------------------------

def _torch_ir(folder, kind: str):
    torch = pytest.importorskip("torch")
    ov = pytest.importorskip("openvino")
    torch.manual_seed(0)

    class LinearGRU(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.rnn = torch.nn.Linear(40, 16), torch.nn.GRU(16, 8, batch_first=True)

        def forward(self, x):
            return self.rnn(torch.relu(self.lin(x)))[0]

    class ConvLSTM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.rnn = torch.nn.Conv1d(12, 16, 3, padding=1), torch.nn.LSTM(16, 8, batch_first=True)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x):
            return self.head(self.rnn(torch.relu(self.conv(x)).transpose(1, 2))[0])

    module, example = (LinearGRU(), torch.randn(2, 7, 40)) if kind == "linear" else (ConvLSTM(), torch.randn(2, 12, 9))
    module.eval()
    converted = ov.convert_model(module, example_input=example, input=[ov.PartialShape([-1, -1, -1])])
    xml = folder / f"{kind}.xml"
    ov.save_model(converted, str(xml), compress_to_fp16=False)
    if kind == "conv":  # OpenVINO 2026.4's frontend fixes the channels (12) from the weights: make them -1 again
        text = xml.read_text()
        for layer in ('type="Parameter"', 'type="Convolution"'):
            start = text.index(layer)
            end = text.index("</port>", start)  # the Parameter's output, the Convolution's data input
            assert "<dim>12</dim>" in text[start:end]
            text = text[:start] + text[start:end].replace("<dim>12</dim>", "<dim>-1</dim>") + text[end:]
        xml.write_text(text)
    return xml, module, example.shape


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_pytorch_frontend_ir_with_dynamic_dims(tmp_path, kind):
    torch = pytest.importorskip("torch")
    xml, module, shape = _torch_ir(tmp_path, kind)
    out_path = tmp_path / "m.onnx"
    code, out, err = run_cli(["from-openvino", xml, "-o", out_path])
    assert code == 0, out + err
    code, out, err = run_cli(["verify", xml, out_path, "--engine", "all", "--json"])
    assert code == 0, out + err
    x = _inputs(out)[0]
    assert x["shape"][1 if kind == "conv" else 2] == shape[1 if kind == "conv" else 2]
    feeds = {"x": np.random.default_rng(6).uniform(-1, 1, (3, *shape[1:2], 11) if kind == "conv" else
                                                         (3, 11, shape[2])).astype(np.float32)}
    with torch.no_grad():
        want = module(torch.from_numpy(feeds["x"])).numpy()
    got = list(run_onnxruntime(str(out_path), feeds).values())[0]
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_size_a_comparison_fixes(tmp_path):
    """out = If(Shape(x)[1] == 160) then x * 2 else x: x's width is drawn at 160, the branch the model takes."""
    k = h.make_node("Constant", [], ["k"], value=nh.from_array(np.array(160, np.int64)))
    i = h.make_node("Constant", [], ["i"], value=nh.from_array(np.array(1, np.int64)))
    two = h.make_node("Constant", [], ["two"], value=nh.from_array(np.array(2, np.float32)))
    then_g = h.make_graph([h.make_node("Mul", ["x", "two"], ["a"])], "then", [],
                          [h.make_tensor_value_info("a", TP.FLOAT, None)])
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["b"])], "else", [],
                          [h.make_tensor_value_info("b", TP.FLOAT, None)])
    nodes = [k, i, two, h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i"], ["w"]),
             h.make_node("Equal", ["w", "k"], ["is160"], name="is160"),
             h.make_node("If", ["is160"], ["out"], then_branch=then_g, else_branch=else_g)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [1, None])],
                     [h.make_tensor_value_info("out", TP.FLOAT, [1, None])])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), src)
    code, out, err = run_cli(["verify", src, src, "--engine", "onnxruntime", "--json"])
    assert code == 0, out + err
    x = _inputs(out)[0]
    assert x["shape"] == [1, 160] and "Equal 'is160'" in x["sizes"]["1"]


def test_pytorch_frontend_ir_with_a_size_baked_into_a_reshape(tmp_path):
    """GRU(x).reshape(7, -1, 8) with x [?, ?, 4]: the model runs only when T*N is a multiple of 7; the IR's own
    Reshape target says 7."""
    torch = pytest.importorskip("torch")
    ov = pytest.importorskip("openvino")
    torch.manual_seed(0)

    class Baked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(4, 8)

        def forward(self, x):
            return self.rnn(x)[0].reshape(7, -1, 8)

    module = Baked().eval()
    converted = ov.convert_model(module, example_input=torch.randn(7, 2, 4), input=[ov.PartialShape([-1, -1, 4])])
    xml = tmp_path / "baked.xml"
    ov.save_model(converted, str(xml), compress_to_fp16=False)
    code, out, err = run_cli(["from-openvino", xml, "-o", tmp_path / "m.onnx"])
    assert code == 0, out + err
    assert "dynamic dims at 7, a size a Reshape in the model states" in out
    feeds = {"x": np.random.default_rng(7).uniform(-1, 1, (7, 4, 4)).astype(np.float32)}
    with torch.no_grad():
        want = module(torch.from_numpy(feeds["x"])).numpy()
    got = list(run_onnxruntime(str(tmp_path / "m.onnx"), feeds).values())[0]
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
