"""Big models and model fleets: external data through every command (weights copied file to file, never through
memory), per-node verification, batch mode over directories with a broken model among good ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper

from rnnconv import io
from rnnconv.engine import onnxruntime_runtime
from rnnconv.verification import inputs as vinputs
from rnnconv.verification import results as vresults
from tests.test_hostile import run_cli

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"


def lstm(path: Path, *, H: int = 8, I: int = 5, opset: int = 14, layout: int = 0, external: str | None = "w.data",
         one_file: bool = True) -> Path:
    """A bidirectional LSTM whose W, R, B (all > 256 bytes) live in external data beside it."""
    rng = np.random.default_rng(1)
    D = 2
    w = {"W": rng.uniform(-1, 1, (D, 4 * H, I)), "R": rng.uniform(-1, 1, (D, 4 * H, H)),
         "B": rng.uniform(-1, 1, (D, 8 * H))}
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()]
    x_shape = ["N", "T", I] if layout else ["T", "N", I]
    attrs = {"layout": layout} if layout else {}
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h"], name="lstm", hidden_size=H,
                          direction="bidirectional", **attrs)], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", "T", D, H] if layout else ["T", D, "N", H]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, ["N", D, H] if layout else [D, "N", H])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    if external:
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
                  location=external, size_threshold=0)
    else:
        onnx.save(model, str(path))
    return path


def snapshot(folder: Path) -> dict:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}


def weights(path: Path) -> dict:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}


def external_locations(path: Path) -> set:
    proto = onnx.load(str(path), load_external_data=False)
    return {e.value for t in proto.graph.initializer if t.data_location == TensorProto.EXTERNAL
            for e in t.external_data if e.key == "location"}


# -- external data through every command -----------------------------------------------------------------------

ONNX_COMMANDS = {
    "upgrade": ["upgrade"],
    "downgrade": ["downgrade", "--opset", "13"],
    "layout": ["layout", "--to", "1"],
    "layout-opset": ["layout", "--to", "0", "--opset", "13"],
}


@pytest.mark.parametrize("command", sorted(ONNX_COMMANDS))
@pytest.mark.parametrize("one_file", [True, False])
def test_external_data_survives_onnx_commands(command, one_file, tmp_path):
    src = lstm(tmp_path / "src" / "m.onnx", one_file=one_file)
    before = snapshot(src.parent)
    out = tmp_path / "out" / "o.onnx"
    code, _, stderr = run_cli([*ONNX_COMMANDS[command][:1], str(src), "-o", str(out),
                               *ONNX_COMMANDS[command][1:]])
    assert code == 0, stderr
    assert external_locations(out) == {"o.onnx.data"}  # where the output says, and only there
    assert sorted(p.name for p in out.parent.iterdir()) == ["o.onnx", "o.onnx.data"]
    assert not any(os.path.samefile(out.parent / "o.onnx.data", p) for p in src.parent.iterdir())  # a copy
    got, want = weights(out), weights(src)
    for name in ("W", "R"):  # untouched by every one of these rewrites
        np.testing.assert_array_equal(got[name], want[name])
    assert snapshot(src.parent) == before  # the source is untouched


def test_untouched_weights_keep_their_offsets(tmp_path):
    src = lstm(tmp_path / "src" / "m.onnx")
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["upgrade", str(src), "-o", str(out), "--no-verify"])
    assert code == 0, stderr

    def offsets(path):
        proto = onnx.load(str(path), load_external_data=False)
        return {t.name: {e.key: e.value for e in t.external_data if e.key != "location"}
                for t in proto.graph.initializer}

    assert offsets(out) == offsets(src)
    assert (tmp_path / "o.onnx.data").read_bytes() == (src.parent / "w.data").read_bytes()


def test_new_tensors_go_to_the_data_file_or_inline(tmp_path):
    # A bidirectional layout-1 node to opset 13: Transposes (small constants inline), weights copied.
    src = lstm(tmp_path / "src" / "m.onnx", layout=1)
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["downgrade", str(src), "-o", str(out), "--opset", "13"])
    assert code == 0, stderr
    model = io.load(out)
    for v in model.graph.initializers.values():
        t = v.const_value
        assert isinstance(t, ir.ExternalTensor) == (t.nbytes > io.SMALL_TENSOR_BYTES)


def test_save_keeps_the_model_as_it_was(tmp_path):
    src = lstm(tmp_path / "src" / "m.onnx")
    model = io.load(src)
    extra = ir.Value(name="big", const_value=ir.tensor(np.arange(1000, dtype=np.float32), name="big"),
                     type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1000]))
    model.graph.register_initializer(extra)
    tensors = {n: v.const_value for n, v in model.graph.initializers.items()}
    io.save(model, tmp_path / "o.onnx", external_data=True)
    assert {n: v.const_value for n, v in model.graph.initializers.items()} == tensors
    saved = io.load(tmp_path / "o.onnx", check=False)
    np.testing.assert_array_equal(saved.graph.initializers["big"].const_value.numpy(), np.arange(1000))
    assert saved.graph.initializers["big"].const_value.offset % io.ALIGNMENT == 0


def test_to_openvino_reads_external_data(tmp_path):
    pytest.importorskip("openvino")
    src = lstm(tmp_path / "src" / "m.onnx")
    before = snapshot(src.parent)
    out = tmp_path / "out" / "o.xml"
    code, stdout, stderr = run_cli(["to-openvino", str(src), "-o", str(out), "--json"])
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["ok"] and report["checks"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["o.bin", "o.xml"]
    assert snapshot(src.parent) == before


def test_external_data_when_asked(tmp_path):
    src = lstm(tmp_path / "m.onnx", external=None)
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["upgrade", str(src), "-o", str(out), "--external-data", "--no-verify"])
    assert code == 0, stderr
    assert external_locations(out) == {"o.onnx.data"}
    np.testing.assert_array_equal(weights(out)["R"], weights(src)["R"])


# -- verification scope ----------------------------------------------------------------------------------------

def test_verify_node_is_reported(tmp_path):
    src = lstm(tmp_path / "m.onnx", opset=7)
    code, stdout, stderr = run_cli(["upgrade", str(src), "-o", str(tmp_path / "o.onnx"), "--verify", "node",
                                    "--json"])
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["verified"] == "node"
    assert report["checks"] and all(c["subject"].startswith("node ") for c in report["checks"])
    code, stdout, _ = run_cli(["upgrade", str(src), "-o", str(tmp_path / "p.onnx"), "--verify", "node"])
    assert code == 0 and "per node only" in stdout


def test_no_verify_is_verify_none(tmp_path):
    src = lstm(tmp_path / "m.onnx", opset=7)
    code, stdout, stderr = run_cli(["upgrade", str(src), "-o", str(tmp_path / "o.onnx"), "--no-verify", "--json"])
    assert code == 0, stderr
    assert json.loads(stdout)["verified"] == "none" and json.loads(stdout)["checks"] == []


def test_big_layers_are_checked_in_float32(monkeypatch):
    from rnnconv.verification import checks

    model = io.load(FIXTURES / "lstm.onnx")
    assert checks.precision_for(model) == "float64"
    monkeypatch.setattr(checks, "BIG_WEIGHT_BYTES", 0)
    assert checks.precision_for(model) == "float32"


# -- batch mode ------------------------------------------------------------------------------------------------

def fleet(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("lstm.onnx", "gru1_forward.onnx"):
        (folder / name).write_bytes((FIXTURES / name).read_bytes())
    lstm(folder / "nested" / "external.onnx", opset=7)
    (folder / "broken.onnx").write_bytes(b"not a model at all")
    return folder


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_batch_over_a_directory_with_a_broken_model(jobs, tmp_path):
    models = fleet(tmp_path / "models")
    out, report = tmp_path / "out", tmp_path / "report.json"
    code, stdout, stderr = run_cli(["upgrade", str(models), "--out-dir", str(out), "--report", str(report),
                                    "--jobs", jobs])
    assert code == 4, stderr  # the broken model's exit code: bad input
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == ["gru1_forward.onnx", "lstm.onnx", "nested/external.onnx", "nested/external.onnx.data"]
    data = json.loads(report.read_text())
    assert data["exit_code"] == 4 and not data["ok"]
    rows = {Path(r["model"]).name: r for r in data["models"]}
    assert sorted(rows) == ["broken.onnx", "external.onnx", "gru1_forward.onnx", "lstm.onnx"]
    assert rows["broken.onnx"]["exit_code"] == 4 and "not an ONNX model" in rows["broken.onnx"]["error"]
    assert rows["broken.onnx"]["output"] is None
    for name in ("external.onnx", "gru1_forward.onnx", "lstm.onnx"):
        assert rows[name]["ok"] and rows[name]["nodes_rewritten"] == 1 and rows[name]["verified"] == "full"
        assert rows[name]["max_abs"] is not None and rows[name]["seconds"] >= 0
    assert "broken.onnx" in stdout and "3 of 4 model(s) converted, 1 failed" in stdout
    assert "not an ONNX model" in stderr


def test_batch_exit_code_is_the_most_severe(tmp_path):
    a = lstm(tmp_path / "a.onnx", opset=7)
    b = tmp_path / "b.onnx"
    b.write_bytes(b"garbage")
    missing = tmp_path / "missing.onnx"
    code, stdout, stderr = run_cli(["upgrade", str(a), str(b), str(missing), "--out-dir", str(tmp_path / "o"),
                                    "--json"])
    data = json.loads(stdout)
    assert code == max(r["exit_code"] for r in data["models"]) == 4
    assert [r["ok"] for r in data["models"]] == [True, False, False]


def test_batch_to_openvino_and_back(tmp_path):
    pytest.importorskip("openvino")
    models = tmp_path / "models"
    models.mkdir()
    for name in ("lstm.onnx", "gru1_forward.onnx"):
        (models / name).write_bytes((FIXTURES / name).read_bytes())
    code, _, stderr = run_cli(["to-openvino", str(models), "--out-dir", str(tmp_path / "ir"), "--quiet"])
    assert code == 0, stderr
    assert sorted(p.name for p in (tmp_path / "ir").iterdir()) == ["gru1_forward.bin", "gru1_forward.xml",
                                                                   "lstm.bin", "lstm.xml"]
    code, _, stderr = run_cli(["from-openvino", str(tmp_path / "ir"), "--out-dir", str(tmp_path / "back"),
                               "--quiet"])
    assert code == 0, stderr
    assert sorted(p.name for p in (tmp_path / "back").iterdir()) == ["gru1_forward.onnx", "lstm.onnx"]


def test_batch_usage_errors(tmp_path):
    a = lstm(tmp_path / "x" / "m.onnx", opset=7)
    b = lstm(tmp_path / "y" / "m.onnx", opset=7)
    code, _, stderr = run_cli(["upgrade", str(a), str(b), "--out-dir", str(tmp_path / "o")])
    assert code == 2 and "would both be written" in stderr
    code, _, stderr = run_cli(["upgrade", str(a), str(b), "-o", str(tmp_path / "o.onnx")])
    assert code == 2 and "--out-dir" in stderr
    code, _, stderr = run_cli(["upgrade", str(a), "-o", str(tmp_path / "o.onnx"), "--out-dir", str(tmp_path)])
    assert code == 2
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.onnx").exists()


def test_one_model_with_a_report(tmp_path):
    a = lstm(tmp_path / "m.onnx", opset=7)
    code, _, stderr = run_cli(["layout", str(a), "-o", str(tmp_path / "o.onnx"), "--to", "0", "--report",
                               str(tmp_path / "r.json")])
    assert code == 0, stderr
    rows = json.loads((tmp_path / "r.json").read_text())["models"]
    assert len(rows) == 1 and rows[0]["output"] == str(tmp_path / "o.onnx")


# -- a big model (slow) ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_big_model_streams_in_little_memory(tmp_path):
    H = 1024  # W and R of two directions: 64 MiB
    src = lstm(tmp_path / "src" / "big.onnx", H=H, I=H)
    size = sum(p.stat().st_size for p in src.parent.iterdir())
    out = tmp_path / "o.onnx"
    # VmHWM, not wait4's ru_maxrss: a child forked from pytest would report pytest's own peak.
    probe = ("import sys\nfrom rnnconv.cli import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
             "    print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0], file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe, "upgrade", str(src), "-o", str(out), "--no-verify"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o.onnx.data").stat().st_size == size - src.stat().st_size
    peak_kib = int(proc.stderr.split("VmHWM:")[1].split()[0])
    assert peak_kib * 1024 < 200 * 2**20  # the weights never enter the process


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("lbr", [0, 1])
def test_big_weights_are_multiplied_where_they_lie(op, lbr, monkeypatch):
    # The engine's three ways to multiply by a layer's gates agree: one view over an ONNX node's gate blocks
    # (no copy), gate by gate where the weights lie (big layers in another gate order), a stacked copy.
    from rnnconv.engine import onnx_graph, recurrence

    if lbr and op != "GRU":
        pytest.skip("linear_before_reset is GRU's")
    rng = np.random.default_rng(0)
    G, H, I, T, N = {"LSTM": 4, "GRU": 3, "RNN": 1}[op], 6, 5, 4, 3
    args = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((T, N, I), (2, G * H, I), (2, G * H, H),
                                                               (2, 2 * G * H))]
    attrs = dict(hidden_size=H, direction="bidirectional", dtype=np.float32)
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    viewed = onnx_graph.KERNELS[op](*args, **attrs)
    monkeypatch.setattr(recurrence, "_adjacent", lambda mats: None)
    stacked = onnx_graph.KERNELS[op](*args, **attrs)
    monkeypatch.setattr(recurrence, "NO_COPY_BYTES", 0)
    in_place = onnx_graph.KERNELS[op](*args, **attrs)
    for a, b, c in zip(viewed, stacked, in_place):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-6)


def test_adjacent_gate_blocks_join_without_copy():
    from rnnconv.engine.recurrence import _adjacent

    W = np.arange(24, dtype=np.float32).reshape(6, 4)
    blocks = [W[0:2], W[2:4], W[4:6]]
    joined = _adjacent(blocks)
    assert joined is not None and np.shares_memory(joined, W)
    np.testing.assert_array_equal(joined, W)
    assert _adjacent([W[2:4], W[0:2], W[4:6]]) is None  # another order needs a copy
    assert _adjacent([W[0:2], np.array(W[2:4]), W[4:6]]) is None  # equal values elsewhere in memory
    assert _adjacent([W[0:2, :3], W[2:4, :3]]) is None  # not contiguous


def test_only_referenced_bytes_are_copied(tmp_path):
    # A data file with 3 MiB of bytes no tensor references: the output's data file holds only the tensors.
    src = lstm(tmp_path / "src" / "m.onnx")
    proto = onnx.load(str(src), load_external_data=False)
    data = (src.parent / "w.data").read_bytes()
    pad = 3 << 20
    (src.parent / "w.data").write_bytes(b"\0" * pad + data)
    for t in proto.graph.initializer:
        for e in t.external_data:
            if e.key == "offset":
                e.value = str(int(e.value) + pad)
    onnx.save(proto, str(src))
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["upgrade", str(src), "-o", str(out), "--no-verify"])
    assert code == 0, stderr
    assert (tmp_path / "o.onnx.data").stat().st_size < len(data) + io.ALIGNMENT
    for name, array in weights(src).items():
        np.testing.assert_array_equal(weights(out)[name], array)


def test_cli_start_defers_sympy(tmp_path):
    # onnx_ir's sympy loads only when a symbolic dimension is computed with; then it is the real module.
    src = lstm(tmp_path / "m.onnx")
    probe = ("import sys\nfrom rnnconv.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "assert 'sympy.core' not in sys.modules, 'sympy was imported'\n"
             "import onnx_ir as ir\nprint(ir.SymbolicDim('N') * 2 + 1)\n"
             "import sympy\nprint(type(sympy.Symbol('x')).__module__)")
    proc = subprocess.run([sys.executable, "-c", probe, "upgrade", str(src), "-o", str(tmp_path / "o.onnx")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["1", "sympy.core.symbol"] and "2*N + 1" in proc.stdout


def test_weights_are_scanned_for_nan_once_per_tensor(monkeypatch, tmp_path):
    from rnnconv.dialects import onnx_recurrent

    model = io.load(lstm(tmp_path / "m.onnx"))
    scans = []
    real = onnx_recurrent._count_nonfinite
    monkeypatch.setattr(onnx_recurrent, "_count_nonfinite", lambda a, *k: (a is not None and scans.append(a.shape)) or real(a, *k))
    onnx_recurrent.find(model)
    first = len(scans)
    onnx_recurrent.find(model)
    assert first == 3 and len(scans) == first  # W, R, B; the second reading scans nothing
    w = model.graph.initializers["W"]
    bad = w.const_value.numpy().copy()
    bad[0, 0, 0] = np.nan
    w.const_value = ir.tensor(bad, name="W")  # a new tensor in the value is scanned anew
    with pytest.warns(Warning, match="1 non-finite"):
        onnx_recurrent.find(model)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nonfinite_count_is_exact(dtype):
    from rnnconv.dialects.onnx_recurrent import _count_nonfinite

    a = np.random.default_rng(0).uniform(-1, 1, 5_000_000).astype(dtype)
    assert _count_nonfinite(a, chunk=1 << 20) == 0
    a[[3, 1_500_000, 4_999_999]] = [np.nan, np.inf, -np.inf]
    assert _count_nonfinite(a, chunk=1 << 20) == 3
    big = np.full(1 << 20, np.finfo(dtype).max / 2, dtype)  # x.x overflows, yet every x is finite
    assert _count_nonfinite(big) == 0


def test_onnxruntime_runs_big_models_in_a_child_with_the_same_answers(tmp_path, monkeypatch):
    from rnnconv.verification import checks, engines
    from rnnconv.verification.model import onnx_model

    model = io.load(lstm(tmp_path / "m.onnx"))
    layout1 = io.load(lstm(tmp_path / "l" / "m.onnx", layout=1))
    feeds = vinputs.random_inputs(model, 0)
    here = onnxruntime_runtime.run(model, feeds)
    (child, why), (refused, reason) = onnxruntime_runtime.run_isolated([model, layout1], feeds)
    assert why == "" and child.keys() == here.keys()
    for k in here:
        np.testing.assert_array_equal(child[k], here[k])
    assert refused is None and reason  # onnxruntime refuses layout 1: the reason comes back, nothing crashes
    calls = []
    monkeypatch.setattr(engines, "ISOLATE_WEIGHT_BYTES", 0)
    monkeypatch.setattr(onnxruntime_runtime, "run_isolated", lambda *a: calls.append(a) or [(here, "")])
    checks.check_models(onnx_model(model), onnx_model(model), checks.CheckOptions())
    assert len(calls) == 2  # past ISOLATE_WEIGHT_BYTES of external weights, each onnxruntime run takes the child


def test_onnxruntime_child_crash_fails_the_check(tmp_path, monkeypatch):
    import subprocess as sp

    from rnnconv.verification import checks, engines
    from rnnconv.verification.model import onnx_model

    model = io.load(lstm(tmp_path / "m.onnx"))
    real = sp.run
    monkeypatch.setattr(sp, "run", lambda cmd, **k: real([sys.executable, "-c", "import os; os.abort()"], **k))
    with pytest.raises(onnxruntime_runtime.Crashed, match="onnxruntime's process failed"):
        onnxruntime_runtime.run_isolated([model], {})
    monkeypatch.setattr(engines, "ISOLATE_WEIGHT_BYTES", 0)
    found = checks.check_models(onnx_model(model), onnx_model(model), checks.CheckOptions())
    assert len(found) == 2 and found[1].engines == "onnxruntime" and found[0].ok
    assert not found[1].ok and "onnxruntime's process failed" in found[1].outputs[0].problem


def test_early_copy_is_kept_when_weights_are_untouched(tmp_path, monkeypatch):
    src = lstm(tmp_path / "src" / "m.onnx")
    taken = []
    real = io.EarlyCopy.take
    monkeypatch.setattr(io.EarlyCopy, "take", lambda self, *a: taken.append(real(self, *a)) or taken[-1])
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    code, _, stderr = run_cli(["upgrade", str(src), "-o", str(out), "--no-verify"])
    assert code == 0, stderr
    assert len(taken) == 1 and taken[0]  # the copy made beside the rewrite became the output's data file
    assert (out.parent / "o.onnx.data").read_bytes() == (src.parent / "w.data").read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == ["o.onnx", "o.onnx.data"]
    umask = os.umask(0)
    os.umask(umask)
    assert (out.parent / "o.onnx.data").stat().st_mode & 0o777 == 0o666 & ~umask  # as any new file, not 0600


def test_early_copy_is_dropped_when_the_layout_changes(tmp_path, monkeypatch):
    # W replaced by a new tensor: R and B would leave a hole of W's size, so the output is laid out anew.
    src = lstm(tmp_path / "src" / "m.onnx", H=64, I=600)  # W: 1.2 MB, past the 1 MiB of holes kept
    model = io.load(src)
    out = tmp_path / "o.onnx"
    taken = []
    real = io.EarlyCopy.take
    monkeypatch.setattr(io.EarlyCopy, "take", lambda self, *a: taken.append(real(self, *a)) or taken[-1])
    with io.EarlyCopy(model, out) as early:
        assert early.path is not None and early.path.parent == tmp_path
        w = model.graph.initializers["W"]
        w.const_value = ir.tensor(w.const_value.numpy() * 2, name="W")
        io.save(model, out, early=early)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.onnx", "o.onnx.data", "src"]
    back = weights(out)
    np.testing.assert_array_equal(back["W"], weights(src)["W"] * 2)
    np.testing.assert_array_equal(back["R"], weights(src)["R"])
    assert taken == [[]]


def test_failed_verification_leaves_no_early_copy(tmp_path, monkeypatch):
    from rnnconv.verification import checks

    src = lstm(tmp_path / "m.onnx")
    failing = vresults.Check("node lstm", "engine", [vresults.failed("Y", "injected")])
    monkeypatch.setattr(checks, "check_nodes", lambda *a, **k: [failing])
    code, _, _ = run_cli(["upgrade", str(src), "-o", str(tmp_path / "o.onnx")])
    assert code == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "w.data"]


def test_unknown_node_leaves_no_early_copy(tmp_path):
    src = lstm(tmp_path / "m.onnx")
    code, _, stderr = run_cli(["layout", str(src), "-o", str(tmp_path / "o.onnx"), "--to", "1", "--node", "nope"])
    assert code == 2 and "'nope'" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "w.data"]
