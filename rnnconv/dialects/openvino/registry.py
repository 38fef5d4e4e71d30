"""One entry per OpenVINO IR operation type (`IR_OPS`, keyed by the type's one spelling, `graph.canonical_type`):
its ONNX <-> IR mapping, its shape rule and its interpreter kernel, each a function or a sentence saying where it
lives or why there is none.

The family modules of `ops/` fill an entry's mapping (`ops.table.mapping` / `reverse`) and shape rule (`shape`)
side by side; `ops/structural.py` states the layers translated outside the table. Kernels stay in the engine
(`rnnconv.engine.ir_*`, registered with `kernel`): they are what verification holds the translation against, so
they live on the floor above it and share no code with it. tests/dialects/openvino/test_registry.py checks that
every type has all three.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Mapping, Union

Part = Union[Callable, str, None]  # a function; a sentence (where it lives, or why none); None: missing
# The shape rule's reason for the types only from-openvino reads (graph.add, which infers ports, never sees them).
READ_ONLY = "none needed: to-openvino never writes it (from-openvino reads it, with its ports from the IR)"


@dataclasses.dataclass
class IROp:
    type: str
    onnx: tuple[str, ...] = ()  # the ONNX ops to-openvino writes this type for
    to_onnx: Part = None  # (LayerContext) -> ONNX values
    shape: Part = None  # (layer, inputs, dims, consts, first element type) -> [(element type, dims)] per output
    kernel: Part = None  # (layer, args, float dtype) -> output array(s), OpenVINO's semantics in numpy


IR_OPS: dict[str, IROp] = {}


def entry(ir_type: str) -> IROp:
    return IR_OPS.setdefault(ir_type, IROp(ir_type))


def find(ir_type: str) -> IROp | None:
    """The entry of an IR type in any letter case (IR not read by rnnconv's reader may spell it ReLU, PReLU...)."""
    found = IR_OPS.get(ir_type)
    if found is None:
        found = next((e for t, e in IR_OPS.items() if t.lower() == ir_type.lower()), None)
    return found


def _set(part: str, ir_types, value) -> None:
    for t in ir_types:
        e = entry(t)
        if getattr(e, part) is not None:
            raise AssertionError(f"IR type {t}: a second {part} registered")  # one place per op
        setattr(e, part, value)


def register(part: str, *ir_types: str):
    """Register `part` ("to_onnx", "shape" or "kernel") of these IR types."""
    def add(fn):
        _set(part, ir_types, fn)
        return fn

    return add


def shape(*ir_types: str):
    """Register the shape rule of these IR types (the "Shape inference" / outputs of their OpenVINO spec pages)."""
    return register("shape", *ir_types)


def kernel(*ir_types: str):
    """Register the interpreter kernel of these IR types (by `rnnconv.engine`: the types must have entries)."""
    unknown = [t for t in ir_types if t not in IR_OPS]
    if unknown:
        raise AssertionError(f"kernels for IR types no entry knows: {unknown}")
    return register("kernel", *ir_types)


def without(part: str, *ir_types: str, why: str) -> None:
    """State where this part of these types lives, or why they have none."""
    _set(part, ir_types, why)


class Functions(Mapping):
    """IR type -> the registered function of one part, live (types with a sentence instead are absent)."""

    def __init__(self, part: str):
        self._part = part

    def __getitem__(self, ir_type: str) -> Callable:
        fn = getattr(IR_OPS[ir_type], self._part)
        if not callable(fn):
            raise KeyError(ir_type)
        return fn

    def __iter__(self) -> Iterator[str]:
        return (t for t, e in IR_OPS.items() if callable(getattr(e, self._part)))

    def __len__(self) -> int:
        return sum(1 for _ in self)
