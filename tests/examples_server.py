"""A process that runs the docs' examples as `python -m rnnconv ...` and `python -c SCRIPT` would, each in a fork
of itself: rnnconv, onnx and numpy are imported once, not once per example (about a second of CPU each).

It reads one JSON request a line on stdin ({"argv": [...], "script": TEXT or null, "cwd": PATH}) and answers one
JSON line ({"code": N, "output": TEXT}). The fork sets up what the interpreter would (cwd, sys.argv, stdin from
/dev/null, stdout and stderr one pipe, the environment the server started with) and leaves through SystemExit, so
that the interpreter's own exit runs (atexit, threads joined, streams flushed) and its exit status is the code.
Before the imports it does what `rnnconv.cli.main` does first (BLAS threads, telemetry), which would otherwise come
after them; it imports neither onnxruntime nor OpenVINO (nor starts a thread), so a fork is as clean as a start and
`batch --jobs` still chooses fork. Run it as `python tests/examples_server.py`, never import it.
"""
import importlib
import json
import os
import pkgutil
import select
import signal
import sys
import time

TIMEOUT = 600  # seconds an example may take


def _preload() -> None:
    from rnnconv.cli import BLAS_THREADS
    from rnnconv.engine import telemetry

    for name, value in BLAS_THREADS.items():
        os.environ.setdefault(name, value)
    telemetry.switch_off()
    import rnnconv

    for module in pkgutil.walk_packages(rnnconv.__path__, "rnnconv."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    started = [m for m in ("onnxruntime", "openvino") if sys.modules.get(m) is not None]
    assert not started, f"preloading rnnconv imported {started}: the examples would fork a runtime"


def _example(request: dict) -> None:
    """In the fork: the example, as its own process would run it."""
    import runpy

    os.chdir(request["cwd"])
    if request["script"] is not None:  # python -c SCRIPT
        sys.argv = ["-c"]
        sys.path[0] = ""
        exec(compile(request["script"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    else:  # python -m rnnconv ARGS
        sys.argv = ["-m", *request["argv"]]
        sys.path[0] = os.getcwd()
        runpy.run_module("rnnconv", run_name="__main__", alter_sys=True)
    sys.exit(0)


def _run(request: dict, answers: int) -> dict:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.close(answers)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(write, 1)
        os.dup2(write, 2)
        os.close(null)
        os.close(write)
        _example(request)  # leaves by SystemExit, never returns
    os.close(write)
    chunks, deadline = [], time.monotonic() + TIMEOUT
    while True:
        ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            chunks.append(b"\n(examples server: killed after %d s)" % TIMEOUT)
            break
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    return {"code": os.waitstatus_to_exitcode(status), "output": b"".join(chunks).decode(errors="replace")}


def serve() -> None:
    answers = os.dup(1)  # the fork's stdout is its pipe; answers go here
    sys.stdout.flush()
    _preload()
    os.write(answers, b'{"ready": true}\n')
    for line in sys.stdin:
        answer = _run(json.loads(line), answers)
        os.write(answers, (json.dumps(answer) + "\n").encode())


if __name__ == "__main__":
    serve()
