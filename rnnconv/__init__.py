"""rnnconv: move recurrent layers (ONNX GRU, LSTM, RNN) between conventions, and prove the numbers were kept.

Public API (each takes a path, a ModelProto or an onnx_ir Model; rewriting calls return a Result with
`.model` and `.report`): upgrade, downgrade, convert_layout, to_openvino, from_openvino, verify, inspect.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> module: imported on first use so `import rnnconv` stays light.
_API = {
    "upgrade": "rnnconv.opset",
    "downgrade": "rnnconv.opset",
    "inspect": "rnnconv.inspection",
    "convert_layout": "rnnconv.layout",
    "from_openvino": "rnnconv.from_openvino",
    "verify": "rnnconv.verify",
    "to_openvino": "rnnconv.to_openvino",
}

__all__ = [*_API, "__version__"]


def __getattr__(name: str):
    if name in _API:
        module = importlib.import_module(_API[name])
        # rnnconv.verify is a callable module: keep the module so `from rnnconv import verify` still works.
        return module if callable(module) else getattr(module, name)
    raise AttributeError(f"module 'rnnconv' has no attribute {name!r}")
