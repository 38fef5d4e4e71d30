"""Usage telemetry of the runtimes, switched off: rnnconv promises to write only its output.

onnxruntime (from 1.2x) writes a device id and an event database on `import onnxruntime`
(~/.cache/Microsoft/DeveloperTools/.onnxruntime/deviceid, onnxruntime.db) and a session file ($TMPDIR/.ses);
its environment variable ORT_DISABLE_TELEMETRY=1 stops all three. OpenVINO's `import openvino` imports its model
converter (openvino.tools.ovc), which sends usage events through the optional openvino_telemetry package and
writes a client id (~/intel/openvino_ga_cid, ~/intel/stats); without that package it uses its own no-op stub, so
the package is made unimportable in rnnconv's processes. Neither touches the user's settings files.
"""

from __future__ import annotations

import os
import sys

ENVIRONMENT = {"ORT_DISABLE_TELEMETRY": "1"}


def switch_off() -> None:
    """Before onnxruntime or openvino is imported in this process (and in the processes it starts)."""
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    sys.modules.setdefault("openvino_telemetry", None)  # `import openvino_telemetry` raises ImportError
