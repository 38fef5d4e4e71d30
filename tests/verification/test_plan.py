"""plan.choose: which whole-model comparisons a conversion makes, decided from the plan and the machine alone (no
run), each case of its docstring held here against the rule written out in the test; and the runner's outcomes
where they depend on the runs."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from rnnconv.engine import openvino_runtime
from rnnconv.verification.model import open_model, onnx_model
from rnnconv.verification.plan import (
    Comparison,
    Failure,
    LeftOut,
    Machine,
    Runtimes,
    Versus,
    WholeModel,
    choose,
    choose_versus,
)
from tests.conftest import FIXTURES, recurrent_model

WITH_OPENVINO = Machine(openvino=True, memory=None)  # memory unknown: nothing is too big
WITHOUT = Machine(openvino=False, memory=None)
IR = FIXTURES / "openvino" / "lstm_batch_first_legacy14.xml"
ONNX = FIXTURES / "torch" / "lstm_batch_first_legacy14.onnx"


def onnx_of(**kw):
    return onnx_model(ir.serde.deserialize_model(recurrent_model("LSTM", **kw)))


def kinds(choice) -> list:
    return [(type(c).__name__, None if isinstance(c, LeftOut) else (c.reference and c.reference.engine,
                                                                      c.candidate.engine))
            for c in choice.comparisons]


def test_onnx_to_onnx_compares_engine_then_onnxruntime():
    before, after = onnx_of(), onnx_of()
    choice = choose(WholeModel(before, after), WITHOUT)
    assert choice.baseline == ("rnnconv",)
    assert kinds(choice) == [("Comparison", (None, "rnnconv")), ("Comparison", ("onnxruntime", "onnxruntime"))]
    engine, runtime = choice.comparisons
    assert engine.redundant and engine.candidate.failure is Failure.SKIPS  # Case 4
    assert runtime.reference.failure is Failure.STANDS_IN and runtime.candidate.failure is Failure.FAILS  # Case 8


def test_a_refusal_a_runtime_fact_explains_lets_the_engine_stand_in():
    """layout=1: onnxruntime refuses it at session creation (rnnconv.runtimes)."""
    choice = choose(WholeModel(onnx_of(), onnx_of(layout=1)), WITHOUT)
    runtime = choice.comparisons[-1]
    assert runtime.candidate.failure is Failure.STANDS_IN and "layout=1" in runtime.candidate.known


@pytest.mark.parametrize("machine, runtime, said", [(WITHOUT, None, True), (WITHOUT, False, False),
                                                     (WITH_OPENVINO, False, False)])
def test_onnx_to_ir_without_the_runtime(machine, runtime, said):
    """Case 5: the converted IR in OpenVINO without the package (or with it switched off): left out, said only
    when the runtime was not switched off."""
    choice = choose(WholeModel(open_model(ONNX), open_model(IR), Runtimes(openvino=runtime)), machine)
    assert choice.baseline == ("onnxruntime", "rnnconv")
    left = [c.why for c in choice.comparisons if isinstance(c, LeftOut)]
    assert left == ([f"OpenVINO runtime (CPU, f32): {openvino_runtime.NOT_INSTALLED}"] if said else [])
    assert [c.candidate.engine for c in choice.comparisons if isinstance(c, Comparison)] == ["rnnconv"]


def test_an_ir_too_big_to_compile_here_is_left_out_saying_so():
    """Case 6: 4.5x its weights must be free to compile it."""
    choice = choose(WholeModel(open_model(ONNX), open_model(IR)), Machine(openvino=True, memory=1000))
    [left] = [c.why for c in choice.comparisons if isinstance(c, LeftOut)]
    assert left.startswith("OpenVINO runtime: compiling this IR needs about")


def test_an_ir_source_without_the_runtime_runs_in_the_engine_instead():
    """Case 7: from-openvino without openvino: the IR interpreter stands in for the source's runtime."""
    choice = choose(WholeModel(open_model(IR), open_model(ONNX)), WITHOUT)
    runtime = choice.comparisons[-1]
    assert (runtime.reference.engine, runtime.candidate.engine) == ("openvino", "onnxruntime")
    assert runtime.reference.unavailable == f"OpenVINO runtime (CPU, f32): {openvino_runtime.NOT_INSTALLED}"


def test_big_layers_with_the_runtime_under_way_leave_the_interpreter_out():
    """Case 3: only with the runtime's early run, on big layers (float32)."""
    whole = WholeModel(open_model(ONNX), open_model(IR), Runtimes(early=True), precision="float32")
    assert choose(whole, WITH_OPENVINO).comparisons[0].left_out_early
    for other in (WholeModel(whole.before, whole.after, Runtimes(early=False), "float32"),
                  WholeModel(whole.before, whole.after, Runtimes(early=True), "float64")):
        assert choose(other, WITH_OPENVINO).comparisons[0].left_out_early is None
    assert choose(whole, WITHOUT).comparisons[0].left_out_early is None


def test_choose_runs_nothing(monkeypatch):
    """Pure: deciding needs no engine."""
    from rnnconv.verification import checks, engines

    def refuse(*args, **kwargs):
        raise AssertionError("choose ran a model")

    monkeypatch.setattr(engines, "run_once", refuse)
    monkeypatch.setattr(checks, "run_sets", refuse)
    choose(WholeModel(open_model(ONNX), open_model(IR)), WITH_OPENVINO)
    choose(WholeModel(open_model(IR), open_model(ONNX)), WITHOUT)


def test_verify_skips_engines_only_when_given_several():
    model = onnx_of()
    runs = choose_versus(Versus(model, model, ("rnnconv", "onnxruntime", "openvino"), ("onnxruntime",)))
    assert [(r.side, r.engine, r.failure) for r in runs] == [
        ("reference", "rnnconv", Failure.SKIPS), ("reference", "onnxruntime", Failure.SKIPS),
        ("reference", "openvino", Failure.SKIPS), ("candidate", "onnxruntime", Failure.REFUSES)]
    quantized = open_model(FIXTURES / "quantized" / "lstm_int8.onnx")
    runs = choose_versus(Versus(quantized, quantized, ("rnnconv",), ("openvino",)))
    assert runs[0].held is None and "DynamicQuantizeLSTM" in runs[1].held
