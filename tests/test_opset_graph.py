"""rnnconv's own opset steps: each checked against the schema difference in the installed onnx; PyTorch exports
convert to the newest opset and back, matching PyTorch's own outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import defs

import rnnconv
from rnnconv import io
from rnnconv.engine.onnx_graph import run_onnx
from rnnconv.passes import adapters

COMPATIBLE = {(c.op, c.older, c.newer): c for c in adapters.COMPATIBLE}

TORCH = sorted((Path(__file__).parent.parent / "fixtures" / "torch").glob("*.onnx"))


@pytest.mark.parametrize("key", sorted(COMPATIBLE), ids=[f"{k[0]}-{k[1]}-{k[2]}" for k in sorted(COMPATIBLE)])
def test_compatible_step_matches_schema_difference(key):
    entry = COMPATIBLE[key]
    older, newer = defs.get_schema(entry.op, entry.older), defs.get_schema(entry.op, entry.newer)
    assert older.since_version == entry.older and newer.since_version == entry.newer
    # adjacent schema versions: no version in between
    assert defs.get_schema(entry.op, entry.newer - 1).since_version == entry.older
    assert [(i.name, i.option) for i in older.inputs] == [(i.name, i.option) for i in newer.inputs]
    assert [o.name for o in older.outputs] == [o.name for o in newer.outputs]
    added = set(newer.attributes) - set(older.attributes)
    assert not set(older.attributes) - set(newer.attributes)
    covered = {name for name, _ in entry.attributes_at_default} | set(entry.absent)
    assert added == covered
    for name, default in entry.attributes_at_default:
        assert onnx.helper.get_attribute_value(newer.attributes[name].default_value) in (default, str(default).encode())
    old_types = {c.type_param_str: set(c.allowed_type_strs) for c in older.type_constraints}
    new_types = {c.type_param_str: set(c.allowed_type_strs) for c in newer.type_constraints}
    for param, allowed in old_types.items():
        assert allowed <= new_types.get(param, allowed), f"{param} narrowed"
    for name in entry.non_negative:
        assert name in older.attributes and name in newer.attributes


def test_slice_down_adapter_is_a_real_step():
    assert defs.get_schema("Slice", 9).since_version == 1 and defs.get_schema("Slice", 10).since_version == 10
    assert adapters.ADAPTERS[("Slice", 10, 1)] is adapters.slice_10_1


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
