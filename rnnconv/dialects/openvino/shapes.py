"""Output port element types and dims of IR operations (-1: dynamic; None: dynamic rank): `infer` applies the
shape rule of the layer type's entry (`registry.IR_OPS`; each rule sits in the op's family module under `ops/`,
following the "Shape inference" / output description of the op's page in the OpenVINO operation specs,
docs.openvino.ai, Operation Specifications). Values are known only for Const inputs; anything else gives -1.
Here: the helpers rules share.
"""

from __future__ import annotations

from typing import Optional

from rnnconv.dialects.openvino import registry
from rnnconv.errors import BadInput

Dims = Optional[list[int]]


def infer(layer, inputs) -> list[tuple[str, Dims]]:
    e = registry.find(layer.type)
    if e is None or not callable(e.shape):
        raise BadInput(f"no shape rule for IR operation {layer.type}")
    d = [x.dims for x in inputs]
    c = [x.const for x in inputs]
    return e.shape(layer, inputs, d, c, inputs[0].element_type if inputs else "f32")


def like_input(layer, inputs, d, c, et) -> list[tuple[str, Dims]]:
    """The rule of an operation whose one output has its first input's element type and dims."""
    return [(et, d[0])]


def like_broadcast(layer, inputs, d, c, et) -> list[tuple[str, Dims]]:
    """The rule of a binary operation with numpy broadcasting (auto_broadcast numpy) keeping the element type."""
    return [(et, broadcast(d[0], d[1]))]


def broadcast(a: Dims, b: Dims) -> Dims:
    """numpy broadcasting of two partial shapes."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x == -1 or y == -1:
            out.append(max(x, y) if min(x, y) == -1 and max(x, y) > 1 else -1)
        elif x == y:
            out.append(x)
        else:
            raise BadInput(f"shapes {a} and {b} do not broadcast")
    return out


def axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def flag(attrs: dict, key: str, default=False) -> bool:
    v = attrs.get(key)
    return default if v is None else str(v).lower() in ("true", "1")


def csv(text) -> list[int]:
    return [int(v) for v in str(text or "").replace(" ", "").split(",") if v]




def dynamic_rank(graph) -> Optional[str]:
    """The first layer whose output may get a dynamic rank at compile time, though the serialized ports show a
    rank: a Squeeze without axes of a dynamic dim (PyTorch's `x.squeeze()`), which squeezes that dim or not by its
    run-time size; OpenVINO's CPU plugin refuses some of those until the inputs have static shapes (speechmos'
    PLCMOS model), not others (its AECMOS models). None when there is none."""
    for layer in graph.all_layers():
        dims = layer.inputs[0].dims if layer.type == "Squeeze" and len(layer.inputs) == 1 else None
        if dims is not None and -1 in dims:
            return f"Squeeze {layer.name!r} squeezes without axes a dim that is dynamic"
    return None
