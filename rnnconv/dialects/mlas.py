"""Facts about onnxruntime's MLAS on this machine that decide its float32 results: which u8 x s8 GEMM kernel it
dispatches to, whether its sigmoid and tanh fuse multiply-adds, and their coefficients (MLAS logistic.cpp,
tanh.cpp). Shared by the engine's DynamicQuantizeLSTM kernel and its OpenVINO lowering."""

from __future__ import annotations

import functools
import platform

import numpy as np

F32 = np.float32


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> frozenset:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def mlas_saturates() -> bool:
    """Whether onnxruntime's u8 x s8 GEMM saturates pairs to int16 here: x86-64 with AVX2 or AVX512BW and
    none of AVX-VNNI, AVX512-VNNI, AMX-INT8 (MLAS's kernel dispatch). x86 without /proc/cpuinfo: the common
    AVX2 case."""
    if not _x86():
        return False
    flags = _cpu_flags()
    if not flags:
        return True
    if flags & {"avx_vnni", "avx512_vnni", "amx_int8"}:
        return False
    return "avx2" in flags or "avx512bw" in flags


def mlas_fma() -> bool:
    """Whether MLAS's logistic / tanh kernels fuse multiply-adds here (x86-64 FMA3, or any non-x86 CPU's NEON
    kernels); x86 without FMA runs the SSE2 kernels."""
    return not _x86() or not _cpu_flags() or "fma" in _cpu_flags()


# MLAS logistic.cpp / tanh.cpp coefficients, as float32: sigmoid(x) = x p(x^2) / q(x^2) + 0.5 on [-18, 18],
# tanh(x) = x p(x^2) / q(x^2) on [-9, 9], each polynomial by Horner's rule from the first coefficient.
LOGISTIC_P = tuple(F32(v) for v in (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                                     8.51377133304701e-03, 2.48287947061529e-01))
LOGISTIC_Q = tuple(F32(v) for v in (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
                                     1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01))
TANH_P = tuple(F32(v) for v in (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                                 5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                                 4.89352455891786e-03))
TANH_Q = tuple(F32(v) for v in (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                                 4.89352518554385e-03))
