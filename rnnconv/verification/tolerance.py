"""The one tolerance policy of every comparison rnnconv makes (Polygraphy's contract).

An element is bad when |candidate - reference| > atol + rtol * |reference|. The default atol has a term that
follows the output's scale, SCALED times the largest finite |reference| of that output: floating arithmetic errs
relative to the magnitudes it passes through, and a near-zero element computed from large terms carries their
error (two correct float32 runtimes differ by 3.4e-5 on an output of magnitude 153). The default is set by the
least precise of: the output's declared dtype, the dtypes the two runs returned (a runtime computing in float32 is not
held to float64's tolerance), float16 when weights were stored as float16, and "dequantized" when a quantized
layer was replaced by a float one (`rnnconv dequantize`: an approximation by nature, see docs/commands.md).
A value given for one output (`NAME=X`) beats a value given for all (`X`), which beats the default. Integer outputs
must be equal.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Mapping, Optional, Union

from rnnconv.errors import UsageError
from rnnconv.verification import ALL_OUTPUTS

# int8 LSTM weights dequantized, against onnxruntime's quantized run (which also quantizes X and h each step, and
# on x86 CPUs without VNNI saturates full-range products: up to 0.5 measured on LSTMs of 32 to 256 units).
DEQUANTIZED_ATOL, DEQUANTIZED_RTOL = 0.5, 0.1

# Defaults by dtype (documented in docs/verification.md), most precise first.
TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (2e-2, 2e-2),
    "dequantized": (DEQUANTIZED_ATOL, DEQUANTIZED_RTOL),
}

# The default atol's term per unit of the output's largest |reference|: 8 units in the last place for float32 and
# float64, 2 for the 16-bit types (whose defaults are already a few units).
SCALED = {"float64": 2e-15, "float32": 1e-6, "float16": 2e-3, "bfloat16": 1.6e-2, "dequantized": 0.0}

# A float for every output, or output name (or ALL) -> float; None: the default.
Tolerance = Union[None, float, Mapping[str, float]]


def _name(dtype) -> Optional[str]:
    if dtype is None:
        return None
    if isinstance(dtype, str):
        return dtype
    import numpy as np  # here: the command-line help quotes this module's tables before numpy may load

    try:
        return np.dtype(dtype).name
    except TypeError:
        return None


def least_precise(*dtypes) -> str:
    """The least precise floating dtype among `dtypes` (None and non-float ones are ignored); float32 when none
    is floating."""
    known = [n for n in map(_name, dtypes) if n in TOLERANCES]
    return max(known, key=lambda n: TOLERANCES[n]) if known else "float32"


def default(*dtypes) -> tuple[float, float]:
    """(atol, rtol) of the least precise floating dtype among `dtypes`, before the scale term."""
    return TOLERANCES[least_precise(*dtypes)]


def _pick(name: str, given: Tolerance, fallback: float) -> float:
    if given is None:
        return fallback
    if isinstance(given, Mapping):
        return float(given.get(name, given.get(ALL_OUTPUTS, fallback)))
    return float(given)


def _given(name: str, given: Tolerance) -> bool:
    return given is not None and (not isinstance(given, Mapping) or name in given or ALL_OUTPUTS in given)


@dataclasses.dataclass(frozen=True)
class Tolerances:
    """What the user asked for (`atol`, `rtol`: see Tolerance) and whether weights were stored as float16."""

    atol: Tolerance = None
    rtol: Tolerance = None
    fp16_weights: bool = False
    dequantized: bool = False

    def for_output(self, name: str, *dtypes, magnitude: float = 0.0) -> tuple[float, float]:
        """(atol, rtol) for output `name`; `magnitude`: its largest finite |reference| (the default's scale)."""
        return self.explain(name, *dtypes, magnitude=magnitude)[:2]

    def explain(self, name: str, *dtypes, magnitude: float = 0.0) -> tuple[float, float, str]:
        """(atol, rtol, why): what for_output gives, and where each value came from, in a few words."""
        kind = least_precise(*dtypes, "float16" if self.fp16_weights else None,
                             "dequantized" if self.dequantized else None)
        a, r = TOLERANCES[kind]
        scaled = SCALED[kind] * float(magnitude) if math.isfinite(magnitude) else 0.0
        atol, rtol = _pick(name, self.atol, a + scaled), _pick(name, self.rtol, r)
        given = [what for what, t in (("atol", self.atol), ("rtol", self.rtol)) if _given(name, t)]
        why = f"{kind} default" + (f", atol {a:g} + {SCALED[kind]:g} x max |ref| {magnitude:.3g}"
                                   if scaled and "atol" not in given else "")
        if given:
            why = f"{' and '.join(given)} given" + ("" if len(given) == 2 else f"; {why}")
        return atol, rtol, why

    def named(self) -> set[str]:
        """Output names given a value of their own."""
        return {k for t in (self.atol, self.rtol) if isinstance(t, Mapping) for k in t if k != ALL_OUTPUTS}

    def check_names(self, outputs: Iterable[str]) -> None:
        unknown = sorted(self.named() - set(outputs))
        if unknown:
            raise UsageError(f"tolerance given for no output named {', '.join(unknown)} "
                             f"(outputs: {', '.join(outputs)})")

