"""Input sets: random ones drawn in each input's valid range (refused before allocating when too large), or given
arrays (an .npz or a dict) checked against the model."""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.errors import BadInput, UsageError, human_size
from rnnconv.verification.report import _shape_text
from rnnconv.verification.specs import InputSpec, _onnx_specs

# Sizes of dynamic dims by role: batch and sequence differ, so an axis mix-up shows. SMALL_DIM: for big layers,
# whose run time is their weights read once per step.
DEFAULT_DIM = {"batch": 3, "sequence": 8, "other": 2}
SMALL_DIM = {"batch": 2, "sequence": 8, "other": 2}
INPUT_LIMIT = 1 << 31  # bytes of random inputs per run; a larger request is refused before allocating
ROLE_ALIASES = {"batch": "batch", "n": "batch", "seq": "sequence", "sequence": "sequence", "t": "sequence"}


def random_inputs(model: ir.Model, seed: int = 0, dims: Optional[Mapping[str, int]] = None) -> dict[str, np.ndarray]:
    """Random feeds for every graph input that is not an initializer, drawn as every check draws them: batch and
    sequence axes traced from the recurrent nodes (different sizes, so a swapped axis shows), sequence_lens in
    1..T, token ids below the table size; a request too large for memory is refused with its estimate."""
    feeds, _ = draw_inputs(_onnx_specs(model), np.random.default_rng(seed), dict(dims or {}), {})
    return feeds

def expand_dims(dims: Mapping[str, int]) -> dict[str, int]:
    """dims as given, plus the roles their aliases name (seq=17 also sets "sequence")."""
    out = dict(dims)
    for k, v in dims.items():
        alias = ROLE_ALIASES.get(k.lower()) if ":" not in k else None
        if alias:
            out.setdefault(alias, v)
    return out


def check_dim_names(dims: Mapping[str, int], specs: Mapping[str, InputSpec]) -> None:
    """Every dim given must name something: a symbolic dim, batch/seq, or an INPUT:AXIS (a static axis only at its
    own size, checked when drawing)."""
    known = set(ROLE_ALIASES)
    for spec in specs.values():
        for axis, d in enumerate(spec.dims):
            if isinstance(d, str):
                known.add(d)
            known.add(f"{spec.name}:{axis}")
    unknown = sorted(k for k in dims if k not in known and k.lower() not in ROLE_ALIASES)
    if unknown:
        dynamic = sorted({d for s in specs.values() for d in s.dims if isinstance(d, str)}
                         | {f"{s.name}:{a}" for s in specs.values() for a, d in enumerate(s.dims)
                            if not isinstance(d, int)})
        raise UsageError(f"dims {', '.join(unknown)}: the model has no dim of that name (symbols and dynamic "
                         f"axes: {', '.join(dynamic) or 'none'}; or batch, seq)")


def _shape_of(spec: InputSpec, dims: Mapping[str, int], symbols: dict) -> tuple[int, ...]:
    shape = []
    for axis, d in enumerate(spec.dims):
        key = f"{spec.name}:{axis}"
        role = spec.roles.get(axis, "other")
        if isinstance(d, int):
            if key in dims and dims[key] != d:
                raise UsageError(f"dims {key}={dims[key]}: that axis is fixed at {d} in the model")
            shape.append(d)
        elif key in dims:
            shape.append(dims[key])
        elif isinstance(d, str):
            if d not in symbols:
                fixed = spec.sizes[axis][0] if axis in spec.sizes else None  # the size the model needs
                symbols[d] = dims.get(d, fixed if fixed is not None else dims.get(role, DEFAULT_DIM[role]))
            shape.append(symbols[d])
        elif axis in spec.sizes:
            shape.append(spec.sizes[axis][0])
        else:
            shape.append(dims.get(role, DEFAULT_DIM[role]))
    return tuple(shape)


def draw_inputs(specs: Mapping[str, InputSpec], rng: np.random.Generator, dims: Mapping[str, int],
                ranges: Mapping[str, tuple], given: Optional[Mapping[str, np.ndarray]] = None
                ) -> tuple[dict[str, np.ndarray], list[dict]]:
    """One input set: `given` arrays as they are, the rest random in valid ranges. Returns feeds and a
    description per input (how it was made) for the report."""
    dims = expand_dims(dims)
    given = dict(given or {})
    symbols: dict = {}
    for spec in specs.values():  # a symbol the model fixes somewhere is that size everywhere, unless given
        for axis, (size, _) in spec.sizes.items():
            d = spec.dims[axis]
            if isinstance(d, str) and d not in dims and f"{spec.name}:{axis}" not in dims:
                symbols.setdefault(d, size)
    shapes = {name: _shape_of(spec, dims, symbols) for name, spec in specs.items()}
    for name, arr in given.items():  # given arrays fix their symbols for the random ones
        for axis, d in enumerate(specs[name].dims):
            if isinstance(d, str) and axis < np.ndim(arr):
                symbols[d] = np.shape(arr)[axis]
    shapes = {name: _shape_of(spec, dims, symbols) for name, spec in specs.items()}
    for name, arr in given.items():
        shapes[name] = tuple(np.shape(arr))
    for name, arr in given.items():
        _check_given(specs[name], np.asarray(arr), shapes)
    drawn = {n: float(np.prod(shapes[n], dtype=np.float64)) * specs[n].dtype.itemsize for n in specs if n not in given}
    if sum(drawn.values()) > INPUT_LIMIT:
        big = max(drawn, key=drawn.get)
        raise BadInput(f"the random inputs would need {human_size(sum(drawn.values()))} ({big} "
                       f"{specs[big].dtype.name}{_shape_text(shapes[big])} alone {human_size(drawn[big])}); the limit "
                       f"is {human_size(INPUT_LIMIT)}", fixes=("dims",))
    feeds, described = {}, []
    for name, spec in specs.items():
        shape = shapes[name]
        info = {"name": name, "dtype": spec.dtype.name, "shape": list(shape)}
        fixed = {str(axis): f"{size}: {why}" for axis, (size, why) in spec.sizes.items() if shape[axis] == size}
        if fixed:
            info["sizes"] = fixed  # the axes drawn at a size the model fixes, and what fixes it
        if name in given:
            feeds[name] = given[name]
            info["from"] = "inputs file"
        elif spec.dtype.kind in "iu":
            if name in ranges:
                lo, hi, why = int(np.ceil(ranges[name][0])), int(np.floor(ranges[name][1])), "given range"
            elif spec.lengths_of is not None:
                src, axis = spec.lengths_of
                lo, hi, why = 1, int(shapes[src][axis]), spec.int_source
            elif spec.int_range is not None:
                (lo, hi), why = spec.int_range, spec.int_source
            else:
                lo, hi, why = 0, 1, "no valid range known: give one"
            if hi < lo:
                raise UsageError(f"range of {name}: no integer in [{ranges[name][0]}, {ranges[name][1]}]")
            feeds[name] = rng.integers(lo, hi + 1, size=shape).astype(spec.dtype)
            info.update({"range": [lo, hi], "from": why})
        elif spec.dtype.kind == "b":
            feeds[name] = rng.integers(0, 2, size=shape).astype(bool)
            info.update({"range": [0, 1], "from": "random booleans"})
        else:
            lo, hi = ranges.get(name, (-1.0, 1.0))
            feeds[name] = rng.uniform(lo, hi, size=shape).astype(spec.dtype)
            info.update({"range": [lo, hi], "from": "given range" if name in ranges else "uniform default"})
        described.append(info)
    return feeds, described


def _check_given(spec: InputSpec, arr: np.ndarray, shapes: Mapping[str, tuple]) -> None:
    """Given sequence lengths and token ids must be valid: a wrong value would make any comparison meaningless."""
    if not spec.role or arr.size == 0 or spec.dtype.kind not in "iu":
        return
    if spec.role == "sequence_lens":
        hi = shapes[spec.lengths_of[0]][spec.lengths_of[1]] if spec.lengths_of else spec.int_range[1]
        lo = 0
    else:
        hi = spec.int_range[1]
        lo = -(hi + 1)  # Gather takes negative indices from the end
    if arr.min() < lo or arr.max() > hi:
        shown = arr.reshape(-1)[:8].tolist()
        raise BadInput(f"input {spec.name!r}: {spec.role} must lie in [{lo}, {hi}], got {shown}"
                       + (" ..." if arr.size > 8 else ""))


def read_inputs(path, specs: Mapping[str, InputSpec]) -> list[dict[str, np.ndarray]]:
    """Input sets from an .npz: keys `NAME` (one set) or `runK/NAME` (several), as `verify` saves them."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except Exception as err:
        raise BadInput(f"{path}: not a readable .npz file ({type(err).__name__}: {err})") from err
    sets: dict[int, dict] = {}
    for key, arr in arrays.items():
        run, sep, name = key.partition("/")
        if sep and run.startswith("run") and run[3:].isdigit():
            sets.setdefault(int(run[3:]), {})[name] = arr
        else:
            sets.setdefault(0, {})[key] = arr
    return [check_inputs(sets[k], specs, str(path)) for k in sorted(sets)]


def check_inputs(arrays: Mapping[str, np.ndarray], specs: Mapping[str, InputSpec], where: str
                 ) -> dict[str, np.ndarray]:
    """Given input arrays: known names, the model's rank and static sizes, a compatible dtype (cast to it)."""
    feeds = {}
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if name not in specs:
            raise BadInput(f"{where}: {name!r} is not an input of the reference (inputs: {sorted(specs)})")
        spec = specs[name]
        if spec.dims and len(spec.dims) != arr.ndim:
            raise BadInput(f"{where}: {name!r} has rank {arr.ndim}, the model wants {len(spec.dims)}")
        for axis, d in enumerate(spec.dims):
            if isinstance(d, int) and arr.shape[axis] != d:
                raise BadInput(f"{where}: {name!r} has shape {list(arr.shape)}, axis {axis} must be {d}")
        if spec.dtype.name == "bfloat16" and arr.dtype == np.uint16:
            arr = arr.view(spec.dtype)  # bfloat16 stored as its bit pattern
        elif arr.dtype.kind not in "biuf" and arr.dtype != spec.dtype or (
                arr.dtype.kind == "f" and spec.dtype.kind in "iub"):
            raise BadInput(f"{where}: {name!r} holds {arr.dtype} values, the model wants {spec.dtype}")
        feeds[name] = arr.astype(spec.dtype, copy=False)
    return feeds
