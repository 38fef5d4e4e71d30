"""What a command costs in memory and start time: a big model's weights never enter the process; the CLI starts
without sympy."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import lstm_file


@pytest.mark.slow
def test_big_model_streams_in_little_memory(tmp_path):
    H = 1024  # W and R of two directions: 64 MiB
    src = lstm_file(tmp_path / "src" / "big.onnx", H=H, I=H)
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


def test_cli_start_defers_sympy(tmp_path):
    # onnx_ir's sympy loads only when a symbolic dimension is computed with; then it is the real module.
    src = lstm_file(tmp_path / "m.onnx")
    probe = ("import sys\nfrom rnnconv.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "assert 'sympy.core' not in sys.modules, 'sympy was imported'\n"
             "import onnx_ir as ir\nprint(ir.SymbolicDim('N') * 2 + 1)\n"
             "import sympy\nprint(type(sympy.Symbol('x')).__module__)")
    proc = subprocess.run([sys.executable, "-c", probe, "upgrade", str(src), "-o", str(tmp_path / "o.onnx")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["1", "sympy.core.symbol"] and "2*N + 1" in proc.stdout
