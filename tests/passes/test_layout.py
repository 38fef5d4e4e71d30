"""The layout pass: layout 1 -> 0 runs in onnxruntime, batch-first exports lose their Transposes, 0 -> 1 -> 0, a
model already in the target layout is left as it was."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import helper

from rnnconv import conversion, io
from rnnconv.commands.layout import convert_layout
from rnnconv.commands.upgrade import upgrade
from tests.conftest import (
    ALL_OPTIONAL,
    FIXTURES,
    NO_OPTIONAL,
    RECURRENT,
    TORCH,
    feeds,
    initializers,
    interface,
    recurrent_model,
    reference,
    run_cli,
    run_onnxruntime,
)

BATCH_FIRST = FIXTURES / "lstm7_batch_first.onnx"


def _ops(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node if n.op_type != "Constant")


def _recurrent_path_transposes(model: onnx.ModelProto) -> list[str]:
    """Transposes producing a recurrent node's X, or downstream of its Y (until a graph output or another node)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    consumers = collections.defaultdict(list)
    for n in model.graph.node:
        for i in n.input:
            consumers[i].append(n)
    found = []
    for node in model.graph.node:
        if node.op_type not in RECURRENT:
            continue
        x = producer.get(node.input[0])
        if x is not None and x.op_type == "Transpose":
            found.append(f"{x.name} before {node.name}")
        stack = [node.output[0]] if node.output and node.output[0] else []
        while stack:
            for c in consumers[stack.pop()]:
                if c.op_type == "Transpose":
                    found.append(f"{c.name} after {node.name}")
                if c.op_type not in RECURRENT:
                    stack.extend(c.output)
    return found


def _layout(node: onnx.NodeProto) -> int:
    return next((a.i for a in node.attribute if a.name == "layout"), 0)


# ---- layout 1 -> 0: onnxruntime runs it and matches the engine on the original -------------------------------

VARIANTS = {"bare": NO_OPTIONAL, "states": {**ALL_OPTIONAL, "sequence_lens": False},
            "states_seq_lens": ALL_OPTIONAL}
MATRIX = [(op, d, v) for op in RECURRENT for d in ("forward", "reverse", "bidirectional") for v in VARIANTS]


@pytest.mark.parametrize("op,direction,variant", MATRIX, ids=[f"{o}-{d}-{v}" for o, d, v in MATRIX])
def test_layout1_to_0_runs_in_onnxruntime(op, direction, variant):
    lbr = int(op == "GRU" and direction == "bidirectional")
    src = recurrent_model(op, direction=direction, layout=1, lbr=lbr, **VARIANTS[variant])
    result = convert_layout(src, to=0)
    assert result.report.ok
    out = io.to_proto(result.model)
    onnx.checker.check_model(out, full_check=True)
    assert interface(out) == interface(src)
    assert [_layout(n) for n in out.graph.node if n.op_type == op] == [0]
    inputs = feeds(src)
    expected = reference(src, inputs)
    got = run_onnxruntime(out, inputs)
    assert set(got) == set(expected)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("name", ["lstm14_layout1_all_features", "gru14_layout1_bidirectional_seq_lens_initial_h",
                                  "rnn14_layout1_bidirectional_seq_lens_initial_h"])
def test_layout1_fixtures_to_0_match_samples(name, tmp_path):
    out_path = tmp_path / "out.onnx"
    assert run_cli(["layout", FIXTURES / f"{name}.onnx", "-o", out_path, "--to", "0"])[0] == 0
    out = onnx.load(out_path)
    samples = np.load(FIXTURES / f"{name}.npz")  # the fixture's inputs
    inputs = {i.name: samples[i.name] for i in out.graph.input if i.name in samples}
    expected = reference(FIXTURES / f"{name}.onnx", inputs)
    got = run_onnxruntime(out, inputs)
    for name_ in expected:
        np.testing.assert_allclose(got[name_], expected[name_], rtol=1e-5, atol=1e-5)
    # 1 -> 0 -> 1 folds every Transpose the first step added: the original graph again.
    back = io.to_proto(convert_layout(str(out_path), to=1).model)
    assert _ops(back) == _ops(onnx.load(FIXTURES / f"{name}.onnx"))


# ---- batch-first exports: Transpose -> layout-0 node -> Transpose becomes one layout-1 node ----------------------

def test_batch_first_fixture_absorbs_transposes():
    src = io.to_proto(upgrade(str(BATCH_FIRST), opset=14).model)
    assert _ops(src) == {"Transpose": 2, "LSTM": 1, "Squeeze": 1}
    result = convert_layout(src, to=1)
    out = io.to_proto(result.model)
    assert _recurrent_path_transposes(src) and not _recurrent_path_transposes(out)
    # Y_h is a graph output [D,N,H]: its Transpose is the interface's, not the recurrent path's.
    assert _ops(out) == {"LSTM": 1, "Squeeze": 1, "Transpose": 1}
    lstm = next(n for n in out.graph.node if n.op_type == "LSTM")
    assert _layout(lstm) == 1 and lstm.input[0] == "input"
    assert interface(out) == interface(src) == interface(BATCH_FIRST)
    # onnxruntime refuses layout 1: the product's check runs the engine there, and says so.
    assert [c.engines for c in result.report.checks] == ["engine", "engine", "onnxruntime vs engine"]
    assert "layout=1 is refused" in result.report.checks[2].note
    assert all(c.ok for c in result.report.checks)


def test_batch_first_upgrade_in_the_same_command(tmp_path):
    out_path = tmp_path / "bf.onnx"
    code, _, _ = run_cli(["layout", BATCH_FIRST, "-o", out_path, "--to", "1", "--opset", "14", "--json"])
    assert code == 0
    out = onnx.load(out_path)
    assert out.opset_import[0].version == 14 and not _recurrent_path_transposes(out)
    assert interface(out) == interface(BATCH_FIRST)
    samples = np.load(FIXTURES / "lstm7_batch_first.npz")  # the fixture's inputs
    inputs = {i.name: samples[i.name] for i in out.graph.input if i.name in samples}
    expected = run_onnxruntime(BATCH_FIRST, inputs)
    got = reference(out, inputs)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)


TORCH_BATCH_FIRST = sorted(p.name for p in TORCH.glob("*batch_first*.onnx")) if TORCH.is_dir() else []


@pytest.mark.skipif(not TORCH_BATCH_FIRST, reason="torch fixtures not generated")
@pytest.mark.parametrize("name", TORCH_BATCH_FIRST)
def test_torch_batch_first_exports(name):
    path = TORCH / name
    src = onnx.load(path)
    if not any(n.op_type in RECURRENT for n in src.graph.node):
        pytest.skip("the exporter unrolled the recurrence (no recurrent node)")
    opset = max(14, src.opset_import[0].version)
    result = convert_layout(str(path), to=1, opset=opset)
    out = io.to_proto(result.model)
    assert result.report.ok
    assert _recurrent_path_transposes(src) and not _recurrent_path_transposes(out)
    assert all(_layout(n) == 1 for n in out.graph.node if n.op_type in RECURRENT)
    # The Transposes left carry states between the nodes' [N,D,H] and the interface's [D,N,H].
    names = {v.name for v in [*out.graph.input, *out.graph.output]}
    assert all({t.input[0], t.output[0]} & names for t in out.graph.node if t.op_type == "Transpose")
    assert sum(_ops(out).values()) <= sum(_ops(src).values())
    assert interface(out) == interface(src)
    samples = np.load(path.with_suffix(".npz"))
    inputs = {i.name: samples[i.name] for i in out.graph.input if i.name in samples}
    got = reference(out, inputs)
    for name_ in got:
        np.testing.assert_allclose(got[name_], samples[name_], rtol=1e-5, atol=1e-5)


# ---- 0 -> 1 -> 0 ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,direction,variant", MATRIX, ids=[f"{o}-{d}-{v}" for o, d, v in MATRIX])
def test_round_trip_0_1_0(op, direction, variant):
    src = recurrent_model(op, direction=direction, layout=0, **VARIANTS[variant])
    there = convert_layout(src, to=1)
    assert there.report.ok
    assert _ops(io.to_proto(there.model))["Transpose"] > 0  # graph inputs/outputs keep layout 0
    back = io.to_proto(convert_layout(there.model, to=0).model)
    assert _ops(back) == _ops(src) and len(back.graph.node) == len(src.graph.node)
    assert interface(back) == interface(src)
    inputs = feeds(src)
    expected, got = run_onnxruntime(src, inputs), run_onnxruntime(back, inputs)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, atol=1e-6)


def test_only_the_named_node(tmp_path):
    src = FIXTURES / "lstm14_stacked.onnx"
    names = [n.name for n in onnx.load(src).graph.node if n.op_type == "LSTM"]
    assert len(names) == 2
    out = io.to_proto(convert_layout(str(src), to=1, nodes=[names[1]]).model)
    layouts = {n.name: _layout(n) for n in out.graph.node if n.op_type == "LSTM"}
    assert layouts == {names[0]: 0, names[1]: 1}


def _nodes(model: onnx.ModelProto) -> list[tuple]:
    return [(n.op_type, n.domain, n.name, list(n.input), list(n.output),
             {a.name: helper.get_attribute_value(a) for a in n.attribute}) for n in model.graph.node]


@pytest.mark.parametrize("op", RECURRENT)
def test_nothing_to_do_keeps_the_model(op):
    """A node already in the target layout is left alone: the same nodes with the same attributes and edges,
    the same initializers bit for bit, the same interface, and onnxruntime gives the same numbers."""
    src = recurrent_model(op, direction="bidirectional", lbr=int(op == "GRU"), **ALL_OPTIONAL)
    result = convert_layout(src, to=0)
    assert result.report.ok and result.report.rewrites == []
    out = io.to_proto(result.model)
    assert _nodes(out) == _nodes(src)
    got, want = initializers(out), initializers(src)
    assert got.keys() == want.keys()
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].tobytes() == value.tobytes(), name
    assert interface(out) == interface(src)
    inputs = feeds(src)
    expected, actual = run_onnxruntime(src, inputs), run_onnxruntime(out, inputs)
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)


def test_interface_with_symbolic_dims_is_kept():
    src = io.to_proto(upgrade(str(BATCH_FIRST), opset=14).model)
    for to in (1, 0):
        model = convert_layout(src, to=to).model
        assert conversion.interface(model) == conversion.interface(io.load(src))
        src = io.to_proto(model)
    assert interface(src)[0][0][2] == ("batch", "seq", 4)
