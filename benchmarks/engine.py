"""Engine (float32) against onnxruntime on LSTM and GRU layers: median milliseconds and their ratio.

Run: python benchmarks/engine.py [--runs N] [--threads N]

Both sides get the same number of threads (default 1: on a shared machine multi-threaded timings are
mostly noise); numpy reads thread counts when it loads, hence the environment is set first. The engine's
time is mostly numpy's float32 GEMM: the header names the OpenBLAS kernels in use, which
OPENBLAS_CORETYPE can change (e.g. SkylakeX on a CPU with AVX-512, where OpenBLAS may pick Haswell).
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

from rnnconv.engine import KERNELS  # noqa: E402

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


def ort_session(kind, direction, X, weights, H):
    node = helper.make_node(kind, ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H, direction=direction)
    graph = helper.make_graph(
        [node], "bench",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, X.shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y", "Y_h")],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="threads for numpy's BLAS and onnxruntime")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"threads: {THREADS}, numpy {np.__version__} (OpenBLAS kernels: {blas_core()}),"
          f" onnxruntime {ort.__version__}, median of {args.runs} interleaved runs")
    header = ("op", "direction", "seq,batch,in,hid", "engine ms", "ort ms", "ratio", "cpu ratio", "max |diff|")
    print("{:5} {:14} {:18} {:>10} {:>10} {:>7} {:>9} {:>10}".format(*header))
    for shape in SHAPES:
        T, N, I, H = shape
        for kind in ("LSTM", "GRU"):
            for direction in ("forward", "bidirectional"):
                X, weights = layer(kind, direction, T, N, I, H, rng)
                session = ort_session(kind, direction, X, weights, H)
                engine = functools.partial(
                    KERNELS[kind], X, **weights, hidden_size=H, direction=direction, dtype=np.float32
                )
                onnxrt = functools.partial(session.run, None, {"X": X})
                (e_ms, o_ms), (e_cpu, o_cpu) = median_ms([engine, onnxrt], args.runs)
                diff = float(np.abs(engine()[0] - onnxrt()[0]).max())
                print(f"{kind:5} {direction:14} {','.join(map(str, shape)):18} {e_ms:10.1f} {o_ms:10.1f}"
                      f" {e_ms / o_ms:7.2f} {e_cpu / o_cpu:9.2f} {diff:10.1e}")


if __name__ == "__main__":
    main()
