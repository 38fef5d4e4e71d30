"""README examples run as tests: every `$ rnnconv ...` line in a console block, and the first set-up command."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def _commands() -> list[str]:
    cmds = []
    for block in re.findall(r"```(?:console|bash)\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            line = line.strip()
            if line.startswith("$ rnnconv "):
                cmds.append(line[2:])
            elif "&& rnnconv " in line:  # the first set-up command: its rnnconv part
                cmds.append("rnnconv " + line.split("&& rnnconv ", 1)[1])
    return cmds


COMMANDS = _commands()


def test_readme_has_examples():
    assert len(COMMANDS) >= 3


@pytest.mark.parametrize("cmd", COMMANDS)
def test_readme_command_runs(cmd, tmp_path):
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    args = shlex.split(cmd)
    proc = subprocess.run([sys.executable, "-m", "rnnconv", *args[1:]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
