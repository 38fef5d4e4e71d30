"""The RNN, GRU and LSTM recurrences of the ONNX spec, in gate-name terms.

run_direction: one direction, weights as dicts gate name -> array (LSTM i, o, f, c; GRU z, r, h; RNN i),
so gate order stays the caller's business (the ONNX kernels, the OpenVINO IR interpreter). run_layer:
every direction. run_onnx_node: one ONNX node on the tensors as the spec stacks them (op_rnn, op_gru,
op_lstm). The input projection of all steps is one matrix product; only the recurrence loops, on
preallocated buffers in `dtype`.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np

from rnnconv.activations import Activation, apply, resolve
from rnnconv.dialects.onnx_recurrent import GATES as ONNX_GATES
from rnnconv.dialects.onnx_recurrent import PEEPHOLES as ONNX_PEEPHOLES
from rnnconv.errors import BadInput
from rnnconv.io import release_pages
from rnnconv.layer import DIRECTIONS, Layer

FLOAT_TYPES = ("float16", "bfloat16", "float32", "float64")

# Packing order inside the loop: ONNX's, so the weights of an ONNX node need no copy. The loops find each gate's
# rows by name; they activate GRU's z and r, and LSTM's sigmoid gates, as one block: h and c come last.
_PACKING = ONNX_GATES
assert _PACKING["GRU"][-1] == "h" and _PACKING["LSTM"][-1] == "c"


def _rows(kind: str, H: int) -> dict[str, slice]:
    """Each gate's rows in the loop's packed [G*H, ...] buffers."""
    return {g: slice(k * H, (k + 1) * H) for k, g in enumerate(_PACKING[kind])}


def run_direction(
    kind: str,
    X: np.ndarray,
    W: Mapping[str, np.ndarray],
    R: Mapping[str, np.ndarray],
    Wb: Optional[Mapping[str, np.ndarray]],
    Rb: Optional[Mapping[str, np.ndarray]],
    P: Optional[Mapping[str, np.ndarray]],
    activations: Sequence[Activation],
    *,
    clip: Optional[float] = None,
    linear_before_reset: bool = False,
    input_forget: bool = False,
    sequence_lens: Optional[np.ndarray] = None,
    initial_h: Optional[np.ndarray] = None,
    initial_c: Optional[np.ndarray] = None,
    reverse: bool = False,
    dtype=np.float64,
    Y: Optional[np.ndarray] = None,
):
    """One direction of a layer: X [T, N, I] -> (Y [T, N, H], Y_h [N, H], Y_c [N, H] or None).

    W[g] [H, I], R[g] [H, H], Wb[g] / Rb[g] / P[g] [H]; an empty or None dict means zeros (P: no peepholes).
    sequence_lens [N]: steps past a sequence's end give zeros in Y and leave the state alone, so Y_h / Y_c
    come from each sequence's last valid step and a reverse pass starts at each sequence's own end.
    Y may be given as a zero-filled [T, N, H] buffer of `dtype` (a view into a layer's output).
    """
    dt = np.dtype(dtype)
    gates = _PACKING[kind]
    T, N, I = X.shape
    H = R[gates[0]].shape[0]
    G = len(gates)
    Wb, Rb, P = Wb or {}, Rb or {}, P or {}
    lbr = kind == "GRU" and bool(linear_before_reset)

    def vec(d, g):
        return np.asarray(d[g], dt) if g in d else np.zeros(H, dt)

    # The loop works feature-major (states [H, N], gates [G*H, N]): R @ h^T reads the weights as stored, with no
    # transposed copy, and is the faster GEMM shape for few rows (64x1024x3072 float32: 1.9 ms against 2.4 ms).
    # Wb + Rb folds into the input projection, except GRU's Rbh which linear_before_reset puts under rt.
    bias = np.concatenate([vec(Wb, g) + (0 if lbr and g == "h" else vec(Rb, g)) for g in gates])
    XW = _stacked_product([W[g] for g in gates], dt)(np.asarray(X, dt).reshape(T * N, I).T,
                                                    np.empty((G * H, T * N), dt))
    XW += bias[:, None]
    XW = XW.reshape(G * H, T, N)

    h_prev = np.zeros((H, N), dt) if initial_h is None else np.array(np.asarray(initial_h).T, dt, order="C")
    c_prev = None
    if kind == "LSTM":
        c_prev = np.zeros((H, N), dt) if initial_c is None else np.array(np.asarray(initial_c).T, dt, order="C")
    Y = np.zeros((T, N, H), dt) if Y is None else Y

    lens = None if sequence_lens is None else np.asarray(sequence_lens).reshape(N)
    if lens is not None and np.all(lens >= T):
        lens = None
    step = _LOOPS[kind](
        R=R, Rbh=vec(Rb, "h") if lbr else None, P=P, activations=activations, clip=clip,
        linear_before_reset=lbr, input_forget=bool(input_forget), N=N, H=H, dt=dt,
    )
    states = (np.empty((H, N), dt), np.empty((H, N), dt))
    shortest = T if lens is None else int(lens.min())
    for t in range(T - 1, -1, -1) if reverse else range(T):
        out = states[0] if h_prev is not states[0] else states[1]
        c = step(XW[:, t], h_prev, c_prev, out)
        if t < shortest:
            Y[t] = out.T
            h_prev, c_prev = out, c
        else:
            active = (t < lens)[None, :]
            Y[t] = np.where(active, out, 0).T
            h_prev = np.where(active, out, h_prev)
            c_prev = None if c is None else np.where(active, c, c_prev)
    Y_h, Y_c = np.array(h_prev.T), None if c_prev is None else np.array(c_prev.T)
    if sequence_lens is not None:
        # An empty sequence outputs no step: onnxruntime and OpenVINO both give zeros, not the initial state.
        empty = np.asarray(sequence_lens).reshape(N) == 0
        Y_h[empty] = 0
        if Y_c is not None:
            Y_c[empty] = 0
    return Y, Y_h, Y_c


# Weights of at least this many bytes, already in the computing dtype, are multiplied gate by gate where they lie
# (memory-mapped, for big models) instead of being stacked into a new matrix: no copy of the layer's weights.
NO_COPY_BYTES = 16 << 20


def _root(a: np.ndarray):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _adjacent(mats: Sequence[np.ndarray]) -> Optional[np.ndarray]:
    """The mats as one matrix without a copy, when they are consecutive row blocks of one C-contiguous array."""
    first = mats[0]
    for a, b in zip(mats, mats[1:]):
        if not (a.flags.c_contiguous and b.flags.c_contiguous and a.dtype == b.dtype and a.shape[1:] == b.shape[1:]
                and _root(a) is _root(b) and b.ctypes.data == a.ctypes.data + a.nbytes):
            return None
    rows = sum(m.shape[0] for m in mats)
    return np.lib.stride_tricks.as_strided(first, (rows,) + first.shape[1:], first.strides, writeable=False)


def _stacked_product(mats: Sequence[np.ndarray], dt):
    """`product(xT, out)`: concatenate(mats) @ xT into `out` ([sum of the mats' rows, columns of xT])."""
    mats = [np.asarray(m) for m in mats]
    if all(m.dtype == dt for m in mats):
        joined = _adjacent(mats)
        if joined is not None:
            return lambda xT, out: _matmul(joined, xT, out)
        if sum(m.nbytes for m in mats) >= NO_COPY_BYTES:
            def product(xT, out):
                start = 0
                for m in mats:
                    _matmul(m, xT, out[start:start + m.shape[0]])
                    start += m.shape[0]
                return out
            return product
    stacked = np.concatenate([np.asarray(m, dt) for m in mats])
    return lambda xT, out: _matmul(stacked, xT, out)


# A big matrix times a few columns (R @ h^T at a check's small batch) is bound by reading the matrix: as a GEMM it
# reads it about twice as slowly as matrix-vector products over row blocks that stay in cache for every column
# (measured on 256 MiB float32 matrices, 2 columns).
THIN_COLUMNS = 8
BLOCK_BYTES = 512 << 10


def _matmul(m: np.ndarray, xT: np.ndarray, out: np.ndarray) -> np.ndarray:
    n = xT.shape[1]
    if not 2 <= n <= THIN_COLUMNS or m.nbytes < NO_COPY_BYTES or m.dtype.kind != "f" or m.dtype.itemsize < 4:
        return np.matmul(m, xT, out=out)
    cols = np.ascontiguousarray(xT.T, m.dtype)
    rows = max(1, BLOCK_BYTES // (m.shape[1] * m.itemsize))
    buf = np.empty((n, rows), m.dtype)
    for start in range(0, m.shape[0], rows):
        block = m[start:start + rows]
        k = block.shape[0]
        for j in range(n):
            np.dot(block, cols[j], out=buf[j, :k])
        out[start:start + k] = buf[:, :k].T
    return out


# clip bounds the inputs of f and g; neither Ct nor the input of h(Ct) is clipped, as in onnxruntime.
def _clip(x, clip):
    if clip is not None:
        np.clip(x, -clip, clip, out=x)


def _rnn_loop(R, activations, clip, N, H, dt, **_):
    (f,) = activations
    Rt = _stacked_product([R["i"]], dt)

    def step(xw, h_prev, c_prev, out):
        # Ht = f(Xt*(Wi^T) + Ht-1*(Ri^T) + Wbi + Rbi), transposed
        Rt(h_prev, out)
        np.add(out, xw, out=out)
        _clip(out, clip)
        apply(f, out, out=out)
        return None

    return step


def _gru_loop(R, Rbh, activations, clip, linear_before_reset, N, H, dt, **_):
    f, g = activations
    # linear_before_reset needs Ht-1*(Rh^T) before rt is known: then one product covers all three gates.
    product_gates = _PACKING["GRU"] if linear_before_reset else _PACKING["GRU"][:-1]
    Rt = _stacked_product([R[k] for k in product_gates], dt)
    Rht = _stacked_product([R["h"]], dt)
    gates = np.empty((len(product_gates) * H, N), dt)
    rows = _rows("GRU", H)
    zr, zt, rt = gates[: 2 * H], gates[rows["z"]], gates[rows["r"]]
    ht, tmp = np.empty((H, N), dt), np.empty((H, N), dt)
    Rbh = None if Rbh is None else Rbh[:, None]

    def step(xw, h_prev, c_prev, out):
        # zt = f(Xt*(Wz^T) + Ht-1*(Rz^T) + Wbz + Rbz), rt likewise
        Rt(h_prev, gates)
        np.add(zr, xw[: 2 * H], out=zr)
        _clip(zr, clip)
        apply(f, zr, out=zr)
        if linear_before_reset:
            # ht = g(Xt*(Wh^T) + (rt (.) (Ht-1*(Rh^T) + Rbh)) + Wbh)
            np.add(gates[rows["h"]], Rbh, out=ht)
            np.multiply(ht, rt, out=ht)
        else:
            # ht = g(Xt*(Wh^T) + (rt (.) Ht-1)*(Rh^T) + Rbh + Wbh)
            np.multiply(rt, h_prev, out=tmp)
            Rht(tmp, ht)
        np.add(ht, xw[rows["h"]], out=ht)
        _clip(ht, clip)
        apply(g, ht, out=ht)
        # Ht = (1 - zt) (.) ht + zt (.) Ht-1
        np.subtract(1, zt, out=tmp)
        np.multiply(tmp, ht, out=tmp)
        np.multiply(zt, h_prev, out=out)
        np.add(out, tmp, out=out)
        return None

    return step


def _lstm_loop(R, P, activations, clip, input_forget, N, H, dt, **_):
    f, g, h = activations
    Rt = _stacked_product([R[k] for k in _PACKING["LSTM"]], dt)
    peepholes = {k: np.asarray(v, dt)[:, None] for k, v in P.items()} if P else {}
    Pi, Po, Pf = peepholes.get("i"), peepholes.get("o"), peepholes.get("f")
    gates = np.empty((4 * H, N), dt)
    rows = _rows("LSTM", H)
    it, ot, ft, ct = gates[rows["i"]], gates[rows["o"]], gates[rows["f"]], gates[rows["c"]]
    tmp = np.empty((H, N), dt)
    cells = (np.empty((H, N), dt), np.empty((H, N), dt))

    def step(xw, h_prev, c_prev, out):
        Rt(h_prev, gates)
        np.add(gates, xw, out=gates)
        if P:
            # it = f(... + Pi (.) Ct-1 ...), ft = f(... + Pf (.) Ct-1 ...); ot waits for Ct
            np.add(it, np.multiply(Pi, c_prev, out=tmp), out=it)
            np.add(ft, np.multiply(Pf, c_prev, out=tmp), out=ft)
            for x in (it, ft):
                _clip(x, clip)
                apply(f, x, out=x)
        else:
            _clip(gates[: 3 * H], clip)
            apply(f, gates[: 3 * H], out=gates[: 3 * H])
        if input_forget:
            np.subtract(1, it, out=ft)
        _clip(ct, clip)
        apply(g, ct, out=ct)
        # Ct = ft (.) Ct-1 + it (.) ct
        c_t = cells[0] if c_prev is not cells[0] else cells[1]
        np.multiply(ft, c_prev, out=c_t)
        np.add(c_t, np.multiply(it, ct, out=tmp), out=c_t)
        if P:
            # ot = f(... + Po (.) Ct ...)
            np.add(ot, np.multiply(Po, c_t, out=tmp), out=ot)
            _clip(ot, clip)
            apply(f, ot, out=ot)
        # Ht = ot (.) h(Ct)
        apply(h, c_t, out=tmp)
        np.multiply(ot, tmp, out=out)
        return c_t

    return step


_LOOPS = {"RNN": _rnn_loop, "GRU": _gru_loop, "LSTM": _lstm_loop}


def run_layer(
    kind: str,
    X: np.ndarray,
    W: Sequence[Mapping[str, np.ndarray]],
    R: Sequence[Mapping[str, np.ndarray]],
    Wb: Sequence[Optional[Mapping[str, np.ndarray]]],
    Rb: Sequence[Optional[Mapping[str, np.ndarray]]],
    P: Sequence[Optional[Mapping[str, np.ndarray]]],
    activations: Sequence[Sequence[Activation]],
    *,
    direction: str,
    sequence_lens: Optional[np.ndarray] = None,
    initial_h: Optional[np.ndarray] = None,
    initial_c: Optional[np.ndarray] = None,
    dtype=np.float64,
    **attributes,
):
    """Every direction of a layer, one dict per direction in W..P: X [T, N, I] ->
    (Y [T, D, N, H], Y_h [D, N, H], Y_c [D, N, H] or None). `attributes`: clip, linear_before_reset, input_forget.
    """
    num_directions = 2 if direction == "bidirectional" else 1
    T, N, _ = X.shape
    H = R[0][next(iter(R[0]))].shape[0]
    Y = np.zeros((T, num_directions, N, H), dtype)
    outputs = []
    for d in range(num_directions):
        outputs.append(run_direction(
            kind, X, W[d], R[d], Wb[d], Rb[d], P[d], activations[d],
            sequence_lens=sequence_lens,
            initial_h=None if initial_h is None else initial_h[d],
            initial_c=None if initial_c is None else initial_c[d],
            reverse=direction == "reverse" or d == 1,
            dtype=dtype,
            Y=Y[:, d],
            **attributes,
        ))
        for weights in (W[d], R[d]):  # memory-mapped weights of a big model: resident one direction at a time
            for g in weights or {}:
                release_pages(np.asarray(weights[g]))
    Y_h = np.stack([o[1] for o in outputs])
    Y_c = None if kind != "LSTM" else np.stack([o[2] for o in outputs])
    return Y, Y_h, Y_c


def run_onnx_node(
    kind: str,
    X: np.ndarray,
    W: np.ndarray,
    R: np.ndarray,
    B: Optional[np.ndarray] = None,
    sequence_lens: Optional[np.ndarray] = None,
    initial_h: Optional[np.ndarray] = None,
    initial_c: Optional[np.ndarray] = None,
    P: Optional[np.ndarray] = None,
    *,
    hidden_size: Optional[int] = None,
    direction: str = "forward",
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip: Optional[float] = None,
    linear_before_reset: int = 0,
    input_forget: int = 0,
    layout: int = 0,
    dtype=np.float64,
):
    """An ONNX RNN, GRU or LSTM node on its tensors as the spec stacks them (gate order: the ONNX dialect's).

    Computes in `dtype`, returns (Y, Y_h, Y_c or None) in X's dtype and the node's layout.
    """
    X = np.asarray(X)
    if direction not in DIRECTIONS:
        raise BadInput(f"{kind}: direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if layout not in (0, 1):
        raise BadInput(f"{kind}: layout must be 0 or 1, got {layout}")
    if clip is not None and not clip >= 0:
        # The spec bounds pre-activations to [-clip, clip]: 0 is a real clip (onnxruntime's RNN computes it,
        # its GRU/LSTM refuse it; OpenVINO reads 0 as "no clip"), a negative bound has no meaning.
        raise BadInput(f"{kind}: clip must be >= 0, got {clip}")
    if X.ndim != 3:
        raise BadInput(f"{kind}: X must have 3 dimensions, got shape {list(X.shape)}")
    if X.dtype.name not in FLOAT_TYPES:
        raise BadInput(f"{kind}: X must be one of {', '.join(FLOAT_TYPES)}, got {X.dtype}")
    if np.dtype(dtype).name not in FLOAT_TYPES:
        raise BadInput(f"{kind}: can compute in {', '.join(FLOAT_TYPES)}, not {np.dtype(dtype)}")
    if input_forget not in (0, 1):
        # "Couple the input and forget gates if 1": other values have no stated meaning.
        raise BadInput(f"{kind}: input_forget must be 0 or 1, got {input_forget}")
    gates = ONNX_GATES[kind]
    D = 2 if direction == "bidirectional" else 1
    G = len(gates)
    H = int(hidden_size) if hidden_size is not None else np.shape(R)[-1]
    # layout 1 is batch-major: X [N, T, I], states [N, D, H], Y [N, T, D, H].
    X_t = X.transpose(1, 0, 2) if layout == 1 else X
    T, N, I = X_t.shape
    state_shape = (N, D, H) if layout == 1 else (D, N, H)

    def check(name, value, shape, spelled):
        if value is not None and np.shape(value) != shape:
            raise BadInput(f"{kind}: {name} has shape {list(np.shape(value))}, expected {spelled} = {list(shape)}")

    check("W", W, (D, G * H, I), f"[num_directions, {G}*hidden_size, input_size]")
    check("R", R, (D, G * H, H), f"[num_directions, {G}*hidden_size, hidden_size]")
    check("B", B, (D, 2 * G * H), f"[num_directions, {2 * G}*hidden_size]")
    check("P", P, (D, len(ONNX_PEEPHOLES) * H), "[num_directions, 3*hidden_size]")
    check("sequence_lens", sequence_lens, (N,), "[batch_size]")
    states = "[batch_size, num_directions, hidden_size]" if layout == 1 else "[num_directions, batch_size, hidden_size]"
    check("initial_h", initial_h, state_shape, states)
    check("initial_c", initial_c, state_shape, states)
    if P is not None and kind != "LSTM":
        raise BadInput(f"{kind} has no peepholes (P)")
    if initial_c is not None and kind != "LSTM":
        raise BadInput(f"{kind} has no cell state (initial_c)")
    if sequence_lens is not None:
        sequence_lens = np.asarray(sequence_lens)
        if not np.issubdtype(sequence_lens.dtype, np.integer):
            raise BadInput(f"{kind}: sequence_lens must hold integers, got {sequence_lens.dtype}")
        if np.any(sequence_lens < 0) or np.any(sequence_lens > T):
            raise BadInput(f"{kind}: sequence_lens must lie in [0, seq_length={T}], got {sequence_lens.tolist()}")
    if initial_h is not None and layout == 1:
        initial_h = np.swapaxes(initial_h, 0, 1)
    if initial_c is not None and layout == 1:
        initial_c = np.swapaxes(initial_c, 0, 1)

    split = Layer.split
    Wb = Rb = [None] * D
    if B is not None:
        Wb = split(np.asarray(B)[:, : G * H], gates)
        Rb = split(np.asarray(B)[:, G * H :], gates)
    Y, Y_h, Y_c = run_layer(
        kind, X_t, split(np.asarray(W), gates), split(np.asarray(R), gates), Wb, Rb,
        [None] * D if P is None else split(np.asarray(P), ONNX_PEEPHOLES),
        resolve(kind, D, activations, activation_alpha, activation_beta),
        direction=direction, sequence_lens=sequence_lens, initial_h=initial_h, initial_c=initial_c, dtype=dtype,
        clip=clip, linear_before_reset=bool(linear_before_reset), input_forget=bool(input_forget),
    )
    if layout == 1:
        Y, Y_h = Y.transpose(2, 0, 1, 3), Y_h.swapaxes(0, 1)
        Y_c = None if Y_c is None else Y_c.swapaxes(0, 1)
    cast = lambda a: None if a is None else np.ascontiguousarray(a, dtype=X.dtype)  # noqa: E731
    return cast(Y), cast(Y_h), cast(Y_c)
