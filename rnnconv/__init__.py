"""rnnconv: move recurrent layers (ONNX GRU, LSTM, RNN) between conventions, and prove the numbers were kept.

Public API (each takes a path, a ModelProto or an onnx_ir Model; converting calls return a Result with `.model`
and `.report`): upgrade, downgrade, convert_layout, dequantize, to_openvino, from_openvino, verify, check, inspect, fuse;
settle_ifs (returns the settled onnx.ModelProto); openvino_extensions (conversion extensions for OpenVINO's
`ov.convert_model(..., extension=...)`).
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

# name -> module: imported on first use so `import rnnconv` stays light.
_API = {
    "upgrade": "rnnconv.commands.upgrade",
    "downgrade": "rnnconv.commands.downgrade",
    "convert_layout": "rnnconv.commands.layout",
    "dequantize": "rnnconv.commands.dequantize",
    "to_openvino": "rnnconv.commands.to_openvino",
    "from_openvino": "rnnconv.commands.from_openvino",
    "verify": "rnnconv.commands.verify",
    "check": "rnnconv.commands.check",
    "inspect": "rnnconv.commands.inspect",
    "fuse": "rnnconv.commands.fuse",
    "settle_ifs": "rnnconv.commands.settle_ifs",
    "openvino_extensions": "rnnconv.commands.to_openvino",
}

__all__ = [*_API, "__version__"]


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'rnnconv' has no attribute {name!r}")
