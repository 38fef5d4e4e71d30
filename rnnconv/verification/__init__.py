"""Verification: what every command uses to prove that a conversion kept the numbers.

model: the models (ONNX or IR); specs: what each input is; inputs: input sets; engines: runs; tolerance: the one
tolerance policy; results: comparisons; report: what commands print; extract: one node as a model of its own;
checks: the pipeline every converting command calls; time_axis: where time is in each output.
"""

# full: each rewritten node, then the whole model; node: each rewritten node only (real weights, small batch and
# sequence: for models too big to run twice); none: no check.
VERIFY_MODES = ("full", "node", "none")
ALL_OUTPUTS = "*"  # the key of a tolerance given for every output
