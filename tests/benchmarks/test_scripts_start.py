"""The benchmark scripts docs/benchmarks.md points to start: their imports (rnnconv's included) still resolve.
Timings are never asserted (shared machines are noisy): `--help` parses the options after every import, and stops
there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

BENCHMARKS = REPO / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


@pytest.mark.skipif(not SCRIPTS, reason="benchmarks/ is not beside this copy of the tests")
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_benchmark_script_starts(script):
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=300,
                          cwd=BENCHMARKS.parent)
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stderr
