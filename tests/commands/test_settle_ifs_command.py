"""`rnnconv settle-ifs` and `rnnconv.settle_ifs` (issue 30): the If settling to-openvino does first, as an ONNX ->
ONNX step. Held against onnxruntime on the source (the settled model equal to it, to the bit here), and against
the model's own declarations (interface unchanged); the source is never modified; a rank decided at run time is
refused; the settled model goes through OpenVINO's own conversion with rnnconv's extensions (in a child process)
and equals onnxruntime on the source."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

import rnnconv
from rnnconv.commands.settle_ifs import settle
from rnnconv.errors import EXIT_UNSUPPORTED, Unsupported
from tests.conftest import FIXTURES, REPO, run_cli

SQUEEZE = FIXTURES / "settle_ifs" / "if_squeeze_lstmcell_legacy16.onnx"  # silero-vad's pattern, 9 Ifs
POLYMORPHIC = FIXTURES / "settle_ifs" / "if_rank_polymorphic_legacy16.onnx"
DIMS = {"x:2": 1}  # one frame: what the LSTMCell branch takes


def _ifs(graph) -> int:
    return sum((n.op_type == "If") + sum(_ifs(a.g) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
               for n in graph.node)


def _interface(model: onnx.ModelProto) -> list:
    return [(v.name, str(v.type)) for v in [*model.graph.input, *model.graph.output]]


def _feeds(batch: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 4, 1)).astype(np.float32),
            "state": rng.standard_normal((2, batch, 8)).astype(np.float32)}


def _ort(model, feeds) -> list:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_api_returns_the_settled_proto_with_the_interface_and_numbers():
    before = _digest(SQUEEZE)
    settled = rnnconv.settle_ifs(SQUEEZE, dims=DIMS)
    source = onnx.load(str(SQUEEZE))
    assert isinstance(settled, onnx.ModelProto) and _ifs(source.graph) == 9 and _ifs(settled.graph) == 0
    assert _interface(settled) == _interface(source)
    onnx.checker.check_model(settled, full_check=True)
    for batch in (1, 3):
        for a, b in zip(_ort(SQUEEZE, _feeds(batch, batch)), _ort(settled, _feeds(batch, batch))):
            np.testing.assert_array_equal(a, b)
    assert _digest(SQUEEZE) == before


def test_in_memory_inputs_are_not_modified():
    proto = onnx.load(str(SQUEEZE))
    copy = proto.SerializeToString()
    assert _ifs(rnnconv.settle_ifs(proto, dims=DIMS).graph) == 0
    assert proto.SerializeToString() == copy
    model = ir.serde.deserialize_model(proto)
    before = ir.serde.serialize_model(model).SerializeToString()
    assert _ifs(rnnconv.settle_ifs(model, dims=DIMS).graph) == 0
    assert ir.serde.serialize_model(model).SerializeToString() == before


def test_the_cli_reports_each_if_settled_and_why(tmp_path):
    out = tmp_path / "settled.onnx"
    code, stdout, stderr = run_cli(["settle-ifs", SQUEEZE, "-o", out, "--dim", "x:2=1"])
    assert code == 0, stdout + stderr
    assert ("  rewrote /If: then_branch kept (else_branch can never reach the outputs: LSTM node '/cell/LSTM' fails "
            "on it, onnx strict shape inference: First input tensor must have rank 3)") in stdout.splitlines()
    assert "  rewrote /cell/If: else_branch taken (its condition is False for every input the declared shapes allow)" \
        in stdout.splitlines()
    assert stdout.splitlines()[-1] == f"settle-ifs: verified: 1 check(s) passed; wrote {out}"
    assert _ifs(onnx.load(str(out)).graph) == 0
    code, stdout, _ = run_cli(["settle-ifs", SQUEEZE, "-o", out, "--dim", "x:2=1", "--force", "--json"])
    report = json.loads(stdout)
    assert code == 0 and report["ok"] and len(report["rewrites"]) == 6
    assert {r["op"] for r in report["rewrites"]} == {"If"}


def test_a_rank_decided_at_run_time_is_refused(tmp_path):
    with pytest.raises(Unsupported, match="If node '/If' decides the rank of its output 0 at run time"):
        rnnconv.settle_ifs(POLYMORPHIC)
    code, stdout, stderr = run_cli(["settle-ifs", POLYMORPHIC, "-o", tmp_path / "p.onnx"])
    assert code == EXIT_UNSUPPORTED and stdout == ""
    (line,) = stderr.strip().splitlines()
    assert line.startswith("rnnconv: error: cannot settle the model's Ifs for a runtime that needs static ranks")
    assert "from input(s) 'x'" in line
    assert list(tmp_path.iterdir()) == []


def test_a_model_without_ifs_is_written_unchanged(tmp_path):
    result = settle(FIXTURES / "lstm.onnx", tmp_path / "lstm.onnx")
    assert "nothing to settle" in " ".join(result.report.notes) and not result.report.rewrites
    unchanged = onnx.load(str(tmp_path / "lstm.onnx"))
    assert str(unchanged.graph.node) == str(onnx.load(str(FIXTURES / "lstm.onnx")).graph.node)


def test_batch_mode_settles_each_model_whatever_happened_to_the_others(tmp_path):
    code, stdout, stderr = run_cli(["settle-ifs", SQUEEZE, POLYMORPHIC, "--out-dir", tmp_path / "out",
                                    "--dim", "x:2=1", "--report", tmp_path / "r.json"])
    assert code == EXIT_UNSUPPORTED, stdout + stderr
    rows = {Path(r["model"]).name: r for r in json.loads((tmp_path / "r.json").read_text())["models"]}
    assert rows[SQUEEZE.name]["exit_code"] == 0 and rows[SQUEEZE.name]["nodes_rewritten"] == 6
    assert rows[POLYMORPHIC.name]["exit_code"] == EXIT_UNSUPPORTED
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [SQUEEZE.name]


_CHILD = """
import io, pickle, sys
import numpy as np
import openvino as ov
import rnnconv

job = pickle.load(sys.stdin.buffer)
compiled = ov.Core().compile_model(ov.convert_model(io.BytesIO(job["onnx"]), extension=rnnconv.openvino_extensions()),
                                   "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
runs = []
for feeds in job["feeds"]:
    result = compiled(feeds)
    runs.append({n: np.asarray(result[p]) for p in compiled.outputs for n in p.get_names()})
sys.stdout.buffer.write(pickle.dumps(runs))
"""


def test_settled_then_openvino_s_own_conversion_runs_it():
    """The third route: settle, then ov.convert_model(io.BytesIO(...), extension=rnnconv.openvino_extensions()),
    compiled at its dynamic shapes; OpenVINO alone refuses the source (the Ifs' two ranks)."""
    pytest.importorskip("openvino")
    settled = rnnconv.settle_ifs(SQUEEZE, dims=DIMS)
    sets = [_feeds(batch, batch) for batch in (1, 3)]
    job = pickle.dumps({"onnx": settled.SerializeToString(), "feeds": sets})
    proc = subprocess.run([sys.executable, "-c", _CHILD], input=job, capture_output=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    for feeds, got in zip(sets, pickle.loads(proc.stdout)):
        for name, want in zip(("out", "stateN"), _ort(SQUEEZE, feeds)):
            np.testing.assert_allclose(got[name], want, atol=1e-5, rtol=1e-5, err_msg=name)


def test_there_is_no_node_to_check_alone():
    from rnnconv.errors import UsageError

    with pytest.raises(UsageError, match="settle-ifs rewrites none"):
        rnnconv.settle_ifs(SQUEEZE, verify="node")
    code, _, err = run_cli(["settle-ifs", SQUEEZE, "-o", "unused.onnx", "--verify", "node"])
    assert code == 2 and "'node' is not one of 'full', 'none'" in err
