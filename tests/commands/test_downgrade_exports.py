"""`downgrade` on the committed PyTorch exports (legacy exporter at 9 and 14, dynamo at 18/20) to the opsets real
users ask for: the result passes onnx.checker's full check and onnxruntime gives PyTorch's own outputs. And the
CLI's side: a warning is one line naming node and assumption; a converted model the checker refuses exits 3."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import rnnconv
from rnnconv import io
from rnnconv.cli import main
from rnnconv.errors import Unsupported

TORCH = Path(__file__).parent.parent.parent / "fixtures" / "torch"
# Legacy 14 to 13 and 9 (11 lies on the way), dynamo to 13 and 11; one of each kind to 11 too.
CASES = [(path, target) for path in sorted(TORCH.glob("*.onnx")) for target in (13, 11, 9)
         if "legacy9" not in path.stem and (target != 9 or "legacy14" in path.stem)
         and (target != 11 or "dynamo" in path.stem or "bidirectional_two_layers" in path.stem)]


@pytest.mark.parametrize("path,target", CASES, ids=[f"{p.stem}-{t}" for p, t in CASES])
def test_export_downgrades_and_keeps_pytorch_outputs(path, target):
    expected = np.load(path.with_suffix(".npz"))
    names = {i.name for i in onnx.load(str(path), load_external_data=False).graph.input}
    feeds = {k: expected[k] for k in names if k in expected}
    result = rnnconv.downgrade(str(path), opset=target, inputs=feeds)
    assert result.report.ok
    out = io.to_proto(result.model)
    onnx.checker.check_model(out, full_check=True)
    assert out.opset_import[0].version == target
    session = ort.InferenceSession(out.SerializeToString(), providers=["CPUExecutionProvider"])
    for output, value in zip(session.get_outputs(), session.run(None, feeds)):
        np.testing.assert_allclose(value, expected[output.name], rtol=1e-5, atol=1e-5, err_msg=output.name)


def test_dynamo_flip_below_10_exits_3_naming_the_node():
    """torch.flip is a Slice with steps -1: Slice-1 (below opset 10) has no steps."""
    with pytest.raises(Unsupported, match=r"Slice node 'node_flip': input steps exists only from version 10; no "
                                          r"adapter from opset 10 to 9 \(No Adapter To Version \$9 for Slice\)"):
        rnnconv.downgrade(str(TORCH / "rnn_bidirectional_dynamo.onnx"), opset=9)


def _save(tmp_path, nodes, inputs, outputs, opset, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def test_cli_prints_a_step_warning_on_one_line(tmp_path, capsys):
    path = _save(tmp_path, [helper.make_node("Gather", ["x", "i"], ["y"], name="embedding")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3]),
                  helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], 13)
    with pytest.raises(SystemExit) as exit_:
        main(["downgrade", str(path), "-o", str(tmp_path / "out.onnx"), "--opset", "10", "--range", "i:0,4"])
    assert exit_.value.code == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warning == ["rnnconv: warning: Gather node 'embedding': indices computed at run time are assumed never "
                       "negative (negative indices exist from Gather-11)"]


def test_cli_missing_op_exits_3_naming_nodes_and_opset(tmp_path, capsys):
    path = _save(tmp_path, [helper.make_node("Einsum", ["x", "x"], ["y"], equation="ij,ij->i", name="ein")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], 12)
    with pytest.raises(SystemExit) as exit_:
        main(["downgrade", str(path), "-o", str(tmp_path / "out.onnx"), "--opset", "11"])
    assert exit_.value.code == 3
    assert "Einsum (1 node(s): ein) does not exist at opset 11; first exists at opset 12" in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


def test_cli_checker_failure_after_conversion_exits_3(tmp_path, capsys, monkeypatch):
    from rnnconv.passes import adapters

    monkeypatch.setitem(adapters.ADAPTERS, ("Reshape", 14, 13), lambda plan, opset: None)
    path = _save(tmp_path, [helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=0)],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], 14,
                 [numpy_helper.from_array(np.array([3, 2], np.int64), "s")])
    with pytest.raises(SystemExit) as exit_:
        main(["downgrade", str(path), "-o", str(tmp_path / "out.onnx"), "--opset", "13"])
    assert exit_.value.code == 3
    assert "no step of rnnconv moves Reshape-14 to Reshape-13 correctly" in capsys.readouterr().err
