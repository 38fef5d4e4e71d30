"""Opset adapters: ONE registry, one line per (op, from version, to version) step, recurrent ops and the others alike
(onnx's version-converter table, `registerAdapter("GRU", 13, 14, ...)`, is the model).

An adapter edits a `NodePlan` (adapter_plan.py, beside the registry): the node's attributes and inputs as they will be
at the step's target version, plus the nodes and constants the step adds. It raises `NotApplicable` when its conditions
do not hold (the opset pass then tries onnx's own adapter for that step) and `Unsupported` when nothing can express the
node at the target. Recurrent steps follow the recurrent version chains (GRU 1, 3, 7, 14, 22; LSTM/RNN 1, 7, 14, 22);
the others follow schema versions. A step to `None` takes an op below its first version (it replaces the node by other
ops).

The other ops' steps are the table `STEPS`: each line a `Step` between adjacent schema versions whose change is only the
type lists (every step checks the node's types against the target version's lists) plus the generic kinds of
adapter_kinds.py: a new attribute at its default (`Default`, removed going down), a new attribute with no neutral value
(`Absent`), an attribute the older version requires (`Required`), a new optional input (`NewInput`), an input that
became optional (`Fill`: the old default is supplied), an attribute that became an input (`ToAttribute`: a constant
input goes back to the attribute), negative axes (`Negative`: normalised with the known rank).
tests/passes/test_adapter_table.py re-derives every line from the installed onnx's schemas. Steps the kinds cannot
express alone carry a specific adapter (`special`, in adapter_specials.py). Changes the schemas do not show (If-11's
branches of different shapes, Pad-19's mode "wrap", Resize-19's "half_pixel_symmetric", ScatterElements-18's max/min)
were read in the ONNX changelog (Changelog.md). A step that reads a value as constant may fold the small chain of
constant-only nodes computing it (`fold`), and says so in its `what`.

Negative indices (Gather, ScatterElements, GatherElements, from opset 11): constant indices are normalised with
the static dimension (exact); indices computed at run time are converted with a warning naming the assumption
that they are never negative. Reshape-14's allowzero=1 with a shape computed at run time likewise (the assumption:
no tensor it reshapes is empty).

onnx's version converter has no GRU/LSTM/RNN adapter across opset 7 (either way), none for GRU 2->3, and refuses
to move a layout=1 node below 14; onnxruntime has no kernel below version 7. Specs: onnx Operators.md and
Changelog.md, ../shared/spec/. `python -m rnnconv.passes.adapters` prints the coverage table of docs/opsets.md.
"""

from __future__ import annotations

from rnnconv.dialects.onnx_recurrent import (
    BFLOAT16_SINCE,
    CAST_BFLOAT16_SINCE,
    LAYOUT_SINCE,
    LINEAR_BEFORE_RESET_SINCE,
    MODERN_SINCE,
    OPS,
)
from rnnconv.errors import Unsupported
from rnnconv.passes.adapter_kinds import (  # noqa: F401  (the table's vocabulary, importable from here)
    Absent,
    Default,
    Fill,
    Negative,
    NewInput,
    Required,
    Step,
    ToAttribute,
    chain,
    step,
)
from rnnconv.passes.adapter_plan import (  # noqa: F401  (what the opset pass drives)
    ADAPTERS,
    WHAT,
    NodePlan,
    NotApplicable,
    Scope,
    register,
)
from rnnconv.passes.adapter_specials import (
    constant_12_11,
    constant_types,
    gather_11_1,
    gather_elements_below_11,
    if_11_1,
    pad_18_13,
    pad_19_18,
    pow_12_7,
    quantize_13_10,
    reduce_noop,
    reshape_14_13,
    resize_19_18,
    scatter_elements_18_16,
    scatter_elements_below_11,
    shape_15_13,
    softmax_13_11,
    split_18_13,
)


# -- recurrent ops ----------------------------------------------------------------------------------------------

def _nothing(plan: NodePlan, opset: int) -> None:
    """The newer version only adds an attribute at its default or widens the type list."""


def _drop_output_sequence(plan: NodePlan, opset: int) -> None:
    """output_sequence dropped (Y is always available from version 7)."""
    if plan.drop("output_sequence") is not None:
        plan.what.append(f"output_sequence dropped (Y is always available from version {MODERN_SINCE})")


def _add_output_sequence(plan: NodePlan, opset: int) -> None:
    """output_sequence=1 when Y is used."""
    y = plan.rn.outputs.get("Y")
    if y is not None and (y.uses() or y.is_graph_output()):
        plan.set("output_sequence", 1)
        plan.what.append("output_sequence=1 (Y is used)")


def _refuse_linear_before_reset(plan: NodePlan, opset: int) -> None:
    """linear_before_reset=1 refused (no GRU-1 holds it)."""
    if plan.drop("linear_before_reset"):
        raise Unsupported(f"GRU node {plan.rn.name!r}: linear_before_reset=1 cannot be expressed in GRU-1 "
                          f"(opsets 1-{LINEAR_BEFORE_RESET_SINCE - 1}); the lowest opset that can hold it is "
                          f"{LINEAR_BEFORE_RESET_SINCE}", fixes=(f"opset={LINEAR_BEFORE_RESET_SINCE}",))


def _layout_to_0(plan: NodePlan, opset: int) -> None:
    """layout=1: the node goes to layout 0 between Transposes."""
    if plan.drop("layout") == 1:
        plan.layout_to_0 = True
        plan.what.append(f"layout=1 -> layout 0 with Transposes (layout exists from version {LAYOUT_SINCE})")


def _bfloat16_to_float32(plan: NodePlan, opset: int) -> None:
    """bfloat16: computed in float32 between Casts (Cast holds bfloat16 from opset 13)."""
    x = plan.rn.inputs["X"]
    dtype = x.dtype.name.lower() if x is not None and x.dtype is not None else getattr(plan.rn.layer.dtype, "name",
                                                                                         "")
    if dtype != "bfloat16":
        return
    if opset < CAST_BFLOAT16_SINCE:
        raise Unsupported(f"{plan.rn.op} node {plan.rn.name!r}: bfloat16 needs Casts around the node below version "
                          f"{BFLOAT16_SINCE}, and Cast holds bfloat16 only from opset {CAST_BFLOAT16_SINCE}",
                          fixes=(f"opset={CAST_BFLOAT16_SINCE}",))
    plan.cast_to_float32 = True
    plan.what.append("bfloat16 computed as float32 between Casts (exact inputs; outputs rounded back)")


for _op in OPS:
    register(_op, MODERN_SINCE, LAYOUT_SINCE, _nothing, what="")
    register(_op, LAYOUT_SINCE, MODERN_SINCE, _layout_to_0)
    register(_op, LAYOUT_SINCE, BFLOAT16_SINCE, _nothing, what="")
    register(_op, BFLOAT16_SINCE, LAYOUT_SINCE, _bfloat16_to_float32)
register("GRU", 1, LINEAR_BEFORE_RESET_SINCE, _nothing, what="")
register("GRU", LINEAR_BEFORE_RESET_SINCE, 1, _refuse_linear_before_reset)
register("GRU", LINEAR_BEFORE_RESET_SINCE, MODERN_SINCE, _drop_output_sequence)
register("GRU", MODERN_SINCE, LINEAR_BEFORE_RESET_SINCE, _add_output_sequence)
register("LSTM", 1, MODERN_SINCE, _drop_output_sequence)
register("LSTM", MODERN_SINCE, 1, _add_output_sequence)
register("RNN", 1, MODERN_SINCE, _drop_output_sequence)
register("RNN", MODERN_SINCE, 1, _add_output_sequence)


# -- the table: every step of the other ops (checked against the schemas by tests/passes/test_adapter_table.py) --

_REDUCE_AXES = (ToAttribute(1, "axes"), Default("noop_with_empty_axes", 0))
_UNARY_13 = ("Abs", "Ceil", "Exp", "Floor", "Log", "Neg", "Reciprocal", "Sigmoid", "Sqrt", "Tanh")

STEPS: list[Step] = [
    *[s for op in ("Add", "Sub", "Mul", "Div") for s in chain(op, 7, 13, 14)],
    *[s for op in _UNARY_13 for s in chain(op, 6, 13)],
    *chain("Relu", 6, 13, 14), *chain("Erf", 9, 13), *chain("Sign", 9, 13), *chain("Round", 11, 22),
    *chain("Sin", 7, 22), *chain("Cos", 7, 22), *chain("Softplus", 1, 22), *chain("LeakyRelu", 6, 16),
    *chain("Elu", 6, 22), *chain("Selu", 6, 22), *chain("HardSigmoid", 6, 22), *chain("PRelu", 7, 9, 16),
    *chain("Pow", 12, 13, 15), step("Pow", 7, 12, special=pow_12_7),
    *chain("Max", 8, 12, 13), *chain("Min", 8, 12, 13), *chain("Mod", 10, 13),
    *chain("Equal", 7, 11, 13, 19), *chain("Greater", 7, 9, 13), *chain("Less", 7, 9, 13),
    *chain("GreaterOrEqual", 12, 16), *chain("LessOrEqual", 12, 16), *chain("Where", 9, 16),
    *chain("MatMul", 1, 9, 13), *chain("Gemm", 7, 9), step("Gemm", 9, 11, Fill(2, "C", "zero")),
    *chain("Gemm", 11, 13),
    *chain("Identity", 1, 13, 14, 16, 19, 21, 23, 24, 25),
    *chain("Cast", 6, 9, 13), step("Cast", 13, 19, Default("saturate", 1)), *chain("Cast", 19, 21, 23),
    step("Cast", 23, 24, Default("round_mode", "up")), *chain("Cast", 24, 25, 28),
    step("Constant", 1, 9, special=constant_types),
    step("Constant", 9, 11, Absent("sparse_value"), Required("value")),
    step("Constant", 11, 12, *(Absent(n) for n in ("value_float", "value_floats", "value_int", "value_ints",
                                                   "value_string", "value_strings")), special=constant_12_11),
    *[step("Constant", a, b, special=constant_types) for a, b in ((12, 13), (13, 19), (19, 21), (21, 23), (23, 24),
                                                                 (24, 25))],
    *chain("ConstantOfShape", 9, 20, 21, 23, 24, 25), *chain("Expand", 8, 13),
    *chain("Size", 1, 13, 19, 21, 23, 24, 25),
    *chain("Shape", 1, 13), step("Shape", 13, 15, Default("start", 0), Absent("end"), special=shape_15_13),
    *chain("Shape", 15, 19, 21, 23, 24, 25),
    *chain("Reshape", 5, 13), step("Reshape", 13, 14, Default("allowzero", 0), special=reshape_14_13),
    *chain("Reshape", 14, 19, 21, 23, 24, 25),
    *chain("Transpose", 1, 13, 21, 23, 24, 25),
    step("Squeeze", 1, 11, Negative("axes")), step("Squeeze", 11, 13, ToAttribute(1, "axes")),
    *chain("Squeeze", 13, 21, 23, 24, 25),
    step("Unsqueeze", 1, 11, Negative("axes", output_rank=True)), step("Unsqueeze", 11, 13, ToAttribute(1, "axes")),
    *chain("Unsqueeze", 13, 21, 23, 24, 25),
    step("Flatten", 1, 9), step("Flatten", 9, 11, Negative("axis")), *chain("Flatten", 11, 13, 21, 23, 24, 25),
    step("Concat", 4, 11, Negative("axis")), *chain("Concat", 11, 13),
    step("Split", 2, 11, Negative("axis")), step("Split", 11, 13, ToAttribute(1, "split")),
    step("Split", 13, 18, Absent("num_outputs"), special=split_18_13),
    step("Slice", 1, 10, ToAttribute(1, "starts"), ToAttribute(2, "ends"), ToAttribute(3, "axes"),
         NewInput(4, "steps", neutral=1)),
    step("Slice", 10, 11, Negative("axes", index=3)), *chain("Slice", 11, 13),
    step("Gather", 1, 11, special=gather_11_1), *chain("Gather", 11, 13),
    *chain("GatherElements", 11, 13),
    *chain("ScatterElements", 11, 13), step("ScatterElements", 13, 16, Default("reduction", "none")),
    step("ScatterElements", 16, 18, special=scatter_elements_18_16),
    *chain("Tile", 6, 13), *chain("CumSum", 11, 14), *chain("NonZero", 9, 13),
    step("OneHot", 9, 11, Negative("axis", output_rank=True)), *chain("OneHot", 11, 28), *chain("Einsum", 12, 28),
    step("Range", 11, 27, Default("stash_type", 1)),
    step("Pad", 2, 11, ToAttribute(1, "pads"), ToAttribute(2, "value")), *chain("Pad", 11, 13),
    step("Pad", 13, 18, NewInput(3, "axes"), special=pad_18_13), step("Pad", 18, 19, special=pad_19_18),
    *chain("Pad", 19, 21, 23, 24, 25),
    step("Clip", 6, 11, ToAttribute(1, "min"), ToAttribute(2, "max")), *chain("Clip", 11, 12, 13),
    *(step(op, 1, 11, Negative("axes")) for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum")),
    *chain("ReduceMean", 11, 13), step("ReduceMean", 13, 18, *_REDUCE_AXES, special=reduce_noop),
    *chain("ReduceMax", 11, 12, 13), step("ReduceMax", 13, 18, *_REDUCE_AXES, special=reduce_noop),
    *chain("ReduceMax", 18, 20),
    *chain("ReduceMin", 11, 12, 13), step("ReduceMin", 13, 18, *_REDUCE_AXES, special=reduce_noop),
    *chain("ReduceMin", 18, 20),
    step("ReduceSum", 11, 13, *_REDUCE_AXES, special=reduce_noop),
    step("ArgMax", 1, 11, Negative("axis")), step("ArgMax", 11, 12, Default("select_last_index", 0)),
    *chain("ArgMax", 12, 13),
    step("Softmax", 1, 11, Negative("axis")), step("Softmax", 11, 13, special=softmax_13_11, onnx_up=True),
    step("LogSoftmax", 1, 11, Negative("axis")), step("LogSoftmax", 11, 13, special=softmax_13_11, onnx_up=True),
    *chain("Conv", 1, 11, 22), *chain("ConvTranspose", 1, 11, 22),
    step("MaxPool", 8, 10, Default("ceil_mode", 0), Absent("dilations", each=1)), *chain("MaxPool", 10, 11, 12, 22),
    step("AveragePool", 1, 7, Default("count_include_pad", 0)), step("AveragePool", 7, 10, Default("ceil_mode", 0)),
    step("AveragePool", 10, 11), step("AveragePool", 11, 19, Absent("dilations", each=1)),
    *chain("AveragePool", 19, 22), *chain("GlobalAveragePool", 1, 22), *chain("InstanceNormalization", 6, 22),
    step("Resize", 11, 13, Fill(1, "roi", "empty"), Fill(2, "scales", "empty")),
    step("Resize", 13, 18, Default("antialias", 0), Default("keep_aspect_ratio_policy", "stretch"), Absent("axes")),
    step("Resize", 18, 19, special=resize_19_18),
    step("If", 1, 11, special=if_11_1), *chain("If", 11, 13, 16, 19, 21, 23, 24, 25),
    *chain("Loop", 11, 13, 16, 19, 21, 23, 24, 25), *chain("Scan", 11, 16, 19, 21, 23, 24, 25),
    *chain("SplitToSequence", 11, 24),
    step("QuantizeLinear", 10, 13, special=quantize_13_10), step("QuantizeLinear", 13, 19, Default("saturate", 1)),
    step("QuantizeLinear", 19, 21, Default("block_size", 0), Default("output_dtype", 0)),
    step("QuantizeLinear", 21, 23, Default("precision", 0)), *chain("QuantizeLinear", 23, 24, 25, 28),
    step("DequantizeLinear", 10, 13, special=quantize_13_10), *chain("DequantizeLinear", 13, 19),
    step("DequantizeLinear", 19, 21, Default("block_size", 0)),
    step("DequantizeLinear", 21, 23, Default("output_dtype", 0)), *chain("DequantizeLinear", 23, 24, 25, 28),
]
for _s in STEPS:
    register(_s.op, _s.older, _s.newer, _s.up, what="")
    register(_s.op, _s.newer, _s.older, _s.down, what=_s.describe())
register("ScatterElements", 11, None, scatter_elements_below_11)
register("GatherElements", 11, None, gather_elements_below_11)


def coverage() -> str:
    """docs/opsets.md's coverage table: each op with the versions rnnconv moves it between and what its steps down do
    beyond checking that the node's types exist in the older version (steps doing the same thing share a line)."""
    versions: dict[str, set] = {}
    downs: dict[str, dict[str, list[str]]] = {}
    for (op, frm, to), what in sorted(WHAT.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        versions.setdefault(op, set()).update(v for v in (frm, to) if v is not None)
        if (to is None or to < frm) and what:
            downs.setdefault(op, {}).setdefault(what, []).append(f"{frm} → {to if to is not None else 'below'}")
    lines = ["| op | versions | going down |", "| --- | --- | --- |"]
    for op in sorted(downs):
        steps = "; ".join(f"{', '.join(s)}: {what}" for what, s in downs[op].items())
        lines.append(f"| {op} | {' '.join(map(str, sorted(versions[op])))} | {steps} |")
    plain = [f"{op} {min(v)}-{max(v)}" for op, v in sorted(versions.items()) if op not in downs]
    lines.append(f"| {len(plain)} more | | type lists only: {', '.join(plain)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(coverage(), end="")
