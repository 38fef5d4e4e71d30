"""The registry's table of steps, line by line, re-derived from the installed onnx's schemas: each step joins
adjacent schema versions, and its generic changes are exactly what the schemas show changed (a specific adapter may
take on more); docs/opsets.md's coverage table is the generated one."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from onnx import defs

from rnnconv.passes import adapters
from rnnconv.passes.adapters import Absent, Default, Fill, Negative, NewInput, Required, ToAttribute

OPTIONAL = defs.OpSchema.FormalParameterOption.Optional
SINGLE = defs.OpSchema.FormalParameterOption.Single
# How the schemas say that negative axes / indices are accepted (counted from the back).
NEGATIVE = re.compile(r"\[-r,\s*r-1\]|\[-r-1,\s*r\]|\[-rank|\[-s,\s*s-1\]|counting (dimensions )?from the back|"
                      r"Accepted range is \[-", re.I)
STEPS = {(s.op, s.older, s.newer): s for s in adapters.STEPS}


def _default(attribute):
    if attribute.default_value is None or attribute.default_value.type == 0:
        return None
    value = onnx.helper.get_attribute_value(attribute.default_value)
    return value.decode() if isinstance(value, bytes) else value


def derive(op: str, older: int, newer: int) -> tuple[set, list[str]]:
    """The generic changes between two schema versions, and the differences no generic kind covers (type lists
    may differ: every step checks the node's types against the target version's lists)."""
    o, n = defs.get_schema(op, older), defs.get_schema(op, newer)
    changes, other = set(), []
    o_in = {f.name: (i, f) for i, f in enumerate(o.inputs)}
    moved = set()
    for i, f in enumerate(n.inputs):
        if f.name in o_in:
            j, g = o_in[f.name]
            if j != i:
                other.append(f"input {f.name} moved")
            if (g.option, f.option) == (SINGLE, OPTIONAL):
                changes.add(("Fill", i, f.name))
            elif g.option != f.option:
                other.append(f"input {f.name} option changed")
            if NEGATIVE.search(f.description or "") and not NEGATIVE.search(g.description or ""):
                changes.add(("Negative", f.name, i))
            continue
        attribute = next((a for a in (f.name, {"constant_value": "value"}.get(f.name)) if a in o.attributes
                          and a not in n.attributes), None)
        if attribute is not None:
            moved.add(attribute)
            changes.add(("ToAttribute", i, attribute))
        elif f.option == OPTIONAL:
            changes.add(("NewInput", i, f.name))
        else:
            other.append(f"new required input {f.name}")
    other += [f"input {f.name} removed" for f in o.inputs if f.name not in {g.name for g in n.inputs}]
    if [(f.name, f.option) for f in o.outputs] != [(f.name, f.option) for f in n.outputs]:
        other.append("outputs changed")
    for name, a in n.attributes.items():
        if name not in o.attributes:
            default = _default(a)
            changes.add(("Absent", name) if default is None else ("Default", name, default))
            continue
        b = o.attributes[name]
        if _default(a) != _default(b):
            other.append(f"default of {name} changed")
        if a.type != b.type:
            other.append(f"type of {name} changed")
        if b.required and not a.required:
            changes.add(("Required", name))
        if NEGATIVE.search(a.description or "") and not NEGATIVE.search(b.description or ""):
            changes.add(("Negative", name, None))
    other += [f"attribute {name} removed" for name in o.attributes if name not in n.attributes and name not in moved]
    return changes, other


def declared(change) -> tuple:
    if isinstance(change, Default):
        return ("Default", change.name, change.value)
    if isinstance(change, Absent):
        return ("Absent", change.name)
    if isinstance(change, Required):
        return ("Required", change.name)
    if isinstance(change, NewInput):
        return ("NewInput", change.index, change.name)
    if isinstance(change, Fill):
        return ("Fill", change.index, change.name)
    if isinstance(change, ToAttribute):
        return ("ToAttribute", change.index, change.attribute)
    if isinstance(change, Negative):
        return ("Negative", change.name, change.index)
    raise AssertionError(f"unknown kind {change!r}")


@pytest.mark.parametrize("key", sorted(STEPS), ids=[f"{k[0]}-{k[1]}-{k[2]}" for k in sorted(STEPS)])
def test_table_line_matches_the_schemas(key):
    step = STEPS[key]
    assert defs.get_schema(step.op, step.older).since_version == step.older
    assert defs.get_schema(step.op, step.newer).since_version == step.newer
    assert defs.get_schema(step.op, step.newer - 1).since_version == step.older, "versions are not adjacent"
    changes, other = derive(step.op, step.older, step.newer)
    mine = {declared(c) for c in step.changes}
    if step.special is None:
        assert mine == changes, f"the schemas show {sorted(changes, key=str)}"
        assert not other, f"not a generic step: {other}"
    else:  # the specific adapter takes on what the generic kinds do not say
        assert mine <= changes, f"the schemas show {sorted(changes, key=str)}"


def test_every_step_is_registered_both_ways():
    for step in adapters.STEPS:
        assert adapters.ADAPTERS[(step.op, step.older, step.newer)] == step.up
        assert adapters.ADAPTERS[(step.op, step.newer, step.older)] == step.down


def test_below_first_version_steps_start_at_the_first_version():
    for op, frm, to in adapters.ADAPTERS:
        if to is None:
            assert defs.get_schema(op, frm).since_version == frm
            with pytest.raises(defs.SchemaError):
                defs.get_schema(op, frm - 1)


def test_readme_coverage_table_is_the_generated_one():
    readme = (Path(__file__).parent.parent.parent / "docs" / "opsets.md").read_text()
    table = adapters.coverage()
    assert table in readme, "docs/opsets.md's coverage table differs: paste `python -m rnnconv.passes.adapters`"
