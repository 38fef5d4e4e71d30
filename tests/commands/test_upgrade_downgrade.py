"""`rnnconv upgrade` / `downgrade`: PyTorch exports go to the newest opset and back with PyTorch's numbers and their
interface; a wrong rewrite exits 1 and writes nothing; the CLI's report and refusals."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import rnnconv
from rnnconv import io
from tests.conftest import ALL_OPTIONAL, TORCH, interface, recurrent_model, reference, run_cli

TORCH_EXPORTS = sorted(TORCH.glob("*.onnx"))


@pytest.mark.parametrize("path", TORCH_EXPORTS, ids=[p.stem for p in TORCH_EXPORTS])
def test_torch_export_upgrades_and_comes_back(path):
    expected = np.load(path.with_suffix(".npz"))
    source_opset = onnx.load(str(path), load_external_data=False).opset_import[0].version
    up = rnnconv.upgrade(str(path))
    assert up.report.ok and up.model.opset_imports[""] >= 20
    down = rnnconv.downgrade(up.model, opset=source_opset)
    assert down.report.ok and down.model.opset_imports[""] == source_opset
    onnx.checker.check_model(io.to_proto(down.model), full_check=True)
    inputs = {v.name: expected[v.name] for v in down.model.graph.inputs if v.name in expected}
    for model in (up.model, down.model):
        got = reference(io.to_proto(model), inputs)
        for name, value in got.items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("path", TORCH_EXPORTS[::6], ids=[p.stem for p in TORCH_EXPORTS[::6]])
def test_interface_is_kept_exactly(path):
    """Names, dtypes and shapes (symbolic dims included) of inputs and outputs survive upgrade and downgrade."""
    source = onnx.load(str(path))
    up = io.to_proto(rnnconv.upgrade(str(path)).model)
    assert interface(up) == interface(source)
    down = io.to_proto(rnnconv.downgrade(up, opset=source.opset_import[0].version).model)
    assert interface(down) == interface(source)


def test_broken_adapter_is_caught_and_nothing_written(tmp_path, monkeypatch):
    """Verification catches a wrong rewrite: an adapter that swaps the i and f gates exits 1, writes nothing."""
    from rnnconv.passes import opset

    real_build = opset.build

    def swapped_gates(plan, names, target):
        rewrite = real_build(plan, names, target)
        node = next(n for n in rewrite.nodes if n.op_type == "LSTM")
        w = node.inputs[1].const_value.numpy().copy()
        h = w.shape[1] // 4
        w[:, 0:h], w[:, 2 * h:3 * h] = w[:, 2 * h:3 * h].copy(), w[:, 0:h].copy()
        bad = ir.Value(name=names("W_swapped"), const_value=ir.tensor(w, name="W_swapped"))
        bad.const_value.name = bad.name
        rewrite.new_initializers.append(bad)
        node.replace_input_with(1, bad)
        return rewrite

    monkeypatch.setattr(opset, "build", swapped_gates)
    src = tmp_path / "lstm.onnx"
    onnx.save(recurrent_model("LSTM", opset=7, **ALL_OPTIONAL), src)
    out = tmp_path / "out.onnx"
    code, _, _ = run_cli(["upgrade", src, "-o", out, "--opset", "14"])
    assert code == 1
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lstm.onnx"]


def test_cli_upgrade_writes_verified_model_and_refuses_overwrite(tmp_path):
    src = tmp_path / "gru1.onnx"
    onnx.save(recurrent_model("GRU", opset=1, **ALL_OPTIONAL), src)
    out = tmp_path / "gru.onnx"
    code, stdout, _ = run_cli(["upgrade", src, "-o", out, "--json"])
    assert code == 0
    report = json.loads(stdout)
    assert report["ok"] and report["rewrites"][0]["node"] == "gru"
    assert {c["engines"] for c in report["checks"]} >= {"engine"}
    assert run_cli(["upgrade", src, "-o", out])[0] == 2
    assert run_cli(["upgrade", src, "-o", src, "--force"])[0] == 2


def _declares_a_rank_its_reshape_does_not_compute(path):
    """ddddocr 1.6.1's common.onnx in small: at opset 12 a Reshape to a computed 3-element shape feeds an output
    declared with rank 2; Reshape-5's shape inference does not look, Reshape-14's does."""
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             h.make_node("Unsqueeze", ["n"], ["n1"], axes=[0]),
             h.make_node("Concat", ["n1", "rest"], ["shape"], axis=0),
             h.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")]
    inits = [nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(np.array([3, 4], np.int64), "rest")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["n", 12])],
                         [h.make_tensor_value_info("y", TP.FLOAT, ["n", 12])], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 12)])
    onnx.checker.check_model(model, full_check=True)  # the source passes at its opset
    onnx.save(model, path)


def test_upgrade_goes_below_the_op_version_that_refutes_a_declared_output(tmp_path):
    import onnxruntime as ort

    source, out = tmp_path / "m.onnx", tmp_path / "up.onnx"
    _declares_a_rank_its_reshape_does_not_compute(source)
    code, said, err = run_cli(["upgrade", source, "-o", out])
    assert code == 0, err
    said += err
    assert "not opset" in said and "Reshape-14 and later refute an output shape" in said and "opset 13" in said
    up = onnx.load(str(out))
    assert up.opset_import[0].version == 13
    onnx.checker.check_model(up, full_check=True)
    x = np.random.default_rng(0).standard_normal((2, 12)).astype(np.float32)
    want = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    # The opset asked for: there, the declaration corrected to what the nodes compute, and said.
    code, said, err = run_cli(["upgrade", source, "-o", tmp_path / "at14.onnx", "--opset", "14"])
    assert code == 0, said + err
    assert "output 'y' is declared [n, 12], rank 2, its nodes compute [?, 3, 4], rank 3 (Reshape-14" in said, said
    at14 = onnx.load(str(tmp_path / "at14.onnx"))
    onnx.checker.check_model(at14, full_check=True)
    assert len(at14.graph.output[0].type.tensor_type.shape.dim) == 3
    got = ort.InferenceSession(str(tmp_path / "at14.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
