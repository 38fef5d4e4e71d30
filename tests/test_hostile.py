"""Broken and hostile inputs: every command fails with the documented exit code and one line on stderr, and
leaves no file behind (tests/make_hostile.py builds the corpus; nothing hostile is committed)."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from rnnconv import errors
from rnnconv.cli import EXIT_INTERNAL, main
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.errors import (
    BadInput,
    IOFailure,
    RnnconvError,
    Unsupported,
    UsageError,
    VerificationFailed,
)
from tests import make_hostile

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


def run_cli(argv) -> tuple[int, str, str]:
    """`rnnconv ARGV` in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code
        else:
            code = 0
    return code, out.getvalue(), err.getvalue()


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


# -- the IR reader directly: typed errors, nothing read outside, nothing expanded ------------------------------

def test_ir_reader_refuses_entities_without_expanding_or_reading(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    for data in (make_hostile.BILLION_LAUGHS, make_hostile._external_entity(secret)):
        with pytest.raises(BadInput, match="must not contain a DOCTYPE") as info:
            ov_reader.parse(data, b"")
        assert "TOP SECRET" not in str(info.value) and "lollol" not in str(info.value)


def test_ir_reader_refuses_parameter_entities(tmp_path):
    xml = b'<?xml version="1.0"?><!DOCTYPE net [<!ENTITY % p SYSTEM "http://example.invalid/x.dtd"> %p;]><net/>'
    with pytest.raises(BadInput, match="DOCTYPE"):
        ov_reader.parse(xml, b"")


def test_ir_reader_refuses_a_const_larger_than_its_bin_before_allocating(tmp_path):
    xml, weights = make_hostile.valid_ir(tmp_path)
    huge = make_hostile._const_layer(xml, {"shape": f"{1 << 20}, {1 << 20}", "size": str((1 << 40) * 4)})
    with pytest.raises(BadInput, match=r"lie outside the \.bin"):
        ov_reader.parse(huge, weights)


@pytest.mark.parametrize("shape", ["4294967296, 4294967296, 16", "18446744073709551616"])
def test_ir_reader_const_shape_overflow_is_bad_input(shape, tmp_path):
    xml, weights = make_hostile.valid_ir(tmp_path)
    overflow = make_hostile._const_layer(xml, {"shape": shape, "size": "0"})
    with pytest.raises(BadInput):
        ov_reader.parse(overflow, weights)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_ir_bin_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    xml, _ = make_hostile.valid_ir(tmp_path)
    (tmp_path / "m.xml").write_bytes(xml)
    os.mkfifo(tmp_path / "m.bin")
    proc = subprocess.run([sys.executable, "-m", "rnnconv", "from-openvino", str(tmp_path / "m.xml"), "-o",
                           str(tmp_path / "o.onnx")], capture_output=True, text=True, timeout=8)
    assert proc.returncode == 4 and "not a regular file" in proc.stderr


@pytest.mark.parametrize("kind", ["directory", "device"])
def test_ir_bin_that_is_not_a_regular_file_is_refused_unread(kind, tmp_path):
    xml, _ = make_hostile.valid_ir(tmp_path)
    (tmp_path / "m.xml").write_bytes(xml)
    if kind == "directory":
        (tmp_path / "m.bin").mkdir()
    elif os.path.exists("/dev/zero"):
        (tmp_path / "m.bin").symlink_to("/dev/zero")  # read to its end, it would fill memory
    else:
        pytest.skip("no /dev/zero")
    with pytest.raises(BadInput, match=r"m\.bin: not a regular file"):
        ov_reader.read(tmp_path / "m.xml")


# -- the Python API: typed errors --------------------------------------------------------------------------

def test_api_raises_typed_errors(tmp_path):
    import rnnconv
    from rnnconv import io

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
    import onnx

    from rnnconv import io

    folder = tmp_path / "m"
    folder.mkdir()
    onnx.save(make_hostile.recurrent(), str(folder / "m.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="m.onnx.data", size_threshold=0)
    monkeypatch.chdir(tmp_path)
    model = io.load(folder / "m.onnx")
    assert model.graph.initializers["W"].const_value.numpy().shape == (1, 16, 3)


def test_exit_codes_are_the_documented_ones():
    assert (VerificationFailed.exit_code, UsageError.exit_code, Unsupported.exit_code, BadInput.exit_code,
            IOFailure.exit_code) == (1, 2, 3, 4, 5)
    assert issubclass(IOFailure, RnnconvError) and EXIT_INTERNAL == 70
    assert "4 bad input" in errors.exit_codes_help() and "70 internal error" in errors.exit_codes_help()


def test_internal_errors_are_one_line_and_debug_shows_the_traceback(monkeypatch, tmp_path):
    import rnnconv.commands.inspect

    model = tmp_path / "m.onnx"
    model.write_bytes(make_hostile.recurrent().SerializeToString())

    def boom(*_a, **_k):
        raise KeyError("a bug\nwith two lines")

    monkeypatch.setattr(rnnconv.commands.inspect, "inspect", boom)
    code, _, stderr = run_cli(["inspect", str(model)])
    assert code == 70 and len(stderr.strip().splitlines()) == 1
    assert stderr.startswith("rnnconv: internal error: KeyError") and "--debug" in stderr
    code, _, stderr = run_cli(["--debug", "inspect", str(model)])
    assert code == 70 and "Traceback (most recent call last)" in stderr and "KeyError" in stderr


def test_out_of_memory_is_exit_5_not_a_bug(monkeypatch, tmp_path):
    import rnnconv.commands.inspect

    model = tmp_path / "m.onnx"
    model.write_bytes(make_hostile.recurrent().SerializeToString())

    def hungry(*_a, **_k):
        return np.empty(1 << 40, dtype=np.float64)  # 8 TiB: refused at once

    monkeypatch.setattr(rnnconv.commands.inspect, "inspect", hungry)
    code, _, stderr = run_cli(["inspect", str(model)])
    assert code == 5 and stderr.startswith("rnnconv: error: out of memory (Unable to allocate")


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
