"""How a check makes its inputs and compares outputs (`CheckOptions`): apart from the checks themselves, so that
a command run with --verify none builds its options without importing any checking code."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Mapping, Optional, Union

if TYPE_CHECKING:
    import numpy as np

from rnnconv.verification.tolerance import Tolerance, Tolerances


@dataclasses.dataclass(frozen=True)
class CheckOptions:
    """How inputs are made and outputs compared; the same for every command (and `rnnconv verify`).

    dims: symbol, "batch" / "seq" or "INPUT:AXIS" -> size; ranges: input -> (lo, hi); inputs: an .npz path or a
    dict of arrays (inputs it lacks are drawn); runs: how many input sets."""

    seed: int = 0
    runs: Optional[int] = None
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    ranges: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    inputs: Union[None, str, os.PathLike, Mapping[str, np.ndarray]] = None
    tolerances: Tolerances = Tolerances()

    @classmethod
    def of(cls, *, seed: int = 0, runs: Optional[int] = None, dims=None, ranges=None, inputs=None,
           atol: Tolerance = None, rtol: Tolerance = None, fp16_weights: bool = False, dequantized: bool = False
           ) -> "CheckOptions":
        return cls(seed, runs, dict(dims or {}), dict(ranges or {}), inputs,
                   Tolerances(atol, rtol, fp16_weights, dequantized))

    @classmethod
    def given(cls, options: Optional["CheckOptions"], keywords: Mapping) -> "CheckOptions":
        """An API call's options: `options` (as the CLI builds them) or their keywords (see `of`), not both."""
        if options is not None and keywords:
            raise TypeError(f"give options or {', '.join(keywords)}, not both")
        return options if options is not None else cls.of(**keywords)

    def holding(self, **facts) -> "CheckOptions":
        """These options under the conversion's own tolerance facts (Tolerances: fp16_weights, dequantized)."""
        return dataclasses.replace(self, tolerances=dataclasses.replace(self.tolerances, **facts)) if facts else self
