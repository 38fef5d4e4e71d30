"""One-node models (built with onnx.helper) at the newer version of each step, downgraded through the registry: the
result passes onnx.checker's full check, every node is valid at the target, and onnxruntime's outputs of the
converted model equal those of the source (onnxruntime's where it runs the source, onnx's reference ops where it
does not). Steps that cannot be exact exit 3 naming the node."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rnnconv
from rnnconv import io
from rnnconv.errors import RnnconvWarning, Unsupported

RNG = np.random.default_rng(0)
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, opset, inputs, outputs, consts=None, functions=()):
    """inputs: name -> fed array (graph inputs); consts: name -> array (initializers); outputs: name -> elem type."""
    graph = helper.make_graph(
        nodes, "step", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                        for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, t, None) for k, t in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()])
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("local", 1)] if functions else [])
    m = helper.make_model(graph, opset_imports=imports, functions=list(functions))
    m.ir_version = 8 if opset < 19 else 10
    for out, value in zip(m.graph.output, ReferenceEvaluator(m).run(None, inputs)):  # outputs need a shape
        out.type.tensor_type.shape.SetInParent()
        for d in np.shape(value):
            out.type.tensor_type.shape.dim.add().dim_value = d
    return m


def run(m, feeds):
    try:
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # onnxruntime has no kernel for this version: onnx's reference ops
        return dict(zip([o.name for o in m.graph.output], ReferenceEvaluator(m).run(None, feeds)))
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def downgrade(m, opset, feeds, **check):
    """Downgraded (rnnconv verifies it too), checked and compared with the source in onnxruntime."""
    out = io.to_proto(rnnconv.downgrade(m, opset=opset, inputs=feeds, **check).model)
    onnx.checker.check_model(out, full_check=True)
    assert [o.version for o in out.opset_import if o.domain == ""] == [opset]
    session = ort.InferenceSession(out.SerializeToString(), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    expected = run(m, feeds)
    assert set(got) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=1e-6, err_msg=name)
    return out


def ops(m) -> list[str]:
    return [n.op_type for n in m.graph.node]


def attrs(m, op) -> dict:
    node = next(n for n in m.graph.node if n.op_type == op)
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def node(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, **kw)


def c(name, array):
    return node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name))


def no_warning():
    return warnings.catch_warnings(record=True)


# -- Reshape 14 -> 13 ----------------------------------------------------------------------------------------------

def test_reshape_allowzero_default_is_removed():
    m = model([node("Reshape", ["x", "s"], ["y"], allowzero=0)], 14, {"x": x(2, 3, 4)}, {"y": F},
              {"s": np.array([4, 6], np.int64)})
    out = downgrade(m, 13, {"x": x(2, 3, 4)})
    assert "allowzero" not in attrs(out, "Reshape")


def test_reshape_allowzero_1_with_a_constant_shape_without_0_is_exact():
    m = model([node("Reshape", ["x", "s"], ["y"], allowzero=1)], 14, {"x": x(2, 3, 4)}, {"y": F},
              {"s": np.array([4, -1], np.int64)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RnnconvWarning)
        out = downgrade(m, 13, {"x": x(2, 3, 4)})
    assert "allowzero" not in attrs(out, "Reshape")


def test_reshape_allowzero_1_with_a_runtime_shape_warns():
    m = model([node("Reshape", ["x", "s"], ["y"], allowzero=1)], 14,
              {"x": x(2, 3, 4), "s": np.array([4, 6], np.int64)}, {"y": F})
    with pytest.warns(RnnconvWarning, match=r"Reshape node 'r': allowzero=1 dropped .* no tensor it reshapes is empty"):
        m.graph.node[0].name = "r"
        downgrade(m, 13, {"x": x(2, 3, 4), "s": np.array([4, 6], np.int64)})


def test_reshape_allowzero_1_with_a_constant_0_is_refused():
    m = model([node("Reshape", ["x", "s"], ["y"], allowzero=1, name="r")], 14, {"x": x(0, 3)}, {"y": F},
              {"s": np.array([0, 3], np.int64)})
    with pytest.raises(Unsupported, match="Reshape node 'r': allowzero=1 with a 0 in its constant shape"):
        rnnconv.downgrade(m, opset=13)


# -- Constant ------------------------------------------------------------------------------------------------------

def test_int64_constant_below_9_becomes_an_initializer():
    m = model([c("s", np.array([3, 8], np.int64)), node("Reshape", ["x", "s"], ["y"])], 9, {"x": x(2, 3, 4)},
              {"y": F})
    out = downgrade(m, 8, {"x": x(2, 3, 4)})
    assert ops(out) == ["Reshape"] and [t.name for t in out.graph.initializer] == ["s"]


def test_constant_value_ints_becomes_a_value_tensor_then_an_initializer():
    m = model([node("Constant", [], ["s"], value_ints=[3, 8]), node("Reshape", ["x", "s"], ["y"])], 13,
              {"x": x(2, 3, 4)}, {"y": F})
    out = downgrade(m, 11, {"x": x(2, 3, 4)})
    assert list(attrs(out, "Constant")) == ["value"]
    assert ops(downgrade(m, 8, {"x": x(2, 3, 4)})) == ["Reshape"]


def test_int64_constant_graph_output_keeps_its_name_on_an_identity():
    m = model([c("k", np.array([1, 2], np.int64)), node("Relu", ["x"], ["y"])], 9, {"x": x(2)}, {"k": I64, "y": F})
    out = downgrade(m, 8, {"x": x(2)})
    assert "Identity" in ops(out) and [o.name for o in out.graph.output] == ["k", "y"]


# -- Gather, GatherElements, ScatterElements below 11 ---------------------------------------------------------------

def test_gather_negative_constant_indices_are_normalised():
    m = model([node("Gather", ["x", "i"], ["y"], axis=0)], 11, {"x": x(5, 3)}, {"y": F},
              {"i": np.array([-1, 0, 2], np.int64)})
    out = downgrade(m, 10, {"x": x(5, 3)})
    assert numpy_helper.to_array(next(t for t in out.graph.initializer if t.name != "i")).tolist() == [4, 0, 2]


def test_gather_runtime_indices_warn_naming_the_assumption():
    m = model([node("Gather", ["x", "i"], ["y"], name="emb")], 11,
              {"x": x(5, 3), "i": np.array([4, 1], np.int64)}, {"y": F})
    with pytest.warns(RnnconvWarning, match="Gather node 'emb': indices computed at run time are assumed never "
                                            "negative"):
        downgrade(m, 10, {"x": x(5, 3), "i": np.array([4, 1], np.int64)}, ranges={"i": (0, 4)})


def test_gather_elements_below_11_with_constant_indices():
    m = model([node("GatherElements", ["x", "i"], ["y"], axis=1)], 11, {"x": x(3, 4)}, {"y": F},
              {"i": np.array([[0, -1], [2, 1], [3, 0]], np.int64)})
    assert ops(downgrade(m, 10, {"x": x(3, 4)})) == ["Reshape", "Gather"]


def test_gather_elements_below_11_with_runtime_indices_is_refused():
    m = model([node("GatherElements", ["x", "i"], ["y"], name="ge")], 11,
              {"x": x(3, 4), "i": np.zeros([3, 4], np.int64)}, {"y": F})
    with pytest.raises(Unsupported, match="GatherElements node 'ge': below opset 11 it needs constant indices"):
        rnnconv.downgrade(m, opset=10)


def test_scatter_elements_below_11_is_scatter_9():
    m = model([node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)], 11, {"x": x(3, 3), "u": x(2, 3)},
              {"y": F}, {"i": np.array([[1, 0, 2], [0, 2, -2]], np.int64)})
    assert ops(downgrade(m, 10, {"x": x(3, 3), "u": x(2, 3)})) == ["Scatter"]


# -- Pad -----------------------------------------------------------------------------------------------------------

PADS = {"p": np.array([0, 1, 1, 0], np.int64), "v": np.array(1.5, np.float32)}


def test_pad_13_to_11_only_checks_types():
    m = model([node("Pad", ["x", "p", "v"], ["y"])], 13, {"x": x(2, 3)}, {"y": F}, PADS)
    assert len(downgrade(m, 11, {"x": x(2, 3)}).graph.node[0].input) == 3


def test_pad_inputs_go_back_to_attributes_below_11():
    m = model([node("Pad", ["x", "p", "v"], ["y"], mode="constant")], 13, {"x": x(2, 3)}, {"y": F}, PADS)
    out = downgrade(m, 10, {"x": x(2, 3)})
    assert attrs(out, "Pad") == {"mode": b"constant", "pads": [0, 1, 1, 0], "value": 1.5}


def test_pad_axes_input_spreads_pads_over_every_axis():
    m = model([node("Pad", ["x", "p", "", "a"], ["y"], mode="reflect")], 19, {"x": x(3, 4)}, {"y": F},
              {"p": np.array([1, 2], np.int64), "a": np.array([-1], np.int64)})
    out = downgrade(m, 13, {"x": x(3, 4)})
    assert numpy_helper.to_array(next(t for t in out.graph.initializer if t.name not in ("p", "a"))).tolist() == [
        0, 1, 0, 2]


def test_pad_wrap_is_refused_below_19():
    m = model([node("Pad", ["x", "p"], ["y"], mode="wrap", name="pad")], 19, {"x": x(3, 4)}, {"y": F},
              {"p": np.array([1, 1, 1, 1], np.int64)})
    with pytest.raises(Unsupported, match="Pad node 'pad': mode 'wrap' exists only from Pad-19"):
        rnnconv.downgrade(m, opset=18)


def test_pad_computed_by_a_constant_chain_is_folded_below_11():
    """As PyTorch's legacy exporter writes F.pad: pads computed by ConstantOfShape / Concat / Reshape / Slice /
    Transpose / Cast from constants only."""
    nodes = [c("n", np.array([2], np.int64)), node("ConstantOfShape", ["n"], ["zeros"],
                                                   value=numpy_helper.from_array(np.array([0], np.int64))),
             c("tail", np.array([1, 2], np.int64)), node("Concat", ["tail", "zeros"], ["cat"], axis=0),
             c("pairs", np.array([-1, 2], np.int64)), node("Reshape", ["cat", "pairs"], ["r"]),
             c("st", np.array([-1], np.int64)), c("en", np.array([-(2 ** 62)], np.int64)),
             c("ax", np.array([0], np.int64)), c("sp", np.array([-1], np.int64)),
             node("Slice", ["r", "st", "en", "ax", "sp"], ["rev"]), node("Transpose", ["rev"], ["t"], perm=[1, 0]),
             c("flat", np.array([-1], np.int64)), node("Reshape", ["t", "flat"], ["f"]),
             node("Cast", ["f"], ["pads"], to=I64), node("Pad", ["x", "pads"], ["y"], name="pad")]
    m = model(nodes, 11, {"x": x(2, 3)}, {"y": F})
    result = rnnconv.downgrade(m, opset=10, inputs={"x": x(2, 3)})
    out = downgrade(m, 10, {"x": x(2, 3)})
    assert ops(out) == ["Pad"] and attrs(out, "Pad")["pads"] == [0, 1, 0, 2]
    assert result.report.ok


# -- Pow, Gemm -----------------------------------------------------------------------------------------------------

def test_pow_15_to_12_only_checks_types():
    m = model([node("Pow", ["x", "e"], ["y"])], 15, {"x": np.abs(x(3)) + 0.5, "e": x(3)}, {"y": F})
    downgrade(m, 12, {"x": np.abs(x(3)) + 0.5, "e": x(3)})


def test_pow_constant_integer_exponent_is_retyped_below_12():
    m = model([node("Pow", ["x", "e"], ["y"])], 13, {"x": x(3)}, {"y": F}, {"e": np.array(2, np.int64)})
    out = downgrade(m, 7, {"x": x(3)})
    assert [t.data_type for t in out.graph.initializer] == [F]


def test_pow_runtime_integer_exponent_is_cast_with_a_warning():
    m = model([node("Pow", ["x", "e"], ["y"], name="pow")], 13, {"x": x(3), "e": np.array([2, 3, 1], np.int32)},
              {"y": F})
    with pytest.warns(RnnconvWarning, match="Pow node 'pow': run-time exponent cast from int32 to float"):
        out = downgrade(m, 7, {"x": x(3), "e": np.array([2, 3, 1], np.int32)}, ranges={"e": (0, 3)})
    assert ops(out) == ["Cast", "Pow"]


@pytest.mark.parametrize("target", [9, 7])
def test_gemm_without_c_gets_a_zero_c(target):
    m = model([node("Gemm", ["a", "b"], ["y"], alpha=0.5)], 13, {"a": x(2, 3)}, {"y": F}, {"b": x(3, 4)})
    assert len(downgrade(m, target, {"a": x(2, 3)}).graph.node[0].input) == 3


# -- If: type lists, bodies, branch shapes -------------------------------------------------------------------------

def _if_model(else_shape=(4, 6)):
    then = helper.make_graph([node("Reshape", ["x", "s"], ["t"], allowzero=0),
                              c("ax", np.array([0], np.int64)), node("Unsqueeze", ["t", "ax"], ["tu"])], "then", [],
                             [helper.make_tensor_value_info("tu", F, [1, 4, 6])])
    other = helper.make_graph([c("s2", np.array(else_shape, np.int64)), node("Reshape", ["x", "s2"], ["e"]),
                               c("ax2", np.array([0], np.int64)), node("Unsqueeze", ["e", "ax2"], ["eu"])],
                              "else", [], [helper.make_tensor_value_info("eu", F, [1, *else_shape])])
    return model([node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="if")], 16,
                 {"cond": np.array(True), "x": x(2, 3, 4)}, {"y": F}, {"s": np.array([4, 6], np.int64)})


@pytest.mark.parametrize("target", [15, 13, 9])
def test_if_moves_with_its_bodies(target):
    for cond in (True, False):
        out = downgrade(_if_model(), target, {"cond": np.array(cond), "x": x(2, 3, 4)})
    body = [n for n in out.graph.node[0].attribute[0].g.node]
    assert all(a.name != "allowzero" for n in body for a in n.attribute)


def test_if_branches_of_different_ranks_are_refused_below_11():
    with pytest.raises(Unsupported, match=r"If node 'if': its branches give output 0 the shapes \[1, 4, 6\] and "
                                          r"\[1, 24\]"):
        rnnconv.downgrade(_if_model(else_shape=(24,)), opset=10)


def test_nodes_of_a_body_are_named_by_their_path_when_their_op_is_missing():
    then = helper.make_graph([node("Einsum", ["x", "x"], ["t"], equation="ij,ij->i", name="ein")], "then", [],
                             [helper.make_tensor_value_info("t", F, [2])])
    other = helper.make_graph([node("ReduceSum", ["x", "axis"], ["e"], keepdims=0)], "else", [],
                              [helper.make_tensor_value_info("e", F, [2])],
                              [numpy_helper.from_array(np.array([1], np.int64), "axis")])
    m = model([node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="if")], 13,
              {"cond": np.array(True), "x": x(2, 3)}, {"y": F})
    with pytest.raises(Unsupported, match=r"Einsum \(1 node\(s\): if/then_branch/ein\) does not exist at opset 11; "
                                          r"first exists at opset 12"):
        rnnconv.downgrade(m, opset=11)


# -- Loop: loop-carried values of several types --------------------------------------------------------------------

def _loop_model(opset: int = 13):
    """A Loop carrying an int32 counter and a float16 state (tf2onnx's form under Keras' mixed precision): Loop's
    `V` is heterogeneous at every version (onnx's schemas: v_initial is a variadic of V, not homogeneous)."""
    F16, I32 = TensorProto.FLOAT16, TensorProto.INT32
    value = helper.make_tensor_value_info
    body = helper.make_graph(
        [node("Identity", ["cond_in"], ["cond_out"]), node("Add", ["k", "one"], ["k_out"]),
         node("Mul", ["s", "half"], ["s_out"]), node("Identity", ["s_out"], ["y_t"])], "body",
        [value("i", I64, []), value("cond_in", TensorProto.BOOL, []), value("k", I32, []), value("s", F16, [2])],
        [value("cond_out", TensorProto.BOOL, []), value("k_out", I32, []), value("s_out", F16, [2]),
         value("y_t", F16, [2])],
        [numpy_helper.from_array(np.array(1, np.int32), "one"), numpy_helper.from_array(np.array(0.5, np.float16),
                                                                                       "half")])
    loop = node("Loop", ["trips", "", "k0", "s0"], ["k_last", "s_last", "y"], body=body, name="loop")
    graph = helper.make_graph([loop], "loop", [value("s0", F16, [2])],
                              [value("k_last", I32, []), value("s_last", F16, [2]), value("y", F16, [3, 2])],
                              [numpy_helper.from_array(np.array(3, np.int64), "trips"),
                               numpy_helper.from_array(np.array(0, np.int32), "k0")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("target", [11, 13])
def test_loop_carrying_values_of_different_types_moves_down(target):
    out = downgrade(_loop_model(16), target, {"s0": np.array([1.5, -3.0], np.float16)})
    assert ops(out) == ["Loop"]


def test_loop_type_constraints_are_the_schemas():
    from rnnconv.passes.adapter_kinds import type_problem
    import onnx_ir as ir

    def v(dtype):
        return ir.Value(name="v", type=ir.TensorType(dtype))

    mixed = [v(ir.DataType.INT64), None, v(ir.DataType.INT32), v(ir.DataType.FLOAT16)]
    assert type_problem("Loop", 11, mixed, mixed[2:]) is None
    assert type_problem("Loop", 1, mixed, mixed[2:]) is None  # Loop-1's V is heterogeneous too
    # a homogeneous variadic still needs one type (Concat's inputs), and types outside a list are still refused
    assert "needs one type" in type_problem("Concat", 11, [v(ir.DataType.FLOAT), v(ir.DataType.FLOAT16)], [])
    assert "not in Loop-11's type list" in type_problem("Loop", 11, [v(ir.DataType.INT32)], [])


# -- attribute <-> input, optional inputs, negative axes -----------------------------------------------------------

def test_split_input_goes_back_to_the_attribute():
    m = model([node("Split", ["x", "s"], ["a", "b"], axis=1)], 13, {"x": x(2, 5)}, {"a": F, "b": F},
              {"s": np.array([2, 3], np.int64)})
    assert attrs(downgrade(m, 12, {"x": x(2, 5)}), "Split")["split"] == [2, 3]


def test_split_num_outputs_uneven_gets_explicit_sizes():
    m = model([node("Split", ["x"], ["a", "b", "c"], axis=-1, num_outputs=3)], 18, {"x": x(2, 7)},
              {"a": F, "b": F, "c": F})
    assert attrs(downgrade(m, 11, {"x": x(2, 7)}), "Split")["split"] == [3, 3, 1]


@pytest.mark.parametrize("target", [12, 9])
def test_squeeze_and_unsqueeze_axes(target):
    m = model([node("Squeeze", ["x", "a"], ["s"]), node("Unsqueeze", ["s", "b"], ["y"])], 13, {"x": x(2, 1, 3)},
              {"y": F}, {"a": np.array([-2], np.int64), "b": np.array([-1, 0], np.int64)})
    out = downgrade(m, target, {"x": x(2, 1, 3)})
    assert attrs(out, "Squeeze")["axes"] == ([-2] if target > 10 else [1])
    assert attrs(out, "Unsqueeze")["axes"] == ([-1, 0] if target > 10 else [0, 3])


@pytest.mark.parametrize("target", [12, 9])
def test_reduce_mean_axes_input(target):
    m = model([node("ReduceMean", ["x", "a"], ["y"], keepdims=1)], 18, {"x": x(2, 3, 4)}, {"y": F},
              {"a": np.array([-1, 1], np.int64)})
    assert attrs(downgrade(m, target, {"x": x(2, 3, 4)}), "ReduceMean")["axes"] == (
        [-1, 1] if target > 10 else [2, 1])


def test_reduce_without_axes_and_noop_is_an_identity():
    m = model([node("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1)], 18, {"x": x(2, 3)}, {"y": F})
    assert ops(downgrade(m, 13, {"x": x(2, 3)})) == ["Identity"]


def test_resize_19_to_13_removes_defaults():
    m = model([node("Resize", ["x", "", "s"], ["y"], mode="linear", antialias=0,
                    keep_aspect_ratio_policy="stretch")], 19, {"x": x(1, 1, 2, 3)}, {"y": F},
              {"s": np.array([1, 1, 2, 2], np.float32)})
    assert set(attrs(downgrade(m, 13, {"x": x(1, 1, 2, 3)}), "Resize")) == {"mode"}


def test_resize_13_to_11_gets_empty_roi_and_scales():
    m = model([node("Resize", ["x", "", "", "z"], ["y"], mode="nearest")], 13, {"x": x(1, 1, 2, 3)}, {"y": F},
              {"z": np.array([1, 1, 4, 6], np.int64)})
    assert all(downgrade(m, 11, {"x": x(1, 1, 2, 3)}).graph.node[0].input)


@pytest.mark.parametrize("target,inputs", [(10, ["x", "lo", "hi"]), (6, ["x", "", "hi"])])
def test_clip_bounds_go_back_to_attributes(target, inputs):
    m = model([node("Clip", inputs, ["y"])], 13, {"x": x(4, 5)}, {"y": F},
              {"lo": np.array(-0.5, np.float32), "hi": np.array(0.25, np.float32)})
    expected = {"min": -0.5, "max": 0.25} if inputs[1] else {"max": 0.25}
    assert attrs(downgrade(m, target, {"x": x(4, 5)}), "Clip") == expected


def test_softmax_on_an_inner_axis_below_13_is_moved_last_by_transposes():
    m = model([node("Softmax", ["x"], ["y"], axis=1)], 13, {"x": x(2, 3, 4)}, {"y": F})
    assert ops(downgrade(m, 12, {"x": x(2, 3, 4)})) == ["Transpose", "Softmax", "Transpose"]


def test_log_softmax_on_the_last_axis_keeps_one_node():
    m = model([node("LogSoftmax", ["x"], ["y"])], 13, {"x": x(2, 3, 4)}, {"y": F})
    out = downgrade(m, 9, {"x": x(2, 3, 4)})
    assert ops(out) == ["LogSoftmax"] and attrs(out, "LogSoftmax") == {"axis": 2}


def test_shape_start_end_become_shape_and_slice():
    m = model([node("Shape", ["x"], ["y"], start=1, end=-1)], 15, {"x": x(2, 3, 4, 5)}, {"y": I64})
    assert ops(downgrade(m, 13, {"x": x(2, 3, 4, 5)})) == ["Shape", "Slice"]


def test_slice_inputs_go_back_to_attributes():
    m = model([node("Slice", ["x", "s", "e", "a", "t"], ["y"])], 13, {"x": x(4, 5)}, {"y": F},
              {"s": np.array([1, -3], np.int64), "e": np.array([3, 5], np.int64), "a": np.array([0, -1], np.int64),
               "t": np.array([1, 1], np.int64)})
    assert attrs(downgrade(m, 9, {"x": x(4, 5)}), "Slice") == {"starts": [1, -3], "ends": [3, 5], "axes": [0, 1]}


def test_slice_with_steps_is_refused_below_10():
    m = model([node("Slice", ["x", "s", "e", "a", "t"], ["y"], name="sl")], 13, {"x": x(4, 5)}, {"y": F},
              {"s": np.array([0], np.int64), "e": np.array([4], np.int64), "a": np.array([0], np.int64),
               "t": np.array([2], np.int64)})
    with pytest.raises(Unsupported, match="Slice node 'sl': input steps exists only from version 10"):
        rnnconv.downgrade(m, opset=9)


def test_cast_saturate_default_is_removed():
    m = model([node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE, saturate=1)], 19, {"x": x(3)},
              {"y": TensorProto.DOUBLE})
    assert attrs(downgrade(m, 13, {"x": x(3)}), "Cast") == {"to": TensorProto.DOUBLE}


def test_max_pool_default_dilations_are_removed():
    m = model([node("MaxPool", ["x"], ["y"], kernel_shape=[2], dilations=[1], ceil_mode=0)], 12,
              {"x": x(1, 2, 6)}, {"y": F})
    assert set(attrs(downgrade(m, 7, {"x": x(1, 2, 6)}), "MaxPool")) == {"kernel_shape"}


def test_max_pool_dilations_are_refused_below_10():
    m = model([node("MaxPool", ["x"], ["y"], kernel_shape=[2], dilations=[2], name="mp")], 12, {"x": x(1, 2, 6)},
              {"y": F})
    with pytest.raises(Unsupported, match="MaxPool node 'mp': dilations exists only from version 10"):
        rnnconv.downgrade(m, opset=7)


@pytest.mark.parametrize("op,attr,expected", [("Concat", "axis", 1), ("Flatten", "axis", 1), ("ArgMax", "axis", 1)])
def test_negative_axis_is_normalised_below_11(op, attr, expected):
    inputs = ["x", "x"] if op == "Concat" else ["x"]
    m = model([node(op, inputs, ["y"], **{attr: -1})], 13, {"x": x(3, 4)}, {"y": I64 if op == "ArgMax" else F})
    assert attrs(downgrade(m, 10, {"x": x(3, 4)}), op)[attr] == expected


# -- steps that only widen the type lists, for the ops real exports use -------------------------------------------

UNARY = {"Relu": 6, "Sigmoid": 6, "Tanh": 6, "Sqrt": 6, "Exp": 6, "Log": 6, "Neg": 6, "Abs": 6, "Floor": 6,
         "Ceil": 6, "Reciprocal": 6, "Erf": 9, "Sign": 9, "Identity": 1, "Softplus": 1, "LeakyRelu": 6, "Elu": 6,
         "HardSigmoid": 6, "Sin": 7, "Cos": 7, "Transpose": 1, "Size": 1, "Shape": 1}
BINARY = {"Add": 7, "Sub": 7, "Mul": 7, "Div": 7, "Pow": 7, "Max": 8, "Min": 8, "Equal": 11, "Less": 9,
          "Greater": 9, "MatMul": 9, "LessOrEqual": 12, "GreaterOrEqual": 12}
OUT = {"Equal": TensorProto.BOOL, "Less": TensorProto.BOOL, "Greater": TensorProto.BOOL, "Size": I64, "Shape": I64,
       "LessOrEqual": TensorProto.BOOL, "GreaterOrEqual": TensorProto.BOOL}


@pytest.mark.parametrize("op", sorted(UNARY) + sorted(BINARY))
def test_type_list_steps(op):
    newest = max(v for (o, v, _), _a in rnnconv.passes.adapters.ADAPTERS.items() if o == op)
    inputs = {"a": np.abs(x(3, 3)) + 0.5} | ({"b": x(3, 3)} if op in BINARY else {})
    m = model([node(op, list(inputs), ["y"])], newest, inputs, {"y": OUT.get(op, F)})
    downgrade(m, UNARY.get(op) or BINARY[op], inputs)


# -- functions, failures the checker finds ---------------------------------------------------------------------------

def test_model_local_function_moves_with_the_model():
    body = [c("s", np.array([-1], np.int64)), node("Reshape", ["x", "s"], ["r"], allowzero=0),
            c("ax", np.array([0], np.int64)), node("Unsqueeze", ["r", "ax"], ["y"])]
    function = helper.make_function("local", "flat", ["x"], ["y"], body, [helper.make_opsetid("", 14)])
    m = model([helper.make_node("flat", ["x"], ["y"], domain="local")], 14, {"x": x(2, 3)}, {"y": F},
              functions=[function])
    out = downgrade(m, 12, {"x": x(2, 3)})
    assert [o.version for o in out.functions[0].opset_import if o.domain == ""] == [12]
    assert {n.op_type: [a.name for a in n.attribute] for n in out.functions[0].node}["Unsqueeze"] == ["axes"]


def test_a_converted_model_failing_the_checker_names_the_step(monkeypatch):
    """A step that leaves what the older version cannot hold is a missing step: exit 3 naming op and versions."""
    from rnnconv.passes import adapters

    monkeypatch.setitem(adapters.ADAPTERS, ("Reshape", 14, 13), lambda plan, opset: None)
    m = model([node("Reshape", ["x", "s"], ["y"], allowzero=0)], 14, {"x": x(2, 3, 4)}, {"y": F},
              {"s": np.array([4, 6], np.int64)})
    with pytest.raises(Unsupported, match=r"no step of rnnconv moves Reshape-14 to Reshape-13 correctly"):
        rnnconv.downgrade(m, opset=13)
