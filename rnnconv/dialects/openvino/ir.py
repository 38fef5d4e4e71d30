"""An in-memory OpenVINO IR graph, its writer (IR version 11 .xml + .bin) and its reader (IR versions 10 and 11).

Format: OpenVINO "IR format" docs (docs.openvino.ai, Intermediate Representation) and what `ov.save_model` writes:
`<net version="11"><layers><layer id name type version><data .../><input><port id precision><dim/>...`,
`<edges><edge from-layer from-port to-layer to-port/>`; Const data lives in the .bin at (offset, size).
Port ids: inputs are numbered first, outputs continue after them. Dims are -1 when dynamic.

Writing needs only numpy and the standard library. The .bin goes into an open file constant by constant (big ones
at page-aligned offsets), a `Pieces` constant (reordered views of memory-mapped weights) piece by piece: no copy of
the model's weights is ever held whole.

Reading refuses any DOCTYPE (so no entity expansion and no external entities can happen), reads only regular files
and no more than their size, bounds the nesting of bodies, checks every edge against the ports it joins and every
.bin offset against the file, sizing shapes in Python ints.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
import xml.parsers.expat
from pathlib import Path
from typing import BinaryIO, Callable, Optional, Sequence
from xml.sax.saxutils import quoteattr

import numpy as np

from rnnconv.errors import BadInput, IOFailure

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
    # Attributes of the <layer> element itself beyond id/name/type/version (Result: output_names).
    element_attrs: dict[str, str] = dataclasses.field(default_factory=dict)


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

    def __init__(self, name: str = "rnnconv"):
        self.name = name
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

    def add(self, type_: str, inputs: Sequence[Out], attrs: Optional[dict] = None, *, version: str = "opset1",
            name: Optional[str] = None, outputs: Optional[list[tuple[str, Optional[list[int]]]]] = None) -> list[Out]:
        """Add an operation; output ports come from `outputs` or from shape inference."""
        from rnnconv.dialects.openvino import shapes

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

    def result(self, src: Out, name: Optional[str] = None, output_name: Optional[str] = None) -> IRLayer:
        """A Result; `output_name` says which of the port's tensor names this output is (as ov.save_model
        writes it), needed when one port carries several names."""
        layer = self._new("Result", "opset1", name, None)
        if output_name is not None:
            layer.element_attrs["output_names"] = output_name
        layer.inputs.append(Port(0, src.element_type, None if src.dims is None else list(src.dims)))
        self.edges.append(Edge(src.layer.id, src.port.id, layer.id, 0))
        return layer

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
        """The tensor names of each Result's input, first name of each (how ONNX outputs are named)."""
        producers, by_id = self.producers(), self.by_id()
        names = []
        for res in self.results():
            if "output_names" in res.element_attrs:
                names.append(result_output_name(res))
                continue
            src = producers.get((res.id, 0))
            port = _port(by_id[src[0]].outputs, src[1]) if src else None
            names.append(port.names[0] if port is not None and port.names else res.name)
        return names


def result_output_name(res: IRLayer) -> str:
    """The first of a Result's `output_names`; an empty list is BadInput."""
    names = _split_names(res.element_attrs.get("output_names", ""))
    if not names:
        raise BadInput(f"IR Result {res.name!r} has an empty output_names")
    return names[0]


def _port(ports: list[Port], pid: int) -> Optional[Port]:
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


def _escape_names(names: list[str]) -> str:
    # Tensor names are comma-separated in IR; a comma inside a name is written "\,".
    return ",".join(n.replace(",", "\\,") for n in names)


def _split_names(text: str) -> list[str]:
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


# -- writer ------------------------------------------------------------------------------------------------
VIEW_BYTES = 1 << 20  # source weights this big become Pieces (views), not copies, when converted
PAGE = 4096  # constants of a page or more start on a page boundary (the runtime maps the .bin)
SHARED_BYTES = 1 << 20  # identical constants up to this size share bytes, as ov.save_model does


# copy(view, fd, offset) -> bool: puts a view's bytes at `offset` of the open file `fd` without reading them (a
# memory-mapped view of a file: the kernel copies file to file), or returns False.
Copier = Callable[[np.ndarray, int, int], bool]


class _BinWriter:
    """Places Const data in an open .bin file: small identical constants once, big ones page-aligned and
    streamed chunk by chunk, or copied by `copy` where a piece is unchanged bytes of a file."""

    def __init__(self, f: BinaryIO, copy: Optional[Copier] = None):
        self.f, self.size, self.shared, self.copy = f, 0, {}, copy

    def place(self, value) -> tuple[int, int]:
        if not isinstance(value, Pieces):
            value = np.ascontiguousarray(value)
            if value.nbytes <= SHARED_BYTES:
                data = value.tobytes()
                if data not in self.shared:
                    self.shared[data] = self._append([[data]], len(data))
                return self.shared[data], len(data)
            value = Pieces([value], value.shape, value.dtype)
        return self._append([self._part(value, p) for p in value.parts], value.nbytes), value.nbytes

    def _part(self, value: Pieces, p: np.ndarray):
        """A lazy writer of one piece: its chunks, or nothing once `copy` has placed it."""
        if self.copy is not None and p.dtype == value.dtype:
            self.f.flush()
            if self.copy(p, self.f.fileno(), self.size):
                self.size += p.nbytes
                self.f.seek(self.size)
                return
        yield from value.part_chunks(p)

    def _append(self, parts, nbytes: int) -> int:
        if nbytes >= PAGE and self.size % PAGE:
            pad = PAGE - self.size % PAGE
            self.f.write(bytes(pad))
            self.size += pad
        offset = self.size
        for part in parts:
            for data in part:
                self.f.write(data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else data)
                self.size += data.nbytes if isinstance(data, np.ndarray) else len(data)
        if self.size != offset + nbytes:
            raise ValueError(f"wrote {self.size - offset} bytes of a {nbytes}-byte constant")
        return offset


def write_to(graph: IRGraph, bin_file: BinaryIO, copy: Optional[Copier] = None) -> bytes:
    """Write the Const data of `graph` into the open `bin_file`; returns the .xml bytes (IR version 11)."""
    writer = _BinWriter(bin_file, copy)
    lines = ['<?xml version="1.0"?>', f"<net name={quoteattr(graph.name)} version=\"11\">"]
    _write_body(graph, lines, writer.place, 1)
    lines.append("</net>")
    return ("\n".join(lines) + "\n").encode("utf-8")


def serialize(graph: IRGraph) -> tuple[bytes, bytes]:
    """(xml, bin) bytes of IR version 11 (small graphs; big ones go through `write_to` into a file)."""
    import io

    buf = io.BytesIO()
    xml_bytes = write_to(graph, buf)
    return xml_bytes, buf.getvalue()


def _write_body(graph: IRGraph, lines: list[str], place, depth: int) -> None:
    ind = "\t" * depth
    lines.append(f"{ind}<layers>")
    for layer in graph.layers:
        attrs = dict(layer.attrs)
        if layer.type == "Const":
            offset, size = place(layer.value)
            attrs["offset"] = str(offset)
            attrs["size"] = str(size)
        extra = "".join(f" {k}={quoteattr(v)}" for k, v in layer.element_attrs.items())
        lines.append(f"{ind}\t<layer id=\"{layer.id}\" name={quoteattr(layer.name)} type={quoteattr(layer.type)} "
                     f"version={quoteattr(layer.version)}{extra}>")
        if attrs or layer.type in ("Parameter", "Const"):
            text = " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items())
            lines.append(f"{ind}\t\t<data {text} />")
        if layer.port_map:
            lines.append(f"{ind}\t\t<port_map>")
            for kind, pm in layer.port_map:
                text = " ".join(f"{k}={quoteattr(v)}" for k, v in pm.items())
                lines.append(f"{ind}\t\t\t<{kind} {text} />")
            lines.append(f"{ind}\t\t</port_map>")
        if layer.back_edges:
            lines.append(f"{ind}\t\t<back_edges>")
            for be in layer.back_edges:
                text = " ".join(f"{k}={quoteattr(v)}" for k, v in be.items())
                lines.append(f"{ind}\t\t\t<edge {text} />")
            lines.append(f"{ind}\t\t</back_edges>")
        for tag, ports in (("input", layer.inputs), ("output", layer.outputs)):
            if not ports:
                continue
            lines.append(f"{ind}\t\t<{tag}>")
            for p in ports:
                precision = ELEMENT_TYPES[p.element_type][0]
                names = f" names={quoteattr(_escape_names(p.names))}" if p.names else ""
                head = f"{ind}\t\t\t<port id=\"{p.id}\" precision=\"{precision}\"{names}"
                if not p.dims:
                    lines.append(head + " />")
                    continue
                lines.append(head + ">")
                lines.extend(f"{ind}\t\t\t\t<dim>{d}</dim>" for d in p.dims)
                lines.append(f"{ind}\t\t\t</port>")
            lines.append(f"{ind}\t\t</{tag}>")
        if layer.body is not None:
            lines.append(f"{ind}\t\t<body>")
            _write_body(layer.body, lines, place, depth + 3)
            lines.append(f"{ind}\t\t</body>")
        lines.append(f"{ind}\t</layer>")
    lines.append(f"{ind}</layers>")
    lines.append(f"{ind}<edges>")
    for e in graph.edges:
        lines.append(f"{ind}\t<edge from-layer=\"{e.from_layer}\" from-port=\"{e.from_port}\" "
                     f"to-layer=\"{e.to_layer}\" to-port=\"{e.to_port}\" />")
    lines.append(f"{ind}</edges>")


def write(graph: IRGraph, xml_path, bin_path=None) -> tuple[Path, Path]:
    """Write `graph` as IR v11; the .bin goes beside the .xml unless given. Not atomic: see to_openvino."""
    xml_path = Path(xml_path)
    bin_path = Path(bin_path) if bin_path is not None else xml_path.with_suffix(".bin")
    with open(bin_path, "wb") as f:
        xml_bytes = write_to(graph, f)
    xml_path.write_bytes(xml_bytes)
    return xml_path, bin_path


# -- reader ------------------------------------------------------------------------------------------------
class _Element:
    __slots__ = ("tag", "attrib", "children", "text")

    def __init__(self, tag, attrib):
        self.tag, self.attrib, self.children, self.text = tag, attrib, [], ""

    def find(self, tag):
        return next((c for c in self.children if c.tag == tag), None)

    def findall(self, tag):
        return [c for c in self.children if c.tag == tag]


def parse_xml(data: bytes, where: str = "<xml>") -> _Element:
    """Parse with expat, refusing DOCTYPE and entity declarations (so neither entity expansion nor external
    entities can happen); no dependency beyond the standard library."""
    parser = xml.parsers.expat.ParserCreate()
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[_Element] = []
    root: list[_Element] = []

    def refuse(*_):
        raise BadInput(f"{where}: IR XML must not contain a DOCTYPE or entity declarations")

    def start(tag, attrib):
        el = _Element(tag, attrib)
        if stack:
            stack[-1].children.append(el)
        else:
            root.append(el)
        stack.append(el)

    def end(_tag):
        stack.pop()

    def chars(text):
        if stack:
            stack[-1].text += text

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as err:
        raise BadInput(f"{where}: not well-formed XML ({err})") from err
    if not root:
        raise BadInput(f"{where}: empty XML")
    return root[0]


def read(xml_path, bin_path=None) -> IRGraph:
    """Read IR version 10 or 11; Const data is copied out of the .bin after checking offsets. A missing .bin is
    an error only when a Const needs bytes from it."""
    xml_path = Path(xml_path)
    bin_path = Path(bin_path) if bin_path is not None else xml_path.with_suffix(".bin")
    data = _read_regular_file(xml_path)
    weights = _read_regular_file(bin_path, missing_ok=True)
    return parse(data, weights, where=str(xml_path), bin_where=str(bin_path))


def _read_regular_file(path: Path, missing_ok: bool = False) -> Optional[bytearray]:
    """The bytes of a regular file, at most as many as its size when opened (None when missing and allowed).

    Opened non-blocking and checked with fstat on the open descriptor: a FIFO would block the open or the read
    forever, and a device such as /dev/zero never ends."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as err:
        if missing_ok:
            return None
        raise IOFailure(f"{path}: cannot read ({err.strerror or err})") from err
    except OSError as err:
        raise IOFailure(f"{path}: cannot read ({err.strerror or err})") from err
    try:
        st = os.fstat(fd)
    except OSError as err:
        os.close(fd)
        raise IOFailure(f"{path}: cannot read ({err.strerror or err})") from err
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise BadInput(f"{path}: not a regular file")
    buf, got = bytearray(st.st_size), 0
    try:
        with open(fd, "rb", buffering=0) as f, memoryview(buf) as view:
            while got < len(buf):
                n = f.readinto(view[got:])
                if not n:
                    break  # shrank since fstat: the offset checks see the shorter length
                got += n
    except OSError as err:
        raise IOFailure(f"{path}: cannot read ({err.strerror or err})") from err
    del buf[got:]
    return buf


def parse(xml_bytes: bytes, bin_bytes: Optional[bytes] = b"", where: str = "<xml>",
          bin_where: Optional[str] = None) -> IRGraph:
    """`bin_bytes` None: the .bin (named `bin_where`) does not exist."""
    root = parse_xml(xml_bytes, where)
    if root.tag != "net":
        raise BadInput(f"{where}: root element is <{root.tag}>, expected <net>")
    version = root.attrib.get("version")
    if version not in ("10", "11"):
        raise BadInput(f"{where}: IR version {version!r} is not supported (10 or 11)")
    graph = _read_body(root, _Weights(bin_bytes, bin_where or "the .bin"), where, 0)
    graph.name = root.attrib.get("name", "model")
    return graph


def _int(text, where):
    try:
        return int(text)
    except (TypeError, ValueError):
        raise BadInput(f"{where}: {text!r} is not an integer") from None


def _read_ports(el: Optional[_Element], where) -> list[Port]:
    ports = []
    for p in (el.findall("port") if el is not None else []):
        precision = p.attrib.get("precision", "FP32").upper()
        et = PRECISION_TO_TYPE.get(precision, precision.lower())
        dims = [_int(d.text.strip(), where) for d in p.findall("dim")]
        ports.append(Port(_int(p.attrib.get("id"), where), et, dims, _split_names(p.attrib.get("names", ""))))
    return ports


@dataclasses.dataclass(frozen=True)
class _Weights:
    data: Optional[bytes]  # bytes-like; None: the .bin does not exist
    name: str


def _read_body(net: _Element, weights: _Weights, where: str, depth: int) -> IRGraph:
    graph = IRGraph()
    layers_el = net.find("layers")
    if layers_el is None:
        raise BadInput(f"{where}: no <layers>")
    for el in layers_el.findall("layer"):
        lid = _int(el.attrib.get("id"), where)
        data = el.find("data")
        attrs = dict(data.attrib) if data is not None else {}
        layer = IRLayer(lid, el.attrib.get("name", f"layer_{lid}"), el.attrib.get("type", ""),
                        el.attrib.get("version", "opset1"), attrs,
                        _read_ports(el.find("input"), where), _read_ports(el.find("output"), where))
        if layer.type == "Const":
            layer.value = _const_data(layer, weights, where)
            for k in ("offset", "size"):
                layer.attrs.pop(k, None)
        pm = el.find("port_map")
        if pm is not None:
            layer.port_map = [(c.tag, dict(c.attrib)) for c in pm.children]
        be = el.find("back_edges")
        if be is not None:
            layer.back_edges = [dict(c.attrib) for c in be.findall("edge")]
        body = el.find("body")
        if body is not None:
            if depth >= MAX_BODY_DEPTH:
                raise BadInput(f"{where}: <body> elements nest deeper than {MAX_BODY_DEPTH} levels")
            layer.body = _read_body(body, weights, where, depth + 1)
        layer.element_attrs = {k: v for k, v in el.attrib.items() if k not in ("id", "name", "type", "version")}
        if layer.type == "Result" and "output_names" in layer.element_attrs \
                and not _split_names(layer.element_attrs["output_names"]):
            raise BadInput(f"{where}: IR Result {layer.name!r} has an empty output_names")
        graph.layers.append(layer)
        graph._names.add(layer.name)
    edges_el = net.find("edges")
    for e in (edges_el.findall("edge") if edges_el is not None else []):
        graph.edges.append(Edge(*(_int(e.attrib.get(k), where) for k in ("from-layer", "from-port", "to-layer",
                                                                          "to-port"))))
    _check_edges(graph, where)
    return graph


def _check_edges(graph: IRGraph, where: str) -> None:
    """Every edge joins an output port and an input port that exist, so no consumer looks up a missing port."""
    by_id = graph.by_id()
    for e in graph.edges:
        src, dst = by_id.get(e.from_layer), by_id.get(e.to_layer)
        if src is None or dst is None:
            raise BadInput(f"{where}: IR edge {e.from_layer}:{e.from_port} -> {e.to_layer}:{e.to_port} names no "
                           "layer")
        if not src.outputs:
            raise BadInput(f"{where}: IR {src.type} {src.name!r} has no <output> port, but an edge starts there")
        if _port(src.outputs, e.from_port) is None:
            raise BadInput(f"{where}: IR edge from layer {src.name!r} names output port {e.from_port}, which it "
                           "does not have")
        if _port(dst.inputs, e.to_port) is None:
            raise BadInput(f"{where}: IR edge into layer {dst.name!r} names input port {e.to_port}, which it does "
                           "not have")


def _const_data(layer: IRLayer, weights: _Weights, where: str) -> np.ndarray:
    label = f"{where}: Const layer {layer.name!r}"
    et = layer.attrs.get("element_type")
    dtype = numpy_dtype(et)
    shape_text = layer.attrs.get("shape", "").strip()
    shape = tuple(_int(s.strip(), label) for s in shape_text.split(",") if s.strip()) if shape_text else ()
    if any(s < 0 for s in shape):
        raise BadInput(f"{label}: negative dimension in shape {shape_text!r}")
    offset, size = _int(layer.attrs.get("offset", "0"), label), _int(layer.attrs.get("size", "0"), label)
    if offset < 0:
        raise BadInput(f"{label}: negative offset {offset}")
    # Python ints: numpy's int64 product wraps past 2^63 elements and overflows on a dim >= 2^63.
    if math.prod(d for d in shape if d) * dtype.itemsize > MAX_TENSOR_BYTES:
        raise BadInput(f"{label}: shape {list(shape)} of {et} is too large to hold")
    need = math.prod(shape) * dtype.itemsize
    if size != need:
        raise BadInput(f"{label}: size {size} does not match shape {list(shape)} of {et} ({need} bytes)")
    if size == 0:
        return np.zeros(shape, dtype=dtype)
    if weights.data is None:
        raise BadInput(f"{label}: needs bytes {offset}..{offset + size} of {weights.name}, which is missing")
    if offset + size > len(weights.data):
        raise BadInput(f"{label}: bytes {offset}..{offset + size} lie outside the .bin ({len(weights.data)} bytes)")
    return np.frombuffer(weights.data, dtype=dtype, count=need // dtype.itemsize, offset=offset).reshape(shape).copy()


def bin_path_for(xml_path) -> Path:
    return Path(os.fspath(xml_path)).with_suffix(".bin")
