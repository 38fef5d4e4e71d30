"""IEEE float32 division and fused multiply-add out of OpenVINO ops that round each result once.

OpenVINO's CPU plugin divides by multiplying with the reciprocal and never fuses a Multiply with an Add
(measured, OpenVINO 2026.4: Divide equals x * (1 / y) on every element, Multiply + Add equals the two roundings).
onnxruntime's quantization divides and MLAS's sigmoid and tanh fuse, so the lowering of its DynamicQuantizeLSTM
rebuilds both from error-free transformations (Dekker's product, Knuth's sum), which hold exactly under that
one-rounding-per-op arithmetic:
- divide(x, y): q = x / y, corrected by the residual x - q y (computed exactly) over y: the quotient correctly
  rounded except within about 2^-24 of an ulp of a tie;
- fma(a, b, c): a b + c rounded once, up to the same double-rounding margin (as the engine's own emulation).
"""

from __future__ import annotations

import numpy as np

from rnnconv.dialects.openvino.graph import IRGraph, Out

SPLITTER = np.float32(4097)  # 2^12 + 1: Veltkamp's split of a 24-bit significand into two halves of 12 bits


def _c(b: IRGraph, v) -> Out:
    return b.const(np.array(v, np.float32))


def split(b: IRGraph, a: Out) -> tuple[Out, Out]:
    t = b.op("Multiply", a, _c(b, SPLITTER))
    high = b.op("Subtract", t, b.op("Subtract", t, a))
    return high, b.op("Subtract", a, high)


def two_product(b: IRGraph, a: Out, x: Out) -> tuple[Out, Out]:
    """(p, e) with p = fl(a x) and p + e = a x exactly (Dekker)."""
    p = b.op("Multiply", a, x)
    ah, al = split(b, a)
    xh, xl = split(b, x)
    e = b.op("Subtract", b.op("Multiply", ah, xh), p)
    e = b.op("Add", e, b.op("Multiply", ah, xl))
    e = b.op("Add", e, b.op("Multiply", al, xh))
    return p, b.op("Add", e, b.op("Multiply", al, xl))


def two_sum(b: IRGraph, a: Out, x: Out) -> tuple[Out, Out]:
    """(s, t) with s = fl(a + x) and s + t = a + x exactly (Knuth)."""
    s = b.op("Add", a, x)
    v = b.op("Subtract", s, a)
    t = b.op("Add", b.op("Subtract", a, b.op("Subtract", s, v)), b.op("Subtract", x, v))
    return s, t


def fma(b: IRGraph, a: Out, x: Out, c: Out) -> Out:
    p, e = two_product(b, a, x)
    s, t = two_sum(b, p, c)
    return b.op("Add", s, b.op("Add", t, e))


def divide(b: IRGraph, x: Out, y: Out) -> Out:
    q = b.op("Divide", x, y)
    p, e = two_product(b, q, y)
    r = b.op("Subtract", b.op("Subtract", x, p), e)  # x - p exact (Sterbenz), then one rounding
    return b.op("Add", q, b.op("Divide", r, y))
