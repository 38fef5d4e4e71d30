"""Output safety: a temporary file beside the target and a rename; nothing left behind on any failure (external
data included); never over the input, by any path to it; an existing output only with --force; killed
mid-write, the target holds nothing or the previous file."""

from __future__ import annotations

import errno
import functools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from rnnconv import io
from rnnconv.errors import IOFailure, UsageError
from rnnconv.verification import results as vresults
from tests.conftest import REPO, lstm_file, recurrent_model, run_cli

# A forward LSTM (I=3, H=4) with its weights inside the model file, or in the `external` data file beside it.
lstm = functools.partial(lstm_file, external=None, direction="forward", H=4, I=3)


def files(folder: Path) -> set[str]:
    """Every entry under `folder`, hidden temporary folders included."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# -- existing outputs and the input itself -----------------------------------------------------------------------

COMMANDS = {
    "upgrade": lambda m, o: ["upgrade", m, "-o", o, "--no-verify"],
    "downgrade": lambda m, o: ["downgrade", m, "-o", o, "--opset", "7", "--no-verify"],
    "layout": lambda m, o: ["layout", m, "-o", o, "--to", "0", "--no-verify"],
    "to-openvino": lambda m, o: ["to-openvino", m, "-o", o, "--no-verify"],
    "settle-ifs": lambda m, o: ["settle-ifs", m, "-o", o, "--no-verify"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_existing_output_needs_force(command, tmp_path):
    model = lstm(tmp_path / "m.onnx")
    out = tmp_path / ("o.xml" if command == "to-openvino" else "o.onnx")
    out.write_bytes(b"previous")
    code, _, stderr = run_cli(COMMANDS[command](str(model), str(out)))
    assert code == 2 and "exists (try --force)" in stderr, stderr
    assert out.read_bytes() == b"previous"
    code, _, stderr = run_cli([*COMMANDS[command](str(model), str(out)), "--force"])
    assert code == 0, stderr
    assert out.read_bytes() != b"previous"
    assert files(tmp_path) <= {"m.onnx", out.name, "o.bin"}, files(tmp_path)


def _same_file_paths(tmp_path: Path, model: Path) -> dict[str, Path]:
    (tmp_path / "sub").mkdir()
    os.symlink(model, tmp_path / "link.onnx")
    os.link(model, tmp_path / "hard.onnx")
    return {"same path": model, "dot-dot path": tmp_path / "sub" / ".." / model.name,
            "symlink": tmp_path / "link.onnx", "hard link": tmp_path / "hard.onnx"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("how", ["same path", "dot-dot path", "symlink", "hard link"])
def test_never_writes_over_the_input(command, how, tmp_path):
    model = lstm(tmp_path / "m.onnx")
    original = model.read_bytes()
    out = _same_file_paths(tmp_path, model)[how]
    code, _, stderr = run_cli([*COMMANDS[command](str(model), str(out)), "--force"])
    assert code == 2 and "refusing to write over the input" in stderr, stderr
    assert model.read_bytes() == original
    assert files(tmp_path) == {"m.onnx", "sub", "link.onnx", "hard.onnx"}


@pytest.mark.parametrize("target", ["xml", "bin"])
def test_from_openvino_never_writes_over_its_ir(target, tmp_path):
    from rnnconv.commands.to_openvino import to_openvino

    to_openvino(lstm(tmp_path / "m.onnx"), tmp_path / "ir.xml", verify=False)
    before = {p: p.read_bytes() for p in (tmp_path / "ir.xml", tmp_path / "ir.bin")}
    code, _, stderr = run_cli(["from-openvino", str(tmp_path / "ir.xml"), "-o", str(tmp_path / f"ir.{target}"),
                               "--force", "--no-verify"])
    assert code == 2 and "refusing to write over the input" in stderr, stderr
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize("case", ["bin exists", "bin is the input"])
def test_to_openvino_guards_its_bin_too(case, tmp_path):
    model = lstm(tmp_path / ("o.bin" if case == "bin is the input" else "m.onnx"))
    original = model.read_bytes()
    if case == "bin exists":
        (tmp_path / "o.bin").write_bytes(b"previous")
    code, _, stderr = run_cli(["to-openvino", str(model), "-o", str(tmp_path / "o.xml"), "--no-verify"])
    assert code == 2, stderr
    assert model.read_bytes() == original
    assert case != "bin exists" or (tmp_path / "o.bin").read_bytes() == b"previous"


def test_to_openvino_never_writes_its_bin_over_the_inputs_external_data(tmp_path):
    model = lstm(tmp_path / "m.onnx", external="o.bin")
    data = (tmp_path / "o.bin").read_bytes()
    code, _, stderr = run_cli(["to-openvino", str(model), "-o", str(tmp_path / "o.xml"), "--no-verify", "--force"])
    assert code == 2 and "refusing to write over the input" in stderr, stderr
    assert (tmp_path / "o.bin").read_bytes() == data
    assert files(tmp_path) == {"m.onnx", "o.bin"}


@pytest.mark.parametrize("previous", [True, False])
def test_to_openvino_xml_rename_failing_restores_the_previous_bin(previous, tmp_path, monkeypatch):
    from rnnconv.commands.to_openvino import to_openvino
    from rnnconv.io import writing

    model = lstm(tmp_path / "m.onnx")
    out = tmp_path / "out"
    out.mkdir()
    if previous:
        (out / "o.xml").write_bytes(b"previous xml")
        (out / "o.bin").write_bytes(b"previous bin")
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst) == out / "o.xml":
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(src, dst)

    monkeypatch.setattr(writing.os, "replace", replace)
    with pytest.raises(IOFailure, match="Input/output error"):
        to_openvino(model, out / "o.xml", verify=False, force=True)
    if previous:
        assert (out / "o.xml").read_bytes() == b"previous xml"
        assert (out / "o.bin").read_bytes() == b"previous bin"
    assert files(out) == ({"o.xml", "o.bin"} if previous else set())


def test_output_that_is_a_directory_is_refused(tmp_path):
    model = lstm(tmp_path / "m.onnx")
    (tmp_path / "d").mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        io.guard_output(tmp_path / "d", force=True, inputs=(model,))


# -- external data -------------------------------------------------------------------------------------------

def test_external_data_round_trip_and_nothing_else_written(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    model = lstm(src / "m.onnx", external="m.weights")
    out = tmp_path / "out"
    code, _, stderr = run_cli(["upgrade", str(model), "-o", str(out / "o.onnx"), "--no-verify"])
    assert code == 0, stderr
    assert files(out) == {"o.onnx", "o.onnx.data"}
    assert files(src) == {"m.onnx", "m.weights"}
    loaded = io.load(out / "o.onnx")
    assert loaded.graph.initializers["W"].const_value.numpy().shape == (1, 16, 3)


def test_never_writes_over_the_inputs_external_data(tmp_path):
    # The input keeps its weights in "o.onnx.data": writing o.onnx (and its data) beside it would destroy them.
    model = lstm(tmp_path / "m.onnx", external="o.onnx.data")
    data = (tmp_path / "o.onnx.data").read_bytes()
    for out in ("o.onnx", "o.onnx.data"):
        code, _, stderr = run_cli(["upgrade", str(model), "-o", str(tmp_path / out), "--no-verify", "--force"])
        assert code == 2 and "refusing to write over the input" in stderr, stderr
        assert (tmp_path / "o.onnx.data").read_bytes() == data
        assert files(tmp_path) == {"m.onnx", "o.onnx.data"}


def test_existing_external_data_needs_force(tmp_path):
    model = lstm(tmp_path / "src.onnx", external="src.data")
    (tmp_path / "o.onnx.data").write_bytes(b"previous")
    code, _, stderr = run_cli(["upgrade", str(model), "-o", str(tmp_path / "o.onnx"), "--no-verify"])
    assert code == 2 and "o.onnx.data: exists" in stderr, stderr
    assert (tmp_path / "o.onnx.data").read_bytes() == b"previous" and not (tmp_path / "o.onnx").exists()


# -- failures leave nothing --------------------------------------------------------------------------------------

def test_unsupported_and_failed_verification_write_nothing(tmp_path, monkeypatch):
    from rnnconv.verification import runner

    gru = tmp_path / "gru.onnx"
    gru.write_bytes(recurrent_model("GRU", lbr=1).SerializeToString())
    out = tmp_path / "out"
    code, _, stderr = run_cli(["downgrade", str(gru), "-o", str(out / "o.onnx"), "--opset", "1"])
    assert code == 3, stderr
    bad = vresults.Check("model", "engine", [vresults.compare("Y", np.zeros(3), np.ones(3), 1e-5, 1e-5)])
    monkeypatch.setattr(runner, "check_nodes", lambda *a, **k: [bad])
    code, _, stderr = run_cli(["upgrade", str(lstm(tmp_path / "m.onnx")), "-o", str(out / "o.onnx")])
    assert code == 1 and "nothing written" in stderr, stderr
    assert not out.exists() or files(out) == set()


def _half_writer(real_save, fail: BaseException):
    """ir.save that writes half of what the real one would (model and external data), then fails."""

    def save(model, path, **kwargs):
        real_save(model, path, **kwargs)
        for p in Path(path).parent.iterdir():
            data = p.read_bytes()
            p.write_bytes(data[: len(data) // 2])
        raise fail

    return save


@pytest.mark.parametrize("external", [False, True])
@pytest.mark.parametrize("previous", [False, True])
def test_writer_failing_half_way_leaves_nothing_or_the_previous_file(external, previous, tmp_path, monkeypatch):
    model = lstm(tmp_path / "m.onnx", external="m.data" if external else None)
    out = tmp_path / "out"
    out.mkdir()
    names = {"o.onnx", "o.onnx.data"} if external else {"o.onnx"}
    if previous:
        for n in names:
            (out / n).write_bytes(b"previous " + n.encode())
    monkeypatch.setattr(io.writing.ir, "save", _half_writer(ir.save, OSError(errno.ENOSPC, "No space left on device")))
    code, _, stderr = run_cli(["upgrade", str(model), "-o", str(out / "o.onnx"), "--no-verify", "--force"])
    assert code == 5 and "No space left on device" in stderr, stderr
    if previous:
        assert files(out) == names
        assert all((out / n).read_bytes() == b"previous " + n.encode() for n in names)
    else:
        assert files(out) == set()


def test_failed_write_removes_the_folders_it_created(tmp_path, monkeypatch):
    model = lstm(tmp_path / "m.onnx")
    monkeypatch.setattr(io.writing.ir, "save", _half_writer(ir.save, OSError(errno.ENOSPC, "No space left on device")))
    code, _, stderr = run_cli(["upgrade", str(model), "-o", str(tmp_path / "new" / "deeper" / "o.onnx"),
                               "--no-verify"])
    assert code == 5, stderr
    assert files(tmp_path) == {"m.onnx"}


def test_interrupted_write_leaves_nothing(tmp_path, monkeypatch):
    model = lstm(tmp_path / "m.onnx")
    monkeypatch.setattr(io.writing.ir, "save", _half_writer(ir.save, KeyboardInterrupt()))
    code, _, stderr = run_cli(["upgrade", str(model), "-o", str(tmp_path / "out" / "o.onnx"), "--no-verify"])
    assert code == 130 and "interrupted" in stderr
    assert files(tmp_path) == {"m.onnx"}


def test_model_rename_failing_after_the_data_moved_restores_the_previous_pair(tmp_path, monkeypatch):
    model = lstm(tmp_path / "m.onnx", external="m.data")
    out = tmp_path / "out"
    out.mkdir()
    (out / "o.onnx").write_bytes(b"previous model")
    (out / "o.onnx.data").write_bytes(b"previous data")
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst) == out / "o.onnx":
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(src, dst)

    monkeypatch.setattr(io.writing.os, "replace", replace)
    with pytest.raises(IOFailure, match="Input/output error"):
        io.save(io.load(model), out / "o.onnx", force=True, inputs=(model,))
    assert (out / "o.onnx").read_bytes() == b"previous model"
    assert (out / "o.onnx.data").read_bytes() == b"previous data"
    assert files(out) == {"o.onnx", "o.onnx.data"}


# -- killed mid-write (SIGKILL: no cleanup code runs) --------------------------------------------------------

KILLER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import onnx_ir as ir
    from rnnconv import io
    from rnnconv.cli import main

    real_save = ir.save

    def save(model, path, **kwargs):
        real_save(model, path, **kwargs)
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[: len(data) // 2])  # half-written, then the machine "dies"
        os.kill(os.getpid(), signal.SIGKILL)

    io.writing.ir.save = save
    main(sys.argv[1:])
""")


def _run_killer(args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", KILLER, *args], capture_output=True, text=True, timeout=180,
                          cwd=cwd, env=env)


@pytest.mark.parametrize("previous", [False, True])
def test_sigkill_mid_write_leaves_the_target_empty_or_previous(previous, tmp_path):
    model = lstm(tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    if previous:
        out.write_bytes(b"previous")
    proc = _run_killer(["upgrade", str(model), "-o", str(out), "--no-verify", "--force"], tmp_path)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (out.read_bytes() == b"previous") if previous else not out.exists()
    # SIGKILL runs no cleanup: the hidden temporary folder beside the target may stay; nothing else does.
    assert all(f.startswith(".o.onnx.") for f in files(tmp_path) - {"m.onnx", "o.onnx"}), files(tmp_path)


@pytest.mark.slow
def test_sigkill_at_a_real_moment_of_a_big_write(tmp_path):
    """No monkeypatching: a ~100 MB model, killed as soon as its temporary folder appears, then while writing."""
    model = lstm(tmp_path / "big.onnx", H=1024, I=4096)  # 4*1024*(4096+1024)*4 bytes ~ 84 MB
    out = tmp_path / "o.onnx"
    out.write_bytes(b"previous")
    for delay in (0.0, 0.05, 0.2):
        proc = subprocess.Popen([sys.executable, "-m", "rnnconv", "upgrade", str(model), "-o", str(out),
                                 "--no-verify", "--force"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not any(p.name.startswith(".o.onnx.") for p in tmp_path.iterdir()):
            if proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        data = out.read_bytes()
        assert data == b"previous" or onnx.load_from_string(data).graph.node[0].op_type == "LSTM"
        if data != b"previous":
            out.write_bytes(b"previous")


# -- unwritable folder, full disk ------------------------------------------------------------------------------

def test_output_under_a_regular_file_is_an_io_error(tmp_path):
    model = lstm(tmp_path / "m.onnx")
    (tmp_path / "file").write_text("not a folder")
    code, _, stderr = run_cli(["upgrade", str(model), "-o", str(tmp_path / "file" / "o.onnx"), "--no-verify"])
    assert code == 5 and "cannot write" in stderr, stderr
    assert files(tmp_path) == {"m.onnx", "file"}


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores directory permissions "
                    "(test_output_under_a_regular_file_is_an_io_error and the RLIMIT_FSIZE test cover exit 5)")
def test_read_only_folder_is_an_io_error(tmp_path):
    model = lstm(tmp_path / "m.onnx")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        code, _, stderr = run_cli(["upgrade", str(model), "-o", str(ro / "o.onnx"), "--no-verify"])
    finally:
        ro.chmod(0o700)
    assert code == 5 and "cannot write" in stderr, stderr
    assert files(ro) == set()


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE + SIGXFSZ semantics are Linux's")
@pytest.mark.parametrize("previous", [False, True])
def test_full_disk_is_exit_5_and_leaves_nothing(previous, tmp_path):
    """A file-size limit makes every write past 64 KiB fail with EFBIG, as a full disk fails with ENOSPC."""
    import resource

    model = lstm(tmp_path / "m.onnx", H=64, I=64)  # ~260 KB of weights
    out = tmp_path / "out"
    out.mkdir()
    if previous:
        (out / "o.onnx").write_bytes(b"previous")

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))

    proc = subprocess.run([sys.executable, "-m", "rnnconv", "upgrade", str(model), "-o", str(out / "o.onnx"),
                           "--no-verify", "--force"], capture_output=True, text=True, timeout=180,
                          preexec_fn=limit)
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr.startswith("rnnconv: error: ") and "cannot write" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert files(out) == ({"o.onnx"} if previous else set())
    assert not previous or (out / "o.onnx").read_bytes() == b"previous"


# -- verify's own outputs --------------------------------------------------------------------------------------

def test_verify_never_saves_over_a_model(tmp_path):
    model = lstm(tmp_path / "m.onnx")
    original = model.read_bytes()
    code, _, stderr = run_cli(["verify", str(model), str(model), "--save-inputs", str(model)])
    assert code == 2 and "refusing to write over" in stderr, stderr
    assert model.read_bytes() == original


@pytest.mark.parametrize("option", ["--save-inputs", "--save-outputs"])
def test_verify_refuses_an_existing_save_file_without_force(option, tmp_path):
    model = lstm(tmp_path / "m.onnx")
    (tmp_path / "s.npz").write_bytes(b"previous")
    code, _, stderr = run_cli(["verify", str(model), str(model), option, str(tmp_path / "s.npz")])
    assert code == 2 and "exists (try --force)" in stderr, stderr
    assert (tmp_path / "s.npz").read_bytes() == b"previous"
    code, _, stderr = run_cli(["verify", str(model), str(model), option, str(tmp_path / "s.npz"), "--force"])
    assert code == 0, stderr
    assert (tmp_path / "s.npz").read_bytes() != b"previous" and files(tmp_path) == {"m.onnx", "s.npz"}
