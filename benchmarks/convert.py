"""Conversion wall time and peak RSS on generated LSTM models, as ratios against anchors measured in the same run.

Anchors: `cp` of the same bytes (the physical floor), `python -c "import onnx"` (with two `cp`, the floor of an
unverified ONNX -> ONNX conversion), plain onnx.load + onnx.save (the floor for ONNX -> ONNX),
onnx's version converter 14 -> 13 (where it works), and for to-openvino OpenVINO's own route twice: converted and
saved (ov.convert_model + ov.save_model(compress_to_fp16=False)), and checked as a user checks it (the same, then
ov.compile_model of the saved IR and one inference, the converted model still held as a script holds it); and the
floor of default to-openvino, OpenVINO's runtime alone compiling and running rnnconv's IR as its check does. Each
figure is the median of --repeat runs, each run a fresh process (peak RSS from wait4: the largest process of the
tree, so a runtime's child process counts alone).

    python benchmarks/convert.py --sizes 256M,1G --repeat 3 [--workdir DIR] [--keep]

Models are bidirectional LSTMs at opset 14 with external data; hidden size is chosen to reach each size.
Commands run with compiled bytecode, as from an installed package (pip compiles on install): where the
environment sets PYTHONDONTWRITEBYTECODE, rnnconv is compiled into a cache in the work folder first.
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

MAKE = r"""
import sys, numpy as np, onnx
from onnx import helper, numpy_helper
H, path = int(sys.argv[1]), sys.argv[2]
D = 2
rng = np.random.default_rng(0)
def w(name, shape):
    return numpy_helper.from_array((rng.standard_normal(shape, dtype=np.float32) * 0.02), name)
inits = [w("W", (D, 4 * H, H)), w("R", (D, 4 * H, H)), w("B", (D, 8 * H))]
node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=H,
                        direction="bidirectional", name="lstm")
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", 1, ["T", "N", H])],
                          [helper.make_tensor_value_info("Y", 1, ["T", D, "N", H])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
          location=path.rsplit("/", 1)[-1] + ".data", size_threshold=0)
"""

LOAD_SAVE = "import onnx,sys; onnx.save(onnx.load(sys.argv[1]), sys.argv[2], save_as_external_data=True, " \
            "all_tensors_to_one_file=True, location=sys.argv[2].rsplit('/',1)[-1]+'.data')"
CONVERTER = "import onnx,sys; from onnx import version_converter as v; m=v.convert_version(onnx.load(sys.argv[1]),13);" \
            " onnx.save(m, sys.argv[2], save_as_external_data=True, location=sys.argv[2].rsplit('/',1)[-1]+'.data')"
OPENVINO = "import openvino as ov,sys; ov.save_model(ov.convert_model(sys.argv[1]), sys.argv[2], compress_to_fp16=False)"
OPENVINO_CHECKED = r"""
import sys, numpy as np, openvino as ov
model = ov.convert_model(sys.argv[1])
ov.save_model(model, sys.argv[2], compress_to_fp16=False)
compiled = ov.compile_model(sys.argv[2], "CPU")
x = compiled.inputs[0]
shape = [d.get_length() if d.is_static else 3 for d in x.get_partial_shape()]
compiled({x: np.random.default_rng(0).standard_normal(shape).astype(np.float32)})
"""

# The floor of default to-openvino: OpenVINO's runtime alone compiling rnnconv's IR (written beforehand) and running
# it once, as the whole-model check does it (rnnconv.engine.openvino_runtime, at a big layer's check sizes).
RUNTIME_ALONE = r"""
import sys, numpy as np
from rnnconv.engine import openvino_runtime
from rnnconv.verification.inputs import SMALL_DIM
shape = (SMALL_DIM["sequence"], SMALL_DIM["batch"], int(sys.argv[2]))
openvino_runtime.run_files(sys.argv[1], {"X": np.random.default_rng(0).standard_normal(shape).astype(np.float32)},
                           reshape=True)
"""

SIZES = {"256M": 2048, "1G": 4096, "2.5G": 6400}  # hidden sizes: W and R of 2 directions = 64 H^2 bytes


ENV = dict(os.environ)


def compiled(work: Path) -> None:
    """Run every command with rnnconv's bytecode compiled once, as an installed package has it."""
    import rnnconv

    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    ENV["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    subprocess.run([PY, "-m", "compileall", "-q", str(Path(rnnconv.__file__).parent)], env=ENV, check=True)


def measure(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MiB, exit code of one fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode


def medians(rows: dict, repeat: int, cleanup) -> dict[str, tuple[float, float, bool]]:
    """Each row's median wall time and peak RSS, and whether every run succeeded; the rows run interleaved
    (row 1, row 2, ..., row 1, ...) so that a shared machine's drift falls on all of them alike."""
    runs: dict[str, list] = {name: [] for name in rows}
    for _ in range(repeat):
        for name, cmd in rows.items():
            cleanup()
            runs[name].append(measure(cmd))
    return {name: (statistics.median(r[0] for r in got), statistics.median(r[1] for r in got),
                   all(r[2] == 0 for r in got)) for name, got in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256M", help="comma list of 256M, 1G, 2.5G")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the generated models")
    ap.add_argument("--only", default=None, help="only the rows whose name holds this text (and the anchors)")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rnnconv-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    compiled(work)
    rnnconv = [PY, "-m", "rnnconv"]
    print(f"{'model':>6} {'command':<34} {'wall s':>8} {'RSS MiB':>8} {'x cp':>6} {'x load+save':>11} {'RSS x size':>10}")
    for size in args.sizes.split(","):
        src = work / f"lstm{size}.onnx"
        if not src.exists():
            subprocess.run([PY, "-c", MAKE, str(SIZES[size]), str(src)], check=True)
        nbytes = sum(p.stat().st_size for p in work.glob(f"lstm{size}.onnx*"))
        out = work / "out"

        def cleanup():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()

        ir = work / f"ir{size}" / "m.xml"
        if not ir.exists():
            subprocess.run([*rnnconv, "to-openvino", str(src), "-o", str(ir), "--no-verify"], env=ENV, check=True,
                           stdout=subprocess.DEVNULL)
        rows = {
            "cp": ["cp", str(src), str(src) + ".data", str(out)],
            "import onnx": [PY, "-c", "import onnx"],
            "onnx.load + onnx.save": [PY, "-c", LOAD_SAVE, str(src), str(out / "m.onnx")],
            "onnx version_converter 14->13": [PY, "-c", CONVERTER, str(src), str(out / "m.onnx")],
            "upgrade --no-verify": [*rnnconv, "upgrade", str(src), "-o", str(out / "m.onnx"), "--no-verify"],
            "downgrade 13 --no-verify": [*rnnconv, "downgrade", str(src), "-o", str(out / "m.onnx"), "--opset",
                                         "13", "--no-verify"],
            "layout --to 1 --no-verify": [*rnnconv, "layout", str(src), "-o", str(out / "m.onnx"), "--to", "1",
                                          "--no-verify"],
            "upgrade (verified)": [*rnnconv, "upgrade", str(src), "-o", str(out / "m.onnx")],
            "upgrade --verify node": [*rnnconv, "upgrade", str(src), "-o", str(out / "m.onnx"), "--verify", "node"],
            "downgrade 13 (verified)": [*rnnconv, "downgrade", str(src), "-o", str(out / "m.onnx"), "--opset", "13"],
            "layout --to 1 (verified)": [*rnnconv, "layout", str(src), "-o", str(out / "m.onnx"), "--to", "1"],
            "ov.convert_model + save_model": [PY, "-c", OPENVINO, str(src), str(out / "m.xml")],
            "ov convert+save+compile+infer": [PY, "-c", OPENVINO_CHECKED, str(src), str(out / "m.xml")],
            "to-openvino --no-verify": [*rnnconv, "to-openvino", str(src), "-o", str(out / "m.xml"),
                                        "--no-verify"],
            "to-openvino --verify node": [*rnnconv, "to-openvino", str(src), "-o", str(out / "m.xml"),
                                          "--verify", "node"],
            "to-openvino (verified)": [*rnnconv, "to-openvino", str(src), "-o", str(out / "m.xml")],
            "ov runtime alone, rnnconv's IR": [PY, "-c", RUNTIME_ALONE, str(ir), str(SIZES[size])],
        }
        if args.only:
            anchors = {"cp", "import onnx", "onnx.load + onnx.save"} | ({n for n in rows if n.startswith("ov")}
                                                          if "openvino" in args.only else set())
            rows = {n: c for n, c in rows.items() if args.only in n or n in anchors}
        results = medians(rows, args.repeat, cleanup)
        cp_wall = results["cp"][0]
        ls_wall = results["onnx.load + onnx.save"][0]
        for name, (wall, rss, ok) in results.items():
            flag = "" if ok else "  (failed)"
            print(f"{size:>6} {name:<34} {wall:8.2f} {rss:8.0f} {wall / cp_wall:6.1f} {wall / ls_wall:11.2f} "
                  f"{rss * 2**20 / nbytes:10.2f}{flag}")
        # The targets, from this run's own anchors. Unverified: the bytes copied twice (read, written) plus the
        # start of a Python process that reads ONNX.
        size_mib = nbytes / 2**20
        floor_nv = 2 * cp_wall + results["import onnx"][0] if "import onnx" in results else 2 * cp_wall
        for name, (wall, rss, ok) in results.items():
            if name.endswith("--no-verify") and not name.startswith("to-openvino"):
                verdict = wall <= floor_nv and rss <= 256
                print(f"{size:>6} target {name}: wall <= 2x cp + import onnx ({wall / floor_nv:.2f}x), RSS <= 256 MiB "
                      f"({rss:.0f}): {'met' if verdict and ok else 'NOT met'}")
            elif "(verified)" in name and not name.startswith("to-openvino"):
                verdict = wall <= ls_wall and rss <= 1.1 * size_mib
                print(f"{size:>6} target {name}: wall <= load+save ({wall / ls_wall:.2f}x), RSS <= 1.1x size "
                      f"({rss / size_mib:.2f}x): {'met' if verdict and ok else 'NOT met'}")
        # to-openvino against OpenVINO's own route: without the runtime's compile, against convert + save;
        # verified by default (which compiles the IR in the runtime), against the same checked as a user does.
        targets = (("to-openvino --no-verify", "ov.convert_model + save_model", 0.5, 0.5),
                   ("to-openvino --verify node", "ov.convert_model + save_model", 0.5, 0.5),
                   ("to-openvino (verified)", "ov convert+save+compile+infer", 0.4, 0.6))
        for name, anchor, wall_x, rss_x in targets:
            if name not in results or anchor not in results:
                continue
            ours, ov = results[name], results[anchor]
            if ov[2] and ours[2]:
                met = ours[0] <= wall_x * ov[0] and ours[1] <= rss_x * ov[1]
                print(f"{size:>6} {name} vs {anchor}: wall {ours[0] / ov[0]:.2f}x (target <= {wall_x}x), peak RSS "
                      f"{ours[1] / ov[1]:.2f}x (target <= {rss_x}x): {'met' if met else 'NOT met'}")
        floor, anchor = "ov runtime alone, rnnconv's IR", "ov convert+save+compile+infer"
        if floor in results and anchor in results:
            print(f"{size:>6} floor of to-openvino (verified): {floor} {results[floor][0] / results[anchor][0]:.2f}x "
                  f"of {anchor} (wall), peak RSS {results[floor][1] / results[anchor][1]:.2f}x")
            ours = results.get("to-openvino (verified)")
            if ours is not None:
                print(f"{size:>6} to-openvino (verified) / its floor: wall {ours[0] / results[floor][0]:.2f}x, peak RSS "
                      f"{ours[1] / results[floor][1]:.2f}x")
        shutil.rmtree(ir.parent, ignore_errors=True)
        if not args.keep:
            for p in work.glob(f"lstm{size}.onnx*"):
                p.unlink()
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
