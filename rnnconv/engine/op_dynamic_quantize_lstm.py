"""com.microsoft DynamicQuantizeLSTM as onnxruntime's CPU kernel computes it, to the bit.

The op and its inputs: rnnconv.dialects.onnx_quantized. The kernel has no specification but onnxruntime's code
(contrib_ops/cpu/quantization/dynamic_quantize_lstm.cc; rnn/lstm_base.cc, uni_directional_lstm.cc,
rnn_helpers.cc; MLAS quantize.cpp, qgemm, logistic.cpp, tanh.cpp), so exactness to onnxruntime is the bar. Per
direction, in float32, one IEEE operation at a time in onnxruntime's order:

    XW = qgemm(quantize(X[0:L] of every sequence, padding included), W)       L = max(sequence_lens): ONE scale
    for each step t < L, for each batch chunk (onnxruntime's intra-op threads, see _chunks):
        G = float(qgemm(quantize(H[t-1] of the chunk), R)) * (h_scale * R_scale) + XW[t]      (no FMA)
        it = f(clip(G_i + Pi * Ct-1 + (Wbi + Rbi)))    ft = f(clip(G_f + Pf * Ct-1 + (Wbf + Rbf)))  or 1 - it
        ct = g(clip(G_c + (Wbc + Rbc)))               Ct = Ct-1 * ft + it * ct
        ot = f(clip(G_o + Po * Ct + (Wbo + Rbo)))     Ht = h(Ct) * ot           (Ct is not clipped)

quantize(A) is DynamicQuantizeLinear's recipe: uint8 over [min(A, 0), max(A, 0)], one scale for the block.
What makes onnxruntime's numbers its own, all reproduced here:
- qgemm on x86-64 with AVX2 and no VNNI (u8 x s8): vpmaddubsw adds the raw products of k = 2j, 2j+1 with int16
  saturation (`mlas_saturates`); VNNI, AMX, ARM and u8 x u8 weights sum exactly.
- sigmoid and tanh are MLAS's rational polynomials (FMA3 kernels on x86-64 with FMA); Elu, Softplus and
  ScaledTanh call the C library's expf / logf.
- the batch is cut into one chunk per intra-op thread (each chunk's H quantized with its own scale) when
  N > 4 or (N >= 2 and H <= 256): the result depends on the session's thread count. rnnconv's onnxruntime
  sessions run models holding this op with ONNXRUNTIME_THREADS threads, and the kernel defaults to the same.
- whether Y is requested: without Y, a finished sequence's row of the H block keeps its last state, which
  enters the next steps' quantization (with Y, the row is 0).
- a sequence of length 0 gives Y_h = Y_c = 0; max(sequence_lens) = 0 gives all zeros; a reverse direction
  reverses each sequence's valid steps only, the padding staying in place (and in X's quantization).
Not reproduced: NaN in the quantized blocks (MLAS's min/max search with NaN depends on operand order), and
onnxruntime's uninitialised H rows when Y is not requested and some, not all, sequences have length 0 (zeros here).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Optional

import numpy as np

from rnnconv import activations as act
from rnnconv.dialects import onnx_quantized as dq
from rnnconv.dialects.mlas import LOGISTIC_P, LOGISTIC_Q, TANH_P, TANH_Q, mlas_fma, mlas_saturates
from rnnconv.dialects.onnx_recurrent import PEEPHOLES
from rnnconv.errors import BadInput

ONNXRUNTIME_THREADS = 1  # intra_op_num_threads of rnnconv's onnxruntime sessions on models holding the op
F32 = np.float32
FLT_MAX = np.finfo(np.float32).max


# -- MLAS's float kernels ------------------------------------------------------------------------------------

def _fma(a, b, c):
    # exact product in float64, one rounding of the sum to float32: fma(a, b, c) for float32 a, b, c, except for
    # double-rounding ties far rarer than any test can meet
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(F32)


def _horner(x2, coefficients, fma: bool):
    acc = _fma(x2, coefficients[0], coefficients[1]) if fma else x2 * coefficients[0] + coefficients[1]
    for c in coefficients[2:]:
        acc = _fma(x2, acc, c) if fma else acc * x2 + c
    return acc


def mlas_logistic(x, fma: bool = True):
    """MlasComputeLogistic: clamp to +-18, p(x)/q(x) + 0.5; the FMA3 kernel clamps below at 0 only, SSE2 to [0, 1]."""
    v = np.clip(np.asarray(x, F32), F32(-18), F32(18))
    x2 = v * v
    r = v * _horner(x2, LOGISTIC_P, fma) / _horner(x2, LOGISTIC_Q, fma) + F32(0.5)
    return np.maximum(r, F32(0)) if fma else np.clip(r, F32(0), F32(1))


def mlas_tanh(x, fma: bool = True):
    """MlasComputeTanh: clamp to +-9, p(x)/q(x)."""
    v = np.clip(np.asarray(x, F32), F32(-9), F32(9))
    x2 = v * v
    return v * _horner(x2, TANH_P, fma) / _horner(x2, TANH_Q, fma)


@functools.lru_cache(maxsize=1)
def _libm():
    """The C library's expf / logf (what onnxruntime's std::exp / std::log of a float call), or None: then exp and
    log in float64 rounded to float32, correctly rounded where the C library may not be (a last-bit difference,
    rarely, that a quantization rounding downstream can amplify)."""
    for name in ("libm.so.6", ctypes.util.find_library("m")):
        try:
            lib = ctypes.CDLL(name) if name else None
            if lib is None:
                continue
            fns = []
            for fn in ("expf", "logf"):
                f = getattr(lib, fn)
                f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
                fns.append(np.frompyfunc(f, 1, 1))
            return fns
        except (OSError, AttributeError):
            continue
    return None


def _expf(x):
    fns = _libm()
    if fns is None:
        with np.errstate(over="ignore"):
            return np.exp(x.astype(np.float64)).astype(F32)
    return np.asarray(fns[0](x), F32).reshape(x.shape)


def _logf(x):
    fns = _libm()
    if fns is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(x.astype(np.float64)).astype(F32)
    return np.asarray(fns[1](x), F32).reshape(x.shape)


def _apply(a: act.Activation, x: np.ndarray, fma: bool) -> np.ndarray:
    """One activation as onnxruntime's LSTM computes it in float32 (rnn_helpers.cc, rnn_activation_functors.h)."""
    name, alpha, beta = a.name, F32(a.alpha or 0), F32(a.beta or 0)
    if name == "Sigmoid":
        return mlas_logistic(x, fma)
    if name == "Tanh":
        return mlas_tanh(x, fma)
    with np.errstate(over="ignore", invalid="ignore"):
        if name == "Relu":
            return np.maximum(x, F32(0))
        if name == "Affine":
            return alpha * x + beta
        if name == "LeakyRelu":
            return np.where(x >= 0, x, alpha * x)
        if name == "ThresholdedRelu":
            return np.where(x > alpha, x, F32(0))
        if name == "ScaledTanh":
            # alpha * tanh(beta * x) as 2 * sigmoid(2 * beta * x) - 1, the sigmoid in its two-branch expf form
            y = F32(2) * (beta * x)
            sigmoid = np.where(y >= 0, F32(1) / (F32(1) + _expf(-y)), _expf(y) / (F32(1) + _expf(y)))
            return alpha * (F32(2) * sigmoid - F32(1))
        if name == "HardSigmoid":
            return np.minimum(F32(1), np.maximum(F32(0), alpha * x + beta))
        if name == "Elu":
            return np.where(x >= 0, x, alpha * (_expf(x) - F32(1)))
        if name == "Softsign":
            return x / (F32(1) + np.abs(x))
        if name == "Softplus":
            return _logf(F32(1) + _expf(x))  # inf past x = 88.7, as onnxruntime
    raise BadInput(f"unknown activation {name!r}")  # pragma: no cover - Activation admits only known names


# -- dynamic quantization and the integer GEMM ----------------------------------------------------------------

def quantize(a: np.ndarray) -> tuple[np.ndarray, F32, int]:
    """uint8 quantization of the whole block `a` (GetQuantizationParameter + MlasQuantizeLinear, the recipe of
    ONNX DynamicQuantizeLinear): (q, scale, zero point)."""
    lo = min(F32(a.min()) if a.size else F32(0), F32(0))
    hi = max(F32(a.max()) if a.size else F32(0), F32(0))
    scale = F32(1) if hi == lo else F32(hi - lo) / F32(255)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        zp = F32(0) - lo / scale
        zp = zp if zp < 255 else F32(255)  # std::min(255, zp): a NaN (from NaN in `a`) becomes 255
        zero_point = int(np.rint(zp if zp > 0 else F32(0)))  # round half to even
        v = a / scale  # a true division, as MLAS
        v = np.clip(np.where(np.isnan(v), F32(-zero_point), v), F32(-zero_point), F32(255 - zero_point))
    return (np.rint(v).astype(np.int32) + zero_point).astype(np.uint8), scale, zero_point


class QuantizedMatrix:
    """An 8-bit weight matrix B [K, N] and its zero point, prepared once for `product`."""

    def __init__(self, q: np.ndarray, zero_point: int, saturate: bool):
        self.zero_point, (self.K, self.N) = zero_point, q.shape
        # Only u8 x s8 saturates (vpmaddubsw); u8 x u8 widens both to int16 first (vpmaddwd): exact.
        self.saturate = saturate and q.dtype == np.int8
        b = q.astype(np.int32)
        if not self.saturate:
            self.exact = (b - zero_point).astype(np.float64)
            return
        if self.K % 2:
            b = np.concatenate([b, np.zeros((1, self.N), np.int32)])
        self.even, self.odd = b[0::2], b[1::2]
        self.even64, self.odd64 = self.even.astype(np.float64), self.odd.astype(np.float64)
        self.column_sums = b.sum(axis=0, keepdims=True).astype(np.int64)
        self.pair_bound = np.abs(self.even) + np.abs(self.odd)  # [K/2, N]

    def product(self, qa: np.ndarray, zero_point_a: int) -> np.ndarray:
        """int32 [M, N]: sum_k (qa[m, k] - zero_point_a) * (B[k, n] - zero_point), as MLAS accumulates it."""
        a = qa.astype(np.int32)
        if not self.saturate:
            # float64 BLAS is exact here (|sum| < 2^53), and far faster than numpy's integer matmul
            return ((a - zero_point_a).astype(np.float64) @ self.exact).astype(np.int64).astype(np.int32)
        M = a.shape[0]
        if self.K % 2:
            a = np.concatenate([a, np.zeros((M, 1), np.int32)], axis=1)
        ae, ao = a[:, 0::2], a[:, 1::2]
        # The raw products summed exactly, less what the int16 saturation of each pair cuts off. Only pairs whose
        # bound max(a) * (|b_even| + |b_odd|) passes int16 can saturate (never with reduce_range weights).
        acc = (ae.astype(np.float64) @ self.even64 + ao.astype(np.float64) @ self.odd64).astype(np.int64)
        a_max = np.maximum(ae.max(axis=0), ao.max(axis=0)) if M else np.zeros(ae.shape[1], np.int32)
        pairs = np.nonzero((a_max[:, None] * self.pair_bound > 32767).any(axis=1))[0]
        block = max(1, (1 << 22) // max(1, M * self.N))  # at most ~4M int32 products at a time
        for start in range(0, len(pairs), block):
            j = pairs[start:start + block]
            pair = ae[:, j, None] * self.even[None, j] + ao[:, j, None] * self.odd[None, j]  # [M, len(j), N]
            acc -= (pair - np.clip(pair, -32768, 32767)).sum(axis=1, dtype=np.int64)
        if zero_point_a or self.zero_point:  # zero points corrected through row and column sums, in int32
            acc = (acc - self.zero_point * a.sum(axis=1, keepdims=True) - zero_point_a * self.column_sums
                   + self.K * zero_point_a * self.zero_point)
        return acc.astype(np.int32)


def _quantized_product(a: np.ndarray, b: QuantizedMatrix, b_scale: np.ndarray,
                       accumulate: Optional[np.ndarray] = None) -> np.ndarray:
    """rnn::detail::ComputeGemm with 8-bit weights: float(acc) * (a_scale * b_scale) [+ accumulate]."""
    qa, a_scale, a_zero_point = quantize(a)
    acc = b.product(qa, a_zero_point)
    with np.errstate(invalid="ignore", over="ignore"):
        out = acc.astype(F32) * (a_scale * b_scale).astype(F32)
        return out if accumulate is None else out + accumulate


def _chunks(batch: int, hidden: int, num_threads: int) -> list[tuple[int, int]]:
    """UniDirectionalLstm::SetNumThreads: the batch split over the intra-op threads."""
    step = batch
    if batch > 4 or (batch >= 2 and hidden <= 256):
        step = -(-batch // max(1, num_threads))
    return [(s, min(s + step, batch)) for s in range(0, batch, max(1, step))]


# -- the op --------------------------------------------------------------------------------------------------

def dynamic_quantize_lstm(
    X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
    W_scale=None, W_zero_point=None, R_scale=None, R_zero_point=None,
    *,
    hidden_size=None,
    direction="forward",
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    input_forget=0,
    layout=0,
    output_sequence: bool = True,
    num_threads: int = ONNXRUNTIME_THREADS,
    saturate: Optional[bool] = None,
    fma: Optional[bool] = None,
):
    """(Y, Y_h, Y_c), float32, as onnxruntime computes them; Y is None when `output_sequence` is False (the node
    does not request Y, which changes the result, see the module docstring). `num_threads`: the onnxruntime
    session's intra-op thread count; `saturate`, `fma`: this machine's MLAS when None."""
    attributes = {"hidden_size": hidden_size, "direction": direction, "clip": clip, "layout": layout}
    dq.check_attributes({k: v for k, v in attributes.items() if v is not None})
    X, W, R = np.asarray(X), np.asarray(W), np.asarray(R)
    if X.ndim != 3 or X.dtype != F32:
        raise BadInput(f"X must be float32 [seq_length, batch_size, input_size], got {X.dtype}{list(X.shape)}")
    T, N, I = X.shape
    H = int(hidden_size)
    acts = act.resolve("LSTM", 2 if direction == "bidirectional" else 1, activations, activation_alpha,
                       activation_beta)
    D = len(acts)
    dq.check_weights(W, R, D, H, I)
    wq = dq.quantization("W", W, W_scale, W_zero_point, D, H)
    rq = dq.quantization("R", R, R_scale, R_zero_point, D, H)

    def given(name, value, shape, dtype=F32):
        if value is None:
            return None
        value = np.asarray(value)
        if value.shape != shape or value.dtype != dtype:
            raise BadInput(f"{name} must be {np.dtype(dtype)}{list(shape)}, got {value.dtype}{list(value.shape)}")
        return value

    B = given("B", B, (D, 8 * H))
    P = given("P", P, (D, 3 * H))
    initial_h = given("initial_h", initial_h, (D, N, H))
    initial_c = given("initial_c", initial_c, (D, N, H))
    lens = given("sequence_lens", sequence_lens, (N,), np.int32)
    if lens is None:
        lens = np.full(N, T, np.int64)
    elif np.any(lens < 0) or np.any(lens > T):
        raise BadInput(f"sequence_lens must lie in [0, seq_length={T}], got {lens.tolist()}")
    saturate = mlas_saturates() if saturate is None else saturate
    fma = mlas_fma() if fma is None else fma

    Y = np.zeros((T, D, N, H), F32) if output_sequence else None
    Y_h, Y_c = np.zeros((D, N, H), F32), np.zeros((D, N, H), F32)
    if lens.max(initial=0) == 0:  # LSTMBase::ComputeImpl: nothing to run, every output zero
        return Y, Y_h, Y_c
    for d in range(D):
        y = _direction(
            X, lens.astype(np.int64), QuantizedMatrix(W[d], wq.zero_point[d], saturate), wq.scale[d],
            QuantizedMatrix(R[d], rq.zero_point[d], saturate), rq.scale[d],
            None if B is None else (B[d, :4 * H] + B[d, 4 * H:]).astype(F32),  # LoadBias: Wb + Rb, once
            None if P is None else P[d],
            np.zeros((N, H), F32) if initial_h is None else initial_h[d],
            np.zeros((N, H), F32) if initial_c is None else initial_c[d],
            acts[d], reverse=direction == "reverse" or d == 1, clip=F32(FLT_MAX if clip is None else clip),
            input_forget=bool(input_forget), num_threads=num_threads, output_sequence=output_sequence, fma=fma,
            Y_h=Y_h[d], Y_c=Y_c[d],
        )
        if Y is not None:
            Y[:, d] = y
    return Y, Y_h, Y_c


def _direction(X, lens, Wq, W_scale, Rq, R_scale, bias, P, h0, c0, acts, *, reverse, clip, input_forget,
               num_threads, output_sequence, fma, Y_h, Y_c):
    """One direction (UniDirectionalLstm::ComputeImpl); fills Y_h [N, H], Y_c [N, H]; returns Y [T, N, H]."""
    T, N, _ = X.shape
    H = Rq.K
    longest, shortest = int(lens.max()), min(T, int(lens.min()))
    if reverse:  # ReverseSequence: each sequence's valid steps reversed, its padding in place
        X = X.copy()
        for b in range(N):
            X[:lens[b], b] = X[:lens[b], b][::-1].copy()
    # One quantization over every step that runs, padding included: X[0:longest] of every sequence.
    XW = _quantized_product(X[:longest].reshape(longest * N, -1), Wq, W_scale).reshape(longest, N, 4 * H)
    f, g, h = acts
    at = {k: slice(n * H, (n + 1) * H) for n, k in enumerate(dq.GATES)}  # rows of G and the bias: ONNX's gate order

    def gate(pre, k, peephole=None, cell=None):
        # clip_add_bias after elementwise_product: (G + P * C) + (Wb + Rb), then clamped
        if peephole is not None:
            pre = pre + cell * peephole
        if bias is not None:
            pre = pre + bias[at[k]]
        return np.maximum(np.minimum(pre, clip), -clip)

    peep = dict.fromkeys(PEEPHOLES) if P is None else {k: P[n * H:(n + 1) * H] for n, k in enumerate(PEEPHOLES)}
    c = np.array(c0, F32)
    outputs = np.zeros((longest, N, H), F32)  # in processing order
    # Without Y, each row's state lives in the Y_h buffer: a finished row keeps its last H, quantized with the rest.
    last_h = np.zeros((N, H), F32)
    rows_of = np.arange(N)
    for s, e in _chunks(N, H, num_threads):
        rows = rows_of[s:e]
        for t in range(longest):
            prev = h0[s:e] if t == 0 else outputs[t - 1, s:e] if output_sequence else last_h[s:e]
            G = _quantized_product(prev, Rq, R_scale, accumulate=XW[t, s:e])
            active = (t < shortest) | (t < lens[rows])
            if active.any():
                idx = rows[active]
                Ga, cp = G[active], c[idx]
                with np.errstate(invalid="ignore", over="ignore"):
                    it = _apply(f, gate(Ga[:, at["i"]], "i", peep["i"], cp), fma)
                    ft = F32(1) - it if input_forget else _apply(f, gate(Ga[:, at["f"]], "f", peep["f"], cp), fma)
                    ct = _apply(g, gate(Ga[:, at["c"]], "c"), fma)
                    cn = cp * ft + it * ct
                    ot = _apply(f, gate(Ga[:, at["o"]], "o", peep["o"], cn), fma)
                    hn = _apply(h, cn, fma) * ot
                c[idx] = cn
                if output_sequence:
                    outputs[t, idx] = hn
                else:
                    last_h[idx] = hn
            ending = rows[lens[rows] == t + 1]
            Y_c[ending] = c[ending]
    for b in range(N):
        if lens[b]:
            Y_h[b] = outputs[lens[b] - 1, b] if output_sequence else last_h[b]
    if not output_sequence:
        return None
    Y = np.zeros((T, N, H), F32)
    if reverse:
        for b in range(N):
            Y[:lens[b], b] = outputs[:lens[b], b][::-1]
    else:
        Y[:longest] = outputs
    return Y
