"""`rnnconv fuse`'s result against its unrolled source: onnxruntime and OpenVINO (f32), run and load/compile.

Run: python benchmarks/fuse.py [--runs N] [--threads N] [--seq T] [--batch N] [--size H]

The unrolled sources are written here with onnx.helper in the form PyTorch's exporters give a cell applied once per
step (nn.LSTMCell, nn.GRUCell, nn.RNNCell: Gemm, Split, Sigmoid/Tanh, Mul per step, weights shared), T = 100 by
default, batch 32, 256 -> 256, then fused by `rnnconv.fuse` (RNN-relu: the RNN cell with Relu; nn.RNN, nn.RNN-bi:
torch's nn.RNN, one way and bidirectional, as the dynamo exporter unrolls it; the latter fused with
--bidirectional, the form OpenVINO computes right). Load is onnxruntime's session creation
and OpenVINO's read + compile; run is the median of interleaved runs. Ratios are unrolled / fused (above 1: the fused
model is faster). Timings are never asserted (tests/benchmarks only checks the script starts).

Both forms do the same multiply-adds (2 T N G H (I + H) per direction, G gates), so each OpenVINO run is also given
as GFLOP/s beside the rate of one f32 MatMul [T N, H] x [H, H]: at this size, one thread, OpenVINO runs the unrolled
chain's FullyConnected layers and its own Sequence kernels near that rate alike, which bounds what fusing can gain.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[variable] = str(THREADS)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import rnnconv  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1, "RNN-relu": 1, "nn.RNN": 1, "nn.RNN-bi": 1}


def unrolled(op: str, T: int, N: int, I: int, H: int, seed: int = 0) -> onnx.ModelProto:
    """x [T, N, I], h [N, H] (and c) -> the stacked h of every step, as torch writes a cell loop."""
    rng = np.random.default_rng(seed)
    G, scale = GATES[op], 1 / np.sqrt(H)
    inits = [numpy_helper.from_array((scale * rng.standard_normal(s)).astype(np.float32), n)
             for n, s in (("w_ih", (G * H, I)), ("w_hh", (G * H, H)), ("b_ih", (G * H,)), ("b_hh", (G * H,)))]
    nodes, h, c = [], "h", "c"
    gemm = dict(transB=1)
    for t in range(T):
        inits.append(numpy_helper.from_array(np.array(t, np.int64), f"t{t}"))
        p = f"s{t}_"
        nodes += [helper.make_node("Gather", ["x", f"t{t}"], [p + "x"], axis=0),
                  helper.make_node("Gemm", [p + "x", "w_ih", "b_ih"], [p + "gx"], **gemm),
                  helper.make_node("Gemm", [h, "w_hh", "b_hh"], [p + "gh"], **gemm)]
        if op.startswith("RNN"):
            nodes += [helper.make_node("Add", [p + "gh", p + "gx"], [p + "a"]),
                      helper.make_node("Relu" if op == "RNN-relu" else "Tanh", [p + "a"], [p + "h"])]
        elif op == "LSTM":
            g = [p + k for k in "ifgo"]
            nodes += [helper.make_node("Add", [p + "gh", p + "gx"], [p + "a"]),
                      helper.make_node("Split", [p + "a"], g, axis=1, num_outputs=4),
                      helper.make_node("Sigmoid", [g[0]], [p + "si"]), helper.make_node("Sigmoid", [g[1]], [p + "sf"]),
                      helper.make_node("Tanh", [g[2]], [p + "tg"]), helper.make_node("Sigmoid", [g[3]], [p + "so"]),
                      helper.make_node("Mul", [p + "sf", c], [p + "fc"]),
                      helper.make_node("Mul", [p + "si", p + "tg"], [p + "ig"]),
                      helper.make_node("Add", [p + "fc", p + "ig"], [p + "c"]),
                      helper.make_node("Tanh", [p + "c"], [p + "tc"]),
                      helper.make_node("Mul", [p + "so", p + "tc"], [p + "h"])]
            c = p + "c"
        else:
            gx, gh = [p + f"x{k}" for k in "rzn"], [p + f"h{k}" for k in "rzn"]
            mk = helper.make_node
            nodes += [mk("Split", [p + "gx"], gx, axis=1, num_outputs=3),
                      mk("Split", [p + "gh"], gh, axis=1, num_outputs=3),
                      mk("Add", [gh[0], gx[0]], [p + "ar"]), mk("Sigmoid", [p + "ar"], [p + "r"]),
                      mk("Add", [gh[1], gx[1]], [p + "az"]), mk("Sigmoid", [p + "az"], [p + "z"]),
                      mk("Mul", [gh[2], p + "r"], [p + "rn"]),
                      mk("Add", [gx[2], p + "rn"], [p + "an"]), mk("Tanh", [p + "an"], [p + "n"]),
                      mk("Sub", [h, p + "n"], [p + "d"]), mk("Mul", [p + "d", p + "z"], [p + "dz"]),
                      mk("Add", [p + "dz", p + "n"], [p + "h"])]
        if t == 0:
            inits.append(numpy_helper.from_array(np.array([0], np.int64), "ax0"))
        nodes.append(helper.make_node("Unsqueeze", [p + "h", "ax0"], [p + "u"]))
        h = p + "h"
    nodes.append(helper.make_node("Concat", [f"s{t}_u" for t in range(T)], ["y"], axis=0))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, N, I]),
              helper.make_tensor_value_info("h", TensorProto.FLOAT, [N, H])]
    if op == "LSTM":
        inputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [N, H]))
    graph = helper.make_graph(nodes, f"unrolled_{op}", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [T, N, H])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def dynamo_rnn(path: str, T: int, N: int, H: int, bidirectional: bool = False) -> bool:
    """torch's nn.RNN(H, H) over x [T, N, H] through the dynamo exporter (which unrolls it); False without torch."""
    try:
        import torch
    except ImportError:
        return False
    import contextlib
    import io
    import logging
    import warnings

    torch.manual_seed(0)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        torch.onnx.export(torch.nn.RNN(H, H, bidirectional=bidirectional).eval(), (torch.randn(T, N, H),), path,
                          dynamo=True, input_names=["x"])
    onnx.save(onnx.load(path), path)  # one file
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    return True


def ort_load_and_run(path: str, feeds: dict, runs: int):
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
    start = time.perf_counter()
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    load = time.perf_counter() - start
    return load, lambda: session.run(None, feeds)


def openvino_load_and_run(path: str, feeds: dict):
    import openvino as ov

    core = ov.Core()
    start = time.perf_counter()
    compiled = core.compile_model(core.read_model(path), "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": THREADS, "NUM_STREAMS": 1})
    load = time.perf_counter() - start
    request = compiled.create_infer_request()
    return load, lambda: request.infer(feeds)


def matmul_rate(rows: int, H: int) -> float:
    """OpenVINO's GFLOP/s on one f32 MatMul [rows, H] x [H, H], the same threads: what bounds a recurrence here."""
    rng = np.random.default_rng(2)
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"])], "matmul",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [rows, H])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, H])],
                              initializer=[numpy_helper.from_array(rng.standard_normal((H, H)).astype(np.float32),
                                                                   "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "matmul.onnx")
        onnx.save(model, path)
        _, run = openvino_load_and_run(path, {"a": rng.standard_normal((rows, H)).astype(np.float32)})
        _, (ms,) = median_ms([run], 20)
    return 2 * rows * H * H / ms / 1e6


def median_ms(fns, runs: int) -> tuple[list[float], list[float]]:
    """Median wall and CPU milliseconds of each function, runs interleaved so load changes hit all alike (with one
    thread the CPU time is the steadier figure on a shared machine)."""
    wall, cpu = [[] for _ in fns], [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(runs):
        for k, fn in enumerate(fns):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[k].append((time.perf_counter() - start) * 1e3)
            cpu[k].append((time.process_time() - start_cpu) * 1e3)
    return [statistics.median(t) for t in wall], [statistics.median(t) for t in cpu]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seq", type=int, default=100)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--ops", default="LSTM,GRU,RNN,RNN-relu,nn.RNN,nn.RNN-bi",
                    help="nn.RNN, nn.RNN-bi: torch's nn.RNN as the dynamo exporter unrolls it (needs torch)")
    args = ap.parse_args()
    T, N, H = args.seq, args.batch, args.size
    rng = np.random.default_rng(1)
    print(f"T={T}, batch {N}, {H} -> {H}, {THREADS} thread(s); ratio = unrolled / fused")
    try:
        print(f"OpenVINO, one f32 MatMul [{T * N}, {H}] x [{H}, {H}]: {matmul_rate(T * N, H):.0f} GFLOP/s")
    except ImportError:
        pass
    print(f"{'op':9} {'runtime':12} {'what':8} {'unrolled':>10} {'fused':>10} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as folder:
        for op in args.ops.split(","):
            src, out = os.path.join(folder, f"{op}.onnx"), os.path.join(folder, f"{op}_fused.onnx")
            feeds = {"x": rng.standard_normal((T, N, H)).astype(np.float32),
                     "h": rng.standard_normal((N, H)).astype(np.float32)}
            if op.startswith("nn.RNN"):
                if not dynamo_rnn(src, T, N, H, bidirectional=op.endswith("-bi")):
                    print(f"{op:9} (torch not installed)")
                    continue
                del feeds["h"]
            else:
                onnx.save(unrolled(op, T, N, H, H), src)
            # one bidirectional node: OpenVINO 2026.4 computes two nodes reading one sequence wrongly (batch > 1)
            rnnconv.fuse(src, out, verify="none", bidirectional=op.endswith("-bi"))
            if op == "LSTM":
                feeds["c"] = rng.standard_normal((N, H)).astype(np.float32)
            for runtime in ("onnxruntime", "openvino"):
                pairs = []
                for path in (src, out):
                    if runtime == "onnxruntime":
                        pairs.append(ort_load_and_run(path, feeds, args.runs))
                    else:
                        try:
                            pairs.append(openvino_load_and_run(path, feeds))
                        except ImportError:
                            pairs = []
                            break
                if not pairs:
                    print(f"{op:9} {runtime:12} (not installed)")
                    continue
                run_ms, run_cpu = median_ms([p[1] for p in pairs], args.runs)
                load_ms = [p[0] * 1e3 for p in pairs]
                for what, (a, b) in (("run", run_ms), ("run cpu", run_cpu), ("load", load_ms)):
                    print(f"{op:9} {runtime:12} {what:8} {a:9.1f}ms {b:9.1f}ms {a / b:6.2f}x")
                if runtime == "openvino":
                    flop = 2 * T * N * GATES[op] * H * (H + H) * (2 if op.endswith("-bi") else 1) / 1e6
                    a, b = (flop / ms for ms in run_cpu)
                    print(f"{op:9} {runtime:12} {'GFLOP/s':8} {a:10.0f}  {b:10.0f}   (run cpu)")


if __name__ == "__main__":
    main()
