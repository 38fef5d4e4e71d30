"""How inputs are made and outputs compared (`CheckOptions`): the same for every converting command and `verify`,
checked when built, whether the CLI or a Python call builds them. The check options' names are CheckOptions'
fields, written here once: the API takes them as keywords (`check_keywords`) and the CLI's flags are tested
against them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import os
from typing import Mapping, Optional, Union

import numpy as np

from rnnconv.errors import UsageError
from rnnconv.verification.tolerance import Tolerance, Tolerances

FACT = {"fact": True}  # a field the conversion sets (Tolerances), not the user


@dataclasses.dataclass(frozen=True)
class CheckOptions:
    """How inputs are made and outputs compared; the same for every command (and `rnnconv verify`).

    seed: of the random inputs (an int >= 0); runs: how many input sets (>= 1; None: 1, or as many as `inputs`
    holds); dims: symbol, "batch" / "seq" or "INPUT:AXIS" -> size (> 0); ranges: input -> (lo, hi), lo <= hi;
    inputs: an .npz path or a dict of arrays (inputs it lacks are drawn); atol, rtol: a tolerance >= 0 for every
    output, or a dict of output name (or "*") -> tolerance (rnnconv.verification.tolerance). fp16_weights and
    dequantized are facts of the conversion (Tolerances), set by the command, not given."""

    seed: int = 0
    runs: Optional[int] = None
    dims: Optional[Mapping[str, int]] = None
    ranges: Optional[Mapping[str, tuple]] = None
    inputs: Union[None, str, os.PathLike, Mapping[str, np.ndarray]] = None
    atol: Tolerance = None
    rtol: Tolerance = None
    fp16_weights: bool = dataclasses.field(default=False, metadata=FACT)
    dequantized: bool = dataclasses.field(default=False, metadata=FACT)

    def __post_init__(self):
        put = functools.partial(object.__setattr__, self)
        put("seed", _integer("seed", self.seed, 0))
        put("runs", None if self.runs is None else _integer("runs", self.runs, 1))
        put("dims", {_name("dims", k): _integer(f"dims[{k!r}]", v, 1) for k, v in _mapping("dims", self.dims)})
        put("ranges", {_name("ranges", k): _range(k, v) for k, v in _mapping("ranges", self.ranges)})
        if not (self.inputs is None or isinstance(self.inputs, (str, os.PathLike, Mapping))):
            raise UsageError(f"inputs={_short(self.inputs)}: expected an .npz path or a dict of arrays")
        put("atol", _tolerance("atol", self.atol))
        put("rtol", _tolerance("rtol", self.rtol))
        for name in ("fp16_weights", "dequantized"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"{name}={_short(getattr(self, name))}: expected True or False")

    @property
    def tolerances(self) -> Tolerances:
        return Tolerances(self.atol, self.rtol, self.fp16_weights, self.dequantized)

    def holding(self, *, fp16_weights: Optional[bool] = None, dequantized: Optional[bool] = None
                ) -> "CheckOptions":
        """These options under the conversion's own tolerance facts (None: as they are); a fact holds once set."""
        return dataclasses.replace(self, fp16_weights=self.fp16_weights or bool(fp16_weights),
                                   dequantized=self.dequantized or bool(dequantized))


# The check options a user gives (API keywords, CLI flags), in CheckOptions' order; the facts are the command's.
CHECK_OPTIONS = tuple(f.name for f in dataclasses.fields(CheckOptions) if not f.metadata.get("fact"))


def given(options: Optional[CheckOptions], named: Mapping[str, object]) -> CheckOptions:
    """An API call's options: `options` (as the CLI builds them) or the check options by name, not both."""
    if options is not None and named:
        raise UsageError(f"give options or {', '.join(named)}, not both")
    if options is not None and not isinstance(options, CheckOptions):
        raise UsageError(f"options={_short(options)}: expected a CheckOptions")
    return options if options is not None else CheckOptions(**named)


def check_keywords(api):
    """`api(..., options=None)` that also takes each check option by name (CHECK_OPTIONS), as the CLI takes its
    flags: they are built into one CheckOptions (checked) at the call, or refused beside `options`. The API's
    switches (parameters annotated bool, or Optional[bool]) take True or False only, as the CLI's flags do."""
    signature = inspect.signature(api)
    own = [p for p in signature.parameters.values() if p.name != "options"]
    named = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
             for f in dataclasses.fields(CheckOptions) if f.name in CHECK_OPTIONS]
    switches = {p.name: p.annotation == "Optional[bool]" for p in own if p.annotation in ("bool", "Optional[bool]")}

    @functools.wraps(api)
    def call(*args, **arguments):
        options = given(arguments.pop("options", None), {k: arguments.pop(k) for k in CHECK_OPTIONS
                                                          if k in arguments})
        for name, value in arguments.items():
            if name in switches and not (isinstance(value, bool) or value is None and switches[name]):
                raise UsageError(f"{name}={_short(value)}: expected True or False")
        return api(*args, options=options, **arguments)

    call.__signature__ = signature.replace(parameters=[*own, *named, signature.parameters["options"]])
    return call


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _integer(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UsageError(f"{name}={_short(value)}: expected an integer")
    if value < least:
        raise UsageError(f"{name}={value}: must be at least {least}")
    return int(value)


def _mapping(name: str, value):
    if value is None:
        return []
    if not isinstance(value, Mapping):
        raise UsageError(f"{name}={_short(value)}: expected a dict")
    return list(value.items())


def _name(what: str, key) -> str:
    if not isinstance(key, str) or not key:
        raise UsageError(f"{what}: {_short(key)} is not a name")
    return key


def _number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise UsageError(f"{name}={_short(value)}: expected a finite number")
    return float(value)


def _range(name: str, value) -> tuple[float, float]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise UsageError(f"ranges[{name!r}]={_short(value)}: expected (lo, hi)")
    lo, hi = (_number(f"ranges[{name!r}]", v) for v in value)
    if hi < lo:
        raise UsageError(f"ranges[{name!r}]=({value[0]}, {value[1]}): lo is above hi")
    return lo, hi


def _tolerance(name: str, value) -> Tolerance:
    def one(label: str, x) -> float:
        x = _number(label, x)
        if x < 0:
            raise UsageError(f"{label}={x:g}: a tolerance must be a non-negative number")
        return x

    if value is None:
        return None
    if isinstance(value, Mapping):
        return {_name(name, k): one(f"{name}[{k!r}]", v) for k, v in value.items()}
    return one(name, value)
