"""One entry per IR type: every type the reader and writer know has its ONNX <-> IR mapping, its shape rule and
its interpreter kernel in `registry.IR_OPS`, or a sentence saying where it lives or why there is none."""

from __future__ import annotations

import pytest

from rnnconv.dialects.openvino import coverage, ops, registry
from rnnconv.dialects.openvino.validate import STRUCTURAL
from rnnconv.engine import ir_graph  # noqa: F401  (registers the kernels)

PARTS = ("to_onnx", "shape", "kernel")
ENDS = {"Parameter", "Const", "Result"}  # the interpreter's loop runs these itself


def _known() -> set[str]:
    """The types from-openvino reads (the coverage table, which lists every entry but the graph's ends), the ones
    its validation lets through without a mapping (STRUCTURAL) and the ones to-openvino writes (the op table)."""
    written = {t.split("-")[0] for m in ops.TABLE.values() for t in m.openvino}
    return set(coverage.mapped()) | set(STRUCTURAL) | written


@pytest.mark.parametrize("part", PARTS)
def test_every_entry_has_each_part_or_says_why_not(part):
    missing = sorted(t for t in _known() if not (callable(getattr(registry.IR_OPS[t], part))
                                                 or str(getattr(registry.IR_OPS[t], part) or "").strip()))
    assert not missing, f"IR types without a {part} and without a reason: {missing}"


def test_what_runs_has_a_function():
    """A reason stands in only where nothing runs: every type the writer emits through `graph.add` has a shape
    rule, every mapped type a reverse mapping, and every type but the graph's ends a kernel."""
    emitted = {t.split("-")[0] for m in ops.TABLE.values() for t in m.openvino} - ENDS
    assert sorted(t for t in emitted if not callable(registry.IR_OPS[t].shape)) == []
    assert sorted(t for t in _known() - ENDS if not callable(registry.IR_OPS[t].kernel)) == []
    reverse = {t for t in coverage.mapped() if t not in STRUCTURAL}
    assert sorted(t for t in reverse if not callable(registry.IR_OPS[t].to_onnx)) == []


def test_a_second_registration_is_refused():
    with pytest.raises(AssertionError, match="a second shape"):
        registry.shape("Add")(lambda *a: None)
    with pytest.raises(AssertionError, match="no entry knows"):
        registry.kernel("NoSuchOp")(lambda *a: None)
    assert "NoSuchOp" not in registry.IR_OPS
