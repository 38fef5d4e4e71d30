"""One error vocabulary for the whole tool: each failure type carries the CLI exit code it maps to."""

from __future__ import annotations

EXIT_OK = 0
EXIT_VERIFY = 1
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3
EXIT_BAD_INPUT = 4
EXIT_IO = 5

EXIT_CODES_HELP = (
    "Exit codes: 0 done, 1 verification failed, 2 usage, 3 unsupported construct, 4 bad input, 5 I/O error "
    "(unwritable output, full disk, out of memory)."
)


class RnnconvError(Exception):
    """Base of every error rnnconv raises on purpose; `str(err)` is the one-line message."""

    exit_code = EXIT_BAD_INPUT


class VerificationFailed(RnnconvError):
    """A rewrite or a pair of models did not agree numerically."""

    exit_code = EXIT_VERIFY

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


class UsageError(RnnconvError):
    exit_code = EXIT_USAGE


class Unsupported(RnnconvError):
    """The target cannot express a construct; the message names node, construct and what would work."""

    exit_code = EXIT_UNSUPPORTED


class BadInput(RnnconvError):
    """The input model (or inputs file) is malformed."""

    exit_code = EXIT_BAD_INPUT


class IOFailure(RnnconvError):
    """Reading or writing a file failed (unreadable input, unwritable folder, full disk); nothing was written."""

    exit_code = EXIT_IO


class RnnconvWarning(UserWarning):
    """Something the user should know that does not stop the command (e.g. NaN/Inf in weights).

    The CLI prints each one once, on one line of stderr: `rnnconv: warning: ...`."""
