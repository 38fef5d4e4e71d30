"""Every ONNX command on every model of the two pinned packages, with the inputs each model needs: no exit 70, every
refusal one line with its documented code, every model written runs in onnxruntime equal to the source."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.real.conftest import NAMES, OUT, shared_cli

pytestmark = [pytest.mark.real, pytest.mark.parametrize("real_model", NAMES, indirect=True)]


def cli(*argv) -> tuple[int, str, str]:
    import contextlib
    import io

    from rnnconv.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def recurrent_nodes(model: onnx.ModelProto) -> int:
    """GRU/LSTM/RNN nodes (and DynamicQuantizeLSTM) anywhere in the model, counted on the raw protobuf."""
    def count(graph) -> int:
        n = 0
        for node in graph.node:
            n += node.op_type in ("GRU", "LSTM", "RNN", "DynamicQuantizeLSTM")
            for a in node.attribute:
                n += sum(count(g) for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs))
        return n

    return count(model.graph) + sum(count(f) for f in model.functions)


def ort_outputs(path, feeds) -> dict:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return dict(zip([o.name for o in session.get_outputs()],
                    session.run(None, {k: v for k, v in feeds.items() if k in wanted})))


def assert_same_numbers(source, converted, feeds) -> None:
    want, got = ort_outputs(source, feeds), ort_outputs(converted, feeds)
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=name)


def assert_refusal(code, stderr, expected_code) -> None:
    assert code == expected_code, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rnnconv: error: "), stderr


def test_inspect_lists_every_recurrent_node(real_model):
    code, out, err = cli("inspect", real_model.path, "--json")
    assert code == 0, err
    assert len(json.loads(out)["nodes"]) == recurrent_nodes(onnx.load(str(real_model.path)))


def test_check_names_findings_or_none(real_model):
    code, out, err = cli("check", real_model.path, "--target", "onnxruntime", "--target", "openvino", "--json")
    assert code in (0, 1), err
    assert json.loads(out)["recurrent_nodes"] == recurrent_nodes(onnx.load(str(real_model.path)))


def test_upgrade(real_model):
    run, folder = shared_cli("upgrade", real_model.path, "-o", f"{OUT}/up.onnx", *real_model.options)  # the sweep's
    assert run.code == 0, run.stdout + run.stderr
    assert_same_numbers(real_model.path, folder / "up.onnx", real_model.feeds)


@pytest.mark.parametrize("opset", [13, 11])
def test_downgrade(real_model, opset):
    source_opset = onnx.load(str(real_model.path), load_external_data=False).opset_import[0].version
    if opset >= source_opset:
        pytest.skip(f"the model is at opset {source_opset}")
    run, folder = shared_cli("downgrade", real_model.path, "-o", f"{OUT}/down.onnx", "--opset", opset,
                             *real_model.options)  # at 13, the sweep's
    code, stdout, err, out = run.code, run.stdout, run.stderr, folder / "down.onnx"
    if code == 3:  # an op that does not exist at the target: named, with the opset where it appears
        assert_refusal(code, err, 3)
        assert "does not exist at opset" in err or "no adapter" in err, err
        return
    assert code == 0, stdout + err
    assert onnx.load(str(out)).opset_import[0].version == opset
    assert_same_numbers(real_model.path, out, real_model.feeds)


def test_layout_to_1_and_back(real_model, tmp_path):
    batch_major, back = tmp_path / "l1.onnx", tmp_path / "l0.onnx"
    code, stdout, err = cli("layout", real_model.path, "-o", batch_major, "--to", "1", "--opset", "14",
                            *real_model.options)
    if code == 3:
        assert_refusal(code, err, 3)
        return
    assert code == 0, stdout + err
    if real_model.name == "ddddocr_common":  # its declared output, which Reshape-14 refutes: corrected, and said
        assert "note: output '387' is declared [1, seqlen], rank 2, its nodes compute [?, 1, ?], rank 3" in stdout
    code, stdout, err = cli("layout", batch_major, "-o", back, "--to", "0", *real_model.options)
    assert code == 0, stdout + err
    assert_same_numbers(real_model.path, back, real_model.feeds)


def test_verify_agrees_with_its_upgrade(real_model):
    run, folder = shared_cli("upgrade", real_model.path, "-o", f"{OUT}/up.onnx", "--no-verify")  # the sweep's
    assert run.code == 0, run.stdout + run.stderr
    code, stdout, err = cli("verify", real_model.path, folder / "up.onnx", "--engine", "onnxruntime",
                            *real_model.options)
    assert code == 0, stdout + err
