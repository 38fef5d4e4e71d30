"""IR the conversion to ONNX refuses up front: layers that contradict each other, inputs too large to feed,
layer types with no ONNX mapping; and the stricter agreement of both ends of every edge that the IR rnnconv writes
keeps (`edge_mismatches`)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import coverage, ops
from rnnconv.dialects.openvino.gates import CELLS, DEFAULT_ACTIVATIONS, SEQUENCES, VERSION
from rnnconv.errors import BadInput, human_size

PARAMETER_LIMIT = 1 << 34  # elements: a declared input larger than this is refused before anything is allocated
# Mapped by the converter itself, not the op table.
STRUCTURAL = {"Parameter", "Const", "Result", "TensorIterator", "Loop", "If", *SEQUENCES, *CELLS}


def validate(graph: ovir.IRGraph, where: str = "IR") -> None:
    """Refuse an IR whose layers contradict each other, before converting: Parameters without an output port or
    too large to feed, edges to layers or ports that do not exist, cycles, two ports with one id, input ports fed
    by no edge or by several, and edges whose two ends declare different ranks or static dims (every IR OpenVINO
    writes agrees there); bodies too."""
    by_id = graph.by_id()
    if len(by_id) != len(graph.layers):
        raise BadInput(f"{where}: two layers share an id")
    for layer in graph.layers:
        _as_openvino_reads_it(layer, where)
    for layer in graph.parameters():
        parameter_dims(layer)
    for e in graph.edges:
        src, dst = by_id.get(e.from_layer), by_id.get(e.to_layer)
        if src is None or dst is None:
            raise BadInput(f"IR edge {e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port} names no layer")
        if ovir.find_port(src.outputs, e.from_port) is None:
            raise BadInput(f"IR edge from layer {src.name!r} names output port {e.from_port}, which it does not "
                           "have")
        if ovir.find_port(dst.inputs, e.to_port) is None:
            raise BadInput(f"IR edge into layer {dst.name!r} names input port {e.to_port}, which it does not have")
    graph.topological()
    fed: dict[tuple[int, int], int] = {}
    for e in graph.edges:
        fed[(e.to_layer, e.to_port)] = fed.get((e.to_layer, e.to_port), 0) + 1
    for layer in graph.layers:
        ids = [p.id for p in layer.inputs + layer.outputs]
        if len(ids) != len(set(ids)):
            raise BadInput(f"{where}: layer {layer.name!r} ({layer.type}) has two ports with the same id")
        for p in layer.inputs:
            n = fed.get((layer.id, p.id), 0)
            if n != 1:
                raise BadInput(f"{where}: input port {p.id} of layer {layer.name!r} ({layer.type}) is fed by {n} "
                               "edges, expected 1")
        for body in layer.bodies():
            validate(body, f"{where}: body of {layer.name!r}")
    for e, src, a, dst, b in _edge_ends(graph):
        if src.type in ("Parameter", "Const") and not a.dims:
            continue  # dims left out of the port (rank from the shape attribute or the data)
        if len(a.dims) != len(b.dims) or any(x >= 0 and y >= 0 and x != y for x, y in zip(a.dims, b.dims)):
            raise BadInput(f"{where}: edge {src.name!r}:{e.from_port} -> {dst.name!r}:{e.to_port} joins shapes "
                           f"{a.dims} and {b.dims}")


# What OpenVINO's IR reader (and its compile) refuse where rnnconv's reader would otherwise guess; measured with
# openvino 2026.4's read_model + compile_model on mutated IR.
# OpenVINO 2026.4's complete opsets are opset1 .. opset16 ("unsupported opset" beyond); its opset17 holds only
# its newest ops (it refuses Broadcast, Concat, Gather or LSTMSequence marked opset17), none of which rnnconv reads.
LATEST_OPSET = 16
OTHER_VERSIONS = {"experimental", "internal", "extension"}
# The first opset holding a layer type (OpenVINO refuses it marked with an older one), for the types in real IR
# seen so far (probed with openvino 2026.4's read_model); any other type is taken to exist from opset1.
FIRST_OPSET = {"CumSum": 3, "Einsum": 7, "Gelu": 2, "If": 8, "Loop": 5, "NonZero": 3, "Round": 5, "STFT": 15,
               "ScaledDotProductAttention": 13, "ScatterNDUpdate": 4, "Slice": 8, "Swish": 4,
               **dict.fromkeys(SEQUENCES, int(VERSION.removeprefix("opset")))}  # the Sequence ops are new in it
# Attributes without which OpenVINO's reader refuses the layer or leaves it invalid ("Output type must be i32 or
# i64", "m_num_splits > 0", "is_num_dir_valid"), where rnnconv's reader would otherwise take a default.
REQUIRED = {("ShapeOf", "opset3"): ("output_type",), ("Range", "opset4"): ("output_type",),
            ("Split", "opset1"): ("num_splits",), ("Parameter", "opset1"): ("element_type",),
            ("Const", "opset1"): ("element_type",),
            **{(t, VERSION): ("hidden_size", "direction") for t in SEQUENCES}}
RECURRENT = {**SEQUENCES, **CELLS}
ACTIVATION_NAMES = {"relu", "sigmoid", "tanh"}


def _as_openvino_reads_it(layer: ovir.IRLayer, where: str) -> None:
    what = f"{where}: layer {layer.name!r} ({layer.type}-{layer.version})"
    version = layer.version or ""
    number = version[5:] if version.startswith("opset") else ""
    known = (number.isdigit() and 1 <= int(number) <= LATEST_OPSET) or version in OTHER_VERSIONS
    if not known:
        raise BadInput(f"{what}: unknown opset {version!r} (OpenVINO reads opset1 to opset{LATEST_OPSET})")
    if number.isdigit() and int(number) < FIRST_OPSET.get(layer.type, 1):
        raise BadInput(f"{what}: opset{number} has no {layer.type} (it first appears in "
                       f"opset{FIRST_OPSET[layer.type]})")
    for port in layer.inputs + layer.outputs:
        if any(d < -1 for d in port.dims):
            raise BadInput(f"{what}: port {port.id} has dims {port.dims}; a dim is -1 (dynamic) or at least 0")
    for name in REQUIRED.get((layer.type, version), ()):
        if not layer.attrs.get(name, "").strip():
            raise BadInput(f"{what}: no {name} (OpenVINO's reader requires it)")
    if layer.type in RECURRENT:
        _recurrent_attributes(layer, RECURRENT[layer.type], what)


def _recurrent_attributes(layer: ovir.IRLayer, kind: str, what: str) -> None:
    """activations, activations_alpha/beta, clip and hidden_size as OpenVINO parses and checks them."""
    text = layer.attrs.get("activations")
    if text is not None:
        names = [a.strip() for a in text.split(",") if a.strip()]
        unknown = [a for a in names if a.lower() not in ACTIVATION_NAMES]
        if unknown:
            raise BadInput(f"{what}: activation {unknown[0]!r} is not one of {', '.join(sorted(ACTIVATION_NAMES))} "
                           f"(OpenVINO refuses it)")
        if len(names) < len(DEFAULT_ACTIVATIONS[kind]):
            raise BadInput(f"{what}: activations {text!r} lists {len(names)}, {kind} needs "
                           f"{len(DEFAULT_ACTIVATIONS[kind])} (OpenVINO refuses it)")
    for name in ("activations_alpha", "activations_beta", "clip"):
        for item in (layer.attrs.get(name) or "").split(","):
            try:
                float(item) if item.strip() else None
            except ValueError:
                raise BadInput(f"{what}: {name} {layer.attrs[name]!r} is not a list of numbers") from None
    hidden = layer.attrs.get("hidden_size", "").strip()
    try:
        hidden_size = int(hidden)
    except ValueError:
        raise BadInput(f"{what}: hidden_size {hidden!r} is not an integer") from None
    state = layer.inputs[1].dims if len(layer.inputs) > 1 else []  # initial_hidden_state: [.., H]
    if hidden_size <= 0 or (state and state[-1] >= 0 and state[-1] != hidden_size):
        raise BadInput(f"{what}: hidden_size={hidden_size} does not match its hidden state's dims {state}")


def _edge_ends(graph: ovir.IRGraph):
    """(edge, source layer, its output port, target layer, its input port) for each edge of the graph."""
    by_id = graph.by_id()
    for e in graph.edges:
        src, dst = by_id[e.from_layer], by_id[e.to_layer]
        yield e, src, ovir.find_port(src.outputs, e.from_port), dst, ovir.find_port(dst.inputs, e.to_port)


def edge_mismatches(graph: ovir.IRGraph, where: str = "IR") -> list[str]:
    """Every edge, bodies included, whose two ends declare different element types or dims (-1 against a static
    dim too): what OpenVINO's IR reader may refuse, and what neither rnnconv's writer nor ov.save_model writes."""
    found = []
    for e, src, a, dst, b in _edge_ends(graph):
        if a.element_type != b.element_type or a.dims != b.dims:
            found.append(f"{where}: edge {src.name!r}:{e.from_port} -> {dst.name!r}:{e.to_port} joins "
                         f"{a.element_type}{a.dims} and {b.element_type}{b.dims}")
    for layer in graph.layers:
        for body in layer.bodies():
            found += edge_mismatches(body, f"{where}: body of {layer.name!r}")
    return found


def parameter_dims(layer: ovir.IRLayer) -> Optional[list[int]]:
    """A Parameter's dims (-1 dynamic, None for a dynamic rank), refusing absurd sizes before any allocation."""
    if not layer.outputs:
        raise BadInput(f"IR Parameter {layer.name!r} has no <output> port")
    port = layer.outputs[0]
    et = layer.attrs.get("element_type", port.element_type)
    dims = port.dims
    if "shape" in layer.attrs and not port.dims:
        text = layer.attrs["shape"].strip()
        try:
            dims = None if text == "..." else [(-1 if s.strip() in ("?", "-1") or ".." in s else int(s))
                                                for s in text.split(",") if s.strip()]
        except ValueError:
            raise BadInput(f"IR Parameter {layer.name!r}: shape {text!r} is not a list of dims") from None
    n = float(np.prod([d for d in dims or () if d >= 0], dtype=np.float64))
    if n > PARAMETER_LIMIT:
        nbytes = n * ovir.numpy_dtype(et).itemsize
        raise BadInput(f"IR Parameter {ovir.parameter_name(layer)!r} declares {n:.4g} elements "
                       f"({human_size(nbytes)}); refusing a model no input could be fed to")
    return dims


def unsupported_layers(graph: ovir.IRGraph) -> list[str]:
    """Every layer type (bodies included) neither the converter nor the reverse op table handles."""
    bad: dict[str, list[str]] = {}
    for layer in graph.all_layers():
        if layer.type not in STRUCTURAL and layer.type not in ops.REVERSE:
            bad.setdefault(f"{layer.type}-{layer.version}", []).append(layer.name)
    return [f"layer type {t} has no ONNX mapping{_why(t)} (layers {', '.join(repr(n) for n in names[:3])}"
            + (f" and {len(names) - 3} more" if len(names) > 3 else "") + ")" for t, names in sorted(bad.items())]


def _why(type_version: str) -> str:
    reason = coverage.NO_MAPPING.get(type_version.rsplit("-", 1)[0])
    return f": {reason}" if reason else ""
