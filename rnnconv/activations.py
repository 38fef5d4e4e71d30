"""Activation functions of the ONNX recurrent ops (RNN, GRU, LSTM): names, alpha/beta, numpy forms.

Spec: the "Activation functions" table and the `activations`, `activation_alpha`, `activation_beta`
attributes of https://onnx.ai/onnx/operators/onnx__LSTM.html (the same text in GRU and RNN).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from rnnconv.errors import BadInput

# How alpha/beta are read, measured on onnxruntime 1.31 (RNN, GRU, LSTM kernels) and held to the spec:
# - the lists are streams handed out in activation order, a value going only to a function that takes
#   that parameter ("consumed in the order of activation functions"); functions past the end of a list
#   take their default. Values nobody consumes are refused unless a positional reading agrees.
# - defaults "are the same as of corresponding ONNX operators": LeakyRelu 0.01, HardSigmoid 0.2/0.5,
#   Elu 1.0, as onnxruntime. Affine and ScaledTanh have no ONNX operator any more and ThresholdedRelu
#   had no default when these ops were written (ThresholdedRelu-10 later chose 1.0): for these three
#   onnxruntime's 0.0, and writers always spell their values out.
# PARAMS: name -> (alpha default, beta default), None where the function takes no such parameter.
PARAMS: dict[str, tuple[Optional[float], Optional[float]]] = {
    "Relu": (None, None),
    "Tanh": (None, None),
    "Sigmoid": (None, None),
    "Affine": (0.0, 0.0),
    "LeakyRelu": (0.01, None),
    "ThresholdedRelu": (0.0, None),
    "ScaledTanh": (0.0, 0.0),
    "HardSigmoid": (0.2, 0.5),
    "Elu": (1.0, None),
    "Softsign": (None, None),
    "Softplus": (None, None),
}
UNSETTLED_DEFAULTS = frozenset({"Affine", "ThresholdedRelu", "ScaledTanh"})

DEFAULTS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}

_BY_LOWER = {name.lower(): name for name in PARAMS}


def _f32(value) -> float:
    # ONNX stores alpha/beta as float32: keep exactly that value so comparisons with read models hold.
    return float(np.float32(value))


def spec_name(name: str) -> str:
    """The spec's spelling of an activation name given in any case."""
    try:
        return _BY_LOWER[str(name).lower()]
    except KeyError:
        raise BadInput(f"unknown activation {name!r}; expected one of {', '.join(PARAMS)}") from None


@dataclass(frozen=True)
class Activation:
    """One activation function. alpha/beta left None take the function's default; a parameter the
    function does not take stays None (giving one is an error)."""

    name: str
    alpha: Optional[float] = None
    beta: Optional[float] = None

    def __post_init__(self):
        name = spec_name(self.name)
        object.__setattr__(self, "name", name)
        for param, default in zip(("alpha", "beta"), PARAMS[name]):
            value = getattr(self, param)
            if default is None:
                if value is not None:
                    raise BadInput(f"activation {name} takes no {param} (got {value})")
            else:
                object.__setattr__(self, param, _f32(default if value is None else value))


def _num_funcs(kind: str) -> int:
    try:
        return len(DEFAULTS[kind])
    except KeyError:
        raise BadInput(f"unknown recurrent op {kind!r}; expected one of {', '.join(DEFAULTS)}") from None


def _consume(values: Optional[Sequence[float]], names: list[str], slot: int, param: str) -> list[Optional[float]]:
    """Hand out `values` to the functions that take the parameter (slot 0 alpha, 1 beta), see PARAMS."""
    values = [] if values is None else [_f32(v) for v in values]
    takers = [k for k, name in enumerate(names) if PARAMS[name][slot] is not None]
    out: list[Optional[float]] = [None] * len(names)
    for k, value in zip(takers, values):
        out[k] = value
    if len(values) > len(takers):
        # Accept when the positional reading (value k to function k) gives every taker the same value.
        positional = all(k < len(values) and values[k] == out[k] for k in takers)
        if not positional:
            raise BadInput(
                f"activation_{param} has {len(values)} values but activations {names} take {len(takers)};"
                " the values left over would be ignored"
            )
    return out


def resolve(
    kind: str,
    num_directions: int,
    activations: Optional[Sequence[str]] = None,
    activation_alpha: Optional[Sequence[float]] = None,
    activation_beta: Optional[Sequence[float]] = None,
) -> list[tuple[Activation, ...]]:
    """The activation functions of each direction, alpha/beta filled in, from the ONNX attributes."""
    num_funcs = _num_funcs(kind)
    if num_directions not in (1, 2):
        raise BadInput(f"num_directions must be 1 or 2, got {num_directions}")
    names = [spec_name(n) for n in activations] if activations else list(DEFAULTS[kind]) * num_directions
    # The RNN schema default is ("Tanh", "Tanh") whatever the direction; one direction uses the first.
    if kind == "RNN" and num_directions == 1 and len(names) == 2 and names[0] == names[1]:
        names = names[:1]
    if len(names) != num_funcs * num_directions:
        raise BadInput(
            f"{kind} with {num_directions} direction(s) needs {num_funcs * num_directions} activations,"
            f" got {len(names)}: {names}"
        )
    alphas = _consume(activation_alpha, names, 0, "alpha")
    betas = _consume(activation_beta, names, 1, "beta")
    acts = [Activation(n, a, b) for n, a, b in zip(names, alphas, betas)]
    return [tuple(acts[d * num_funcs : (d + 1) * num_funcs]) for d in range(num_directions)]


def to_attributes(kind: str, per_direction: Sequence[Sequence[Activation]]):
    """(activations, activation_alpha, activation_beta) for a writer; None where the attribute can be omitted."""
    num_funcs = _num_funcs(kind)
    flat = [act for acts in per_direction for act in acts]
    if any(len(acts) != num_funcs for acts in per_direction):
        raise BadInput(f"{kind} takes {num_funcs} activations per direction, got {[len(a) for a in per_direction]}")
    names = None if all(tuple(a.name for a in acts) == DEFAULTS[kind] for acts in per_direction) else [
        a.name for a in flat
    ]
    lists = []
    for slot, param in enumerate(("alpha", "beta")):
        takers = [a for a in flat if PARAMS[a.name][slot] is not None]
        values = [getattr(a, param) for a in takers]
        settled = all(
            a.name not in UNSETTLED_DEFAULTS and v == _f32(PARAMS[a.name][slot]) for a, v in zip(takers, values)
        )
        lists.append(None if settled else values)
    return names, lists[0], lists[1]


def apply(act: Activation, x: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """act(x) elementwise in x's dtype; `out` may be x itself."""
    name, alpha, beta = act.name, act.alpha, act.beta
    if out is None:
        out = np.empty_like(x)
    if name == "Sigmoid":
        # 1/(1+e^-x) written through tanh: no overflow for large |x|, one transcendental call.
        np.multiply(x, 0.5, out=out)
        np.tanh(out, out=out)
        np.multiply(out, 0.5, out=out)
        np.add(out, 0.5, out=out)
    elif name == "Tanh":
        np.tanh(x, out=out)
    elif name == "Relu":
        np.maximum(x, 0, out=out)
    elif name == "Affine":
        np.multiply(x, alpha, out=out)
        np.add(out, beta, out=out)
    elif name == "LeakyRelu":
        np.copyto(out, np.where(x >= 0, x, x * alpha))
    elif name == "ThresholdedRelu":
        np.copyto(out, np.where(x >= alpha, x, 0))
    elif name == "ScaledTanh":
        np.multiply(x, beta, out=out)
        np.tanh(out, out=out)
        np.multiply(out, alpha, out=out)
    elif name == "HardSigmoid":
        np.multiply(x, alpha, out=out)
        np.add(out, beta, out=out)
        np.clip(out, 0, 1, out=out)
    elif name == "Elu":
        np.copyto(out, np.where(x >= 0, x, alpha * np.expm1(np.minimum(x, 0))))
    elif name == "Softsign":
        np.copyto(out, x / (1 + np.abs(x)))
    elif name == "Softplus":
        # log(1 + e^x) without overflow for large x.
        np.logaddexp(0, x, out=out)
    else:  # pragma: no cover - Activation() only admits PARAMS names
        raise BadInput(f"unknown activation {name!r}")
    return out
