"""Small slips planted in rnnconv one at a time, each of the kinds that give a silent wrong number or a false verdict,
and the tests that must catch it: the suite's own check that it can fail where it matters. Not run by CI (each
mutation runs its tests in a fresh copy of the tree, a few minutes in all); see docs/code.md.

    python tests/mutations/run.py                              # every mutation, this interpreter
    python tests/mutations/run.py --python VENV/bin/python --python OTHER/bin/python   # with and without openvino
    python tests/mutations/run.py --only softmax --list

Each mutation replaces short exact snippets of one file (anchors); a snippet that is not found exactly once is
said (the code moved: update the anchor), never silently skipped. The named tests first run on the unmutated copy
(they must pass there); then, per mutation, a failing test is "caught", all passing "SURVIVED". Exit 1 when a
mutation survives or an anchor is missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class Mutation:
    name: str
    file: str  # relative to the root
    edits: list[tuple[str, str]]  # (anchor, replacement); each anchor must occur exactly once
    tests: list[str]  # pytest node ids or paths, relative to the root (`-k` filters after "::-k ")
    why: str


M = Mutation
MUTATIONS = [
    # -- silent wrong numbers in the conversions --------------------------------------------------------------
    M("softmax13-default-axis", "rnnconv/dialects/openvino/ops/matrix.py",
      [('axis = int(attr(node, "axis", -1))', 'axis = int(attr(node, "axis", 1))')],
      ["tests/dialects/openvino/test_ops.py::-k no-axis",
       "tests/commands/test_to_openvino.py::test_lstm_then_softmax_without_axis"],
      "Softmax-13's axis left out read as 1 instead of -1"),
    M("dq-lowering-round-half-away", "rnnconv/dialects/openvino/quantized.py",
      [('return b.op("Round", v, mode="half_to_even"', 'return b.op("Round", v, mode="half_away_from_zero"')],
      ["tests/commands/test_quantized_rounding.py"],
      "DynamicQuantizeLSTM's lowering rounds X and H half away from zero (onnxruntime: half to even)"),
    *[M(f"default-{name}", f"rnnconv/dialects/openvino/ops/{file}", [(anchor, mutated)],
        [f"tests/dialects/openvino/test_ops.py::-k {case}"], f"to-openvino reads {name} left out as another value")
      for name, file, anchor, mutated, case in [
          ("MaxPool-ceil_mode", "convolution.py", 'ceil = bool(attr(node, "ceil_mode", 0))',
           'ceil = bool(attr(node, "ceil_mode", 1))', "no-ceil_mode"),
          ("AveragePool-count_include_pad", "convolution.py", 'not attr(node, "count_include_pad", 0)',
           'not attr(node, "count_include_pad", 1)', "no-count_include_pad"),
          ("Mod-fmod", "elementwise.py", 'ov_op = "Mod" if attr(node, "fmod", 0)', 'ov_op = "Mod" if attr(node, "fmod", 1)',
           "no-fmod"),
          ("Selu-alpha", "elementwise.py", 'attr(node, "alpha", 1.67326319217681884765625)',
           'attr(node, "alpha", 1.6)', "Selu-defaults"),
          ("Selu-gamma", "elementwise.py", 'attr(node, "gamma", 1.05070102214813232421875)',
           'attr(node, "gamma", 1.0)', "Selu-defaults"),
          ("LeakyRelu-alpha", "elementwise.py", 'float(attr(node, "alpha", 0.01))', 'float(attr(node, "alpha", 0.1))',
           "LeakyRelu-default"),
          ("HardSigmoid-alpha", "elementwise.py", 'float(attr(node, "alpha", 0.2))', 'float(attr(node, "alpha", 0.3))',
           "HardSigmoid-defaults"),
          ("HardSigmoid-beta", "elementwise.py", 'float(attr(node, "beta", 0.5))', 'float(attr(node, "beta", 0.6))',
           "HardSigmoid-defaults"),
          ("Clip-6-min", "elementwise.py", 'attr(node, "min", -np.inf)', 'attr(node, "min", -1.0)', "Clip-6"),
          ("Clip-6-max", "elementwise.py", 'attr(node, "max", np.inf)', 'attr(node, "max", 1.0)', "Clip-6"),
          ("Gemm-alpha", "matrix.py", 'float(attr(node, "alpha", 1.0))', 'float(attr(node, "alpha", 2.0))',
           "Gemm-defaults"),
          ("Gemm-beta", "matrix.py", 'float(attr(node, "beta", 1.0))', 'float(attr(node, "beta", 2.0))',
           "Gemm-defaults"),
          ("Reduce-noop_with_empty_axes", "matrix.py", 'if attr(node, "noop_with_empty_axes", 0):',
           'if attr(node, "noop_with_empty_axes", 1):', "18-all"),
          ("ScatterND-reduction", "indexing.py", 'reduction = attr(node, "reduction", "none")',
           'reduction = attr(node, "reduction", "add")', "ScatterND-no-reduction"),
      ]],
    # (the zero point's rounding mode is no such slip: zp only moves the clamp bounds, and for a tie k + 0.5 both
    # modes clamp and round every value to the same integer)
    M("lstm-gate-order", "rnnconv/dialects/openvino/gates.py",
      [('ORDER = {"LSTM": ("f", "i", "c", "o")', 'ORDER = {"LSTM": ("i", "f", "c", "o")')],
      ["tests/commands/test_to_openvino.py::-k matrix_runs_in_openvino and LSTM"],
      "OpenVINO's LSTM gates written in ONNX's i, f order"),
    M("gru-gate-order", "rnnconv/dialects/openvino/gates.py",
      [('"GRU": ("z", "r", "h")', '"GRU": ("r", "z", "h")')],
      ["tests/commands/test_to_openvino.py::-k matrix_runs_in_openvino and GRU", "tests/test_facts.py"],
      "OpenVINO's GRU gates written in r, z order"),
    M("ir-sequence-op-name", "rnnconv/dialects/openvino/gates.py",
      [('"LSTM": "LSTMSequence"', '"LSTM": "LstmSequence"')],
      ["tests/test_facts.py"],
      "the IR spelling of the LSTM sequence op mistyped where it is written once"),
    M("newest-recurrent-version", "rnnconv/dialects/onnx_versions.py",
      [("BFLOAT16_SINCE = 22", "BFLOAT16_SINCE = 21")],
      ["tests/test_facts.py"],
      "the newest GRU/LSTM/RNN version (22) written as 21"),
    M("ir-round-default-mode", "rnnconv/engine/ir_basic.py",
      [('if layer.attrs.get("mode", "half_to_even").lower() == "half_to_even":', "if True:")],
      ["tests/commands/test_quantized_rounding.py", "tests/dialects/openvino/test_to_onnx_layers.py::-k Round"],
      "the IR interpreter's Round-5 ignores mode (always half to even)"),
    # -- false verdicts ---------------------------------------------------------------------------------------
    M("rounding-verdict-excuses-a-node", "rnnconv/verification/divergence.py",
      [('return self.cause != "node" and not self.computes_differently and not self.unexplained and bool(self.tipped)',
        "return not self.unexplained and bool(self.tipped)")],
      ["tests/verification/test_localize.py::-k wrong_node_after_a_tip"],
      "the run-time rounding verdict passes a comparison where a node computes differently given identical inputs"),
    M("float32-default-rtol", "rnnconv/verification/tolerance.py",
      [('"float32": (1e-5, 1e-5)', '"float32": (1e-5, 1e-3)')],
      ["tests/verification/test_tolerance.py::-k documented_tolerance"],
      "float32's default rtol 100 times looser than documented"),
    M("float32-default-atol", "rnnconv/verification/tolerance.py",
      [('"float32": (1e-5, 1e-5)', '"float32": (1e-3, 1e-5)')],
      ["tests/verification/test_tolerance.py::-k documented_tolerance"],
      "float32's default atol 100 times looser than documented"),
    M("float32-scaled-atol", "rnnconv/verification/tolerance.py",
      [('"float32": 1e-6, "float16"', '"float32": 1e-4, "float16"')],
      ["tests/verification/test_tolerance.py"],
      "float32's scale term 100 times looser than documented"),
    M("least-precise-is-most-precise", "rnnconv/verification/tolerance.py",
      [("return max(known, key=lambda n: TOLERANCES[n])", "return min(known, key=lambda n: TOLERANCES[n])")],
      ["tests/verification/test_tolerance.py", "tests/commands/test_to_openvino_fp16.py"],
      "the tolerance of the most precise dtype of a comparison, not the least"),
    M("bad-element-at-equality", "rnnconv/verification/results.py",
      [("bad = (diff > atol + rtol", "bad = (diff >= atol + rtol")],
      ["tests/verification/test_tolerance.py::-k zero_tolerance"],
      "an element equal to the bound counts as bad"),
    # -- the engine's partition (speed only: the numbers cannot show it) --------------------------------------
    M("partition-parity", "rnnconv/engine/partition.py",
      [("Segment(RNNCONV if level % 2 else ONNXRUNTIME", "Segment(ONNXRUNTIME if level % 2 else RNNCONV")],
      ["tests/engine/test_partitioned.py::test_segments_are_the_levels_of_a_known_graph"],
      "a level's nodes placed in the other provider (each then falls back to running alone)"),
    M("partition-level-step", "rnnconv/engine/partition.py",
      [("before + (1 if (before % 2 == 0) == own else 0)", "before + (1 if (before % 2 == 0) != own else 0)")],
      ["tests/engine/test_partitioned.py::test_segments_are_the_levels_of_a_known_graph"],
      "a node joins its producer's level when it should start the next"),
    # what onnxruntime refuses of a recurrent node is written once (partition.onnxruntime_refusals), read by the
    # partition and by `check`: the same slip, held by each reader's tests
    *[M(name, "rnnconv/engine/partition.py",
        [("    if version < MODERN_SINCE:\n        found[", "    if version <= MODERN_SINCE:\n        found[")],
        [test], why)
      for name, test, why in [
          ("partition-version-boundary", "tests/engine/test_partitioned.py::-k versions_onnxruntime_refuses",
           "version 7 recurrent nodes run in rnnconv's kernels, though onnxruntime runs them"),
          ("check-version-boundary", "tests/commands/test_check.py",
           "`check --target onnxruntime` says onnxruntime refuses version 7 nodes")]],
    # -- fuse, settle_ifs, sizes ------------------------------------------------------------------------------
    M("fuse-ignores-biases", "rnnconv/passes/fuse_cells.py",
      [('for name in ("W", "Wb", "R", "Rb"):', 'for name in ("W", "R"):')],
      ["tests/passes/test_fuse_cells.py::test_steps_differing_only_in_a_bias_are_not_fused"],
      "fuse compares W and R between steps, not the biases"),
    M("settle-ifs-unneeded-failure", "rnnconv/passes/settle_ifs.py",
      [("if len(failing) != 1 or not _needed(failing[0], graph):", "if len(failing) != 1:")],
      ["tests/passes/test_settle_ifs.py::test_a_failure_no_output_reads_settles_nothing"],
      "settle_ifs keeps a branch because the other fails in code no output reads"),
    M("sizes-matmul-axis", "rnnconv/verification/sizes.py",
      [('hold(0, -1, 1, -2 if b and len(b) > 1 else 0, "the inner size")',
        'hold(0, -1, 1, -1 if b and len(b) > 1 else 0, "the inner size")')],
      ["tests/verification/test_sizes.py", "tests/commands/test_input_sizes.py::test_sizes_read_from_weights_onnx"],
      "the size inference reads a MatMul's weight at its output axis"),
]


def copy_tree(into: Path) -> Path:
    """The files of the tree (git's list when in a clone, else everything but caches) under `into`."""
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        listed = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
                  and not {"__pycache__", ".git", "out", ".pytest_cache"} & set(p.relative_to(ROOT).parts)]
    for name in listed:
        src = ROOT / name
        if src.is_file():
            dst = into / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return into


def apply(mutation: Mutation, tree: Path) -> list[str]:
    """Apply the edits in `tree`; the anchors not found exactly once (empty: applied)."""
    path = tree / mutation.file
    if not path.exists():
        return [f"{mutation.file}: no such file"]
    text = path.read_text()
    problems = []
    for anchor, replacement in mutation.edits:
        count = text.count(anchor)
        if count != 1:
            problems.append(f"{mutation.file}: anchor {'not found' if count == 0 else f'found {count} times'}: "
                            f"{anchor!r}")
            continue
        text = text.replace(anchor, replacement)
    if not problems:
        path.write_text(text)
    return problems


def pytest_args(tests: list[str]) -> list[str]:
    args = []
    for test in tests:
        path, _, select = test.partition("::-k ")
        args += [path] if not select else [path, "-k", select]
    return args


def run_tests(python: str, tree: Path, tests: list[str]) -> tuple[int, str, float]:
    """pytest on `tests` in `tree`, importing the tree's rnnconv (its root first on the path)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(tree)
    started = time.monotonic()
    groups = [pytest_args([t]) for t in tests]  # one run per entry: -k applies to its own path only
    output, codes = [], []
    for args in groups:
        proc = subprocess.run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *args], cwd=tree,
                              env=env, capture_output=True, text=True)
        output.append(proc.stdout[-3000:] + proc.stderr[-2000:])
        codes.append(proc.returncode)
        if proc.returncode == 1:  # caught: no need for the rest
            break
    # pytest's exit 5: nothing collected (a module that skips without openvino); 1: a test failed
    code = 1 if 1 in codes else 5 if set(codes) == {5} else max(c for c in codes if c != 5)
    return code, "\n".join(output), time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", action="append", help="an interpreter to run the tests with (repeatable; "
                        "default: this one); give one venv with openvino and one without")
    parser.add_argument("--only", help="mutations whose name contains this (several: comma-separated)")
    parser.add_argument("--list", action="store_true", help="list the mutations and their tests, run nothing")
    parser.add_argument("--verbose", action="store_true", help="print pytest's output of every run")
    args = parser.parse_args()
    pythons = args.python or [sys.executable]
    chosen = [m for m in MUTATIONS if not args.only or any(w in m.name for w in args.only.split(","))]
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.why}\n    {m.file}\n    " + "\n    ".join(m.tests))
        return 0
    with tempfile.TemporaryDirectory(prefix="rnnconv-mutations-") as work:
        work = Path(work)
        clean = copy_tree(work / "clean")
        every = sorted({t for m in chosen for t in m.tests})
        for python in pythons:
            code, out, seconds = run_tests(python, clean, every)
            print(f"baseline [{python}]: {'pass' if code == 0 else f'FAILS (pytest exit {code})'} ({seconds:.0f} s)",
                  flush=True)
            if code != 0:
                print(out)
                return 2
        bad = 0
        for m in chosen:
            tree = work / m.name
            shutil.copytree(clean, tree)
            problems = apply(m, tree)
            if problems:
                bad += 1
                print(f"ANCHOR   {m.name}: " + "; ".join(problems))
                continue
            for python in pythons:
                code, out, seconds = run_tests(python, tree, m.tests)
                verdict = {1: "caught  ", 0: "SURVIVED", 5: "NO TEST "}.get(code, f"ERROR {code}")
                bad += code != 1
                print(f"{verdict} {m.name} [{python}] ({seconds:.0f} s): {m.why}", flush=True)
                if args.verbose or code not in (0, 1):
                    print(out)
            shutil.rmtree(tree)
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
