"""The OpenVINO IR reader (IR versions 10 and 11): .xml + .bin into an IRGraph.

Reading refuses any DOCTYPE (so no entity expansion and no external entities can happen), reads only regular files
and no more than their size, bounds the nesting of bodies, checks every edge against the ports it joins and every
.bin offset against the file, sizing shapes in Python ints.
"""

from __future__ import annotations

import dataclasses
import math
import mmap
import os
import stat
import xml.parsers.expat
from pathlib import Path
from typing import Optional

import numpy as np

from rnnconv.dialects.openvino.graph import (
    MAX_BODY_DEPTH,
    MAX_TENSOR_BYTES,
    PRECISION_TO_TYPE,
    Edge,
    IRGraph,
    IRLayer,
    Port,
    canonical_type,
    find_port,
    numpy_dtype,
    split_names,
)
from rnnconv.errors import BadInput, IOFailure


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
        if data.strip() and not data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
            raise BadInput(f"{where}: not XML, so not OpenVINO IR (an ONNX model? `rnnconv to-openvino` converts "
                           f"ONNX to IR)") from err
        raise BadInput(f"{where}: not well-formed XML ({err})") from err
    if not root:
        raise BadInput(f"{where}: empty XML")
    return root[0]


def read(xml_path, bin_path=None, *, mapped: bool = False) -> IRGraph:
    """Read IR version 10 or 11; Const data is copied out of the .bin after checking offsets, or with `mapped`,
    left there as read-only views of the memory-mapped file (a big IR costs no copy of its weights). A missing
    .bin is an error only when a Const needs bytes from it."""
    xml_path = Path(xml_path)
    bin_path = Path(bin_path) if bin_path is not None else xml_path.with_suffix(".bin")
    data = _read_regular_file(xml_path)
    weights = _read_regular_file(bin_path, missing_ok=True, mapped=mapped)
    return parse(data, weights, where=str(xml_path), bin_where=str(bin_path))


def _read_regular_file(path: Path, missing_ok: bool = False, mapped: bool = False):
    """The bytes of a regular file, at most as many as its size when opened (None when missing and allowed);
    `mapped`: a read-only memory map of them.

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
    if mapped and st.st_size:
        try:
            return mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ)
        except OSError as err:
            raise IOFailure(f"{path}: cannot read ({err.strerror or err})") from err
        finally:
            os.close(fd)
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
    graph = _read_body(root, _Weights(bin_bytes, bin_where or "the .bin"), where, 0, int(version))
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
        ports.append(Port(_int(p.attrib.get("id"), where), et, dims, split_names(p.attrib.get("names", ""))))
    return ports


@dataclasses.dataclass(frozen=True)
class _Weights:
    data: Optional[bytes]  # bytes-like; None: the .bin does not exist
    name: str


def _read_body(net: _Element, weights: _Weights, where: str, depth: int, ir_version: int) -> IRGraph:
    graph = IRGraph(ir_version=ir_version)
    layers_el = net.find("layers")
    if layers_el is None:
        raise BadInput(f"{where}: no <layers>")
    for el in layers_el.findall("layer"):
        lid = _int(el.attrib.get("id"), where)
        data = el.find("data")
        attrs = dict(data.attrib) if data is not None else {}
        layer = IRLayer(lid, el.attrib.get("name", f"layer_{lid}"), canonical_type(el.attrib.get("type", "")),
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
        for tag in ("body", "then_body", "else_body"):  # If-8 has two, with then_/else_port_map
            body = el.find(tag)
            if body is None:
                continue
            if depth >= MAX_BODY_DEPTH:
                raise BadInput(f"{where}: <body> elements nest deeper than {MAX_BODY_DEPTH} levels")
            inner = _read_body(body, weights, where, depth + 1, ir_version)
            if tag == "body":
                layer.body = inner
            else:
                branch = tag[: -len("_body")]
                pm = el.find(f"{branch}_port_map")
                layer.branches[branch] = (inner, [(c.tag, dict(c.attrib)) for c in pm.children] if pm is not None
                                          else [])
        layer.element_attrs = {k: v for k, v in el.attrib.items() if k not in ("id", "name", "type", "version")}
        if layer.type == "Result" and "output_names" in layer.element_attrs \
                and not split_names(layer.element_attrs["output_names"]):
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
        if find_port(src.outputs, e.from_port) is None:
            raise BadInput(f"{where}: IR edge from layer {src.name!r} names output port {e.from_port}, which it "
                           "does not have")
        if find_port(dst.inputs, e.to_port) is None:
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
    if need == 0:  # ov.save_model writes an empty constant with size 1
        return np.zeros(shape, dtype=dtype)
    if size != need:
        raise BadInput(f"{label}: size {size} does not match shape {list(shape)} of {et} ({need} bytes)")
    if size == 0:
        return np.zeros(shape, dtype=dtype)
    if weights.data is None:
        raise BadInput(f"{label}: needs bytes {offset}..{offset + size} of {weights.name}, which is missing")
    if offset + size > len(weights.data):
        raise BadInput(f"{label}: bytes {offset}..{offset + size} lie outside the .bin ({len(weights.data)} bytes)")
    view = np.frombuffer(weights.data, dtype=dtype, count=need // dtype.itemsize, offset=offset).reshape(shape)
    return view if isinstance(weights.data, mmap.mmap) else view.copy()  # a copy frees the file's bytes


def bin_path_for(xml_path) -> Path:
    return Path(os.fspath(xml_path)).with_suffix(".bin")
