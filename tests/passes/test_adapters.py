"""rnnconv's own opset steps (passes/adapters.py): each checked against the schema difference in the installed
onnx."""

from __future__ import annotations

import onnx
import pytest
from onnx import defs

from rnnconv.passes import adapters

COMPATIBLE = {(c.op, c.older, c.newer): c for c in adapters.COMPATIBLE}


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
