"""Verification: inputs, engines, comparison, report.

Every rewriting command checks each replaced node against its replacement, then the whole model before against
after; `rnnconv verify` (`compare_models`, also callable as `rnnconv.verify(...)`) holds any two models, ONNX or
OpenVINO IR, against each other in any engine. Outputs are matched by name, shapes exactly (see report.py).

report: comparison results; model: the models; specs: what each input is; inputs: input sets; engines: runs;
time_axis: where time is in each output; verify_report and command: `rnnconv verify` itself.
"""

from __future__ import annotations

import sys
import types

# The names callers use as `verify.NAME` (_human included). Tests that patch a function patch it where it is
# looked up, in its submodule.
from rnnconv.verify.command import compare_models, parse_tolerances, plot_errors, verify
from rnnconv.verify.engines import ENGINES, CannotRun, can_read, run
from rnnconv.verify.inputs import (DEFAULT_DIM, INPUT_LIMIT, ROLE_ALIASES, _human, check_dim_names, check_inputs,
                                   draw_inputs, expand_dims, parse_dims, parse_ranges, random_inputs, read_inputs)
from rnnconv.verify.model import Model, open_model
from rnnconv.verify.report import (TOLERANCES, Check, OutputComparison, Report, compare, compare_all,
                                   default_tolerances)
from rnnconv.verify.specs import SEQUENCE_OPS, InputSpec, input_specs, merge_specs
from rnnconv.verify.time_axis import time_axes
from rnnconv.verify.verify_report import VerifyReport

__all__ = [
    "CannotRun", "Check", "DEFAULT_DIM", "ENGINES", "INPUT_LIMIT", "InputSpec", "Model", "OutputComparison",
    "ROLE_ALIASES", "Report", "SEQUENCE_OPS", "TOLERANCES", "VerifyReport", "can_read", "check_dim_names",
    "check_inputs", "compare", "compare_all", "compare_models", "default_tolerances", "draw_inputs", "expand_dims",
    "input_specs", "merge_specs", "open_model", "parse_dims", "parse_ranges", "parse_tolerances", "plot_errors",
    "random_inputs", "read_inputs", "run", "time_axes", "verify",
]


class _CallableModule(types.ModuleType):
    """`rnnconv.verify(reference, candidate, ...)` runs `compare_models`, and `rnnconv.verify.Report` etc. stay
    reachable: the public function and this package share one name."""

    def __call__(self, reference, candidate, **kwargs) -> VerifyReport:
        return compare_models(reference, candidate, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
