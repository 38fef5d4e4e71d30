"""What a localization found (`localize`), and the verdict on a failing whole-model comparison it gives: where
no node computes differently given identical inputs and every tip is a run-time quantizer of the reference (the
source), the conversion is faithful up to run-time rounding (`rounding_verdict`)."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

import numpy as np

from rnnconv.verification.results import Check

# Ops that round values computed at run time: a last bit of what they read tips a rounding step.
QUANTIZERS = {"onnx": {"DynamicQuantizeLinear", "QuantizeLinear", "Round", "Floor", "Ceil", "DynamicQuantizeMatMul",
                       "DynamicQuantizeLSTM"},
              "ir": {"Round", "Floor", "Ceiling", "FakeQuantize"}}


class CannotLocalize(Exception):
    """Why a localization could not be made (one line)."""


@dataclasses.dataclass
class Divergence:
    """The first tensor, in the reference's topological order, where two runs of a model differ beyond tolerance,
    the node (the reference's) that computes it and why it differs; and what the whole localization found."""

    node: str
    op_type: str
    tensor: str
    # "node": computes differently given identical inputs; "upstream": agrees given identical inputs, its inputs
    # already differed; "rounding": holding a run-time quantizer, it differs given identical inputs only where
    # float arithmetic before a rounding tips it (tipped[...]["how"]: "boundary", values one step the other way
    # where a last bit of its inputs moves the reference's own rounding too; "float64", rnnconv's engine in float64
    # where it agrees in float32)
    cause: str
    alone_max_abs: float  # the node alone in both runtimes on the reference's values of its inputs
    input_max_abs: float  # how far those inputs differed between the two runs
    max_abs: float  # how far the tensor differed between the two runs
    # run-time quantizers of the reference that a last bit tipped by a rounding step ("upstream" or "rounding")
    tipped: list = dataclasses.field(default_factory=list)
    which_runtime: Optional[str] = None  # an OpenVINO runtime computing an IR otherwise than the IR's ops
    # every node that computes differently given identical inputs (beyond this one)
    computes_differently: list = dataclasses.field(default_factory=list)
    unexplained: list = dataclasses.field(default_factory=list)  # tips at nodes that round nothing
    # the reference's nodes before it that ran with it, alone: their tensors are not compared (another name, or
    # above the size limit)
    region: list = dataclasses.field(default_factory=list)
    compared: int = 0
    diverging: list = dataclasses.field(default_factory=list, repr=False)  # names of every diverging tensor
    left_out: str = ""  # tensors not compared, and why

    def text(self) -> str:
        where = f"{self.op_type} {self.node!r}" + (f" (tensor {self.tensor})" if self.tensor != self.node else "")
        if self.region:
            where += (f" with {', '.join(repr(n) for n in self.region[:3])}" + (" ..." if len(self.region) > 3 else "")
                      + " before it (tensors not compared)")
        if self.cause == "node":
            text = f"{where}: the node computes differently given identical inputs (max abs {self.alone_max_abs:.3g})"
            return text + (f"; {self.which_runtime}" if self.which_runtime else "")
        if self.cause == "rounding":
            own = next(t for t in self.tipped if t["tensor"] == self.tensor)
            if own["how"] == "float64":
                text = (f"{where}: given identical inputs the node agrees in float32, the model's precision; rnnconv's "
                        f"engine in float64 rounds {own['elements']} value(s) of its run-time quantization otherwise")
            else:
                text = (f"{where}: given identical inputs the node rounds {own['elements']} value(s) one step the "
                        f"other way, each at a rounding boundary (a last bit of its inputs moves it there)"
                        + (f"; {own['which_runtime']}" if own.get("which_runtime") else ""))
        else:
            own = next((t for t in self.tipped if t["tensor"] == self.tensor), None)
            step = f" (a rounding step at {own['op_type']} {own['node']})" if own else ""
            text = (f"{where}: the node agrees given identical inputs; its inputs already differed by "
                    f"{self.input_max_abs:.3g}{step}")
        if self.computes_differently:
            other = self.computes_differently[0]
            text += (f"; {other['op_type']} {other['node']!r} computes differently given identical inputs (max abs "
                     f"{other['alone_max_abs']:.3g})" + (f"; {other['which_runtime']}" if other.get("which_runtime")
                                                         else ""))
        return text

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("diverging")
        d["diverging_tensors"] = len(self.diverging)
        d["text"] = self.text()
        return d

    @property
    def faithful(self) -> bool:
        """Every node agrees given identical inputs, and every tip is a run-time quantizer of the reference."""
        return self.cause != "node" and not self.computes_differently and not self.unexplained and bool(self.tipped)


@dataclasses.dataclass
class NotLocalized:
    """Why a failing comparison has no localization."""

    reason: str

    def text(self) -> str:
        return f"not localized: {self.reason}"

    def as_dict(self) -> dict:
        return {"error": self.reason}


def rounding_verdict(check: Check, divergence, ref_outputs: Mapping[str, np.ndarray],
                     cand_outputs: Mapping[str, np.ndarray]) -> Optional[str]:
    """The warning under which a failing whole-model comparison passes: every node agrees given identical inputs,
    every tip is a run-time quantizer of the reference (the source's ops, never the converted model's), and every
    failing output diverged in the localization's runs too. None: the comparison stays failed."""
    if not isinstance(divergence, Divergence) or not divergence.faithful:
        return None
    bad = [o for o in check.outputs if not o.ok]
    if any(o.problem for o in bad) or not {o.name for o in bad} <= set(divergence.diverging):
        return None
    quantizers = list(dict.fromkeys(f"{t['op_type']} {t['node']}" for t in divergence.tipped))
    named = ", ".join(quantizers[:3]) + (f" and {len(quantizers) - 3} more" if len(quantizers) > 3 else "")
    agree = []
    for o in bad:
        r, c = np.asarray(ref_outputs.get(o.name)), np.asarray(cand_outputs.get(o.name))
        if r.ndim and r.shape == c.shape and r.shape[-1] > 1 and r.dtype.kind == "f":
            same = float(np.mean(np.argmax(r, axis=-1) == np.argmax(c, axis=-1)))
            agree.append(f"{o.name} {100 * same:.1f}%")
    argmax = f"; argmax over the last axis agrees: {', '.join(agree)}" if agree else ""
    return (f"faithful up to run-time rounding: given identical inputs every node agrees, but for values on a "
            f"rounding boundary of the source's run-time quantizers ({named}), where a last bit tips a rounding step; "
            f"the outputs differ by max abs {check.max_abs:.3g} ({', '.join(o.name for o in bad)}){argmax}")
