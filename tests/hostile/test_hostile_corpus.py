"""Broken and hostile inputs: every command fails with the documented exit code and one line on stderr, and
leaves no file behind (tests/hostile/make_hostile.py builds the corpus; nothing hostile is committed)."""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
import pytest

import rnnconv
from rnnconv import io
from rnnconv.errors import BadInput, Unsupported
from tests.conftest import run_cli
from tests.hostile import make_hostile

# The corpus is made once, at collection, so every (case, command) pair is its own test.
_CORPUS = Path(tempfile.mkdtemp(prefix="rnnconv-hostile-"))
atexit.register(shutil.rmtree, _CORPUS, True)
CASES = make_hostile.build(_CORPUS)


def argv_for(command: str, case: make_hostile.Case, out: Path) -> list[str]:
    model = str(case.model if case.kind == "npz" else case.path)
    argv = {
        "inspect": ["inspect", model],
        "upgrade": ["upgrade", model, "-o", str(out / "out.onnx")],
        "downgrade": ["downgrade", model, "-o", str(out / "out.onnx"), "--opset", "7"],
        "layout": ["layout", model, "-o", str(out / "out.onnx"), "--to", "0"],
        "to-openvino": ["to-openvino", model, "-o", str(out / "out.xml")],
        "check": ["check", model, "--target", "onnxruntime"],
        "from-openvino": ["from-openvino", model, "-o", str(out / "out.onnx")],
        "verify": ["verify", model, model],
    }[command]
    if command == "verify" and case.kind == "npz" and case.path != case.model:
        argv += ["--inputs", str(case.path)]
    return argv + list(case.extra)


def snapshot(folder: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if not p.is_symlink()}


def _params():
    for case in CASES:
        for command in case.commands:
            why = case.xfail_reason(command)
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            yield pytest.param(case, command, id=f"{case.name}-{command}", marks=marks)


@pytest.mark.parametrize("case,command", list(_params()))
def test_hostile_input(case, command, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    before = snapshot(_CORPUS)
    code, stdout, stderr = run_cli(argv_for(command, case, out))
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert all(ln.startswith("rnnconv: ") for ln in lines), f"stderr is not rnnconv's one-liners: {stderr}"
    assert code == case.exit_code, f"exit {code}, wanted {case.exit_code}: {stderr.strip()}"
    if case.exit_code:
        errors_ = [ln for ln in lines if ln.startswith("rnnconv: error: ")]
        assert len(errors_) == 1, stderr
        assert re.search(case.message, errors_[0]), errors_[0]
        assert list(out.iterdir()) == [], "a failed command left files behind"
    if case.warning:
        warned = [ln for ln in lines if ln.startswith("rnnconv: warning: ")]
        assert len(warned) == 1 and re.search(case.warning, warned[0]), stderr
    if command in ("upgrade", "downgrade", "layout", "to-openvino") and not case.exit_code:
        assert "verified" in stdout, stdout  # NaN/Inf weights: verification still ran
    assert snapshot(_CORPUS) == before, "a command changed or added files next to its input"


@pytest.mark.parametrize("name", ["nan_in_w", "inf_in_r"])
def test_non_finite_weights_to_openvino_verify_or_refuse(name, tmp_path):
    """Runtimes differ on where NaN spreads (onnxruntime vs OpenVINO); whichever way, the warning is given,
    verification runs, and a disagreement writes nothing."""
    case = next(c for c in CASES if c.name == name)
    code, stdout, stderr = run_cli(["to-openvino", str(case.path), "-o", str(tmp_path / "o.xml")])
    assert stderr.count("rnnconv: warning:") == 1 and re.search(case.warning, stderr), stderr
    assert code in (0, 1), stderr
    if code == 1:
        assert "verification FAILED" in stderr and list(tmp_path.iterdir()) == []
    else:
        assert "verified" in stdout and (tmp_path / "o.xml").exists()


def test_corpus_covers_the_issue():
    names = {c.name for c in CASES}
    for needed in ("garbage_bytes", "truncated", "empty_graph", "cycle", "dangling_input", "duplicate_value_names",
                   "x_rank_2", "w_rank_2", "hidden_size_0", "hidden_size_negative", "weights_int32",
                   "sequence_lens_above_T", "sequence_lens_negative", "nan_in_w", "external_absolute",
                   "external_dotdot", "external_symlink_outside", "external_shorter_than_declared",
                   "ir_malformed_xml", "ir_billion_laughs", "ir_external_entity", "ir_edge_to_nowhere", "ir_cycle",
                   "ir_offset_outside", "ir_size_not_shape", "ir_unknown_element_type", "ir_const_2_40_elements",
                   "npz_extra_name", "npz_wrong_shape", "npz_wrong_dtype", "verify_dim_2_40"):
        assert needed in names


# -- the Python API: typed errors --------------------------------------------------------------------------

def test_api_raises_typed_errors(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07\x12\x00garbage" * 50)
    with pytest.raises(BadInput, match="not an ONNX model"):
        io.load(garbage)
    with pytest.raises(BadInput, match="no such file"):
        rnnconv.upgrade(tmp_path / "missing.onnx", tmp_path / "o.onnx")
    future = tmp_path / "future.onnx"
    future.write_bytes(make_hostile.recurrent(opset=999).SerializeToString())
    with pytest.raises(Unsupported, match="newer than the installed onnx"):
        io.load(future)
    assert not (tmp_path / "o.onnx").exists()


def test_valid_external_data_loads_from_any_working_directory(tmp_path, monkeypatch):
    folder = tmp_path / "m"
    folder.mkdir()
    onnx.save(make_hostile.recurrent(), str(folder / "m.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="m.onnx.data", size_threshold=0)
    monkeypatch.chdir(tmp_path)
    model = io.load(folder / "m.onnx")
    assert model.graph.initializers["W"].const_value.numpy().shape == (1, 16, 3)


def test_library_logging_and_numpy_warnings_stay_off_stderr(tmp_path):
    case = next(c for c in CASES if c.name == "dangling_input")  # onnx_ir logs a warning while loading it
    code, _, stderr = run_cli(["upgrade", str(case.path), "-o", str(tmp_path / "o.onnx")])
    assert code == 4 and len(stderr.strip().splitlines()) == 1, stderr
    inf = next(c for c in CASES if c.name == "inf_in_r")  # numpy: "invalid value encountered in matmul"
    code, _, stderr = run_cli(["upgrade", str(inf.path), "-o", str(tmp_path / "o.onnx")])
    assert code == 0 and "RuntimeWarning" not in stderr and stderr.count("rnnconv: warning:") == 1, stderr


@pytest.mark.parametrize("name", ["garbage_bytes", "ir_billion_laughs"])
def test_real_process_exit_code_and_one_line(name, tmp_path):
    case = next(c for c in CASES if c.name == name)
    command = "upgrade" if case.kind == "onnx" else "from-openvino"
    proc = subprocess.run([sys.executable, "-m", "rnnconv", *argv_for(command, case, tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("rnnconv: error: "), proc.stderr
    assert list(tmp_path.iterdir()) == []
    debug = subprocess.run([sys.executable, "-m", "rnnconv", "--debug", *argv_for(command, case, tmp_path)],
                           capture_output=True, text=True, timeout=120)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "BadInput" in debug.stderr
