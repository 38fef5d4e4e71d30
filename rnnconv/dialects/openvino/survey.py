"""What an OpenVINO IR model holds, for `inspect` and `check`: its layers by type, its recurrent layers (the
opset5 Sequence ops, the Cell ops, and the TensorIterator / Loop layers that carry a recurrence) with their
attributes, and what from-openvino makes of each (`to_onnx.Converter`, run here without writing anything).

A TensorIterator whose body is one cell step is one recurrent layer (from-openvino makes it one ONNX node; its
cell is not listed again); any other TensorIterator or Loop is listed as a recurrence whose body from-openvino
keeps as an ONNX Loop, and the cells in it are listed too.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path
from typing import Optional

import onnx_ir as ir

from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino import shapes
from rnnconv.dialects.openvino.gates import CELLS, DEFAULT_ACTIVATIONS, SEQUENCES
from rnnconv.dialects.openvino.graph import IRGraph, IRLayer
from rnnconv.dialects.openvino.ir_facts import flag
from rnnconv.dialects.openvino.to_onnx import Converter
from rnnconv.dialects.openvino.validate import validate
from rnnconv.errors import BadInput, RnnconvError

LOOPS = ("TensorIterator", "Loop")


def w_port(ir_type: str) -> Optional[int]:
    """The input port of the weights W (its last dim is the input size): after X, the states (H, and C for LSTM)
    and, in the Sequence ops, seq_lengths."""
    kind = SEQUENCES.get(ir_type) or CELLS.get(ir_type)
    if kind is None:
        return None
    return 1 + (2 if kind == "LSTM" else 1) + (ir_type in SEQUENCES)


@dataclasses.dataclass
class RecurrentLayer:
    path: str  # its name, prefixed by the layers and bodies it lies in (as from-openvino names its ONNX node)
    type: str
    version: str
    kind: Optional[str]  # GRU / LSTM / RNN; None for a recurrence of other layers (a TensorIterator / Loop body)
    attributes: dict
    from_openvino: str = ""  # what from-openvino makes of it

    def as_dict(self) -> dict:
        return {"name": self.path, "type": self.type, "version": self.version, "kind": self.kind,
                **self.attributes, "from_openvino": self.from_openvino}


@dataclasses.dataclass
class Survey:
    ir_version: int
    layers: dict  # type -> count, bodies included
    recurrent: list[RecurrentLayer]
    onnx: Optional[ir.Model]  # from-openvino's translation (None: refused, see `refusal`)
    refusal: Optional[str]
    dynamic_rank: Optional[str]  # what makes OpenVINO's CPU plugin ask for static input shapes (shapes.dynamic_rank)
    converted: dict = dataclasses.field(default_factory=dict)  # layer path -> the ONNX RecurrentNode made of it


def is_ir(model) -> bool:
    """Whether `model` names an OpenVINO IR file (.xml)."""
    return isinstance(model, (str, os.PathLike)) and Path(model).suffix.lower() == ".xml"


def survey(xml, bin_path=None, *, opset: int) -> Survey:
    """Read the IR at `xml` (the .bin beside it, or `bin_path`) and survey it; from-openvino's translation is made
    at `opset`, layout 0 (its defaults)."""
    xml = Path(xml)
    if not xml.exists():
        raise BadInput(f"{xml}: no such file")
    graph = ov_reader.read(xml, bin_path if bin_path is not None else ov_reader.bin_path_for(xml), mapped=True)
    found = list(_recurrent(graph))
    model, refusal, rewrites, mapped = None, None, {}, set()
    try:
        validate(graph, str(xml))  # what from-openvino checks first
        converter = Converter(graph, opset, 0)
        model = converter.run()
        rewrites = {r["node"]: r["what"] for r in converter.rewrites}
        mapped = {r.path for r in converter.recurrent}
    except RnnconvError as err:
        refusal = err.message
    except (KeyError, IndexError, ValueError, TypeError, AttributeError, OverflowError) as err:
        refusal = f"malformed IR ({type(err).__name__}: {err})"
    kept = []
    for rec in found:
        if rec.type in CELLS and any(rec.path.startswith(p.path + "/") and p.path in mapped for p in found
                                     if p.type == "TensorIterator"):
            continue  # one cell step of a TensorIterator from-openvino makes one node: listed as the TensorIterator
        if refusal is not None:
            rec.from_openvino = "not converted: from-openvino refuses the model"
        elif rec.path in rewrites:
            rec.from_openvino = rewrites[rec.path]
        elif rec.type in LOOPS:
            rec.from_openvino = f"{rec.type} -> ONNX Loop (its body of {rec.attributes['body_layers']} layers kept)"
        else:
            rec.from_openvino = "not converted"
        kept.append(rec)
    layers = Counter(layer.type for layer in graph.all_layers())
    by_name = {rn.name: rn for rn in onnx_recurrent.find(model)} if model is not None else {}
    converted = {rec.path: by_name[rec.path] for rec in kept if rec.path in by_name}
    return Survey(graph.ir_version, dict(sorted(layers.items())), kept, model, refusal, shapes.dynamic_rank(graph),
                  converted)


def _recurrent(graph: IRGraph, path: str = ""):
    """A RecurrentLayer for every recurrent layer of `graph` and its bodies, outer ones first."""
    for layer in graph.layers:
        if layer.type in SEQUENCES or layer.type in CELLS:
            yield RecurrentLayer(path + layer.name, layer.type, layer.version,
                                 SEQUENCES.get(layer.type) or CELLS[layer.type], _attributes(layer))
        elif layer.type in LOOPS and layer.body is not None:
            cells = [inner for inner in layer.body.layers if inner.type in CELLS]
            # one cell in the body: the recurrence is that cell's (from-openvino may make it one node)
            kind, attributes = (CELLS[cells[0].type], _attributes(cells[0])) if len(cells) == 1 else (None, {})
            yield RecurrentLayer(path + layer.name, layer.type, layer.version, kind,
                                 {**attributes, "body_layers": len(layer.body.layers), "cells": [c.type for c in cells]})
        if layer.body is not None:
            yield from _recurrent(layer.body, f"{path}{layer.name}/body/")
        for branch, (body, _) in layer.branches.items():
            yield from _recurrent(body, f"{path}{layer.name}/{branch}/")


def _attributes(layer: IRLayer) -> dict:
    """A Sequence or Cell layer's attributes, read as OpenVINO reads them (defaults filled in)."""
    kind = SEQUENCES.get(layer.type) or CELLS[layer.type]
    attrs = layer.attrs
    names = [s.strip() for s in attrs.get("activations", "").split(",") if s.strip()] or \
        list(DEFAULT_ACTIVATIONS[kind])
    alpha = [float(x) for x in attrs.get("activations_alpha", "").split(",") if x.strip()]
    beta = [float(x) for x in attrs.get("activations_beta", "").split(",") if x.strip()]
    clip = float(attrs.get("clip", "0") or 0)
    port = w_port(layer.type)
    w = layer.inputs[port].dims if port is not None and port < len(layer.inputs) else None
    out = {"direction": attrs.get("direction", "forward"),
           "hidden_size": int(attrs["hidden_size"]) if attrs.get("hidden_size", "").isdigit() else None,
           "input_size": w[-1] if w and w[-1] != -1 else None,
           "activations": names[: len(DEFAULT_ACTIVATIONS[kind])], "activations_alpha": alpha,
           "activations_beta": beta, "clip": clip if clip > 0 else None,
           "dtype": layer.inputs[0].element_type if layer.inputs else None}
    if kind == "GRU":
        out["linear_before_reset"] = flag(attrs, "linear_before_reset")
    if kind == "LSTM" and "input_forget" in attrs:
        out["input_forget"] = flag(attrs, "input_forget")
    return out
