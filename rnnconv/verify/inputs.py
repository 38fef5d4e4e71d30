"""Input sets: random ones drawn in each input's valid range (refused before allocating when too large), or given
arrays (an .npz or a dict) checked against the model."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Optional

import numpy as np
import onnx_ir as ir

from rnnconv.errors import BadInput, UsageError
from rnnconv.verify.report import _shape_text
from rnnconv.verify.specs import InputSpec, _narrow, _onnx_specs


DEFAULT_DIM = {"batch": 3, "sequence": 5, "other": 2}
INPUT_LIMIT = 1 << 31  # bytes of random inputs per run; a larger request is refused before allocating
ROLE_ALIASES = {"batch": "batch", "n": "batch", "seq": "sequence", "sequence": "sequence", "t": "sequence"}


def random_inputs(model: ir.Model, seed: int = 0, dims: Optional[Mapping[str, int]] = None,
                  roles: Optional[Callable[[ir.Value], Mapping[int, str]]] = None,
                  lengths: Optional[Mapping[str, int]] = None) -> dict[str, np.ndarray]:
    """Random feeds for every graph input that is not an initializer, drawn as `rnnconv verify` draws them.

    Batch and sequence axes are traced from the recurrent nodes (different sizes, so a swapped axis shows),
    sequence_lens lie in 1..T, token ids below the table size, and a request too large for memory is refused
    with its estimate. `roles(value)` adds axis roles ("batch", "sequence") the tracing did not find;
    `lengths` maps further sequence_lens-like inputs to their T.
    """
    specs = _onnx_specs(model)
    for value in model.graph.inputs:
        spec = specs.get(value.name)
        if spec is None:
            continue
        for axis, role in (roles(value) if roles else {}).items():
            spec.roles.setdefault(axis, role)
        if lengths and value.name in lengths and spec.dtype.kind in "iu" and spec.int_range is None:
            _narrow(spec, (1, int(lengths[value.name])), "sequence_lens")
    feeds, _ = draw_inputs(specs, np.random.default_rng(seed), dict(dims or {}), {})
    return feeds


def parse_dims(items: Iterable[str]) -> dict[str, int]:
    """`name=N` (a symbolic dim, or batch / seq), or `INPUT:AXIS=N`."""
    out = {}
    for item in items:
        key, sep, value = str(item).rpartition("=")
        if not sep or not key:
            raise UsageError(f"--dim {item!r}: expected NAME=N or INPUT:AXIS=N")
        try:
            n = int(value)
        except ValueError:
            raise UsageError(f"--dim {item!r}: {value!r} is not an integer") from None
        if n <= 0:
            raise UsageError(f"--dim {item!r}: a size must be positive")
        out[key] = n
    return out


def parse_ranges(items: Iterable[str]) -> dict[str, tuple[float, float]]:
    """`name:lo,hi` (inclusive for integer inputs)."""
    out = {}
    for item in items:
        name, sep, bounds = str(item).rpartition(":")
        lo, comma, hi = bounds.partition(",")
        try:
            if not sep or not name or not comma:
                raise ValueError
            lo_v, hi_v = float(lo), float(hi)
        except ValueError:
            raise UsageError(f"--range {item!r}: expected NAME:LO,HI") from None
        if hi_v < lo_v:
            raise UsageError(f"--range {item!r}: LO is above HI")
        out[name] = (lo_v, hi_v)
    return out


def expand_dims(dims: Mapping[str, int]) -> dict[str, int]:
    """--dim names as given, plus the roles their aliases name (seq=17 also sets "sequence")."""
    out = dict(dims)
    for k, v in dims.items():
        alias = ROLE_ALIASES.get(k.lower()) if ":" not in k else None
        if alias:
            out.setdefault(alias, v)
    return out


def check_dim_names(dims: Mapping[str, int], specs: Mapping[str, InputSpec]) -> None:
    """Every --dim must name something: a symbolic dim, batch/seq, or a dynamic INPUT:AXIS."""
    known = set(ROLE_ALIASES)
    for spec in specs.values():
        for axis, d in enumerate(spec.dims):
            if isinstance(d, str):
                known.add(d)
            if not isinstance(d, int):
                known.add(f"{spec.name}:{axis}")
    unknown = sorted(k for k in dims if k not in known and k.lower() not in ROLE_ALIASES)
    if unknown:
        raise UsageError(f"--dim {', '.join(unknown)}: no dynamic dim of that name (symbols and dynamic axes: "
                         f"{', '.join(sorted(known - set(ROLE_ALIASES))) or 'none'}; or batch, seq)")


def _shape_of(spec: InputSpec, dims: Mapping[str, int], symbols: dict) -> tuple[int, ...]:
    shape = []
    for axis, d in enumerate(spec.dims):
        key = f"{spec.name}:{axis}"
        role = spec.roles.get(axis)
        if isinstance(d, int):
            if key in dims and dims[key] != d:
                raise UsageError(f"--dim {key}={dims[key]}: that axis is fixed at {d}")
            shape.append(d)
        elif key in dims:
            shape.append(dims[key])
        elif isinstance(d, str):
            if d not in symbols:
                symbols[d] = dims.get(d, dims.get(role, DEFAULT_DIM.get(role, DEFAULT_DIM["other"])))
            shape.append(symbols[d])
        else:
            shape.append(dims.get(role, DEFAULT_DIM.get(role, DEFAULT_DIM["other"])))
    return tuple(shape)


def draw_inputs(specs: Mapping[str, InputSpec], rng: np.random.Generator, dims: Mapping[str, int],
                ranges: Mapping[str, tuple], given: Optional[Mapping[str, np.ndarray]] = None
                ) -> tuple[dict[str, np.ndarray], list[dict]]:
    """One input set: `given` arrays as they are, the rest random in valid ranges. Returns feeds and a
    description per input (how it was made) for the report."""
    dims = expand_dims(dims)
    given = dict(given or {})
    symbols: dict = {}
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
        raise BadInput(f"the random inputs would need {_human(sum(drawn.values()))} ({big} "
                       f"{specs[big].dtype.name}{_shape_text(shapes[big])} alone {_human(drawn[big])}); the limit "
                       f"is {_human(INPUT_LIMIT)}: give smaller sizes with --dim")
    feeds, described = {}, []
    for name, spec in specs.items():
        shape = shapes[name]
        info = {"name": name, "dtype": spec.dtype.name, "shape": list(shape)}
        if name in given:
            feeds[name] = given[name]
            info["from"] = "inputs file"
        elif spec.dtype.kind in "iu":
            if name in ranges:
                lo, hi, why = int(np.ceil(ranges[name][0])), int(np.floor(ranges[name][1])), "--range"
            elif spec.lengths_of is not None:
                src, axis = spec.lengths_of
                lo, hi, why = 1, int(shapes[src][axis]), spec.int_source
            elif spec.int_range is not None:
                (lo, hi), why = spec.int_range, spec.int_source
            else:
                lo, hi, why = 0, 1, "no valid range known (use --range)"
            if hi < lo:
                raise UsageError(f"--range {name}: no integer in [{ranges[name][0]}, {ranges[name][1]}]")
            feeds[name] = rng.integers(lo, hi + 1, size=shape).astype(spec.dtype)
            info.update({"range": [lo, hi], "from": why})
        elif spec.dtype.kind == "b":
            feeds[name] = rng.integers(0, 2, size=shape).astype(bool)
            info.update({"range": [0, 1], "from": "random booleans"})
        else:
            lo, hi = ranges.get(name, (-1.0, 1.0))
            feeds[name] = rng.uniform(lo, hi, size=shape).astype(spec.dtype)
            info.update({"range": [lo, hi], "from": "--range" if name in ranges else "uniform default"})
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


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} TiB"


def read_inputs(path, specs: Mapping[str, InputSpec]) -> list[dict[str, np.ndarray]]:
    """Input sets from an .npz: keys `NAME` (one set) or `runK/NAME` (several), as --save-inputs writes them."""
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
