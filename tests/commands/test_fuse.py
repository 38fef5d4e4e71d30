"""`rnnconv fuse` on PyTorch's own exports (both exporters), held against torch: cells applied step by step
(nn.LSTMCell, nn.GRUCell, nn.RNNCell tanh / relu) and dynamo's unrolled nn.RNN come back as recurrent nodes, with no
MatMul/Gemm left, as many directions as the module has, onnxruntime equal to torch within 1e-5, the interface
unchanged; what cannot be fused is refused (exit 3) or left alone and reported."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import onnx
import pytest

from tests.commands.test_fuse_fixtures import RECURRENT, directions
from tests.conftest import interface, run_cli, run_onnxruntime

torch = pytest.importorskip("torch")

from tests.torch_exports import CellLoop, export, nn_rnn, outputs  # noqa: E402



def fuse_and_check(tmp_path, module, args, exporter: str, want_op: str, want_directions: int) -> str:
    src = export(module, args, tmp_path / f"src_{exporter}.onnx", exporter)
    out = tmp_path / "fused.onnx"
    code, stdout, stderr = run_cli(["fuse", src, "-o", out])
    assert code == 0, stdout + stderr
    fused = onnx.load(str(out))
    ops = Counter(n.op_type for n in fused.graph.node)
    assert ops["MatMul"] == 0 and ops["Gemm"] == 0, ops  # nothing of the recurrence is left unrolled
    assert set(ops) & set(RECURRENT) == {want_op}, ops
    assert directions(fused) == want_directions
    assert ops[want_op] == want_directions, ops  # one node per direction (fuse's default)
    assert interface(src) == interface(out)
    feeds = {i.name: a.numpy() for i, a in zip([i for i in onnx.load(str(src)).graph.input], args)}
    got = run_onnxruntime(out, feeds)
    want = outputs(module, args)
    assert len(got) == len(want)
    for (name, g), w in zip(got.items(), want):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5, err_msg=name)
    return stdout


CELLS = [("lstm", "LSTM", {}), ("gru", "GRU", {}), ("rnn", "RNN", {}), ("rnn", "RNN", {"nonlinearity": "relu"})]
CELL_IDS = ["LSTMCell", "GRUCell", "RNNCell-tanh", "RNNCell-relu"]
# (T, bias, initial state): the fast ones, then the rest marked slow
CELL_CONFIGS = [(6, True, True), (1, False, False)]
CELL_SLOW = [(50, True, False), (6, False, True), (1, True, True), (6, True, False)]


def _cell_params(configs, marks=()):
    return [pytest.param(kind, op, kw, exporter, T, bias, state, marks=marks,
                         id=f"{cid}-{exporter}-T{T}-{'bias' if bias else 'nobias'}-{'h0' if state else 'zero'}")
            for (kind, op, kw), cid in zip(CELLS, CELL_IDS) for exporter in ("legacy", "dynamo")
            for T, bias, state in configs]


@pytest.mark.parametrize("kind,op,kw,exporter,T,bias,state",
                         _cell_params(CELL_CONFIGS) + _cell_params(CELL_SLOW, pytest.mark.slow))
def test_cell_loop_fuses(tmp_path, kind, op, kw, exporter, T, bias, state):
    module, args = CellLoop.make(kind, bias=bias, state=state, T=T, **kw)
    stdout = fuse_and_check(tmp_path, module, args, exporter, op, 1)
    assert f"{T} unrolled {op} step(s)" in stdout


# nn.RNN as dynamo unrolls it: (layers, bidirectional, batch_first, bias, initial state, T, nonlinearity)
RNN_FAST = [(1, False, False, True, False, 6, "tanh"), (2, True, True, False, True, 1, "tanh"),
            (1, True, False, True, True, 6, "relu")]
RNN_SLOW = [(layers, bi, bf, bias, state, T, "tanh")
            for (layers, bi, bf, bias, state), T in zip(itertools.product((1, 2), (False, True), (False, True),
                                                                           (True, False), (False, True)),
                                                         itertools.cycle((50, 1, 6)))]


def _rnn_params(configs, marks=()):
    def name(layers, bi, bf, bias, state, T, act):
        return (f"L{layers}-{'bi' if bi else 'uni'}-{'bf' if bf else 'tf'}-{'bias' if bias else 'nobias'}-"
                f"{'h0' if state else 'zero'}-T{T}-{act}")

    return [pytest.param(*c, marks=marks, id=name(*c)) for c in configs]


@pytest.mark.parametrize("layers,bi,bf,bias,state,T,act", _rnn_params(RNN_FAST) + _rnn_params(RNN_SLOW,
                                                                                              pytest.mark.slow))
def test_dynamo_unrolled_rnn_fuses(tmp_path, layers, bi, bf, bias, state, T, act):
    module, args = nn_rnn(layers=layers, bidirectional=bi, batch_first=bf, bias=bias, state=state, T=T,
                          nonlinearity=act)
    fuse_and_check(tmp_path, module, args, "dynamo", "RNN", layers * (2 if bi else 1))


def test_dynamo_rnn_with_big_weights_fuses(tmp_path):
    """Past a size, dynamo keeps the zero initial state and the recurrent weight's Transpose in the graph."""
    module, args = nn_rnn(size=100, T=6)
    src = export(module, args, tmp_path / "src.onnx", "dynamo")
    assert "Transpose" in {n.op_type for n in onnx.load(str(src)).graph.node}
    fuse_and_check(tmp_path, module, args, "dynamo", "RNN", 1)


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_recurrent_layers_exported_whole_have_nothing_to_fuse(tmp_path, exporter, cls):
    torch.manual_seed(0)
    module = getattr(torch.nn, cls)(3, 4)
    src = export(module, (torch.randn(5, 2, 3),), tmp_path / "m.onnx", exporter)
    out = tmp_path / "out.onnx"
    code, _, stderr = run_cli(["fuse", src, "-o", out])
    assert code == 3, stderr
    assert "nothing to fuse" in stderr and not out.exists()


def test_steps_with_their_own_weights_are_not_fused_and_are_reported(tmp_path):
    module, args = CellLoop.make("lstm", shared=False, T=3)
    src = export(module, args, tmp_path / "m.onnx", "dynamo")
    code, _, stderr = run_cli(["fuse", src, "-o", tmp_path / "out.onnx"])
    assert code == 3, stderr
    assert "not fused" in stderr and "differs" in stderr


def test_a_near_miss_beside_a_fusion_is_left_alone_and_reported(tmp_path):
    shared, _ = CellLoop.make("rnn", T=4)
    apart, _ = CellLoop.make("rnn", shared=False, T=3, seed=1)

    class Both(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = shared, apart

        def forward(self, x, h):
            return self.a(x, h), self.b(x[:3], h)

    g = torch.Generator().manual_seed(3)
    args = (torch.randn(4, 2, 3, generator=g), torch.randn(2, 4, generator=g))
    src = export(Both().eval(), args, tmp_path / "m.onnx", "dynamo")
    out = tmp_path / "out.onnx"
    code, stdout, stderr = run_cli(["fuse", src, "-o", out])
    assert code == 0, stderr
    assert "fused 1 recurrence(s) (1 RNN) from 4 unrolled step(s)" in stdout
    assert "3 RNN step(s)" in stdout and "not fused" in stdout and "differs" in stdout
    ops = Counter(n.op_type for n in onnx.load(str(out)).graph.node)
    assert ops["RNN"] == 1 and ops["Gemm"] == 6  # the near-miss's three steps, untouched
    feeds = dict(zip(["x", "h"], (a.numpy() for a in args)))
    got = list(run_onnxruntime(out, feeds).values())
    for g_, w in zip(got, outputs(Both().eval(), args)):
        np.testing.assert_allclose(g_, w, atol=1e-5, rtol=1e-5)


def test_python_api(tmp_path):
    import rnnconv

    module, args = CellLoop.make("gru", T=5)
    src = export(module, args, tmp_path / "m.onnx", "dynamo")
    result = rnnconv.fuse(str(src))
    assert result.report.ok and [r["op"] for r in result.report.rewrites] == ["GRU"]


@pytest.mark.parametrize("case", ["gru-cell", "rnn-two-layers-batch-first"])
def test_free_sequence_runs_at_other_lengths_as_torch_does(tmp_path, case):
    if case == "gru-cell":
        module, args = CellLoop.make("gru", T=6)
    else:
        module, args = nn_rnn(layers=2, batch_first=True, state=True, T=6)
    src = export(module, args, tmp_path / "m.onnx", "dynamo")
    out = tmp_path / "free.onnx"
    code, stdout, stderr = run_cli(["fuse", src, "-o", out, "--free-sequence"])
    assert code == 0, stdout + stderr
    assert "sequence length freed on request (an interface change)" in stdout
    time_axis = 1 if case != "gru-cell" else 0
    x = args[0]
    for T in (1, 11):
        shape = list(x.shape)
        shape[time_axis] = T
        longer = (torch.randn(*shape, generator=torch.Generator().manual_seed(T)),) + args[1:]
        feeds = {i.name: a.numpy() for i, a in zip(onnx.load(str(out)).graph.input, longer)}
        got = list(run_onnxruntime(out, feeds).values())
        for g, w in zip(got, outputs(module, longer)):
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5)


def test_free_sequence_refuses_a_reverse_recurrence(tmp_path):
    module, args = nn_rnn(bidirectional=True, T=4)
    src = export(module, args, tmp_path / "m.onnx", "dynamo")
    code, _, stderr = run_cli(["fuse", src, "-o", tmp_path / "out.onnx", "--free-sequence"])
    assert code == 3 and "cannot free the sequence length" in stderr and "do not run forward" in stderr
    assert not (tmp_path / "out.onnx").exists()
