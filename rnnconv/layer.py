"""The canonical recurrent layer: what every dialect reads into and writes out of.

Weights are kept per direction and per gate *name*; gate order is a property of a dialect
(ONNX LSTM i,o,f,c; OpenVINO LSTM f,i,c,o; GRU z,r,h in both), see `rnnconv.dialects`.
Input bias (Wb) and recurrence bias (Rb) are kept apart: folding them is also a dialect property.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from rnnconv.activations import Activation

KINDS = ("GRU", "LSTM", "RNN")  # the recurrent ops (ONNX's op types)
DIRECTIONS = ("forward", "reverse", "bidirectional")

# Gate names from the ONNX spec notation (the RNN's single gate is "i" there); their order is a dialect's.
GATE_NAMES = {"RNN": frozenset("i"), "GRU": frozenset("zrh"), "LSTM": frozenset("iofc")}
PEEPHOLE_GATES = frozenset("iof")


@dataclasses.dataclass
class Cell:
    """One direction of a layer. Arrays: W[g] [H, I], R[g] [H, H], Wb[g] / Rb[g] / P[g] [H].

    For a layer whose weights are computed at run time the dicts are empty (see Layer.weights_constant).
    """

    W: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    R: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    Wb: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    Rb: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    P: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    activations: tuple[Activation, ...] = ()


@dataclasses.dataclass
class Layer:
    kind: str
    direction: str
    hidden_size: int
    input_size: Optional[int]
    cells: list[Cell]
    clip: Optional[float] = None
    linear_before_reset: bool = False
    input_forget: bool = False
    layout: int = 0
    # Which optional weight tensors the source held (absent B means zero biases, absent P zero peepholes).
    has_bias: bool = True
    has_peepholes: bool = False
    # False when W/R/B/P are computed at run time: cells then hold no arrays and rewrites must emit graph ops.
    weights_constant: bool = True
    dtype: Optional[np.dtype] = None
    name: str = ""

    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def stacked(self, tensor: str, order: tuple[str, ...]) -> np.ndarray:
        """W, R, Wb, Rb or P of every direction, gates concatenated in `order`: [D, len(order)*H, ...]."""
        return np.stack([np.concatenate([getattr(c, tensor)[g] for g in order], axis=0) for c in self.cells])

    @staticmethod
    def split(stacked: np.ndarray, order: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
        """Inverse of `stacked`: one {gate: array} dict per direction."""
        return [split_gates(d, order) for d in stacked]


def split_gates(array: np.ndarray, order: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One direction's gates concatenated in `order` along the first axis ([len(order)*H, ...]) as {gate: array}."""
    return dict(zip(order, np.split(array, len(order), axis=0)))
