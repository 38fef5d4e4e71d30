"""com.microsoft DynamicQuantizeLSTM: the facts about onnxruntime's quantized LSTM, read into the canonical
`Layer` (its weights dequantized), and the translation of its weights to a float ONNX LSTM.

Definition: onnxruntime's contrib operator docs (docs/ContribOperators.md, com.microsoft.DynamicQuantizeLSTM,
version 1, since onnxruntime 1.6) and its only kernel, the CPU one (contrib_ops/cpu/quantization/
dynamic_quantize_lstm.cc). onnx knows no schema for it, so onnx.checker accepts anything in the node.

It is ONNX LSTM-7 with W and R stored as int8 or uint8 and transposed, and four more inputs:

    X [T, N, I] float32 (time-major: the op has no `layout`)    W [D, I, 4H], R [D, H, 4H] int8 or uint8
    B [D, 8H], sequence_lens [N] int32, initial_h / initial_c [D, N, H], P [D, 3H]: as ONNX LSTM
    W_scale, W_zero_point, R_scale, R_zero_point: [D] (per direction) or [D, 4H] (per gate row), the zero
    points of W's own type.  Gate order along 4H: i, o, f, c, ONNX LSTM's.

    float W of ONNX LSTM [D, 4H, I] = ((W[d] - zero_point) * scale).T   (R likewise)

What onnxruntime's kernel adds beyond that (the engine's kernel, engine/op_dynamic_quantize_lstm.py, follows it):
X and each step's hidden state are quantized to uint8 at run time; only element [d, 0] of a zero point is used,
so a per-row zero point must be all 0 (int8) or one value over every direction (uint8); clip must be > 0.
quantize_dynamic (onnxruntime.quantization) writes int8 weights with zero points 0, one scale per direction
(per_channel=False) or per gate row, and drops an LSTM's `layout`, even layout=1 (a wrong model from
onnxruntime 1.18 on; up to 1.17 it copied the attribute and onnxruntime refused the model).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import activations as act
from rnnconv.dialects.onnx_recurrent import GATES as ONNX_GATES
from rnnconv.dialects.onnx_recurrent import INPUTS as ONNX_INPUTS
from rnnconv.dialects.onnx_recurrent import OUTPUTS as ONNX_OUTPUTS
from rnnconv.dialects.onnx_recurrent import PEEPHOLES, constant_array, node_label, split_bias, walk
from rnnconv.errors import BadInput
from rnnconv.layer import DIRECTIONS, Cell, Layer, split_gates

DOMAIN = "com.microsoft"
OP = "DynamicQuantizeLSTM"
QUANTIZATION = ("W_scale", "W_zero_point", "R_scale", "R_zero_point")
INPUTS = ONNX_INPUTS["LSTM"] + QUANTIZATION
OUTPUTS = ONNX_OUTPUTS["LSTM"]
GATES = ONNX_GATES["LSTM"]
ATTRIBUTES = frozenset({"hidden_size", "direction", "activations", "activation_alpha", "activation_beta", "clip",
                        "input_forget"})
WEIGHT_TYPES = ("int8", "uint8")


def is_quantized_lstm(node: ir.Node) -> bool:
    return node.domain == DOMAIN and node.op_type == OP


def holds(model: ir.Model) -> bool:
    """Whether any graph of the model (bodies and functions included) holds a DynamicQuantizeLSTM."""
    return any(is_quantized_lstm(node) for node, _, _ in walk(model))


@dataclasses.dataclass(frozen=True)
class Quantization:
    """One weight's quantization, per direction: the scale [1] or [4H] and the zero point onnxruntime uses."""

    scale: np.ndarray  # [D, 1] or [D, 4H] float32
    zero_point: tuple[int, ...]  # [D]
    per_channel: bool


def quantization(name: str, q: np.ndarray, scale, zero_point, num_directions: int, hidden_size: int) -> Quantization:
    """W's or R's scale and zero point, checked as onnxruntime's kernel checks them (WeightCheck, ZeroPointCheck)."""
    D, G = num_directions, 4 * hidden_size
    scale, zero_point = np.asarray(scale), np.asarray(zero_point)
    for what, arr in (("scale", scale), ("zero_point", zero_point)):
        if arr.shape not in ((D,), (D, G)):
            raise BadInput(f"{name}_{what} has shape {list(arr.shape)}, expected [{D}] or [{D}, {G}]")
    if scale.dtype != np.float32:
        raise BadInput(f"{name}_scale has dtype {scale.dtype}, expected float32")
    if zero_point.dtype != q.dtype:
        raise BadInput(f"{name}_zero_point has dtype {zero_point.dtype}, {name} has {q.dtype}: they must match")
    if zero_point.ndim == 2:
        # The GEMM reads one zero point per direction (element [d, 0]): the others must agree with it.
        flat = zero_point.reshape(-1)
        if q.dtype == np.int8 and np.any(flat != 0):
            raise BadInput(f"{name}_zero_point per row must be all 0 for int8 weights")
        if q.dtype == np.uint8 and np.any(flat != flat[0]):
            raise BadInput(f"{name}_zero_point per row must hold one value (over every direction) for uint8 weights")
    return Quantization(scale.reshape(D, -1).astype(np.float32), tuple(int(z) for z in zero_point.reshape(D, -1)[:, 0]),
                        zero_point.ndim == 2)


def check_weights(W: np.ndarray, R: np.ndarray, num_directions: int, hidden_size: int,
                  input_size: Optional[int]) -> None:
    """W [D, I, 4H] and R [D, H, 4H] of one 8-bit type (onnxruntime 1.32 checks the shapes; older ones do not,
    and run an ONNX-layout W [D, 4H, I] as garbage)."""
    D, H = num_directions, hidden_size
    for name, q, want in (("W", W, (D, input_size, 4 * H)), ("R", R, (D, H, 4 * H))):
        if q.dtype.name not in WEIGHT_TYPES:
            raise BadInput(f"{name} has dtype {q.dtype}, expected int8 or uint8")
        if q.ndim != 3 or any(w is not None and g != w for g, w in zip(q.shape, want)):
            spelled = [w if w is not None else "input_size" for w in want]
            raise BadInput(f"{name} has shape {list(q.shape)}, expected {spelled} ([num_directions, "
                           f"{'input_size' if name == 'W' else 'hidden_size'}, 4*hidden_size]: ONNX LSTM's transposed)")
    if W.dtype != R.dtype:
        raise BadInput(f"W is {W.dtype} but R is {R.dtype}: one weight type for both")


def check_attributes(attributes: dict) -> None:
    """What onnxruntime refuses at load (unknown attributes, layout, clip <= 0); `layout=0`, which some
    quantize_dynamic versions copied from the LSTM, is read as the op (onnxruntime refuses the node)."""
    unknown = sorted(set(attributes) - ATTRIBUTES - {"layout"})
    if unknown:
        raise BadInput(f"attribute(s) {unknown} do not exist in {OP}")
    if int(attributes.get("layout", 0)) != 0:
        raise BadInput(f"{OP} has no layout attribute and computes time-major: layout={attributes['layout']} is "
                       f"ignored by onnxruntime (quantize_dynamic drops it), so X is read as [T, N, I]; quantize the "
                       f"model again from a layout-0 LSTM")
    direction = attributes.get("direction", "forward")
    if direction not in DIRECTIONS:
        raise BadInput(f"direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    if int(attributes.get("hidden_size", 0)) <= 0:
        raise BadInput(f"hidden_size must be given and positive, got {attributes.get('hidden_size')}")
    clip = attributes.get("clip")
    if clip is not None and not clip > 0:
        raise BadInput(f"clip must be > 0, got {clip}")


def dequantize(W: np.ndarray, R: np.ndarray, W_scale, W_zero_point, R_scale, R_zero_point
               ) -> tuple[np.ndarray, np.ndarray]:
    """ONNX LSTM's float W [D, 4H, I] and R [D, 4H, H] (float32, gates i, o, f, c) from the quantized ones:
    (q - zero_point) * scale, transposed. Exact in float32 (|q - zero_point| < 2^9, one product per value)."""
    W, R = np.asarray(W), np.asarray(R)
    D, H = R.shape[0], R.shape[1]
    check_weights(W, R, D, H, None)
    out = []
    for name, q, scale, zero_point in (("W", W, W_scale, W_zero_point), ("R", R, R_scale, R_zero_point)):
        qz = quantization(name, q, scale, zero_point, D, H)
        shifted = q.astype(np.int32) - np.asarray(qz.zero_point, np.int32)[:, None, None]
        out.append(np.ascontiguousarray((shifted.astype(np.float32) * qz.scale[:, None, :]).transpose(0, 2, 1)))
    return out[0], out[1]


@dataclasses.dataclass
class QuantizedLSTM:
    """A DynamicQuantizeLSTM in a graph: its float layer (weights dequantized; no arrays when the weights are
    computed at run time), how its weights are quantized, and the values it is wired to."""

    node: ir.Node
    layer: Layer
    weight_type: Optional[str]  # "int8" / "uint8"; None when W is computed at run time
    per_channel: Optional[bool]  # W's scale per gate row rather than per direction
    inputs: dict[str, Optional[ir.Value]]
    outputs: dict[str, Optional[ir.Value]]
    scope: str = ""
    opset: Optional[int] = None  # the default-domain opset of the graph it lies in
    op = OP
    version = 1

    @property
    def name(self) -> str:
        return self.scope + node_label(self.node)


def read(node: ir.Node, scope: str = "", opset: Optional[int] = None) -> QuantizedLSTM:
    label = f"{OP} node {scope + node_label(node)!r}"
    if len(node.inputs) > len(INPUTS) or len(node.outputs) > len(OUTPUTS):
        raise BadInput(f"{label}: too many inputs or outputs")
    inputs = {n: (node.inputs[i] if i < len(node.inputs) else None) for i, n in enumerate(INPUTS)}
    outputs = {n: (node.outputs[i] if i < len(node.outputs) and node.outputs[i].name else None)
               for i, n in enumerate(OUTPUTS)}
    missing = [n for n in ("X", "W", "R") + QUANTIZATION if inputs[n] is None]
    if missing:
        raise BadInput(f"{label}: {', '.join(missing)} required")
    attributes = {k: a.value for k, a in node.attributes.items()}
    try:
        check_attributes(attributes)
        per_direction = act.resolve("LSTM", 2 if attributes.get("direction") == "bidirectional" else 1,
                                    attributes.get("activations"), attributes.get("activation_alpha"),
                                    attributes.get("activation_beta"))
    except BadInput as err:
        raise BadInput(f"{label}: {err}") from err
    direction = attributes.get("direction", "forward")
    D, H = len(per_direction), int(attributes["hidden_size"])
    arrays = {k: constant_array(inputs[k]) for k in ("W", "R", "B", "P") + QUANTIZATION}
    constant = all(arrays[k] is not None for k in ("W", "R") + QUANTIZATION) and all(
        arrays[k] is not None for k in ("B", "P") if inputs[k] is not None)
    cells = [Cell(activations=acts) for acts in per_direction]
    weight_type = per_channel = input_size = None
    if constant:
        try:
            check_weights(arrays["W"], arrays["R"], D, H, None)
            W, R = dequantize(arrays["W"], arrays["R"], *(arrays[k] for k in QUANTIZATION))
        except BadInput as err:
            raise BadInput(f"{label}: {err}") from err
        weight_type, per_channel = arrays["W"].dtype.name, np.ndim(arrays["W_scale"]) == 2
        input_size = W.shape[2]
        B = arrays["B"] if arrays["B"] is not None else np.zeros((D, 8 * H), np.float32)
        P = arrays["P"] if arrays["P"] is not None else np.zeros((D, 3 * H), np.float32)
        for d, cell in enumerate(cells):
            cell.W, cell.R = split_gates(W[d], GATES), split_gates(R[d], GATES)
            cell.Wb, cell.Rb = split_bias(B[d], GATES)
            cell.P = split_gates(P[d], PEEPHOLES)
    clip = attributes.get("clip")
    layer = Layer(kind="LSTM", direction=direction, hidden_size=H, input_size=input_size, cells=cells,
                  clip=None if clip is None else float(clip), input_forget=bool(attributes.get("input_forget", 0)),
                  has_bias=inputs["B"] is not None, has_peepholes=inputs["P"] is not None, weights_constant=constant,
                  dtype=np.dtype(np.float32), name=node.name or "")
    return QuantizedLSTM(node, layer, weight_type, per_channel, inputs, outputs, scope, opset)


def find(model: ir.Model) -> list[QuantizedLSTM]:
    """Every DynamicQuantizeLSTM of the model (bodies and functions included)."""
    return [read(node, scope, opset) for node, scope, opset in walk(model) if is_quantized_lstm(node)]
