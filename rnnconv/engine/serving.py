"""Runtime child processes that live across models (batch mode): one onnxruntime child and one OpenVINO child per
converting process, each importing its runtime once, instead of a process per model and check.

A child started with `--serve` answers framed jobs (8-byte length, then a pickle) on its stdin with framed answers,
one at a time, until its stdin ends; what the runtime libraries print goes to stderr (fd 1 is redirected there:
the answers use a descriptor of their own). The caller keeps the children only while `sharing()` is on
(cli.batch turns it on in each batch process); a child that dies is dropped, its job reported as the one-shot
child's failure is, and the next job starts a new one. Each child runs in a session of its own, ended with it
(see openvino_runtime: a process `import openvino` forks may hold the pipes).
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import struct
import subprocess
import sys
from typing import Any, Callable, Optional

_HEADER = struct.Struct("<Q")
_SHARING: list[bool] = [False]
_CHILDREN: dict[str, "Child"] = {}


class Gone(Exception):
    """The child ended (or its pipe broke) before answering."""


def share(on: bool = True) -> None:
    """Keep runtime children across models from now on (`on`), or end them and stop keeping them."""
    _SHARING[0] = on
    if on:
        # a pool's worker process ends through os._exit, past atexit: multiprocessing's own exit hooks end them
        import multiprocessing.util

        multiprocessing.util.Finalize(None, close_all, exitpriority=10)
    else:
        close_all()


def sharing() -> bool:
    return _SHARING[0]


def child(module: str) -> "Child":
    """The live child serving `module` (`python -m module --serve`), started if there is none."""
    found = _CHILDREN.get(module)
    if found is None or found.proc.poll() is not None:
        found = _CHILDREN[module] = Child(module)
    return found


def drop(module: str) -> None:
    gone = _CHILDREN.pop(module, None)
    if gone is not None:
        gone.close()


def close_all() -> None:
    for module in list(_CHILDREN):
        drop(module)


atexit.register(close_all)


class Child:
    def __init__(self, module: str):
        self.module = module
        self.proc = subprocess.Popen([sys.executable, "-m", module, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self.pending = 0  # jobs sent, answers not read yet

    def send(self, job: Any) -> None:
        data = pickle.dumps(job)
        try:
            self.proc.stdin.write(_HEADER.pack(len(data)) + data)
            self.proc.stdin.flush()
        except OSError:
            pass  # gone: receive() says so
        self.pending += 1

    def receive(self) -> Any:
        self.pending -= 1
        head = _read(self.proc.stdout, _HEADER.size)
        if head is None:
            raise Gone(f"exit status {self.proc.poll()}")
        body = _read(self.proc.stdout, _HEADER.unpack(head)[0])
        if body is None:
            raise Gone(f"exit status {self.proc.poll()}")
        return pickle.loads(body)

    def ask(self, job: Any) -> Any:
        self.send(job)
        return self.receive()

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass


def _read(stream, n: int) -> Optional[bytes]:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def serve(handle: Callable[[Any], Any]) -> None:
    """The child's loop: each framed job on stdin -> handle(job) -> a framed answer, until stdin ends."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a library's print must not land among the answers
    jobs = sys.stdin.buffer
    while True:
        head = _read(jobs, _HEADER.size)
        if head is None:
            return
        body = _read(jobs, _HEADER.unpack(head)[0])
        if body is None:
            return
        data = pickle.dumps(handle(pickle.loads(body)))
        answers.write(_HEADER.pack(len(data)) + data)
        answers.flush()
