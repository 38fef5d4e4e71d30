"""verification.runner: the one executor. Every failing whole-model comparison, a conversion's or `rnnconv
verify`'s, reaches `localize_failure` with both runs and the inputs they ran on; `rnnconv verify` and the
conversions share the runner (a fix to a rule reaches both)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import rnnconv
from rnnconv.errors import VerificationFailed
from rnnconv.verification import runner


def chain(k: int = 0, n: int = 4) -> onnx.ModelProto:
    """x -> n Adds of 1 (the k-th adds 1.5 when k > 0) -> y."""
    nodes, prev = [], "x"
    inits = [nh.from_array(np.array(1.0, np.float32), "one"), nh.from_array(np.array(1.5, np.float32), "off")]
    for i in range(1, n + 1):
        nodes.append(h.make_node("Add", [prev, "off" if i == k else "one"], [f"v{i}"], name=f"add{i}"))
        prev = f"v{i}"
    nodes.append(h.make_node("Identity", [prev], ["y"]))
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


@pytest.fixture
def handed(monkeypatch):
    seen = []

    def record(check, reference, candidate, feeds, tolerances, isolate=False):
        seen.append((check.subject, reference.engine, candidate.engine, sorted(feeds), reference.ok, candidate.ok))

    monkeypatch.setattr(runner, "localize_failure", record)
    return seen


def test_verify_hands_each_failing_comparison_to_localization(tmp_path, handed):
    onnx.save(chain(), tmp_path / "a.onnx")
    onnx.save(chain(3), tmp_path / "b.onnx")
    report = rnnconv.verify(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), engine="all")
    assert not report.ok
    assert handed and all(s[3] == ["x"] and s[4] and s[5] for s in handed)
    assert {s[0] for s in handed} == {c.subject for c in report.checks if not c.ok}
    assert rnnconv.verify(str(tmp_path / "a.onnx"), str(tmp_path / "a.onnx")).ok and len(handed) == len(
        [c for c in report.checks if not c.ok])  # agreeing models hand nothing over


def _spoil_w_after_the_node_checks(monkeypatch):
    """The converted model's W moved by 1% once the translator made its node pairs: a divergence at a known node."""
    from rnnconv import conversion

    real = conversion.Passes.translate

    def spoiled(self, loaded, job):
        done = real(self, loaded, job)
        w = done.model.graph.initializers["W"]
        w.const_value = ir.tensor(w.const_value.numpy() * 1.01, name="W")
        return done

    monkeypatch.setattr(conversion.Passes, "translate", spoiled)


def test_a_conversions_failing_whole_model_comparison_is_handed_over(tmp_path, handed, monkeypatch):
    """The converted model computing otherwise (a weight moved after the node checks were taken): each failing
    whole-model comparison reaches localization, with the source's run as reference."""
    from tests.conftest import recurrent_model

    _spoil_w_after_the_node_checks(monkeypatch)
    with pytest.raises(VerificationFailed) as err:
        rnnconv.upgrade(recurrent_model("GRU", opset=7), tmp_path / "o.onnx", opset=14)
    failing = [c for c in err.value.report.checks if not c.ok]
    assert failing and [s[0] for s in handed] == [c.subject for c in failing]
    assert all(s[1] in ("rnnconv", "onnxruntime") and s[4] and s[5] for s in handed)


def test_a_conversions_failing_comparison_names_the_node_that_computes_differently(tmp_path, monkeypatch):
    """Localization runs in the runner for a conversion as for `verify`: the converted GRU's W moved by 1% after the
    node checks (a divergence made by hand at a known node), `upgrade --json` exits 1 and every failing whole-model
    comparison names that node, given identical inputs computing differently."""
    import json

    from tests.conftest import recurrent_model, run_cli

    _spoil_w_after_the_node_checks(monkeypatch)
    onnx.save(recurrent_model("GRU", opset=7), tmp_path / "m.onnx")
    code, out, _ = run_cli(["upgrade", tmp_path / "m.onnx", "-o", tmp_path / "o.onnx", "--opset", "14", "--json"])
    assert code == 1 and not (tmp_path / "o.onnx").exists()
    failing = [c for c in json.loads(out)["checks"] if not c["ok"]]
    assert failing and all(c["subject"] == "model" for c in failing)
    for check in failing:
        found = check["first_divergence"]
        assert (found["node"], found["op_type"], found["cause"]) == ("gru", "GRU", "node"), found
        assert found["alone_max_abs"] > 1e-4 and found["input_max_abs"] == 0.0
