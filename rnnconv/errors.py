"""One error vocabulary for the whole tool: each failure type carries the exit code the CLI ends with.

Library errors speak of the model (node names, ops, versions). What would fix an error is carried apart, as the
API parameters to set (`fixes`, e.g. "opset=14"): the API prints them as such, the CLI as its flags (--opset 14).
"""

from __future__ import annotations

from typing import Iterable, Optional

EXIT_OK = 0
EXIT_VERIFY = 1
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3
EXIT_BAD_INPUT = 4
EXIT_IO = 5
EXIT_INTERNAL = 70  # sysexits' EX_SOFTWARE
EXIT_INTERRUPTED = 130  # as a shell reports SIGINT

EXIT_CODES = {
    EXIT_OK: "done",
    EXIT_VERIFY: "verification failed (nothing written)",
    EXIT_USAGE: "usage error",
    EXIT_UNSUPPORTED: "unsupported construct",
    EXIT_BAD_INPUT: "bad input",
    EXIT_IO: "I/O error (unwritable output, full disk, out of memory)",
    EXIT_INTERNAL: "internal error (a bug: please report it with --debug)",
    EXIT_INTERRUPTED: "interrupted",
}


def human_size(nbytes: float) -> str:
    """A byte count as messages print it (1.5 GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} TiB"


def first_line(err: BaseException) -> str:
    """An exception's first line, as one-line messages quote it."""
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def exit_codes_help() -> str:
    return "Exit codes: " + "; ".join(f"{code} {what}" for code, what in EXIT_CODES.items()) + "."


class RnnconvError(Exception):
    """Base of every error rnnconv raises on purpose; `str(err)` is the one-line message.

    `fixes`: API parameters that would make the call work, as "name" or "name=value"."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str = "", *, fixes: Iterable[str] = ()):
        super().__init__(message)
        self.message = message
        self.fixes = tuple(fixes)

    def __str__(self) -> str:
        return self.message + (f" (try {', or '.join(self.fixes)})" if self.fixes else "")


class VerificationFailed(RnnconvError):
    """A rewrite or a pair of models did not agree numerically."""

    exit_code = EXIT_VERIFY

    def __init__(self, message: str, report=None, **kwargs):
        super().__init__(message, **kwargs)
        self.report = report


class UsageError(RnnconvError):
    exit_code = EXIT_USAGE


class Unsupported(RnnconvError):
    """The target cannot express a construct; the message names node, construct and what would work."""

    exit_code = EXIT_UNSUPPORTED


class BadInput(RnnconvError):
    """The input model (or inputs file) is malformed, or the model cannot run on the inputs drawn for it."""

    exit_code = EXIT_BAD_INPUT


class ContradictedOutputs(BadInput):
    """The model declares an output shape its nodes do not compute, which the converted model's newer op version
    `op` checks and the source's did not (a lower opset may keep the older rule)."""

    def __init__(self, message: str, op: Optional[str] = None, **kwargs):
        super().__init__(message, **kwargs)
        self.op = op


class NodeFailed(BadInput):
    """A node of the model failed while rnnconv's engine ran it: the model cannot run on these inputs.

    `node` is the node's path (scope + name, as `dialects.onnx_recurrent.walk` spells it), `op` its type,
    `inputs` what it got ("float32[1,576]", "-" for an absent optional input), `reason` the underlying error."""

    def __init__(self, node: str, op: str, inputs: Iterable[str], reason: str, **kwargs):
        self.node, self.op, self.inputs, self.reason = node, op, tuple(inputs), reason
        super().__init__(f"node {node!r} ({op}) failed: {reason}; its inputs: {', '.join(self.inputs) or 'none'}",
                         **kwargs)


class IOFailure(RnnconvError):
    """Reading or writing a file failed (unreadable input, unwritable folder, full disk); nothing was written."""

    exit_code = EXIT_IO


class RnnconvWarning(UserWarning):
    """Something the user should know that does not stop the command (e.g. NaN/Inf in weights).

    The CLI prints each one once, on one line of stderr: `rnnconv: warning: ...`."""
