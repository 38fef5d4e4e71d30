"""An OpenVINO IR graph in memory: layers with ports, edges, Const data (arrays, or `Pieces` of memory-mapped
weights), bodies of TensorIterator / Loop; built by rnnconv's writers and by the reader (`reader`), written by
`writer`.

Format: OpenVINO "IR format" docs (docs.openvino.ai, Intermediate Representation) and what `ov.save_model` writes:
`<net version="11"><layers><layer id name type version><data .../><input><port id precision><dim/>...`,
`<edges><edge from-layer from-port to-layer to-port/>`; Const data lives in the .bin at (offset, size).
Port ids: inputs are numbered first, outputs continue after them. Dims are -1 when dynamic.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable, Optional, Sequence

import numpy as np

from rnnconv.dialects.openvino import shapes
from rnnconv.errors import BadInput

# element_type (Parameter/Const data) <-> port precision <-> numpy, from the IR format page and ov.save_model.
ELEMENT_TYPES = {
    "f64": ("FP64", np.dtype("float64")),
    "f32": ("FP32", np.dtype("float32")),
    "f16": ("FP16", np.dtype("float16")),
    "i64": ("I64", np.dtype("int64")),
    "i32": ("I32", np.dtype("int32")),
    "i16": ("I16", np.dtype("int16")),
    "i8": ("I8", np.dtype("int8")),
    "u64": ("U64", np.dtype("uint64")),
    "u32": ("U32", np.dtype("uint32")),
    "u16": ("U16", np.dtype("uint16")),
    "u8": ("U8", np.dtype("uint8")),
    "boolean": ("BOOL", np.dtype("bool")),
}
try:  # bfloat16 through ml_dtypes (a dependency of rnnconv), as onnx_ir holds it
    import ml_dtypes

    ELEMENT_TYPES["bf16"] = ("BF16", np.dtype(ml_dtypes.bfloat16))
except ImportError:  # pragma: no cover
    pass
PRECISION_TO_TYPE = {p: t for t, (p, _) in ELEMENT_TYPES.items()}
MAX_BODY_DEPTH = 64  # TensorIterator/Loop bodies inside bodies; real models nest a few levels
MAX_TENSOR_BYTES = 1 << 62  # numpy cannot even describe an array (empty or not) past 2^63 bytes


# Operation types rnnconv knows, by lower-case spelling. OpenVINO's IR reader matches a layer's type without regard
# to case, and ov.save_model writes the spec's spelling (ReLU, PReLU, SoftMax) where rnnconv writes others (Relu,
# PRelu): the reader gives every layer the one spelling rnnconv's tables use (`canonical_type`).
_TYPE_NAMES: dict[str, str] = {}


def known_types(*names: str) -> None:
    """Register the spelling rnnconv's tables use for these operation types."""
    for name in names:
        _TYPE_NAMES.setdefault(name.lower(), name)


known_types("Parameter", "Const", "Result", "TensorIterator", "Loop", "If")  # the recurrent ones: in `gates`


def canonical_type(name: str) -> str:
    """The spelling rnnconv uses for an IR layer type written in any letter case (unknown types unchanged)."""
    return _TYPE_NAMES.get(name.lower(), name)


def element_type_of(dtype) -> str:
    dtype = np.dtype(dtype)
    for t, (_, d) in ELEMENT_TYPES.items():
        if d == dtype:
            return t
    raise BadInput(f"no OpenVINO element type for numpy dtype {dtype}")


def is_float(dtype) -> bool:
    """numpy floating types and bfloat16 (kind 'V' in ml_dtypes)."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def numpy_dtype(element_type: str) -> np.dtype:
    try:
        return ELEMENT_TYPES[element_type][1]
    except KeyError:
        raise BadInput(f"unsupported OpenVINO element type {element_type!r}") from None


class Pieces:
    """A Const's data as arrays laid end to end in C order, cast to `dtype`: reordered gates of memory-mapped
    weights stay views until the writer copies them into the .bin one piece at a time.

    `np.asarray` joins them (for interpreters and small graphs); `astype` and `reshape` stay lazy. `release(view)`
    is called on each part once it has been read (to_openvino drops memory-mapped pages from the resident set)."""

    def __init__(self, parts: Sequence[np.ndarray], shape: Sequence[int], dtype,
                 release: Optional[Callable[[np.ndarray], None]] = None):
        self.parts = [np.asarray(p) for p in parts]
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.release = release or (lambda view: None)
        if sum(p.size for p in self.parts) != self.size:
            raise ValueError(f"pieces of {sum(p.size for p in self.parts)} elements for shape {list(self.shape)}")

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def astype(self, dtype, copy=True) -> "Pieces":
        return Pieces(self.parts, self.shape, dtype, self.release)

    def reshape(self, *shape) -> "Pieces":
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        shape = [int(d) for d in shape]
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            shape[shape.index(-1)] = self.size // known if known else 0
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape {list(self.shape)} to {shape}")
        return Pieces(self.parts, shape, self.dtype, self.release)

    def __array__(self, dtype=None, copy=None):
        if len(self.parts) == 1 and self.parts[0].dtype == self.dtype and not copy:
            out = self.parts[0].reshape(self.shape)  # a view of the source (read-only when memory-mapped)
            return out if dtype is None else out.astype(dtype, copy=False)
        out = np.empty(self.shape, self.dtype)
        flat, start = out.reshape(-1), 0
        for p in self.parts:
            flat[start:start + p.size] = p.reshape(-1)
            self.release(p)
            start += p.size
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, key):
        # A run of whole pieces along axis 0 (one direction of stacked weights) stays pieces.
        if isinstance(key, slice) and key.step in (None, 1) and self.ndim:
            lo, hi, _ = key.indices(self.shape[0])
            row, start, chosen = math.prod(self.shape[1:]), 0, []
            for p in self.parts:
                if start >= lo * row and start + p.size <= hi * row:
                    chosen.append(p)
                start += p.size
            if hi > lo and sum(p.size for p in chosen) == (hi - lo) * row:
                return Pieces(chosen, (hi - lo, *self.shape[1:]), self.dtype, self.release)
        return np.asarray(self)[key]

    def __len__(self):
        return self.shape[0]

    def __getattr__(self, name):
        # Anything else an ndarray has (T, tolist, item...) on the joined array.
        if name.startswith("__") or name in ("parts", "shape", "dtype", "release"):
            raise AttributeError(name)
        return getattr(np.asarray(self), name)

    def chunks(self, nbytes: int = 16 << 20):
        """The data in `dtype`, in order, in C-contiguous chunks of at most about `nbytes` (each source view
        released once its chunk has been used)."""
        for p in self.parts:
            yield from self.part_chunks(p, nbytes)

    def part_chunks(self, p: np.ndarray, nbytes: int = 16 << 20):
        flat = p.reshape(-1)
        step = max(1, nbytes // max(1, p.dtype.itemsize))
        for i in range(0, flat.size, step):
            src = flat[i:i + step]
            yield np.ascontiguousarray(src if src.dtype == self.dtype else src.astype(self.dtype))
            self.release(src)


@dataclasses.dataclass
class Port:
    id: int
    element_type: str
    dims: Optional[list[int]]  # -1 for a dynamic dim; None for a dynamic rank
    names: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class IRLayer:
    id: int
    name: str
    type: str
    version: str
    attrs: dict[str, str] = dataclasses.field(default_factory=dict)
    inputs: list[Port] = dataclasses.field(default_factory=list)
    outputs: list[Port] = dataclasses.field(default_factory=list)
    value: Optional[np.ndarray] = None  # Const data (or Pieces of it)
    body: Optional["IRGraph"] = None  # TensorIterator / Loop body
    port_map: list[tuple[str, dict[str, str]]] = dataclasses.field(default_factory=list)  # ("input"|"output", attrs)
    back_edges: list[dict[str, str]] = dataclasses.field(default_factory=list)
    # If-8: "then" / "else" -> (body, its port map as `port_map`)
    branches: dict[str, tuple["IRGraph", list[tuple[str, dict[str, str]]]]] = dataclasses.field(default_factory=dict)
    # Attributes of the <layer> element itself beyond id/name/type/version (Result: output_names).
    element_attrs: dict[str, str] = dataclasses.field(default_factory=dict)

    def bodies(self) -> list["IRGraph"]:
        """The graphs inside this layer: a TensorIterator / Loop body, If's branches."""
        return ([self.body] if self.body is not None else []) + [b for b, _ in self.branches.values()]


@dataclasses.dataclass(frozen=True)
class Out:
    """One output port of one layer: what an edge starts from."""

    layer: IRLayer
    index: int  # position among the layer's outputs

    @property
    def port(self) -> Port:
        return self.layer.outputs[self.index]

    @property
    def dims(self) -> Optional[list[int]]:
        return self.port.dims

    @property
    def element_type(self) -> str:
        return self.port.element_type

    @property
    def const(self) -> Optional[np.ndarray]:
        return self.layer.value if self.layer.type == "Const" else None


@dataclasses.dataclass(frozen=True)
class Edge:
    from_layer: int
    from_port: int
    to_layer: int
    to_port: int


class IRGraph:
    """Layers and edges; `add` infers output ports with `rnnconv.dialects.openvino.shapes`."""

    def __init__(self, name: str = "rnnconv", ir_version: int = 11):
        self.name = name
        self.ir_version = ir_version  # what the reader found; rnnconv writes 11
        self.layers: list[IRLayer] = []
        self.edges: list[Edge] = []
        self._names: set[str] = set()

    # -- building -------------------------------------------------------------------------------------------
    def _unique(self, base: str) -> str:
        name, i = base, 1
        while name in self._names:
            name = f"{base}_{i}"
            i += 1
        self._names.add(name)
        return name

    def _new(self, type_: str, version: str, name: Optional[str], attrs) -> IRLayer:
        layer = IRLayer(len(self.layers), self._unique(name or f"{type_}_{len(self.layers)}"), type_, version,
                        {k: _attr_text(v) for k, v in (attrs or {}).items()})
        self.layers.append(layer)
        return layer

    def parameter(self, name: str, element_type: str, dims: Optional[Sequence[int]]) -> Out:
        shape = "..." if dims is None else ",".join("?" if d < 0 else str(d) for d in dims)
        layer = self._new("Parameter", "opset1", name, {"shape": shape, "element_type": element_type})
        layer.outputs.append(Port(0, element_type, None if dims is None else list(dims), [name]))
        return Out(layer, 0)

    def const(self, array, name: Optional[str] = None, element_type: Optional[str] = None) -> Out:
        """A Const holding a copy of `array`, or `array` itself when it is Pieces (views, not copied)."""
        if not isinstance(array, Pieces):
            array = np.asarray(array)
        if element_type is not None:
            array = array.astype(numpy_dtype(element_type))
        et = element_type_of(array.dtype)
        layer = self._new("Const", "opset1", name, {"element_type": et, "shape": ", ".join(map(str, array.shape))})
        layer.value = array if isinstance(array, Pieces) else np.array(array, order="C", copy=True)
        layer.outputs.append(Port(0, et, list(array.shape)))
        return Out(layer, 0)

    def weight(self, array, fp16: bool = False, name: Optional[str] = None) -> Out:
        """A float weight (`const`); with `fp16`, float32 data of more than one element is stored as f16 and
        decompressed by Convert-1 to f32, as ov.save_model(compress_to_fp16=True) writes it (scalars stay)."""
        if fp16 and np.dtype(array.dtype) == np.float32 and array.size > 1:
            return self.op("Convert", self.const(array.astype(np.float16), name=name), destination_type="f32")
        return self.const(array, name=name)

    def add(self, type_: str, inputs: Sequence[Out], attrs: Optional[dict] = None, *, version: str = "opset1",
            name: Optional[str] = None, outputs: Optional[list[tuple[str, Optional[list[int]]]]] = None) -> list[Out]:
        """Add an operation; output ports come from `outputs` or from shape inference."""
        layer = self._new(type_, version, name, attrs)
        for i, src in enumerate(inputs):
            layer.inputs.append(Port(i, src.element_type, None if src.dims is None else list(src.dims)))
            self.edges.append(Edge(src.layer.id, src.port.id, layer.id, i))
        if outputs is None:
            outputs = shapes.infer(layer, list(inputs))
        for j, (et, dims) in enumerate(outputs):
            layer.outputs.append(Port(len(inputs) + j, et, None if dims is None else list(dims)))
        return [Out(layer, j) for j in range(len(layer.outputs))]

    def op(self, type_: str, *inputs: Out, version: str = "opset1", name: Optional[str] = None, **attrs) -> Out:
        """`add` for single-output operations, attributes as keywords."""
        return self.add(type_, inputs, attrs, version=version, name=name)[0]

    def copy_layer(self, layer: IRLayer, inputs: Sequence[Out]) -> list[Out]:
        """A copy of `layer` (attributes, port ids and names, body and port maps shared) fed by `inputs`."""
        new = self._new(layer.type, layer.version, layer.name, None)
        new.attrs = dict(layer.attrs)
        new.body, new.port_map, new.back_edges, new.branches = (layer.body, layer.port_map, layer.back_edges,
                                                                 layer.branches)
        for port, src in zip(layer.inputs, inputs):
            new.inputs.append(dataclasses.replace(port))
            self.edges.append(Edge(src.layer.id, src.port.id, new.id, port.id))
        new.outputs = [dataclasses.replace(p, names=list(p.names)) for p in layer.outputs]
        return [Out(new, j) for j in range(len(new.outputs))]

    def result(self, src: Out, name: Optional[str] = None, output_name: Optional[str] = None) -> IRLayer:
        """A Result; `output_name` says which of the port's tensor names this output is (as ov.save_model
        writes it), needed when one port carries several names."""
        layer = self._new("Result", "opset1", name, None)
        if output_name is not None:
            layer.element_attrs["output_names"] = output_name
        layer.inputs.append(Port(0, src.element_type, None if src.dims is None else list(src.dims)))
        self.edges.append(Edge(src.layer.id, src.port.id, layer.id, 0))
        return layer

    def reinfer(self) -> None:
        """After a rewrite rewired edges: every input port takes its producer's element type and dims, and a
        layer whose inputs changed infers its outputs again (`shapes`), so both ends of every edge agree
        downstream. Layers without a shape rule (TensorIterator...) keep their outputs."""
        by_id, producers = self.by_id(), self.producers()
        for layer in self.topological():
            sources, changed = [], False
            for p in layer.inputs:
                src = by_id[producers[(layer.id, p.id)][0]]
                index = next(i for i, q in enumerate(src.outputs) if q.id == producers[(layer.id, p.id)][1])
                out = Out(src, index)
                sources.append(out)
                if (p.element_type, p.dims) != (out.element_type, out.dims):
                    p.element_type, p.dims = out.element_type, None if out.dims is None else list(out.dims)
                    changed = True
            if not changed or layer.type in ("Result", "TensorIterator", "Loop", "If"):
                continue
            try:
                inferred = shapes.infer(layer, sources)
            except BadInput:  # no rule for this type
                continue
            for port, (et, dims) in zip(layer.outputs, inferred):
                port.element_type, port.dims = et, None if dims is None else list(dims)

    # -- reading ------------------------------------------------------------------------------------------
    def by_id(self) -> dict[int, IRLayer]:
        return {layer.id: layer for layer in self.layers}

    def producers(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(to_layer, to_port) -> (from_layer, from_port)."""
        return {(e.to_layer, e.to_port): (e.from_layer, e.from_port) for e in self.edges}

    def parameters(self) -> list[IRLayer]:
        return [layer for layer in self.layers if layer.type == "Parameter"]

    def results(self) -> list[IRLayer]:
        return [layer for layer in self.layers if layer.type == "Result"]

    def topological(self) -> list[IRLayer]:
        """Layers in an order where every producer comes before its consumers; a cycle is BadInput."""
        by_id = self.by_id()
        deps: dict[int, set[int]] = {lid: set() for lid in by_id}
        for e in self.edges:
            if e.to_layer not in by_id or e.from_layer not in by_id:
                raise BadInput(f"IR edge {e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port} names no layer")
            deps[e.to_layer].add(e.from_layer)
        order, state = [], {}
        for root in by_id:
            stack = [(root, iter(sorted(deps[root])))]
            if state.get(root) == 2:
                continue
            state[root] = 1
            while stack:
                lid, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    state[lid] = 2
                    order.append(by_id[lid])
                elif state.get(nxt) == 1:
                    raise BadInput(f"IR graph has a cycle through layer {nxt}")
                elif state.get(nxt) is None:
                    state[nxt] = 1
                    stack.append((nxt, iter(sorted(deps[nxt]))))
        return order

    def output_names(self) -> list[str]:
        """The name of each Result's output, as OpenVINO names it (and ONNX gets it back). IR 11: the Result's
        `output_names` (which of the port's tensor names it is), else the port's tensor names, else the Result's
        name. IR 10: the port's tensor names, else the producing layer's name with ".<output index>" when it has
        several outputs. Of several names, the Result's own (its name without OpenVINO's "/sink_port_N") comes
        first: OpenVINO lists a port's names sorted, so the first may be another tensor's ("A_copy,X")."""
        producers, by_id = self.producers(), self.by_id()
        names = []
        for res in self.results():
            src = producers.get((res.id, res.inputs[0].id if res.inputs else 0))
            layer = by_id.get(src[0]) if src else None
            port = find_port(layer.outputs, src[1]) if layer is not None else None
            chosen = split_names(res.element_attrs.get("output_names", ""))
            if self.ir_version != 10 and "output_names" in res.element_attrs:
                if not chosen:
                    raise BadInput(f"IR Result {res.name!r} has an empty output_names")
                names.append(_own(chosen, _SINK.sub("", res.name)))
            elif port is not None and port.names:
                names.append(_own(port.names, _SINK.sub("", res.name)))
            elif self.ir_version == 10 and layer is not None:
                index = next(i for i, q in enumerate(layer.outputs) if q.id == src[1])
                names.append(layer.name if len(layer.outputs) == 1 else f"{layer.name}.{index}")
            else:
                names.append(res.name)
        return names

    def all_layers(self):
        """Every layer, those of bodies (and If branches) included."""
        for layer in self.layers:
            yield layer
            for body in layer.bodies():
                yield from body.all_layers()

    def release(self) -> None:
        """Hand every memory-mapped piece of Const data back (its pages leave the resident set)."""
        for layer in self.all_layers():
            if isinstance(layer.value, Pieces):
                for part in layer.value.parts:
                    layer.value.release(part)


def parameter_name(layer: IRLayer) -> str:
    """The name a Parameter is fed by: the layer's own name when its port lists it among its tensor names (the name
    the source gave the input; the port also lists the names of the tensors it feeds unchanged, sorted: "A_copy,X"
    for an input X read by an Identity A_copy), else the port's first tensor name, else the layer's name."""
    port = layer.outputs[0] if layer.outputs else None
    return _own(port.names, layer.name) if port is not None and port.names else layer.name


_SINK = re.compile(r"/sink_port_\d+$")  # what OpenVINO appends to the name of the tensor a Result takes


def _own(names: list[str], own: str) -> str:
    return own if own in names else names[0]


def find_port(ports: list[Port], pid: int) -> Optional[Port]:
    for p in ports:
        if p.id == pid:
            return p
    return None


def _attr_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ", ".join(_attr_text(x) for x in v)
    if isinstance(v, (float, np.floating)):
        return "0" if v == 0 else repr(float(v))
    return str(v)


def escape_names(names: list[str]) -> str:
    # Tensor names are comma-separated in IR; a comma inside a name is written "\,".
    return ",".join(n.replace(",", "\\,") for n in names)


def split_names(text: str) -> list[str]:
    names, cur, i = [], "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] == ",":
            cur += ","
            i += 2
            continue
        if text[i] == ",":
            names.append(cur.strip())
            cur = ""
        else:
            cur += text[i]
        i += 1
    if cur.strip():
        names.append(cur.strip())
    return [n for n in names if n]


