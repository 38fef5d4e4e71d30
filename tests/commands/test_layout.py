"""`rnnconv layout`: refusals and exit codes, the JSON report, and a wrong rewrite that exits 1 and writes nothing."""

from __future__ import annotations

import json

import onnx_ir as ir
import pytest

from rnnconv.commands.layout import convert_layout
from rnnconv.errors import Unsupported, UsageError
from rnnconv.passes import layout as layout_pass
from tests.conftest import FIXTURES, run_cli


def test_layout1_below_14_needs_opset(tmp_path):
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["layout", FIXTURES / "lstm7_forward.onnx", "-o", out, "--to", "1"])
    assert code == 3
    assert "--opset 14" in stderr and not out.exists()
    with pytest.raises(Unsupported):
        convert_layout(str(FIXTURES / "lstm7_forward.onnx"), to=1, opset=13)


def test_usage_errors(tmp_path):
    out = tmp_path / "o.onnx"
    src = str(FIXTURES / "lstm14_layout1.onnx")
    assert run_cli(["layout", src, "-o", out, "--to", "2"])[0] == 2
    assert run_cli(["layout", src, "-o", out])[0] == 2
    code, _, err = run_cli(["layout", src, "-o", out, "--to", "0", "--node", "nope"])
    assert code == 2
    assert "'nope'" in err and "lstm (LSTM)" in err and not out.exists()
    with pytest.raises(UsageError):
        convert_layout(src, to=0, nodes=["nope"])


def test_json_report(tmp_path):
    out = tmp_path / "o.onnx"
    code, stdout, _ = run_cli(["layout", FIXTURES / "gru14_layout1.onnx", "-o", out, "--to", "0", "--json"])
    assert code == 0
    report = json.loads(stdout)
    assert report["ok"] and report["command"] == "layout" and report["output"] == str(out)
    assert [r["node"] for r in report["rewrites"]] == ["gru"]
    engines = {c["engines"] for c in report["checks"]}
    assert "engine vs onnxruntime" in engines


def test_mismatch_exits_1_and_writes_nothing(tmp_path, monkeypatch):
    relayout = layout_pass.relayout

    def wrong(rn, to, names):  # a relayout that also clips: the numbers change, the shapes do not
        r = relayout(rn, to, names)
        node = next(n for n in r.nodes if n.op_type == rn.op)
        node.attributes["clip"] = ir.AttrFloat32("clip", 0.01)
        return r

    monkeypatch.setattr(layout_pass, "relayout", wrong)
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["layout", FIXTURES / "gru14_layout1.onnx", "-o", out, "--to", "0"])
    assert code == 1
    assert "FAIL" in stderr and not out.exists()


def _ocr_declaring_rank_2(path):
    """ddddocr 1.6.1's OCR model in small: opset 12, an LSTM whose Y a Reshape to a computed 3-element shape
    (Shape -> Gather -> Concat) turns into the output, declared [1, seqlen] (rank 2). onnxruntime runs it;
    Reshape-14's shape inference refutes the declaration."""
    import numpy as np
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.uniform(-0.5, 0.5, (1, 16, 3)).astype(np.float32), "W"),
             nh.from_array(rng.uniform(-0.5, 0.5, (1, 16, 4)).astype(np.float32), "R"),
             nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(np.array([1, -1], np.int64), "rest")]
    nodes = [h.make_node("LSTM", ["x", "W", "R"], ["Y"], hidden_size=4, name="lstm"),
             h.make_node("Shape", ["Y"], ["s"]), h.make_node("Gather", ["s", "zero"], ["t"], axis=0),
             h.make_node("Unsqueeze", ["t"], ["t1"], axes=[0]),
             h.make_node("Concat", ["t1", "rest"], ["shape"], axis=0),
             h.make_node("Reshape", ["Y", "shape"], ["out"], name="reshape")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["T", 1, 3])],
                         [h.make_tensor_value_info("out", TP.FLOAT, [1, "seqlen"])], initializer=inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 12)])
    onnx.checker.check_model(model, full_check=True)  # the source passes at its own opset
    onnx.save(model, path)
    return path


def test_layout_1_corrects_an_output_shape_the_newer_opset_refutes_and_says_so(tmp_path):
    import numpy as np
    import onnx
    import onnxruntime as ort

    src = _ocr_declaring_rank_2(tmp_path / "ocr.onnx")
    l1, l0 = tmp_path / "l1.onnx", tmp_path / "l0.onnx"
    code, out, err = run_cli(["layout", src, "-o", l1, "--to", "1", "--opset", "14"])
    assert code == 0, out + err  # was exit 4: "output 'out' is declared [1, seqlen], rank 2, ..."
    assert "note: output 'out' is declared [1, seqlen], rank 2, its nodes compute [?, 1, ?], rank 3 (Reshape-14 " \
           "checks it): written as they compute it" in out, out
    written = onnx.load(str(l1))
    onnx.checker.check_model(written, full_check=True)
    assert [i.name for i in written.graph.input] == ["x"] and [o.name for o in written.graph.output] == ["out"]
    # onnxruntime (which refuses layout 1) runs it moved back to layout 0 as it runs the source
    assert run_cli(["layout", l1, "-o", l0, "--to", "0"])[0] == 0
    x = np.random.default_rng(1).uniform(-1, 1, (9, 1, 3)).astype(np.float32)
    want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(l0), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert want.shape == (9, 1, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
