"""Numbers the commands' help texts quote (tolerances, exit codes, opsets), read from the modules that define them:
a docstring says `{EXIT_VERIFY}` and `@filled` puts the number in. Only light modules are imported here: the help
is built before numpy may load (rnnconv.cli.main sets its thread count first)."""

from __future__ import annotations

from rnnconv import errors
from rnnconv.dialects import onnx_versions
from rnnconv.verification import tolerance


def _sci(x: float) -> str:
    """2e-3, 1.6e-2: a tolerance as people write it."""
    mantissa, exponent = f"{x:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def tolerance_defaults() -> str:
    """The default tolerance of each float dtype, as "float64 1e-7, float32 1e-5, ... (atol and rtol alike)"."""
    rows = {k: v for k, v in tolerance.TOLERANCES.items() if k != "dequantized"}
    if all(a == r for a, r in rows.values()):
        return ", ".join(f"{k} {_sci(a)}" for k, (a, _) in rows.items()) + " (atol and rtol alike)"
    return ", ".join(f"{k} atol {_sci(a)} rtol {_sci(r)}" for k, (a, r) in rows.items())


FACTS = {
    **{name: code for name, code in vars(errors).items() if name.startswith("EXIT_") and isinstance(code, int)},
    "TOLERANCE_DEFAULTS": tolerance_defaults(),
    "DEQUANTIZED": f"atol {tolerance.DEQUANTIZED_ATOL:g} + rtol {tolerance.DEQUANTIZED_RTOL:g}",
    "MODERN_SINCE": onnx_versions.MODERN_SINCE,
    "LAYOUT_SINCE": onnx_versions.LAYOUT_SINCE,
}


def filled(f):
    """`f` with its docstring's {NAME}s replaced by FACTS (click reads the docstring as the command's help)."""
    f.__doc__ = f.__doc__.format(**FACTS)
    return f
