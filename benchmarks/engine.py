"""Engine (float32) against onnxruntime and OpenVINO (f32) on LSTM and GRU layers: median milliseconds, ratios.

Run: python benchmarks/engine.py [--runs N] [--threads N] [--real FOLDER]

A second table has a row per real model (every .onnx under FOLDER, default the real-model tests' cache:
$RNNCONV_REAL_CACHE, else ~/.cache/rnnconv-real): rnnconv's engine running the whole model as a whole-model check
runs it (partitioned: onnxruntime sessions for what onnxruntime runs, rnnconv's kernels for the rest) against
onnxruntime's own run of the same model on the same inputs, each with its session made, as a check makes it.

Both sides get the same number of threads (default 1: on a shared machine multi-threaded timings are
mostly noise); numpy reads thread counts when it loads, hence the environment is set first. The engine's
time is mostly numpy's float32 GEMM: the header names the OpenBLAS kernels in use. Where the environment
forces a kernel set (OPENBLAS_CORETYPE, e.g. Haswell on a CPU with AVX-512, which halves GEMM speed), a second
table follows, measured in a child process with the kernels numpy's OpenBLAS picks for this CPU itself.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(THREADS)

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from rnnconv.engine.onnx_graph import KERNELS  # noqa: E402

SHAPES = ((100, 32, 256, 256), (50, 64, 1024, 1024))  # (seq, batch, input, hidden)
GATES = {"GRU": 3, "LSTM": 4}


def layer(kind, direction, T, N, I, H, rng):
    D = 2 if direction == "bidirectional" else 1
    G = GATES[kind]
    scale = 1 / np.sqrt(H)
    weights = {
        "W": (scale * rng.standard_normal((D, G * H, I))).astype(np.float32),
        "R": (scale * rng.standard_normal((D, G * H, H))).astype(np.float32),
        "B": (scale * rng.standard_normal((D, 2 * G * H))).astype(np.float32),
    }
    X = rng.standard_normal((T, N, I)).astype(np.float32)
    return X, weights


def onnx_model(kind, direction, X, weights, H):
    node = helper.make_node(kind, ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H, direction=direction)
    graph = helper.make_graph(
        [node], "bench",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, X.shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y", "Y_h")],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def openvino_run(model):
    """The layer compiled by OpenVINO (its own ONNX import; f32, as many threads, one stream), or None."""
    try:
        import openvino as ov
    except ImportError:
        return None
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "m.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        converted = ov.convert_model(path)
    compiled = ov.Core().compile_model(converted, "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": THREADS, "NUM_STREAMS": 1})
    request = compiled.create_infer_request()
    return lambda X: request.infer({0: X})


def ort_session(model):
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def median_ms(fns, runs):
    """Median wall and CPU milliseconds of each function, runs interleaved so load changes hit all alike.

    With one thread the CPU time is what the code itself used, the steadier figure on a shared machine.
    """
    wall, cpu = [[] for _ in fns], [[] for _ in fns]
    for fn in fns:
        fn()  # warm-up
    for _ in range(runs):
        for k, fn in enumerate(fns):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[k].append((time.perf_counter() - start) * 1e3)
            cpu[k].append((time.process_time() - start_cpu) * 1e3)
    return [statistics.median(t) for t in wall], [statistics.median(t) for t in cpu]


def blas_core():
    """The kernel family numpy's OpenBLAS picked (OPENBLAS_CORETYPE overrides it), or '?'."""
    import ctypes
    import glob

    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*"))
    for lib in libs:
        for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            function = getattr(ctypes.CDLL(lib), symbol, None)
            if function is not None:
                function.restype = ctypes.c_char_p
                return function().decode()
    return "?"


def real_models(folder):
    """Rows: rnnconv's engine on a whole real model / onnxruntime's run of it (wall), inputs drawn as the checks
    draw them (the sizes the model runs at)."""
    from pathlib import Path

    from rnnconv.verification import checks, engines
    from rnnconv.verification.model import open_model
    from rnnconv.verification.specs import merge_specs

    folder = Path(folder or os.environ.get("RNNCONV_REAL_CACHE") or Path.home() / ".cache" / "rnnconv-real")
    paths = sorted(folder.rglob("*.onnx"))
    print(f"\nreal models under {folder}: {len(paths)}" + ("" if paths else " (run `pytest -m real` once to fetch)"))
    if not paths:
        return
    print("{:40} {:>10} {:>8} {:>6}  {}".format("model", "engine ms", "ort ms", "/ort", "where the engine ran it"))
    for path in paths:
        model = open_model(str(path))
        specs = merge_specs(model, model)
        # silero-vad: 512 samples and 64 of context at 16 kHz, as its users feed it (and the real-model tests)
        sized = path.stem.startswith("silero") and "input" in specs
        options = checks.CheckOptions(dims={"input:1": 576} if sized else {},
                                      ranges={"sr": (16000, 16000)} if "sr" in specs else {})
        try:
            sets, _, _ = checks.runnable_sets(model, specs, options, ["onnxruntime"])
        except Exception as err:  # noqa: BLE001 - a row that says why, not a stopped benchmark
            print(f"{path.stem[:40]:40} not run: {str(err)[:80]}")
            continue
        feeds = sets[0][0]
        placed = {}
        runs = [functools.partial(engines.run_once, "rnnconv", model, feeds, placements=placed),
                functools.partial(engines.run_once, "onnxruntime", model, feeds)]
        wall, _ = median_ms(runs, 5)
        where = {}
        for counts in placed.values():
            for place, n in counts.items():
                where[place] = where.get(place, 0) + n
        print(f"{path.stem[:40]:40} {wall[0]:10.1f} {wall[1]:8.1f} {wall[0] / wall[1]:6.2f}  "
              + ", ".join(f"{place} {n}" for place, n in sorted(where.items())), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--real", metavar="FOLDER", default=None,
                        help="real models (.onnx, searched recursively) for the second table")
    parser.add_argument("--no-layers", action="store_true", help="the real-model table only")
    parser.add_argument("--threads", type=int, default=1, help="threads for numpy's BLAS and onnxruntime")
    parser.add_argument("--only-this-environment", action="store_true",
                        help="no second table with numpy's own OpenBLAS kernel choice")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"threads: {THREADS}, numpy {np.__version__} (OpenBLAS kernels: {blas_core()}),"
          f" onnxruntime {ort.__version__}, median of {args.runs} interleaved runs")
    print("ratios: engine time / onnxruntime's (wall and CPU) and / OpenVINO's (wall)")
    header = ("op", "direction", "seq,batch,in,hid", "engine ms", "ort ms", "ov ms", "/ort", "cpu /ort", "/ov",
              "max |diff|")
    print("{:5} {:14} {:18} {:>10} {:>8} {:>8} {:>6} {:>8} {:>6} {:>10}".format(*header))
    for shape in () if args.no_layers else SHAPES:
        T, N, I, H = shape
        for kind in ("LSTM", "GRU"):
            for direction in ("forward", "bidirectional"):
                X, weights = layer(kind, direction, T, N, I, H, rng)
                model = onnx_model(kind, direction, X, weights, H)
                engine = functools.partial(
                    KERNELS[kind], X, **weights, hidden_size=H, direction=direction, dtype=np.float32
                )
                onnxrt = functools.partial(ort_session(model).run, None, {"X": X})
                ov_infer = openvino_run(model)
                runs = [engine, onnxrt] + ([functools.partial(ov_infer, X)] if ov_infer else [])
                wall, cpu = median_ms(runs, args.runs)
                e_ms, o_ms = wall[:2]
                v_ms = f"{wall[2]:8.1f}" if ov_infer else f"{'-':>8}"
                v_ratio = f"{e_ms / wall[2]:6.2f}" if ov_infer else f"{'-':>6}"
                diff = float(np.abs(engine()[0] - onnxrt()[0]).max())
                print(f"{kind:5} {direction:14} {','.join(map(str, shape)):18} {e_ms:10.1f} {o_ms:8.1f} {v_ms}"
                      f" {e_ms / o_ms:6.2f} {cpu[0] / cpu[1]:8.2f} {v_ratio} {diff:10.1e}", flush=True)
    if not args.only_this_environment:
        real_models(args.real)
    forced = [v for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v in os.environ]
    if forced and not args.only_this_environment:
        import subprocess

        print(f"\nwithout {' and '.join(f'{v}={os.environ[v]}' for v in forced)} (numpy's own kernel choice):",
              flush=True)
        env = {k: v for k, v in os.environ.items() if k not in forced}
        subprocess.run([sys.executable, *sys.argv, "--only-this-environment"], env=env, check=True)


if __name__ == "__main__":
    main()
