"""The OpenVINO IR writer: an IRGraph as IR version 11 (.xml + .bin), with only numpy and the standard library.

The .bin goes into an open file constant by constant (big ones at page-aligned offsets), a `Pieces` constant
(reordered views of memory-mapped weights) piece by piece: no copy of the model's weights is ever held whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Callable, Optional
from xml.sax.saxutils import quoteattr

import numpy as np

from rnnconv.dialects.openvino.graph import ELEMENT_TYPES, IRGraph, Pieces, escape_names

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
                names = f" names={quoteattr(escape_names(p.names))}" if p.names else ""
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
