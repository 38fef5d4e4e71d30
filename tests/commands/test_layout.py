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
