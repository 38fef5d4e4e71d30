"""CI cannot pass on tests that did not run: the real-model job (.ci/run) requires its download."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _real_run(tmp_path: Path, required: bool) -> subprocess.CompletedProcess:
    """One real-model test, with an empty cache and pip pointed at an index nothing listens on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "RNNCONV_REAL_REQUIRED"}
    env.update(RNNCONV_REAL_CACHE=str(tmp_path / "cache"), PIP_CONFIG_FILE=os.devnull, PIP_RETRIES="0",
               PIP_DEFAULT_TIMEOUT="2", PIP_INDEX_URL="http://127.0.0.1:9/simple")
    if required:
        env["RNNCONV_REAL_REQUIRED"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-m", "real", "-p", "no:cacheprovider",
           str(ROOT / "tests" / "real" / "test_quantized_real.py"), "-k", "inspect"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_a_failed_real_model_download_fails_the_ci_job(tmp_path):
    run = _real_run(tmp_path, required=True)
    assert run.returncode != 0, run.stdout
    assert "could not download" in run.stdout and "RNNCONV_REAL_REQUIRED=1" in run.stdout, run.stdout


def test_a_failed_real_model_download_only_skips_locally(tmp_path):
    run = _real_run(tmp_path, required=False)
    assert run.returncode == 0, run.stdout
    assert "could not download" in run.stdout and "skipped" in run.stdout, run.stdout


def test_ci_requires_the_real_models():
    if not (ROOT / ".ci" / "run").exists():
        pytest.skip("a copy of the suite without .ci (CI's wheel jobs); the source tree's job checks it")
    run = (ROOT / ".ci" / "run").read_text()
    line = next(x for x in run.splitlines() if "-m real" in x)
    assert "RNNCONV_REAL_REQUIRED=1" in line and "-rs" in line, line
