"""A fleet of small models through batch mode (CI migrating a model zoo), as ratios against anchors measured in the
same run.

N copies of fixtures/lstm.onnx (a small LSTM) in one folder; rows:
- `upgrade --out-dir` and `to-openvino --out-dir` (default verification) at --jobs 1 and --jobs 2, and
  `to-openvino --verify node` at --jobs 1;
- the anchor: OpenVINO's own loop in one Python process, ov.convert_model + ov.save_model + compile_model + one
  inference per model (what a script that converts and checks a zoo with OpenVINO alone does), and the same
  without compile and inference (convert + save).
Each figure is the median of --repeat runs; each run is a fresh process, the rows interleaved so that a shared
machine's drift falls on all of them alike. Targets (issue 22): default to-openvino <= 0.6x the anchor's loop,
--jobs 2 faster than --jobs 1 for both commands.

    python benchmarks/fleet.py --models 100 --repeat 1 [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
SOURCE = Path(__file__).resolve().parent.parent / "fixtures" / "lstm.onnx"

OPENVINO_LOOP = r"""
import sys, numpy as np, openvino as ov
from pathlib import Path
src, out, run = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1"
core = ov.Core()
for path in sorted(src.glob("*.onnx")):
    xml = out / (path.stem + ".xml")
    ov.save_model(ov.convert_model(str(path)), str(xml), compress_to_fp16=False)
    if run:
        compiled = core.compile_model(str(xml), "CPU")
        feeds = {}
        for port in compiled.inputs:
            shape = [d.get_length() if d.is_static else 3 for d in port.get_partial_shape()]
            feeds[port] = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        compiled(feeds)
"""


def measure(cmd: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=100, help="how many copies of fixtures/lstm.onnx")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--only", default=None, help="only the rows whose name holds this text (and the anchors)")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rnnconv-fleet-"))
    zoo, out = work / "zoo", work / "out"
    shutil.rmtree(zoo, ignore_errors=True)
    zoo.mkdir(parents=True)
    for k in range(args.models):
        shutil.copyfile(SOURCE, zoo / f"lstm{k:03d}.onnx")
    rnnconv = [PY, "-m", "rnnconv"]
    rows = {
        "ov convert+save (one process)": [PY, "-c", OPENVINO_LOOP, str(zoo), str(out), "0"],
        "ov convert+save+compile+infer": [PY, "-c", OPENVINO_LOOP, str(zoo), str(out), "1"],
        "upgrade --jobs 1": [*rnnconv, "upgrade", str(zoo), "--out-dir", str(out), "--quiet", "--jobs", "1"],
        "upgrade --jobs 2": [*rnnconv, "upgrade", str(zoo), "--out-dir", str(out), "--quiet", "--jobs", "2"],
        "to-openvino --jobs 1": [*rnnconv, "to-openvino", str(zoo), "--out-dir", str(out), "--quiet", "--jobs", "1"],
        "to-openvino --jobs 2": [*rnnconv, "to-openvino", str(zoo), "--out-dir", str(out), "--quiet", "--jobs", "2"],
        "to-openvino --verify node --jobs 1": [*rnnconv, "to-openvino", str(zoo), "--out-dir", str(out), "--quiet",
                                               "--verify", "node", "--jobs", "1"],
    }
    if args.only:
        rows = {n: c for n, c in rows.items() if args.only in n or n.startswith("ov ")}
    runs: dict[str, list] = {name: [] for name in rows}
    for _ in range(args.repeat):
        for name, cmd in rows.items():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            runs[name].append(measure(cmd))
    results = {n: (statistics.median(r[0] for r in got), all(r[1] == 0 for r in got)) for n, got in runs.items()}
    anchor = results["ov convert+save+compile+infer"][0]
    print(f"{args.models} models ({SOURCE.name}), {os.cpu_count()} CPU(s)")
    print(f"{'row':<36} {'wall s':>8} {'s/model':>8} {'x ov loop':>9}")
    for name, (wall, ok) in results.items():
        print(f"{name:<36} {wall:8.2f} {wall / args.models:8.3f} {wall / anchor:9.2f}{'' if ok else '  (failed)'}")
    ours = results.get("to-openvino --jobs 1")
    if ours:
        print(f"target to-openvino (default) <= 0.6x ov loop: {ours[0] / anchor:.2f}x: "
              f"{'met' if ours[0] <= 0.6 * anchor else 'NOT met'}")
    for command in ("upgrade", "to-openvino"):
        one, two = results.get(f"{command} --jobs 1"), results.get(f"{command} --jobs 2")
        if one and two:
            print(f"target {command} --jobs 2 faster than --jobs 1: {two[0] / one[0]:.2f}x: "
                  f"{'met' if two[0] < one[0] else 'NOT met'}")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
