"""How far the drawn inputs exercise the recurrence: the time steps and the batch each recurrent node runs at, and
the input sizes that give every node at least MIN_STEPS steps and a batch of MIN_BATCH where the model allows it.

A check that never runs the recurrence proves nothing about it: an OCR model whose convolutional front end divides
an image's width by 8 takes one LSTM step on an image 5 columns wide. The steps and batch at a node are derived from
the input shapes, never guessed: onnx's shape inference at those shapes, with the shape computations that feed a
Reshape (Shape -> Gather -> Concat) folded to constants (`ShapeFold`) and inferred again. An input dim drives a node
when a larger size gives it more steps (or a larger batch); the smallest size that reaches the minimum is found
from the model's own arithmetic, a few inferences, and tried first, the sizes drawn before it next (a model may not
run at the larger size). OpenVINO IR is read through its ONNX counterpart in the check (the source of to-openvino,
the translation of from-openvino); an IR alone by its declared dims.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from typing import Callable, Iterator, Mapping, Optional, Sequence

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.onnx_recurrent import constant_array
from rnnconv.passes.settle_ifs import ShapeFold, ifs, settle_by_shapes
from rnnconv.verification.inputs import ROLE_ALIASES
from rnnconv.verification.model import Model
from rnnconv.verification.specs import SEQUENCE_OPS, InputSpec

MIN_STEPS, MIN_BATCH = 8, 2
LARGEST = 4096  # a dim is not grown past this
_RECURRENT = {"GRU", "LSTM", "RNN", "DynamicQuantizeLSTM"}
# Inputs that are shapes: folded to constants where onnx's inference leaves the output's dims unknown.
_SHAPE_INPUTS = {"Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
                 "Slice": (1, 2, 3, 4), "Squeeze": (1,), "Unsqueeze": (1,), "Resize": (2, 3), "Pad": (1,)}
_ROUNDS = 8  # inference again after each fold: a shape computed from a folded shape needs the next


@dataclasses.dataclass
class Exercised:
    """One recurrent node at the drawn sizes: its time steps and batch (None where they are not known), and why
    they are below MIN_STEPS / MIN_BATCH when they are."""

    node: str
    op_type: str
    steps: Optional[int]
    batch: Optional[int]
    why: str = ""

    def as_dict(self) -> dict:
        d = {"node": self.node, "op_type": self.op_type, "steps": self.steps, "batch": self.batch}
        if self.why:
            d["why"] = self.why
        return d

    def text(self) -> str:
        steps = "steps not known" if self.steps is None else f"{self.steps} step{'s' if self.steps != 1 else ''}"
        batch = "batch not known" if self.batch is None else f"batch {self.batch}"
        return f"{self.node} {self.op_type} {steps}, {batch}" + (f" ({self.why})" if self.why else "")


def short(e: Exercised) -> bool:
    return (e.steps is not None and e.steps < MIN_STEPS) or (e.batch is not None and e.batch < MIN_BATCH)


# -- the steps and batch at each node -------------------------------------------------------------------------------

class Shapes:
    """The recurrent nodes of one model and their (steps, batch) at given input shapes, inferred once per shapes."""

    def __init__(self, model: Model):
        self.model = model
        self.memo: dict[tuple, list[Exercised]] = {}
        if model.format == "onnx":
            self.nodes = [(scope + onnx_recurrent.node_label(node), node)
                          for node, scope, _ in onnx_recurrent.walk(model.onnx)
                          if node.op_type in _RECURRENT and node.domain in ("", "ai.onnx", "com.microsoft")]
        else:
            self.nodes = [(layer.name, layer) for layer in model.graph.all_layers() if layer.type in SEQUENCE_OPS]

    def at(self, shapes: Mapping[str, Sequence[int]]) -> list[Exercised]:
        key = tuple(sorted((k, tuple(int(n) for n in v)) for k, v in shapes.items()))
        if key not in self.memo:
            self.memo[key] = self._onnx(shapes) if self.model.format == "onnx" else self._ir()
        return [dataclasses.replace(e) for e in self.memo[key]]

    def _onnx(self, shapes: Mapping[str, Sequence[int]]) -> list[Exercised]:
        if not self.nodes:
            return []
        model = self.model.onnx
        inputs = {v.name: tuple(shapes[v.name]) for v in model.graph.inputs if v.name in shapes}
        dims = _x_dims(model, inputs)
        if any(d is None for d in dims.values()) and ifs(model):
            # Ifs on shapes (torch's `x.squeeze(-1)`, LSTMCell's `if x.dim() == 2`): settled at these sizes
            settled = model.clone()
            for v in settled.graph.inputs:
                if v.name in inputs:
                    v.shape = ir.Shape(inputs[v.name])
            settle_by_shapes(settled)
            dims = {name: d if d is not None else _x_dims(settled, inputs).get(name) for name, d in dims.items()}
        out = []
        for name, node in self.nodes:
            dims_x = dims.get(name)
            layout = node.attributes["layout"].value if "layout" in node.attributes else 0
            t_axis, n_axis = (1, 0) if layout else (0, 1)
            out.append(Exercised(name, node.op_type, None if dims_x is None else dims_x[t_axis],
                                 None if dims_x is None else dims_x[n_axis]))
        return out

    def _ir(self) -> list[Exercised]:
        """An IR alone: the dims its X ports declare ([batch, T, input_size]); dynamic ones are not known."""
        out = []
        for name, layer in self.nodes:
            dims = layer.inputs[0].dims if layer.inputs else None
            known = [None if dims is None or len(dims) != 3 or dims[a] < 0 else int(dims[a]) for a in (1, 0)]
            out.append(Exercised(name, layer.type, *known))
        return out


def _x_dims(model: ir.Model, inputs: Mapping[str, tuple]) -> dict[str, Optional[tuple]]:
    """node path -> the dims of its X at these input shapes (None where they stay unknown)."""
    nodes = [(scope + onnx_recurrent.node_label(node), node) for node, scope, _ in onnx_recurrent.walk(model)
             if node.op_type in _RECURRENT and node.domain in ("", "ai.onnx", "com.microsoft")]
    known: dict[str, np.ndarray] = {}
    for _ in range(_ROUNDS):
        found, _ = schemas.infer_shapes(model, inputs=inputs, known=known)
        if all(_dims(found, node) is not None for _, node in nodes):
            break
        more = _foldable(model, found, known)
        if not more:
            break
        known.update(more)
    return {name: _dims(found, node) for name, node in nodes}


def _dims(found: dict, node: ir.Node) -> Optional[tuple]:
    x = node.inputs[0] if node.inputs else None
    dims = found.get(x.name) if x is not None else None
    if x is not None and x.const_value is not None:
        dims = tuple(x.const_value.shape)
    return dims if dims is not None and len(dims) == 3 and None not in dims else None


def _foldable(model: ir.Model, found: dict, known: dict) -> dict[str, np.ndarray]:
    """Shape inputs that onnx's inference leaves uncomputed (If / Loop bodies included), computed from the
    inferred shapes."""
    fold = ShapeFold(found)
    more = {}
    for node, _, _ in onnx_recurrent.walk(model):
        if node.op_type not in _SHAPE_INPUTS or node.domain not in ("", "ai.onnx") or not node.outputs:
            continue
        out = found.get(node.outputs[0].name)
        if out is not None and None not in out:
            continue
        for i in _SHAPE_INPUTS[node.op_type]:
            v = node.inputs[i] if i < len(node.inputs) else None
            producer = v.producer() if v is not None else None
            if (producer is None or len(producer.outputs) != 1 or v.name in known or v.name in more
                    or constant_array(v) is not None):
                continue
            array = fold.known(v)
            if array is not None and array.dtype.kind in "iu" and array.size <= 64:
                more[v.name] = array
    return more


# -- drawing sizes that exercise every node -------------------------------------------------------------------------

def shapes_of(sets: list) -> dict[str, list[int]]:
    return {i["name"]: list(i["shape"]) for i in sets[0][1]} if sets else {}


def counterpart(model: Model, partner: Optional[Model]) -> Model:
    """The model to read the nodes' steps from: ONNX where either side is."""
    if model.format != "onnx" and partner is not None and partner.format == "onnx":
        return partner
    return model


_SHAPES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # one Shapes per model: each inference once


def _shapes_of_model(model: Model, partner: Optional[Model]) -> Shapes:
    chosen = counterpart(model, partner)
    key = chosen.onnx if chosen.format == "onnx" else chosen.graph
    if key not in _SHAPES:
        _SHAPES[key] = Shapes(chosen)
    return _SHAPES[key]


@dataclasses.dataclass
class _Key:
    """A dynamic input dim that can be drawn at another size: a symbol (every axis carrying it) or one axis."""

    dims_key: str  # the key in CheckOptions.dims: the symbol, or INPUT:AXIS
    axes: list  # [(input, axis)]
    given: bool  # the user gave its size (--dim, an alias of its role, or --inputs)


def _keys(specs: Mapping[str, InputSpec], dims: Mapping[str, int]) -> list[_Key]:
    roles = {ROLE_ALIASES[k.lower()] for k in dims if k.lower() in ROLE_ALIASES}
    fixed = {spec.dims[a] for spec in specs.values() for a in spec.sizes if isinstance(spec.dims[a], str)}
    by_key: dict[str, _Key] = {}
    for spec in specs.values():
        for axis, d in enumerate(spec.dims):
            if isinstance(d, int) or axis in spec.sizes or d in fixed:
                continue
            key = d if isinstance(d, str) else f"{spec.name}:{axis}"
            given = key in dims or f"{spec.name}:{axis}" in dims or spec.roles.get(axis) in roles
            entry = by_key.setdefault(key, _Key(key, [], False))
            entry.axes.append((spec.name, axis))
            entry.given = entry.given or given
    return list(by_key.values())


def _with(shapes: Mapping[str, list], key: _Key, size: int) -> dict[str, list]:
    out = {k: list(v) for k, v in shapes.items()}
    for name, axis in key.axes:
        if name in out and axis < len(out[name]):
            out[name][axis] = size
    return out


def _value(shapes_at: Shapes, shapes: Mapping, node: str, what: str) -> Optional[int]:
    for e in shapes_at.at(shapes):
        if e.node == node:
            return getattr(e, what)
    return None


def _size_of(key: _Key, shapes: Mapping[str, list]) -> Optional[int]:
    name, axis = key.axes[0]
    return shapes[name][axis] if name in shapes and axis < len(shapes[name]) else None


def _grow(shapes_at: Shapes, shapes: dict, key: _Key, node: str, what: str, want: int) -> Optional[int]:
    """The smallest size of `key` at which `node` reaches `want` steps (or batch), found from two sizes and the
    slope between them (the model's arithmetic: a front end that divides by 8 gives 1/8), checked by inference;
    None when a larger size does not give more."""
    v0 = _size_of(key, shapes)
    t0 = _value(shapes_at, shapes, node, what)
    if v0 is None or t0 is None:
        return None
    v1 = min(max(2 * v0, v0 + want), LARGEST)
    t1 = _value(shapes_at, _with(shapes, key, v1), node, what)
    if t1 is None or t1 <= t0:
        return None
    lo = v0  # the largest size known to fall short
    for _ in range(8):
        if t1 >= want:
            if v1 - lo <= 1:
                return v1
            mid = (lo + v1) // 2  # the smallest size that reaches it, within the bracket
            tm = _value(shapes_at, _with(shapes, key, mid), node, what)
            if tm is not None and tm >= want:
                v1, t1 = mid, tm
            else:
                lo = mid
            continue
        slope = (t1 - t0) / (v1 - v0)
        guess = min(LARGEST, v1 + max(1, math.ceil((want - t1) / slope)))
        if guess <= v1:
            return None
        t_guess = _value(shapes_at, _with(shapes, key, guess), node, what)
        if t_guess is None or t_guess <= t1:
            return None
        lo, v0, t0, v1, t1 = v1, v1, t1, guess, t_guess
    return v1 if t1 >= want else None


def grown_dims(model: Model, partner: Optional[Model], specs: Mapping[str, InputSpec], dims: Mapping[str, int],
               shapes: Mapping[str, list]) -> dict[str, int]:
    """Sizes (CheckOptions.dims keys) to draw instead of `shapes` so that every recurrent node takes MIN_STEPS
    steps and a batch of MIN_BATCH where a dynamic dim the user did not give drives it; {} when nothing grows."""
    shapes_at = _shapes_of_model(model, partner)
    current = dict(shapes)
    if not any(short(e) for e in shapes_at.at(current)):
        return {}
    keys = [k for k in _keys(specs, dims) if not k.given]
    extra: dict[str, int] = {}
    for what, want in (("steps", MIN_STEPS), ("batch", MIN_BATCH)):
        for e in shapes_at.at(current):
            have = getattr(e, what)
            if have is None or have >= want:
                continue
            for key in keys:
                size = _grow(shapes_at, current, key, e.node, what, want)
                if size is not None:
                    extra[key.dims_key] = size
                    current = _with(current, key, size)
                    break
    return extra


def candidates(model: Model, partner: Optional[Model], specs: Mapping[str, InputSpec], options,
               draw: Callable[[object], list]) -> Iterator[list]:
    """Input sets to try in turn: those whose sizes exercise every recurrent node (grown_dims), then the sets
    `draw(options)` makes (a model may not run at the larger sizes). Inputs the user gave are never redrawn."""
    sets = draw(options)
    if options.inputs is None and sets:
        try:
            extra = grown_dims(model, partner, specs, options.dims, shapes_of(sets))
        except Exception:  # shape inference is a help for drawing, never a requirement
            extra = {}
        if extra:
            yield draw(dataclasses.replace(options, dims={**extra, **options.dims}))
    yield sets


def exercised(model: Model, partner: Optional[Model], specs: Mapping[str, InputSpec], options,
              sets: list) -> list[Exercised]:
    """Each recurrent node's steps and batch at the sizes of `sets`, with why where they are below the minimum:
    the model fixes them (no dynamic input dim changes them), or the sizes were given."""
    shapes_at = _shapes_of_model(model, partner)
    shapes = shapes_of(sets)
    try:
        found = shapes_at.at(shapes)
    except Exception:
        return []
    keys = _keys(specs, options.dims)
    try:
        _say_why(found, shapes_at, shapes, keys, options)
    except Exception:  # shape inference is a help for the report, never a requirement
        pass
    return found


def _say_why(found: list[Exercised], shapes_at: Shapes, shapes: Mapping, keys: list[_Key], options) -> None:
    for e in found:
        parts = []
        for what, want, word in (("steps", MIN_STEPS, "time steps"), ("batch", MIN_BATCH, "batch")):
            have = getattr(e, what)
            if have is None or have >= want:
                continue
            drivers = [k for k in keys if _drives(shapes_at, shapes, k, e.node, what)]
            if options.inputs is not None and drivers:
                parts.append(f"{word} {have}: the inputs given")
            elif not drivers:
                parts.append(f"the model fixes {word} at {have}")
            elif all(k.given for k in drivers):
                parts.append(f"{word} {have}: the sizes given")
            else:
                parts.append(f"{word} {have}: the model did not run at larger sizes")
        e.why = "; ".join(parts)


def _drives(shapes_at: Shapes, shapes: Mapping, key: _Key, node: str, what: str) -> bool:
    v0 = _size_of(key, shapes)
    if v0 is None:
        return False
    t0 = _value(shapes_at, shapes, node, what)
    t1 = _value(shapes_at, _with(shapes, key, min(max(2 * v0, v0 + MIN_STEPS), LARGEST)), node, what)
    return t0 is not None and t1 is not None and t1 > t0
