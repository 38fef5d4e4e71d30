"""The rnnconv command runs numpy's BLAS on one thread unless the environment chooses: its products are memory-bound
matrix-times-few-columns, and idle BLAS threads spin on the cores that to-openvino's OpenVINO runtime compiles on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The command, then numpy's BLAS as it was loaded: the variable and the threads of this process.
PROBE = """
import atexit, os, sys
from rnnconv.cli import main
def report():
    threads = next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("Threads:"))
    print("probe", os.environ.get("OPENBLAS_NUM_THREADS"), threads, "numpy" in sys.modules)
atexit.register(report)
main(["inspect", sys.argv[1]])
"""


def probe(**env):
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    environ.update(env, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", PROBE, str(REPO / "fixtures" / "lstm.onnx")], env=environ,
                         capture_output=True, text=True, check=True).stdout
    _, value, threads, numpy_loaded = next(ln for ln in out.splitlines() if ln.startswith("probe")).split()
    assert numpy_loaded == "True"  # the command loaded numpy after main() set the variable
    return value, int(threads)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="thread count read from /proc")
def test_one_blas_thread_unless_the_environment_chooses():
    value, threads = probe()
    assert (value, threads) == ("1", 1)
    value, threads = probe(OPENBLAS_NUM_THREADS="2")
    assert value == "2"
    if (os.cpu_count() or 1) > 1:
        assert threads > 1  # the user's choice reached OpenBLAS: the probe can tell the two apart
