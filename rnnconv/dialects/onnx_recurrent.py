"""ONNX GRU / LSTM / RNN, every version, read into and written out of the canonical `Layer`.

Specs: onnx Operators.md GRU (1, 3, 7, 14, 22), LSTM and RNN (1, 7, 14, 22); ../shared/spec/.
Version differences are attributes only: output_sequence (1..6), linear_before_reset (GRU >= 3), layout (>= 14),
bfloat16 (22). The v1/v3 equations print `Ht-1*Rz` without ^T, but R is [D, G*H, H] in every version, so the
math is the same as v7 (Ht-1 * Rz^T); we read all versions with the v7 equations.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import activations as act
from rnnconv.dialects.onnx_versions import (  # noqa: F401  (the version facts, also read from here)
    BFLOAT16_SINCE,
    CAST_BFLOAT16_SINCE,
    LAYOUT_SINCE,
    LINEAR_BEFORE_RESET_SINCE,
    MODERN_SINCE,
    VERSIONS,
)
from rnnconv.errors import BadInput, RnnconvWarning, Unsupported
from rnnconv.io import release_pages
from rnnconv.layer import DIRECTIONS, GATE_NAMES, KINDS, PEEPHOLE_GATES, Cell, Layer, split_gates

OPS = KINDS  # ONNX's op types are the layer kinds' names
# Gate order is a property of the dialect: ONNX LSTM i,o,f,c; GRU z,r,h.
GATES = {"LSTM": ("i", "o", "f", "c"), "GRU": ("z", "r", "h"), "RNN": ("i",)}
PEEPHOLES = ("i", "o", "f")
INPUTS = {
    "LSTM": ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
    "GRU": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
    "RNN": ("X", "W", "R", "B", "sequence_lens", "initial_h"),
}
OUTPUTS = {"LSTM": ("Y", "Y_h", "Y_c"), "GRU": ("Y", "Y_h"), "RNN": ("Y", "Y_h")}
WEIGHTS = ("W", "R", "B", "P")

assert all(set(GATES[k]) == set(GATE_NAMES[k]) for k in OPS) and set(PEEPHOLES) == set(PEEPHOLE_GATES)
assert set(VERSIONS) == set(OPS)


def version_of(op_type: str, opset: int) -> int:
    """The version of a recurrent op in force at `opset` (the newest version not above it)."""
    usable = [v for v in VERSIONS[op_type] if v <= opset]
    if not usable:
        raise BadInput(f"{op_type} does not exist at opset {opset}")
    return usable[-1]


def attributes_at(op_type: str, version: int) -> frozenset[str]:
    names = {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size"}
    if version < MODERN_SINCE:
        names.add("output_sequence")
    if op_type == "GRU" and version >= LINEAR_BEFORE_RESET_SINCE:
        names.add("linear_before_reset")
    if op_type == "LSTM":
        names.add("input_forget")
    if version >= LAYOUT_SINCE:
        names.add("layout")
    return frozenset(names)


@dataclasses.dataclass
class RecurrentNode:
    """A recurrent node in a graph: its canonical layer plus the values it is wired to."""

    node: ir.Node
    op: str
    version: int
    layer: Layer
    inputs: dict[str, Optional[ir.Value]]
    outputs: dict[str, Optional[ir.Value]]
    output_sequence: Optional[int] = None  # only versions before MODERN_SINCE carry it
    scope: str = ""  # where the node lies: "" in the main graph, else "If_0/then_branch/" or "function f/"

    @property
    def name(self) -> str:
        """The node's path: its name, prefixed with the nodes and attributes whose bodies hold it."""
        return self.scope + node_label(self.node)

    def weight_values(self) -> dict[str, Optional[ir.Value]]:
        return {k: self.inputs.get(k) for k in WEIGHTS}


def default_opset(model: ir.Model) -> int:
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))


def bodies(node: ir.Node) -> list[ir.Graph]:
    """The graphs a node's attributes hold (If's branches, Loop's and Scan's body), in attribute order."""
    return [g for attr in node.attributes.values()
            for g in ([attr.value] if attr.type == ir.AttributeType.GRAPH else
                      list(attr.value) if attr.type == ir.AttributeType.GRAPHS else [])]


def node_label(node: ir.Node) -> str:
    return node.name or (node.outputs[0].name if node.outputs and node.outputs[0].name else node.op_type)


def walk(model: ir.Model):
    """(node, scope, default-domain opset) for every node of the model: the main graph, the bodies of If / Loop /
    Scan at any depth, and model-local functions (with their own opsets). `scope` is the path to the node's graph,
    e.g. "If_0/then_branch/"."""

    def graph(g, scope: str, opset: int):
        for node in g:
            yield node, scope, opset
            for attr in node.attributes.values():
                bodies = ([attr.value] if attr.type == ir.AttributeType.GRAPH else
                          list(attr.value) if attr.type == ir.AttributeType.GRAPHS else [])
                for k, body in enumerate(bodies):
                    name = attr.name if len(bodies) == 1 else f"{attr.name}[{k}]"
                    yield from graph(body, f"{scope}{node_label(node)}/{name}/", opset)

    yield from graph(model.graph, "", default_opset(model))
    for function in model.functions.values():
        opset = function.opset_imports.get("", function.opset_imports.get("ai.onnx", default_opset(model)))
        yield from graph(function, f"function {function.name}/", opset)


def find(model: ir.Model, where: str = "") -> list[RecurrentNode]:
    """Every GRU/LSTM/RNN node of the model (subgraphs and functions included, see `walk`), read into canonical
    layers; `where` prefixes errors."""
    found = []
    try:
        for node, scope, opset in walk(model):
            if node.domain in ("", "ai.onnx") and node.op_type in OPS:
                found.append(read(node, opset, scope))
    except BadInput as err:
        raise BadInput(f"{where}: {err}" if where else str(err)) from err
    return found


def _attr(node: ir.Node, name: str, default=None):
    a = node.attributes.get(name)
    return default if a is None else a.value


def constant_array(value: Optional[ir.Value]) -> Optional[np.ndarray]:
    """The value's array when it is an initializer or a Constant node's output (any of its value attributes but
    the sparse one), else None."""
    if value is None:
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and producer.domain in ("", "ai.onnx"):
        t = _attr(producer, "value")
        if t is not None:
            return t.numpy()
        for name, dtype in _CONSTANT_LISTS.items():
            v = _attr(producer, name)
            if v is not None:
                return np.array(list(v) if isinstance(v, (list, tuple)) else v, dtype=dtype)
    return None


# Constant-12's value attributes other than the tensor (value_string(s) read as numpy object arrays)
_CONSTANT_LISTS = {"value_int": np.int64, "value_ints": np.int64, "value_float": np.float32,
                   "value_floats": np.float32, "value_string": object, "value_strings": object}


def _shape(value: Optional[ir.Value]) -> Optional[tuple]:
    if value is None or value.shape is None:
        return None
    return tuple(d if isinstance(d, int) else None for d in value.shape)


def read(node: ir.Node, opset: int, scope: str = "") -> RecurrentNode:
    op = node.op_type
    version = version_of(op, opset)
    label = f"{op} node {scope + node_label(node)!r}"
    names = INPUTS[op]
    if len(node.inputs) > len(names) or len(node.outputs) > len(OUTPUTS[op]):
        raise BadInput(f"{label}: too many inputs or outputs for {op}-{version}")
    inputs = {n: (node.inputs[i] if i < len(node.inputs) else None) for i, n in enumerate(names)}
    outputs = {n: (node.outputs[i] if i < len(node.outputs) else None) for i, n in enumerate(OUTPUTS[op])}
    outputs = {n: (v if v is not None and v.name != "" else None) for n, v in outputs.items()}
    if inputs["X"] is None or inputs["W"] is None or inputs["R"] is None:
        raise BadInput(f"{label}: X, W and R are required")

    unknown = set(node.attributes) - attributes_at(op, version)
    if unknown:
        raise BadInput(f"{label}: attribute(s) {sorted(unknown)} do not exist in {op}-{version}")
    direction = _attr(node, "direction", "forward")
    if direction not in DIRECTIONS:
        raise BadInput(f"{label}: direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    num_directions = 2 if direction == "bidirectional" else 1
    layout = int(_attr(node, "layout", 0))
    if layout not in (0, 1):
        raise BadInput(f"{label}: layout must be 0 or 1, got {layout}")
    clip = _attr(node, "clip")
    if clip is not None and not clip >= 0:  # NaN too: no threshold bounds anything by NaN
        raise BadInput(f"{label}: clip must be non-negative, got {clip}")
    lbr = int(_attr(node, "linear_before_reset", 0))
    input_forget = int(_attr(node, "input_forget", 0))

    arrays = {k: constant_array(inputs.get(k)) for k in WEIGHTS}
    present = {k: inputs.get(k) is not None for k in WEIGHTS}
    constant = all(arrays[k] is not None for k in WEIGHTS if present[k])
    shapes = {k: (arrays[k].shape if arrays[k] is not None else _shape(inputs.get(k))) for k in WEIGHTS}

    gates = GATES[op]
    n_gates = len(gates)
    hidden_size = _attr(node, "hidden_size")
    r_shape = shapes["R"]
    if hidden_size is None and r_shape is not None and r_shape[-1] is not None:
        hidden_size = r_shape[-1]
    if hidden_size is None:
        raise BadInput(f"{label}: hidden_size is neither given nor readable from R's shape")
    if hidden_size <= 0:
        raise BadInput(f"{label}: hidden_size must be positive, got {hidden_size}")
    H = hidden_size
    input_size = shapes["W"][-1] if shapes["W"] is not None and len(shapes["W"]) == 3 else None
    expected = {
        "W": (num_directions, n_gates * H, input_size),
        "R": (num_directions, n_gates * H, H),
        "B": (num_directions, 2 * n_gates * H),
        "P": (num_directions, 3 * H),
    }
    for k, want in expected.items():
        got = shapes[k]
        if not present[k] or got is None:
            continue
        if len(got) != len(want) or any(g is not None and w is not None and g != w for g, w in zip(got, want)):
            raise BadInput(
                f"{label}: {k} has shape {list(got)}, expected {[w if w is not None else '?' for w in want]} "
                f"for hidden_size={H}, direction={direction}"
            )
    for k in ("W", "R", "B", "P"):
        if arrays[k] is not None and arrays[k].dtype.kind != "f" and arrays[k].dtype.name != "bfloat16":
            raise BadInput(f"{label}: {k} has dtype {arrays[k].dtype}, expected a floating-point type")
    _check_run_inputs(label, inputs, arrays, layout, num_directions, H, input_size)

    try:
        per_direction = act.resolve(op, num_directions, _attr(node, "activations"), _attr(node, "activation_alpha"),
                                    _attr(node, "activation_beta"))
    except BadInput as err:
        raise BadInput(f"{label}: {err}") from err
    cells = []
    for d in range(num_directions):
        cell = Cell(activations=per_direction[d])
        if constant:
            cell.W, cell.R = split_gates(arrays["W"][d], gates), split_gates(arrays["R"][d], gates)
            if arrays["B"] is not None:
                cell.Wb, cell.Rb = split_bias(arrays["B"][d], gates)
            else:
                zero = np.zeros(H, dtype=arrays["W"].dtype)
                cell.Wb = {g: zero for g in gates}
                cell.Rb = {g: zero for g in gates}
            if op == "LSTM":
                p = arrays["P"][d] if arrays["P"] is not None else np.zeros(3 * H, dtype=arrays["W"].dtype)
                cell.P = split_gates(p, PEEPHOLES)
        cells.append(cell)

    dtype = arrays["W"].dtype if arrays["W"] is not None else _value_dtype(inputs["X"])
    layer = Layer(
        kind=op, direction=direction, hidden_size=H, input_size=input_size, cells=cells,
        clip=None if clip is None else float(clip), linear_before_reset=bool(lbr), input_forget=bool(input_forget),
        layout=layout, has_bias=present["B"], has_peepholes=present["P"], weights_constant=constant,
        dtype=dtype, name=node.name or "",
    )
    output_sequence = int(_attr(node, "output_sequence", 0)) if version < MODERN_SINCE else None
    return RecurrentNode(node, op, version, layer, inputs, outputs, output_sequence, scope)


def split_bias(B: np.ndarray, gates: tuple[str, ...]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """One direction of ONNX's B, [Wb gates, Rb gates] in `gates` order, as the Wb and Rb gate dicts (the inverse of
    `tensors`' B)."""
    Wb, Rb = np.split(B, 2)
    return split_gates(Wb, gates), split_gates(Rb, gates)


def _check_run_inputs(label, inputs, arrays, layout, num_directions, H, input_size) -> None:
    """X, initial states and sequence_lens against the spec's shapes and types; one element type throughout;
    a warning (not an error) for NaN/Inf in constant weights."""
    x = _shape(inputs["X"])
    if x is not None and len(x) != 3:
        axes = "[batch, seq, input]" if layout else "[seq, batch, input]"
        raise BadInput(f"{label}: X has rank {len(x)}, expected 3 {axes}")
    T = N = None
    if x is not None:
        T, N = (x[1], x[0]) if layout else (x[0], x[1])
    if x is not None and x[2] is not None and input_size is not None and x[2] != input_size:
        raise BadInput(f"{label}: X has input size {x[2]}, W has {input_size}")
    dtypes = {"X": _value_dtype(inputs["X"])}
    for k in ("W", "R", "B", "P"):
        dtypes[k] = arrays[k].dtype if arrays.get(k) is not None else _value_dtype(inputs.get(k))
    for k in ("initial_h", "initial_c"):
        value = inputs.get(k)
        if value is None:
            continue
        const = constant_array(value)
        dtypes[k] = const.dtype if const is not None else _value_dtype(value)
        got = const.shape if const is not None else _shape(value)
        want = (N, num_directions, H) if layout else (num_directions, N, H)
        if got is not None and (len(got) != 3 or any(g is not None and w is not None and g != w
                                                    for g, w in zip(got, want))):
            spelled = [w if w is not None else "?" for w in want]
            raise BadInput(f"{label}: {k} has shape {list(got)}, expected {spelled}")
    known = {k: np.dtype(d) for k, d in dtypes.items() if d is not None}
    if known:
        first, ref = next(iter(known.items()))
        for k, d in known.items():
            if d != ref:
                raise BadInput(f"{label}: {k} is {d} but {first} is {ref}; all float inputs must share one type")
    lens = inputs.get("sequence_lens")
    if lens is not None:
        const = constant_array(lens)
        dtype = const.dtype if const is not None else _value_dtype(lens)
        if dtype is not None and np.dtype(dtype) != np.int32:
            raise BadInput(f"{label}: sequence_lens has dtype {np.dtype(dtype)}, expected int32")
        got = const.shape if const is not None else _shape(lens)
        if got is not None and (len(got) != 1 or (N is not None and got[0] is not None and got[0] != N)):
            raise BadInput(f"{label}: sequence_lens has shape {list(got)}, expected [{N if N is not None else '?'}]")
        if const is not None and const.size and T is not None and (const.min() < 0 or const.max() > T):
            got = const.tolist() if const.size <= 16 else f"values from {const.min()} to {const.max()}"
            raise BadInput(f"{label}: sequence_lens must lie in [0, {T}], got {got}")
    for k in ("W", "R", "B", "P"):
        bad = _nonfinite_once(inputs.get(k), arrays.get(k))
        if bad:
            warnings.warn(RnnconvWarning(f"{label}: {k} holds {bad} non-finite value(s) (NaN/Inf): outputs may be "
                                         f"NaN; verification still compares them"), stacklevel=3)


def _nonfinite_once(value: Optional[ir.Value], array: Optional[np.ndarray]) -> int:
    """_count_nonfinite, once per weight tensor: commands read a model's recurrent nodes more than once, and a scan
    of a big model's weights costs about 0.1 s per GB. The count is kept on the tensor, so a model built around the
    same tensors (a node check's model, the copy verified against, which shares the memory maps) is not scanned
    again, and nothing outlives the loaded model."""
    tensor = None if value is None else value.const_value
    if tensor is None or array is None:
        return _count_nonfinite(array)
    key = "rnnconv.nonfinite"
    if key not in tensor.meta:
        tensor.meta[key] = _count_nonfinite(array)
    return tensor.meta[key]


def _count_nonfinite(array: Optional[np.ndarray], chunk: int = 1 << 22) -> int:
    """NaN/Inf count in chunks, so a memory-mapped multi-GB weight is not copied into a mask whole."""
    if array is None or array.dtype.kind not in "fV" and array.dtype.name != "bfloat16":
        return 0
    flat = array.reshape(-1)
    bad = 0
    try:
        for i in range(0, flat.size, chunk):
            part = flat[i:i + chunk]
            # x.x is finite only when every x is (NaN and Inf propagate; a finite x can overflow it, then count).
            with np.errstate(over="ignore", invalid="ignore"):
                finite = part.dtype.kind == "f" and part.dtype.itemsize >= 4 and np.isfinite(np.dot(part, part))
            if not finite:
                bad += int(np.count_nonzero(~np.isfinite(part)))
            release_pages(part)  # a memory-mapped weight does not stay resident once scanned
    except TypeError:  # a float type numpy cannot test (exotic 8-bit floats): nothing to report
        return 0
    return bad


def _value_dtype(value: Optional[ir.Value]):
    if value is None or value.dtype is None:
        return None
    try:
        return value.dtype.numpy()
    except Exception:
        return None


def attributes(layer: Layer, version: int, *, output_sequence: Optional[int] = None) -> dict:
    """The ONNX attributes of `layer` at `version`; defaults omitted so the node reads like a hand-written one."""
    op = layer.kind
    attrs: dict = {"hidden_size": layer.hidden_size}
    if layer.direction != "forward":
        attrs["direction"] = layer.direction
    names, alphas, betas = act.to_attributes(op, [c.activations for c in layer.cells])
    if names is not None:
        attrs["activations"] = list(names)
    if alphas is not None:
        attrs["activation_alpha"] = [float(a) for a in alphas]
    if betas is not None:
        attrs["activation_beta"] = [float(b) for b in betas]
    if layer.clip is not None:
        attrs["clip"] = float(layer.clip)
    if layer.linear_before_reset:
        attrs["linear_before_reset"] = 1
    if layer.input_forget:
        attrs["input_forget"] = 1
    if layer.layout:
        attrs["layout"] = layer.layout
    if version < MODERN_SINCE and output_sequence:
        attrs["output_sequence"] = int(output_sequence)
    allowed = attributes_at(op, version)
    missing = sorted(k for k in attrs if k not in allowed)
    if missing:
        raise Unsupported(f"{op} node {layer.name!r}: {', '.join(missing)} cannot be expressed in {op}-{version}")
    return attrs


def tensors(layer: Layer) -> dict[str, Optional[np.ndarray]]:
    """W, R, B, P in ONNX gate order (B and P None when the layer had none)."""
    gates = GATES[layer.kind]
    out = {"W": layer.stacked("W", gates), "R": layer.stacked("R", gates), "B": None, "P": None}
    if layer.has_bias:
        out["B"] = np.concatenate([layer.stacked("Wb", gates), layer.stacked("Rb", gates)], axis=1)
    if layer.kind == "LSTM" and layer.has_peepholes:
        out["P"] = layer.stacked("P", PEEPHOLES)
    return out
