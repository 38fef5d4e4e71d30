"""PyTorch exports convert to the newest opset and back, matching PyTorch's own outputs (the registry's steps
themselves: tests/passes/)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import rnnconv
from rnnconv import io
from rnnconv.engine.onnx_graph import run_onnx

TORCH = sorted((Path(__file__).parent.parent / "fixtures" / "torch").glob("*.onnx"))


@pytest.mark.parametrize("path", TORCH, ids=[p.stem for p in TORCH])
def test_torch_export_upgrades_and_comes_back(path):
    expected = np.load(path.with_suffix(".npz"))
    source_opset = onnx.load(str(path), load_external_data=False).opset_import[0].version
    up = rnnconv.upgrade(str(path))
    assert up.report.ok and up.model.opset_imports[""] >= 20
    down = rnnconv.downgrade(up.model, opset=source_opset)
    assert down.report.ok and down.model.opset_imports[""] == source_opset
    onnx.checker.check_model(io.to_proto(down.model), full_check=True)
    feeds = {v.name: expected[v.name] for v in down.model.graph.inputs if v.name in expected}
    for model in (up.model, down.model):
        got = run_onnx(model, feeds)
        for name, value in got.items():
            np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-5, err_msg=name)


def _interface(model: onnx.ModelProto):
    inits = {t.name for t in model.graph.initializer}

    def sig(vi):
        dims = [d.dim_param or d.dim_value if d.HasField("dim_param") or d.HasField("dim_value") else None
                for d in vi.type.tensor_type.shape.dim]
        return vi.name, vi.type.tensor_type.elem_type, dims if vi.type.tensor_type.HasField("shape") else None

    return [sig(v) for v in model.graph.input if v.name not in inits], [sig(v) for v in model.graph.output]


@pytest.mark.parametrize("path", TORCH[::6], ids=[p.stem for p in TORCH[::6]])
def test_interface_is_kept_exactly(path):
    """Names, dtypes and shapes (symbolic dims included) of inputs and outputs survive upgrade and downgrade."""
    source = onnx.load(str(path))
    up = io.to_proto(rnnconv.upgrade(str(path)).model)
    assert _interface(up) == _interface(source)
    down = io.to_proto(rnnconv.downgrade(up, opset=source.opset_import[0].version).model)
    assert _interface(down) == _interface(source)
