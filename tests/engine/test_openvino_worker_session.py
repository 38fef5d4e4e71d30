"""The OpenVINO runtime's child process (`openvino_runtime.Worker`) ends with whatever it forked: `import openvino`
sends a telemetry event from a forked process that holds the child's pipes and, without network, may wait for
good. Here a stand-in child forks a grandchild that sleeps on those pipes: neither closing an unused worker nor
collecting a result may wait for it, and the grandchild is gone afterwards."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from rnnconv.engine import openvino_runtime

FORKS_THEN = """
import os, pickle, sys, time
if os.fork() == 0:  # what OpenVINO's telemetry does on import: a forked process, holding stdout and stderr
    open(sys.argv[1], "w").write(str(os.getpid()))
    time.sleep(600)
    os._exit(0)
while not os.path.exists(sys.argv[1]) or not open(sys.argv[1]).read():
    time.sleep(0.01)
if sys.argv[2] == "answer":
    pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps([]))
else:
    sys.stdin.buffer.read()  # an unused worker waits for its job
"""


def _finishes(fn, seconds: float = 30) -> bool:
    done = threading.Event()
    threading.Thread(target=lambda: (fn(), done.set()), daemon=True).start()
    return done.wait(seconds)


def _gone(pid: int) -> bool:
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split()[2] == "Z":  # ended, not yet reaped by its parent
                    return True
        except FileNotFoundError:  # reaped meanwhile
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("mode", ["close", "answer"])
def test_the_worker_ends_what_its_child_forked(mode, tmp_path, monkeypatch):
    pid_file = tmp_path / "grandchild.pid"
    monkeypatch.setattr(openvino_runtime, "CHILD", [sys.executable, "-c", FORKS_THEN, str(pid_file), mode])
    worker = openvino_runtime.Worker()
    while not pid_file.exists() or not pid_file.read_text():
        time.sleep(0.01)
    if mode == "close":
        assert _finishes(worker.close), "close() waited for the forked process"
    else:
        worker.submit(tmp_path / "m.xml", {})
        got = []
        assert _finishes(lambda: got.append(worker.result())), "result() waited for the forked process"
        assert got == [[]]
    assert _gone(int(pid_file.read_text()))
