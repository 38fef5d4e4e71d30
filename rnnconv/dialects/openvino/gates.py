"""The OpenVINO recurrent dialect: gate order, bias folding and attributes of the opset5 Sequence ops.

Specs: OpenVINO LSTMSequence-5, GRUSequence-5, RNNSequence-5 (docs.openvino.ai, Operation Specifications,
Sequence processing; ../shared/spec/openvino-GRUSequence-5.txt); ONNX LSTM / GRU / RNN (onnx Operators.md).
OpenVINO orders LSTM gates f,i,c,o (ONNX: i,o,f,c), GRU z,r,h (as ONNX); it holds one bias per gate,
Wb + Rb, except GRU with linear_before_reset, whose h gate keeps both: [Wbz+Rbz, Wbr+Rbr, Wbh, Rbh].
One activation list serves every direction; only relu, sigmoid and tanh exist; clip 0 means "no clip";
there are no peepholes and no input_forget.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.activations import Activation
from rnnconv.dialects.openvino.graph import Pieces, known_types
from rnnconv.errors import Unsupported
from rnnconv.layer import Cell, Layer, split_gates

ORDER = {"LSTM": ("f", "i", "c", "o"), "GRU": ("z", "r", "h"), "RNN": ("i",)}
# The IR spelling of each kind's ops: the Sequence op rnnconv writes, and the one step of TensorIterator bodies.
SEQUENCE_OP = {"GRU": "GRUSequence", "LSTM": "LSTMSequence", "RNN": "RNNSequence"}
CELL_OP = {"GRU": "GRUCell", "LSTM": "LSTMCell", "RNN": "RNNCell"}
SEQUENCES = {op: kind for kind, op in SEQUENCE_OP.items()}  # IR type -> kind
CELLS = {op: kind for kind, op in CELL_OP.items()}
known_types(*SEQUENCES, *CELLS)
VERSION = "opset5"
ACTIVATIONS = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}
DEFAULT_ACTIVATIONS = {"LSTM": ("sigmoid", "tanh", "tanh"), "GRU": ("sigmoid", "tanh"), "RNN": ("tanh",)}


def bias_gates(kind: str, linear_before_reset: bool) -> list[tuple[str, tuple[str, ...]]]:
    """Each B slot as (gate, which ONNX biases it sums): GRU lbr keeps h's two biases apart."""
    if kind == "GRU" and linear_before_reset:
        return [slot for g in ORDER[kind]
                for slot in ([(g, ("Wb",)), (g, ("Rb",))] if g == "h" else [(g, ("Wb", "Rb"))])]
    return [(g, ("Wb", "Rb")) for g in ORDER[kind]]


def folded(cell: Cell, gate: str, sources: tuple[str, ...] = ("Wb", "Rb")) -> np.ndarray:
    """One OpenVINO bias slot: the sum of the ONNX biases of `gate` it holds (Wb + Rb unless `bias_gates` says)."""
    return sum(getattr(cell, src)[gate] for src in sources)


def folded_bias(layer: Layer) -> np.ndarray:
    """OpenVINO's B [D,G*H] (GRU lbr: [D,4H]), each slot `folded` from the layer's Wb and Rb."""
    slots = bias_gates(layer.kind, layer.linear_before_reset)
    return np.stack([np.concatenate([folded(c, g, srcs) for g, srcs in slots]) for c in layer.cells])


def sequence_tensors(layer: Layer) -> dict[str, np.ndarray]:
    """W [D,G*H,I], R [D,G*H,H], B [D,G*H] (GRU lbr: [D,4H]) in OpenVINO order, biases folded."""
    order = ORDER[layer.kind]
    W, R = layer.stacked("W", order), layer.stacked("R", order)
    return {"W": W, "R": R, "B": folded_bias(layer).astype(W.dtype)}


def sequence_pieces(layer: Layer, dtype) -> dict:
    """`sequence_tensors` with W and R as `Pieces`: the source's gate views in OpenVINO order, copied only when
    written (the folded B is small and computed here)."""

    order, D, H = ORDER[layer.kind], len(layer.cells), layer.hidden_size
    out = {}
    for k in ("W", "R"):
        parts = [getattr(c, k)[g] for c in layer.cells for g in order]
        out[k] = Pieces(parts, (D, len(order) * H, parts[0].shape[-1]), dtype)
    out["B"] = folded_bias(layer).astype(parts[0].dtype).astype(dtype)
    return out


def split_direction(kind: str, W: np.ndarray, R: np.ndarray, B: np.ndarray, lbr: bool):
    """One direction of OpenVINO W [G*H,I], R [G*H,H], B back to gate-name dicts W, R, Wb, Rb (Rb = 0 where
    OpenVINO folded it; exact, since only the sum enters the equations)."""
    order = ORDER[kind]
    Wd, Rd = split_gates(W, order), split_gates(R, order)
    slots = bias_gates(kind, lbr)
    parts = np.split(B, len(slots))
    Wb = {g: np.zeros_like(parts[0]) for g in order}
    Rb = {g: np.zeros_like(parts[0]) for g in order}
    for (g, srcs), part in zip(slots, parts):
        (Rb if srcs == ("Rb",) else Wb)[g] = part
    return Wd, Rd, Wb, Rb


def layer_from_sequence(kind: str, attrs: dict, W: np.ndarray, R: np.ndarray, B: np.ndarray) -> Layer:
    """An opset5 Sequence op's constants and attributes as a canonical Layer (for IR -> ONNX)."""
    lbr = str(attrs.get("linear_before_reset", "false")).lower() in ("true", "1")
    acts = activations_from_attrs(kind, attrs)
    cells = []
    for d in range(W.shape[0]):
        Wd, Rd, Wb, Rb = split_direction(kind, W[d], R[d], B[d], lbr)
        cells.append(Cell(W=Wd, R=Rd, Wb=Wb, Rb=Rb, activations=acts))
    clip = float(attrs.get("clip", "0") or 0)
    return Layer(kind=kind, direction=attrs.get("direction", "forward"), hidden_size=int(attrs["hidden_size"]),
                 input_size=W.shape[-1], cells=cells, clip=clip if clip > 0 else None, linear_before_reset=lbr,
                 dtype=W.dtype)


def activations_from_attrs(kind: str, attrs: dict) -> tuple:
    """OpenVINO's activations/activations_alpha/activations_beta as Activation objects (ONNX names). OpenVINO
    reads the first 1 / 2 / 3 activations of an RNN / GRU / LSTM op and ignores the rest (its ONNX import copies a
    bidirectional ONNX list, e.g. "tanh, tanh", into RNNSequence)."""
    text = attrs.get("activations")
    names = [s.strip() for s in text.split(",") if s.strip()] if text else list(DEFAULT_ACTIVATIONS[kind])
    names = names[: len(DEFAULT_ACTIVATIONS[kind])]
    back = {v: k for k, v in ACTIVATIONS.items()}
    out = []
    for n in names:
        if n.lower() not in back:
            raise Unsupported(f"OpenVINO {SEQUENCE_OP[kind]}: activation {n!r} is not one of relu, sigmoid, tanh")
        out.append(Activation(back[n.lower()], None, None))
    return tuple(out)


def inexpressible(layer: Layer, peepholes_zero: Optional[bool]) -> list[str]:
    """Why `layer` cannot be one opset5 Sequence op as it stands (empty: it can).

    `peepholes_zero`: True when P is absent or constant zeros, False when nonzero, None when computed at run time.
    """
    reasons = []
    if layer.kind == "LSTM" and layer.has_peepholes and not peepholes_zero:
        reasons.append("peepholes (P): OpenVINO LSTMSequence-5 has no peephole input"
                       + (" and P is computed at run time" if peepholes_zero is None else ""))
    if layer.input_forget:
        reasons.append("input_forget=1: OpenVINO LSTMSequence-5 has no coupled input/forget gate")
    if layer.clip is not None and layer.clip <= 0:
        reasons.append(f"clip={layer.clip}: OpenVINO reads clip 0 as 'no clip', ONNX clips to [-0, 0]")
    for d, cell in enumerate(layer.cells):
        for a in cell.activations:
            if a.name not in ACTIVATIONS:
                reasons.append(f"activation {a.name}: OpenVINO Sequence ops know only relu, sigmoid, tanh")
    if len(layer.cells) == 2 and _names(layer.cells[0]) != _names(layer.cells[1]):
        reasons.append("different activations per direction: OpenVINO has one list for both directions")
    return list(dict.fromkeys(reasons))


def _names(cell: Cell) -> tuple[str, ...]:
    return tuple(a.name for a in cell.activations)


def attributes(layer: Layer, cell_index: Optional[int] = None, direction: Optional[str] = None) -> dict:
    """The `<data>` of the Sequence op, attribute for attribute as ov.save_model writes it."""
    cell = layer.cells[cell_index or 0]
    attrs = {"direction": direction or layer.direction}
    if layer.kind == "GRU":
        attrs["linear_before_reset"] = bool(layer.linear_before_reset)
    attrs.update({
        "hidden_size": layer.hidden_size,
        "activations": ", ".join(ACTIVATIONS[a.name] for a in cell.activations),
        # relu, sigmoid and tanh take no alpha/beta.
        "activations_alpha": "",
        "activations_beta": "",
        "clip": float(layer.clip) if layer.clip else 0,
    })
    return attrs
