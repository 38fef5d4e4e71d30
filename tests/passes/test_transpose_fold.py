"""FoldTransposes, case by case, on small graphs built with onnx.helper; onnxruntime checks every fold."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv import conversion, io
from rnnconv.commands.downgrade import downgrade
from rnnconv.commands.upgrade import upgrade
from rnnconv.passes.transpose_fold import FoldTransposes
from tests.conftest import ALL_OPTIONAL, NO_OPTIONAL, feeds, recurrent_model, reference, run_onnxruntime

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def _t(src, dst, perm, name=None):
    return helper.make_node("Transpose", [src], [dst], perm=list(perm), name=name or f"T_{dst}")


def _fold(proto: onnx.ModelProto, scope_names=None, inputs=None):
    """Fold; assert the interface is kept, the checker passes, onnxruntime agrees. Returns (proto, modified)."""
    model = io.load(proto)
    conversion.infer_shapes(model)  # as in the rewrite pipeline
    scope = None if scope_names is None else [n for n in model.graph if n.name in scope_names]
    before = conversion.interface(model)
    result = FoldTransposes(scope=scope)(model)
    assert conversion.interface(model) == before
    out = io.to_proto(model)
    onnx.checker.check_model(out, full_check=True)
    if inputs is not None:
        expected, got = run_onnxruntime(proto, inputs), run_onnxruntime(out, inputs)
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name])
    return out, result.modified


def _ops(model):
    return collections.Counter(n.op_type for n in model.graph.node)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def test_case1_identity_and_case2_pair_cancel():
    m = _model([_t("x", "a", (1, 0, 2)), _t("a", "b", (1, 0, 2)), helper.make_node("Relu", ["b"], ["y"])],
               [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])])
    out, modified = _fold(m, inputs={"x": X})
    assert modified and _ops(out) == {"Relu": 1}


def test_case2_merge_into_one_transpose():
    m = _model([_t("x", "a", (1, 0, 2)), _t("a", "y", (0, 2, 1))], [_vi("x", [2, 3, 4])], [_vi("y", [3, 4, 2])])
    out, _ = _fold(m, inputs={"x": X})
    assert _ops(out) == {"Transpose": 1}
    assert list(out.graph.node[0].attribute[0].ints) == [1, 2, 0]


def test_graph_output_name_moves_to_the_cancelled_value():
    m = _model([helper.make_node("Relu", ["x"], ["r"]), _t("r", "a", (2, 1, 0)), _t("a", "y", (2, 1, 0))],
               [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])])
    out, _ = _fold(m, inputs={"x": X})
    assert _ops(out) == {"Relu": 1} and out.graph.node[0].output[0] == "y"


def test_interface_transpose_between_input_and_output_stays():
    m = _model([_t("x", "a", (1, 0, 2)), _t("a", "y", (1, 0, 2))], [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])])
    out, _ = _fold(m, inputs={"x": X})
    assert out.graph.output[0].name == "y" and len(out.graph.node) >= 1  # y must still be produced by a node


def test_case3_constant_folds_into_a_new_initializer_shared_one_untouched():
    c = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    m = _model([_t("c", "ct", (1, 0, 2)), helper.make_node("Add", ["x", "ct"], ["y"]),
                helper.make_node("Mul", ["c", "c"], ["z"])],
               [_vi("x", [3, 2, 4])], [_vi("y", [3, 2, 4]), _vi("z", [2, 3, 4])], [numpy_helper.from_array(c, "c")])
    out, _ = _fold(m, inputs={"x": X.transpose(1, 0, 2).copy()})
    assert "Transpose" not in _ops(out)
    inits = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    np.testing.assert_array_equal(inits["c"], c)  # the shared initializer is as it was
    assert any(v.shape == (3, 2, 4) for v in inits.values())


def test_case4_constant_of_shape_from_concat():
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
             helper.make_node("Concat", ["one", "s", "eight"], ["shape"], axis=0),
             helper.make_node("ConstantOfShape", ["shape"], ["zeros"]),
             _t("zeros", "zt", (1, 0, 2)), helper.make_node("Shape", ["zt"], ["y"])]
    inits = [numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([8], np.int64), "eight")]
    m = _model(nodes, [_vi("x", ["n", 3, 4])], [helper.make_tensor_value_info("y", TensorProto.INT64, [3])], inits)
    out, _ = _fold(m, inputs={"x": X})
    assert "Transpose" not in _ops(out) and _ops(out)["ConstantOfShape"] == 1


def test_case5_duplicates_become_one():
    m = _model([_t("x", "a", (1, 0, 2)), _t("x", "b", (1, 0, 2)), helper.make_node("Add", ["a", "b"], ["y"])],
               [_vi("x", [2, 3, 4])], [_vi("y", [3, 2, 4])])
    out, _ = _fold(m, inputs={"x": X})
    assert _ops(out) == {"Transpose": 1, "Add": 1}


@pytest.mark.parametrize("opset", [11, 17])
def test_case6_sink_through_squeeze(opset):
    # the batch-first export's Y path: [N,T,1,H] -> to [T,1,N,H] -> Squeeze(1) -> [T,N,H] -> Transpose -> [N,T,H]
    sq = (helper.make_node("Squeeze", ["a"], ["s"], axes=[1]) if opset < 13
          else helper.make_node("Squeeze", ["a", "axes"], ["s"]))
    inits = [] if opset < 13 else [numpy_helper.from_array(np.array([1], np.int64), "axes")]
    m = _model([_t("x", "a", (1, 2, 0, 3)), sq, _t("s", "y", (1, 0, 2))],
               [_vi("x", ["n", 3, 1, 4])], [_vi("y", ["n", 3, 4])], inits, opset=opset)
    out, _ = _fold(m, inputs={"x": RNG.standard_normal((2, 3, 1, 4)).astype(np.float32)})
    assert _ops(out) == {"Squeeze": 1}


def test_case6_sink_through_reshape():
    # the stacked bidirectional export: [N,T,D,H] -> [T,N,D,H] -> Reshape [0,0,-1] -> [T,N,D*H] -> [N,T,D*H]
    m = _model([_t("x", "a", (1, 0, 2, 3)), helper.make_node("Reshape", ["a", "shape"], ["r"]),
                _t("r", "y", (1, 0, 2))],
               [_vi("x", ["n", "t", 2, 4])], [_vi("y", ["n", "t", 8])],
               [numpy_helper.from_array(np.array([0, 0, -1], np.int64), "shape")])
    out, _ = _fold(m, inputs={"x": RNG.standard_normal((3, 5, 2, 4)).astype(np.float32)})
    assert _ops(out) == {"Reshape": 1}


def test_case6_reshape_that_mixes_axes_gets_one_grouping_transpose():
    # [2,3,4] -> [2,4,3] -> [2,12] -> [12,2]: one Transpose to [4,3,2], then the Reshape (numbers checked in _fold)
    m = _model([_t("x", "a", (0, 2, 1)), helper.make_node("Reshape", ["a", "shape"], ["r"]),
                _t("r", "y", (1, 0))],
               [_vi("x", [2, 3, 4])], [_vi("y", [12, 2])],
               [numpy_helper.from_array(np.array([0, -1], np.int64), "shape")])
    out, _ = _fold(m, inputs={"x": X})
    assert _ops(out) == {"Transpose": 1, "Reshape": 1}


def test_case7_and_8_states_sliced_and_concatenated():
    # per-layer states sliced from one graph input, transposed; final states transposed then concatenated
    nodes = [helper.make_node("Slice", ["h0", "s0", "e0", "ax"], ["h_a"]),
             helper.make_node("Slice", ["h0", "e0", "e1", "ax"], ["h_b"]),
             _t("h_a", "ta", (1, 0, 2)), _t("h_b", "tb", (1, 0, 2)),
             helper.make_node("Relu", ["ta"], ["ra"]), helper.make_node("Relu", ["tb"], ["rb"]),
             _t("ra", "ua", (1, 0, 2)), _t("rb", "ub", (1, 0, 2)),
             helper.make_node("Concat", ["ua", "ub"], ["h_n"], axis=0)]
    inits = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in
             (("s0", 0), ("e0", 2), ("e1", 4), ("ax", 0))]
    m = _model(nodes, [_vi("h0", [4, "n", 8])], [_vi("h_n", [4, "n", 8])], inits)
    out, _ = _fold(m, inputs={"h0": RNG.standard_normal((4, 3, 8)).astype(np.float32)})
    assert _ops(out)["Transpose"] == 2  # one for h0, one for h_n (the interface's)


def test_scope_leaves_other_transposes_alone():
    m = _model([_t("x", "a", (1, 0, 2), "theirs1"), _t("a", "b", (1, 0, 2), "theirs2"),
                helper.make_node("Relu", ["b"], ["r"], name="relu"),
                _t("r", "c", (1, 0, 2), "ours1"), _t("c", "y", (1, 0, 2), "ours2")],
               [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])])
    out, _ = _fold(m, scope_names={"ours1", "ours2"}, inputs={"x": X})
    assert [n.name for n in out.graph.node] == ["theirs1", "theirs2", "relu"]
    assert not _fold(m, scope_names=set())[1]


def test_downgrade_folds_the_transposes_it_adds():
    # layout-1 LSTM whose X the exporter transposed from [T,N,I]: downgrading below 14 cancels that pair
    src = recurrent_model("LSTM", layout=1, **NO_OPTIONAL)
    g = src.graph
    x = g.input[0]
    dims = [d.dim_value for d in x.type.tensor_type.shape.dim]
    g.input[0].CopyFrom(_vi("x_seq_major", [dims[1], dims[0], dims[2]]))
    g.node.insert(0, _t("x_seq_major", "X", (1, 0, 2), "exporter_T"))
    inputs = {"x_seq_major": RNG.standard_normal((dims[1], dims[0], dims[2])).astype(np.float32)}
    out = io.to_proto(downgrade(src, opset=13).model)
    lstm = next(n for n in out.graph.node if n.op_type == "LSTM")
    assert lstm.input[0] == "x_seq_major"
    expected = reference(src, inputs)
    got = run_onnxruntime(out, inputs)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)


def test_upgrade_without_transposes_is_unchanged():
    src = recurrent_model("GRU", opset=7, **ALL_OPTIONAL)
    out = io.to_proto(upgrade(src, opset=14).model)
    assert _ops(out) == _ops(src)
    inputs = feeds(src)
    np.testing.assert_allclose(run_onnxruntime(out, inputs)["Y"], run_onnxruntime(src, inputs)["Y"], rtol=1e-6)


@pytest.mark.parametrize("seed", range(20))
def test_random_transpose_chains(seed):
    # Relu -> k random Transposes -> Relu: folding leaves at most one Transpose, and the same numbers.
    rng = np.random.default_rng(seed)
    shape = [2, 3, 4, 5]
    nodes, value = [helper.make_node("Relu", ["x"], ["r0"])], "r0"
    for i in range(int(rng.integers(2, 5))):
        perm = [int(p) for p in rng.permutation(4)]
        nodes.append(_t(value, f"t{i}", perm))
        shape, value = [shape[p] for p in perm], f"t{i}"
    nodes.append(helper.make_node("Relu", [value], ["y"]))
    m = _model(nodes, [_vi("x", [2, 3, 4, 5])], [_vi("y", shape)])
    out, _ = _fold(m, inputs={"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32)})
    assert _ops(out)["Transpose"] <= 1 and _ops(out)["Relu"] == 2
