"""SettleIfs (issue 21) on silero-vad's pattern rebuilt: a scripted PyTorch module with `squeeze(-1)` on a length
only known at run time and an LSTMCell before an LSTM, exported by the legacy exporter, which writes both as If
nodes whose branches give two ranks. The rank-3 branch of `squeeze(-1)` never reaches the outputs (the LSTM
refuses a 4-D X), so the If keeps the rank-2 one, and the LSTMCell's Ifs then follow from it.

Held against independent oracles: onnxruntime on the source (the settled model equals it exactly and refuses
what it refuses), and OpenVINO's runtime (in a process of its own) on the IR to-openvino writes. A module whose
`squeeze(0)` is genuinely rank-polymorphic (both ranks run) is refused, naming the root If, not the one derived
from it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv import io
from rnnconv.commands.check import check
from rnnconv.errors import EXIT_UNSUPPORTED
from rnnconv.passes.settle_ifs import SettleIfs, ifs, settle
from tests.conftest import run_cli

import onnxruntime as ort  # noqa: E402

from tests.conftest import REPO  # noqa: E402

try:  # the modules below are how the shipped fixtures were made: torch re-exports them when installed
    import torch
except ImportError:
    torch = None
FIXTURES = REPO / "fixtures" / "settle_ifs"


def _export(module, args, path, names, dynamic_axes):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.jit.script(module), args, str(path), dynamo=False, input_names=names[0],
                          output_names=names[1], dynamic_axes=dynamic_axes, opset_version=16)
    return path


class Silero(torch.nn.Module if torch else object):
    """silero-vad's decoder in small: x [N, 4, T] is meant to come with T = 1."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 8, 3, padding=1)
        self.cell = torch.nn.LSTMCell(8, 8)
        self.lstm = torch.nn.LSTM(8, 8)

    def forward(self, x, state):
        y = self.conv(x).squeeze(-1)
        h, c = self.cell(y, (state[0], state[1]))
        out, _ = self.lstm(h.unsqueeze(0))
        return torch.tanh(out), torch.stack([h, c])


class Polymorphic(torch.nn.Module if torch else object):
    """`squeeze(0)` of the LSTM's output: rank 2 when T = 1, else rank 3; both run to the end."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 8)

    def forward(self, x):
        y, _ = self.lstm(x)
        y = y.squeeze(0)
        if y.dim() == 2:
            y = y.unsqueeze(0)
        return torch.tanh(y.mean(-1))


def _shipped_or_exported(name: str, export) -> object:
    """The export as torch writes it now (when installed), else the one shipped in fixtures/settle_ifs/ (made by the
    same code: `python -m tests.passes.test_settle_ifs` rewrites them)."""
    return export() if torch is not None else FIXTURES / f"{name}.onnx"


@pytest.fixture(scope="module")
def silero(tmp_path_factory):
    return _shipped_or_exported("if_squeeze_lstmcell_legacy16", lambda: _silero(tmp_path_factory.mktemp("silero")))


@pytest.fixture(scope="module")
def polymorphic(tmp_path_factory):
    return _shipped_or_exported("if_rank_polymorphic_legacy16", lambda: _polymorphic(tmp_path_factory.mktemp("poly")))


def _silero(folder):
    torch.manual_seed(0)
    path = folder / "silero.onnx"
    return _export(Silero().eval(), (torch.randn(2, 4, 1), torch.zeros(2, 2, 8)), path,
                   (["x", "state"], ["out", "stateN"]), {"x": {0: "batch", 2: "time"}, "state": {1: "batch"}})


def _polymorphic(folder):
    torch.manual_seed(0)
    path = folder / "poly.onnx"
    return _export(Polymorphic().eval(), (torch.randn(1, 2, 4),), path, (["x"], ["y"]),
                   {"x": {0: "time", 1: "batch"}})


def _ort(path, feeds):
    """onnxruntime's outputs on the model at `path` (or serialized as bytes), or why it refused the feeds."""
    session = ort.InferenceSession(path if isinstance(path, bytes) else str(path), providers=["CPUExecutionProvider"])
    try:
        return session.run(None, feeds)
    except Exception as err:  # onnxruntime's refusal of an input the model does not take
        return f"refused: {type(err).__name__}"


def _feeds(batch, time, seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 4, time)).astype(np.float32),
            "state": rng.standard_normal((2, batch, 8)).astype(np.float32)}


def _interface(model: onnx.ModelProto):
    return [(v.name, str(v.type)) for v in [*model.graph.input, *model.graph.output]]


def test_the_pattern_is_settled_exactly_with_its_interface(silero, tmp_path):
    source = onnx.load(str(silero))
    model = io.load(silero)
    assert len(ifs(model)) == 9  # squeeze(-1), the LSTMCell's and the LSTM's: what the exporter wrote
    result = SettleIfs()(model)
    assert result.modified and ifs(model) == []
    assert ("If node '/If': then_branch kept (else_branch can never reach the outputs: LSTM node '/cell/LSTM' "
            "fails on it, onnx strict shape inference: First input tensor must have rank 3)") in result.changes
    settled = tmp_path / "settled.onnx"
    io.save(model, settled)
    onnx.checker.check_model(onnx.load(str(settled)), full_check=True)
    assert _interface(onnx.load(str(settled))) == _interface(source)  # names, types and dims (batch, time dynamic)
    for batch in (1, 3):
        want, got = _ort(silero, _feeds(batch, 1)), _ort(settled, _feeds(batch, 1))
        assert not isinstance(want, str)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)
        # a length the source refuses (the LSTM gets a 4-D X) is refused too (by the Squeeze)
        assert isinstance(_ort(silero, _feeds(batch, 2)), str) and isinstance(_ort(settled, _feeds(batch, 2)), str)


def test_to_openvino_converts_the_pattern_and_openvino_runs_it(silero, tmp_path):
    pytest.importorskip("openvino")
    from tests.real.conftest import openvino_outputs

    xml = tmp_path / "m.xml"
    code, out, err = run_cli(["to-openvino", silero, "-o", xml, "--dim", "x:2=1"])
    assert code == 0, out + err
    assert "settled If node '/If': then_branch kept" in out
    for batch in (1, 3):
        feeds = _feeds(batch, 1, seed=batch)
        want = dict(zip(["out", "stateN"], _ort(silero, feeds)))
        got = openvino_outputs(xml, feeds, want)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], atol=1e-5, rtol=1e-5)


def test_a_rank_polymorphic_if_is_refused_naming_the_root_if(polymorphic, tmp_path):
    for t in (1, 2):  # both ranks run in onnxruntime: nothing rules a branch out
        assert not isinstance(_ort(polymorphic, {"x": np.ones((t, 2, 4), np.float32)}), str)
    settled = settle(io.load(polymorphic))
    assert [p.node for p in settled.polymorphic] == ["/If"]  # not '/If_1', which tests the rank '/If' gives
    code, out, err = run_cli(["to-openvino", polymorphic, "-o", tmp_path / "p.xml"])
    assert code == EXIT_UNSUPPORTED, out + err
    line = err.strip().splitlines()[-1]
    assert line.startswith("rnnconv: error: cannot convert to OpenVINO IR (OpenVINO needs static ranks): the rank "
                           "of a value is decided at run time: If node '/If' decides the rank of its output 0 at run "
                           "time (rank 2 in then_branch, 3 in else_branch")
    assert "'/If_1'" not in line and "from input(s) 'x'" in line
    assert list(tmp_path.iterdir()) == []


def test_check_predicts_openvino_s_refusal_and_names_the_fix(silero, polymorphic):
    found = check(silero, ["openvino"])["findings"]
    assert [(f["node"], f["op"], f["effect"]) for f in found] == [("/If", "If", "refuses")]
    assert found[0]["fix"].startswith("rnnconv to-openvino ")
    found = check(polymorphic, ["openvino"])["findings"]
    assert [(f["node"], f["fix"].split(":")[0]) for f in found] == [("/If", "none in rnnconv")]


def _sr_model() -> onnx.ModelProto:
    """An If on a value (`sr == 16000`) beside one on a declared dim (Shape(state)[0] == 2)."""
    out = helper.make_tensor_value_info
    const = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731

    def branch(name, value):
        return helper.make_graph([helper.make_node("Mul", ["x", f"{name}_k"], [f"{name}_y"])], name, [],
                                 [out(f"{name}_y", TensorProto.FLOAT, None)], [numpy_helper.from_array(
                                     np.array(value, np.float32), f"{name}_k")])

    nodes = [helper.make_node("Equal", ["sr", "k16000"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["a"], then_branch=branch("t1", 2.0), else_branch=branch("e1", 3.0),
                              name="by_value"),
             helper.make_node("Shape", ["state"], ["s"]), helper.make_node("Gather", ["s", "k0"], ["s0"], axis=0),
             helper.make_node("Equal", ["s0", "k2"], ["two"]),
             helper.make_node("If", ["two"], ["b"], then_branch=branch("t2", 5.0), else_branch=branch("e2", 7.0),
                              name="by_shape"),
             helper.make_node("Add", ["a", "b"], ["y"])]
    graph = helper.make_graph(nodes, "sr", [out("x", TensorProto.FLOAT, ["n"]), out("sr", TensorProto.INT64, []),
                                            out("state", TensorProto.FLOAT, [2, "n", 4])],
                              [out("y", TensorProto.FLOAT, ["n"])],
                              [const("k16000", 16000), const("k0", 0), const("k2", 2)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)], ir_version=8)


def test_an_if_on_a_value_stays_and_one_on_a_declared_dim_is_settled(tmp_path):
    model = io.load(_sr_model())
    result = SettleIfs()(model)
    assert [n.name for n in ifs(model)] == ["by_value"]
    assert result.changes == ["If node 'by_shape': then_branch taken (its condition is True for every input the "
                              "declared shapes allow)"]
    io.save(model, tmp_path / "s.onnx")
    feeds = {"x": np.arange(3, dtype=np.float32), "state": np.zeros((2, 3, 4), np.float32)}
    for sr in (16000, 8000):
        f = {**feeds, "sr": np.array(sr, np.int64)}
        np.testing.assert_array_equal(_ort(tmp_path / "s.onnx", f)[0], feeds["x"] * ((2 if sr == 16000 else 3) + 5))


def _squeeze_if() -> onnx.NodeProto:
    """If 'squeeze' on `is1`: x [N, L] squeezed to [N] (then), or x itself (else), as output `a`."""
    out = helper.make_tensor_value_info
    return helper.make_node(
        "If", ["is1"], ["a"], name="squeeze",
        then_branch=helper.make_graph([helper.make_node("Squeeze", ["x", "axis1"], ["sq"])], "t", [],
                                      [out("sq", TensorProto.FLOAT, ["N"])]),
        else_branch=helper.make_graph([helper.make_node("Identity", ["x"], ["id"])], "e", [],
                                      [out("id", TensorProto.FLOAT, ["N", "L"])]))


def _squeeze_then_lstm(lstm_behind_a_value_if: bool) -> onnx.ModelProto:
    """x [N, L] -> If 'squeeze' (L == 1: Squeeze to [N], else x) -> Unsqueeze(0) -> an LSTM (input size 3), which
    needs a 3-D X: the Squeeze branch never gets through it. With `lstm_behind_a_value_if` the LSTM sits in the
    then_branch of an If on the input `flag`, so an input taking the Squeeze branch still runs (flag false)."""
    rng = np.random.default_rng(0)
    out = helper.make_tensor_value_info
    tensor = lambda name, a: numpy_helper.from_array(np.asarray(a), name)  # noqa: E731
    squeeze = _squeeze_if()
    lstm = [helper.make_node("LSTM", ["u", "W", "R"], ["Y"], hidden_size=2, name="lstm"),
            helper.make_node("ReduceSum", ["Y"], ["y_lstm"], keepdims=0)]
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["L"], axis=0),
             helper.make_node("Equal", ["L", "one"], ["is1"]), squeeze,
             helper.make_node("Unsqueeze", ["a", "axis0"], ["u"])]
    if lstm_behind_a_value_if:
        nodes.append(helper.make_node(
            "If", ["flag"], ["y"], name="by_flag",
            then_branch=helper.make_graph(lstm[:1] + [helper.make_node("ReduceSum", ["Y"], ["y_t"], keepdims=0)],
                                          "t2", [], [out("y_t", TensorProto.FLOAT, [])]),
            else_branch=helper.make_graph([helper.make_node("ReduceSum", ["u"], ["y_e"], keepdims=0)], "e2", [],
                                          [out("y_e", TensorProto.FLOAT, [])])))
        inputs = [out("x", TensorProto.FLOAT, ["N", "L"]), out("flag", TensorProto.BOOL, [])]
    else:
        nodes += lstm[:1] + [helper.make_node("ReduceSum", ["Y"], ["y"], keepdims=0)]
        inputs = [out("x", TensorProto.FLOAT, ["N", "L"])]
    inits = [tensor("one", np.int64(1)), tensor("axis1", np.array([1], np.int64)),
             tensor("axis0", np.array([0], np.int64)), tensor("W", rng.standard_normal((1, 8, 3), np.float32)),
             tensor("R", rng.standard_normal((1, 8, 2), np.float32))]
    graph = helper.make_graph(nodes, "squeeze_lstm", inputs, [out("y", TensorProto.FLOAT, [])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_a_branch_is_ruled_out_only_by_a_failure_that_always_runs(tmp_path):
    model = io.load(_squeeze_then_lstm(False))
    result = SettleIfs()(model)
    assert ifs(model) == [] and result.changes == [
        "If node 'squeeze': else_branch kept (then_branch can never reach the outputs: LSTM node 'lstm' fails on "
        "it, onnx strict shape inference: First input tensor must have rank 3)"]
    io.save(model, tmp_path / "settled.onnx")
    x = np.ones((2, 3), np.float32)
    want = _ort(_squeeze_then_lstm(False).SerializeToString(), {"x": x})
    np.testing.assert_array_equal(_ort(tmp_path / "settled.onnx", {"x": x})[0], want[0])

    # Behind an If on a value, the LSTM does not always run: an input with L = 1 and flag false runs to the end.
    source = _squeeze_then_lstm(True)
    assert not isinstance(_ort(source.SerializeToString(), {"x": np.ones((2, 1), np.float32),
                                                             "flag": np.array(False)}), str)
    settler = SettleIfs()
    assert not settler(io.load(source)).modified
    assert [p.node for p in settler.polymorphic] == ["squeeze"]


def _dead_end_lstm(with_lstm: bool = True) -> onnx.ModelProto:
    """x [N, L] -> If 'squeeze' (L == 1: Squeeze to [N], else x) -> Unsqueeze(0) -> u; the output is Shape(u)
    ([1, N] or [1, N, L]: the If decides its length). An LSTM also reads u (it needs rank 3, so it fails on the
    Squeeze branch) but leads nowhere: no output reads it. `with_lstm=False`: the same model without that dead
    end."""
    rng = np.random.default_rng(0)
    out = helper.make_tensor_value_info
    tensor = lambda name, a: numpy_helper.from_array(np.asarray(a), name)  # noqa: E731
    squeeze = _squeeze_if()
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["L"], axis=0),
             helper.make_node("Equal", ["L", "one"], ["is1"]), squeeze,
             helper.make_node("Unsqueeze", ["a", "axis0"], ["u"]), helper.make_node("Shape", ["u"], ["y"])]
    inits = [tensor("one", np.int64(1)), tensor("axis1", np.array([1], np.int64)),
             tensor("axis0", np.array([0], np.int64))]
    if with_lstm:
        nodes += [helper.make_node("LSTM", ["u", "W", "R"], ["Y"], hidden_size=2, name="lstm"),
                  helper.make_node("ReduceSum", ["Y"], ["unused"], keepdims=0, name="dead_end")]
        inits += [tensor("W", rng.standard_normal((1, 8, 3), np.float32)),
                  tensor("R", rng.standard_normal((1, 8, 2), np.float32))]
    graph = helper.make_graph(nodes, "dead_end_lstm", [out("x", TensorProto.FLOAT, ["N", "L"])],
                              [out("y", TensorProto.INT64, ["R"])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_a_failure_no_output_reads_settles_nothing():
    """The LSTM fails on the Squeeze branch, but no output reads it: that proves nothing about the outputs (an
    input with L = 1 gives y = [1, N] by the spec, which keeping the Identity branch would change to [1, N, 1])."""
    settler = SettleIfs()
    assert not settler(io.load(_dead_end_lstm())).modified
    assert [p.node for p in settler.polymorphic] == ["squeeze"]
    # the spec's answer, from onnxruntime on the model without its dead end: both lengths run, two ranks
    twin = _dead_end_lstm(with_lstm=False).SerializeToString()
    assert _ort(twin, {"x": np.ones((2, 1), np.float32)})[0].tolist() == [1, 2]
    assert _ort(twin, {"x": np.ones((2, 3), np.float32)})[0].tolist() == [1, 2, 3]


if __name__ == "__main__":  # the shipped fixtures, written anew with the installed torch
    import shutil

    for name, make in (("if_squeeze_lstmcell_legacy16", _silero), ("if_rank_polymorphic_legacy16", _polymorphic)):
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            shutil.copy(make(__import__("pathlib").Path(folder)), FIXTURES / f"{name}.onnx")
