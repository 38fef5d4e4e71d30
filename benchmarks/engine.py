"""Engine (float32) against onnxruntime on LSTM and GRU layers: median milliseconds and their ratio.

Run: python benchmarks/engine.py [--runs N] [--threads N]

Both sides get the same number of threads (default 1: on a shared machine multi-threaded BLAS timings
are mostly noise). Thread counts are read when numpy loads, hence the environment set-up first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(THREADS)

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from rnnconv.engine import KERNELS

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


def median_ms(fn, runs):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="threads for numpy's BLAS and onnxruntime")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"threads: {THREADS}, numpy {np.__version__}, onnxruntime {ort.__version__}")
    print(f"{'op':5} {'direction':14} {'seq,batch,in,hid':18} {'engine ms':>10} {'ort ms':>10} {'ratio':>7} {'max |diff|':>10}")
    for shape in SHAPES:
        T, N, I, H = shape
        for kind in ("LSTM", "GRU"):
            for direction in ("forward", "bidirectional"):
                X, weights = layer(kind, direction, T, N, I, H, rng)
                session = ort_session(kind, direction, X, weights, H)
                kernel = KERNELS[kind]
                engine = lambda: kernel(X, **weights, hidden_size=H, direction=direction, dtype=np.float32)  # noqa: E731
                onnxrt = lambda: session.run(None, {"X": X})  # noqa: E731
                e_ms, o_ms = median_ms(engine, args.runs), median_ms(onnxrt, args.runs)
                diff = float(np.abs(engine()[0] - onnxrt()[0]).max())
                print(f"{kind:5} {direction:14} {','.join(map(str, shape)):18} {e_ms:10.1f} {o_ms:10.1f}"
                      f" {e_ms / o_ms:7.2f} {diff:10.1e}")


if __name__ == "__main__":
    main()
