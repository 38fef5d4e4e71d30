"""Signal processing, both ways: ONNX STFT <-> OpenVINO STFT-15, ONNX DFT (one-sided, real) <-> OpenVINO RDFT-9.

ONNX STFT (opset 17) takes a real signal as [batch, length, 1] and a window as long as the frame; OpenVINO STFT-15
takes [batch, length] or [length] and a window of at most frame_size samples, centred in the frame (zeros on both
sides, the odd one on the right). Both give [batch, frames, frame_size / 2 + 1, 2] (OpenVINO: frames and bins
swapped with transpose_frames), frames = (length - frame_size) / frame_step + 1.
"""

from __future__ import annotations

import numpy as np

from rnnconv.dialects.openvino import shapes
from rnnconv.dialects.openvino.ops.table import attr, mapping, reverse
from rnnconv.dialects.openvino.registry import shape
from rnnconv.errors import Unsupported


@mapping("STFT", "STFT-opset15", "Squeeze-opset1")
def stft(ctx, node):
    """ONNX STFT (onnx__STFT, opset 17: real signal [batch, length, 1], frame_step, window as long as the frame,
    onesided 1) -> OpenVINO STFT-15 (transpose_frames false) of the signal squeezed to [batch, length]."""
    x, step, window, length = (ctx.inp(node, i) for i in range(4))
    if not attr(node, "onesided", 1) or window is None or length is None or x.dims is None or x.dims[-1] != 1:
        raise Unsupported(f"STFT node {node.name!r}: rnnconv maps a one-sided STFT of a real signal with a window "
                          "and a frame_length")
    signal = ctx.g.op("Squeeze", x, ctx.i64([2]))
    return [ctx.g.op("STFT", signal, window, length, step, transpose_frames=False, version="opset15",
                     name=node.name or None)]


@reverse("STFT")
def _from_stft(ctx):
    """OpenVINO STFT-15 (signal [batch, length] or [length], window of at most frame_size samples centred in the
    frame, frame_size, frame_step; transpose_frames) -> ONNX STFT (onnx__STFT, opset 17: signal [batch, length,
    1], frame_step, the window zero-padded to frame_size, frame_length; onesided), Unsqueeze / Squeeze /
    Transpose around it for a 1-D signal and transpose_frames."""
    if ctx.opset < 17:
        raise ctx.unsupported("ONNX STFT is new in opset 17", opset=17)
    b = ctx.b
    dims = ctx.dims(0)
    if dims is None or len(dims) not in (1, 2):
        raise ctx.unsupported("a signal that is not 1-D or 2-D")
    frame = int(ctx.need_const(2, "frame_size").reshape(-1)[0])
    window_dims = ctx.dims(1)
    window = ctx.c(1)
    if window is not None:
        window = np.asarray(window).reshape(-1)
        left = (frame - window.size) // 2
        padded = np.zeros(frame, window.dtype)
        padded[left:left + window.size] = window
        window_v = b.const(padded, "window")
    elif window_dims is not None and window_dims[0] == frame:
        window_v = ctx.v(1)
    elif window_dims is not None and window_dims[0] >= 0:
        left = (frame - window_dims[0]) // 2
        window_v = b.op1("Pad", ctx.v(1), b.i64([left, frame - window_dims[0] - left], "pads"))
    else:
        raise ctx.unsupported("a computed window of unknown length")
    signal = b.axes_op("Unsqueeze", ctx.v(0), [0, 2] if len(dims) == 1 else [2])
    out = b.op1("STFT", signal, ctx.as_i64(3, "frame_step"), window_v, b.i64(frame, "frame_length"), onesided=1)
    if len(dims) == 1:
        out = b.axes_op("Squeeze", out, [0])
    if ctx.flag("transpose_frames"):
        n = 3 if len(dims) == 1 else 4
        perm = list(range(n))
        perm[-3], perm[-2] = perm[-2], perm[-3]
        out = b.transpose(out, perm)
    return [b.op1("Identity", out, hint=ctx.hint)]


@mapping("DFT", "RDFT-opset9", "Squeeze-opset1")
def dft(ctx, node):
    """ONNX DFT (onnx__DFT: a real signal [..., 1], onesided 1, not inverse, one axis: an attribute in opset 17-19,
    a constant input from 20; dft_length constant) -> OpenVINO RDFT-9 of the signal squeezed (signal_size from
    dft_length)."""
    x, length = ctx.inp(node, 0), ctx.const_input(node, 1)
    axis = attr(node, "axis", 1) if ctx.opset < 20 else ctx.const_input(node, 2)
    axis = -2 if axis is None and ctx.opset >= 20 else axis
    if (not attr(node, "onesided", 0) or attr(node, "inverse", 0) or x.dims is None or x.dims[-1] != 1
            or axis is None or (len(node.inputs) > 1 and node.inputs[1] is not None and length is None)):
        raise Unsupported(f"DFT node {node.name!r}: rnnconv maps a one-sided forward DFT of a real signal over a "
                          "constant axis with a constant dft_length")
    rank = len(x.dims)
    axis = int(np.asarray(axis).reshape(-1)[0]) % rank
    signal = ctx.g.op("Squeeze", x, ctx.i64([rank - 1]))
    inputs = [signal, ctx.i64([axis])] + ([ctx.i64(np.asarray(length).reshape(-1)[:1])] if length is not None else [])
    return [ctx.g.op("RDFT", *inputs, version="opset9", name=node.name or None)]


@reverse("RDFT")
def _from_rdft(ctx):
    """OpenVINO RDFT-9 (real data, one constant axis, optional signal_size: the signal trimmed or zero-padded to
    it; output [..., n / 2 + 1, ..., 2], real and imaginary parts last) -> ONNX DFT (onnx__DFT: the real signal as
    [..., 1], onesided 1, dft_length; the axis an attribute in opset 17-19, an input from 20) of the data
    unsqueezed at the end."""
    if ctx.opset < 17:
        raise ctx.unsupported("ONNX DFT with onesided output is mapped from opset 17", opset=17)
    dims = ctx.dims(0)
    axes = ctx.need_const(1, "the axes").reshape(-1)
    if dims is None or axes.size != 1:
        raise ctx.unsupported("an RDFT over several axes or of data of unknown rank (rnnconv maps one axis)")
    axis = int(axes[0]) % len(dims)
    b = ctx.b
    length = None
    if len(ctx.keys) > 2:
        size = ctx.need_const(2, "signal_size").reshape(-1)
        length = None if int(size[0]) == -1 else b.i64(int(size[0]), "dft_length")
    signal = b.axes_op("Unsqueeze", ctx.v(0), [len(dims)])
    if ctx.opset >= 20:
        return [b.op1("DFT", signal, length, b.i64(axis, "axis"), onesided=1, hint=ctx.hint)]
    return [b.op1("DFT", signal, length, axis=axis, onesided=1, hint=ctx.hint)]


@shape("STFT")
def _stft_shape(layer, inputs, d, c, et):
    """STFT-15: [..., frames, frame_size / 2 + 1, 2] (transpose_frames: the two middle axes swapped)."""
    if d[0] is None or c[2] is None or c[3] is None:
        return [(et, None if d[0] is None else [-1] * (len(d[0]) + 2))]
    frame, step = int(c[2].reshape(-1)[0]), int(c[3].reshape(-1)[0])
    length = d[0][-1]
    frames = (length - frame) // step + 1 if length >= 0 else -1
    tail = [frame // 2 + 1, frames] if shapes.flag(layer.attrs, "transpose_frames") else [frames, frame // 2 + 1]
    return [(et, d[0][:-1] + tail + [2])]


@shape("RDFT")
def _rdft_shape(layer, inputs, d, c, et):
    """RDFT-9: one output, the transformed axes resized (signal_size), the last one halved, then [2]."""
    if d[0] is None or c[1] is None:
        return [(et, None if d[0] is None else [-1] * (len(d[0]) + 1))]
    axes = [int(v) % len(d[0]) for v in c[1].reshape(-1)]
    sizes = [int(v) for v in c[2].reshape(-1)] if len(inputs) > 2 and c[2] is not None else [-1] * len(axes)
    out = list(d[0])
    for ax, size in zip(axes, sizes):
        out[ax] = size if size != -1 else out[ax]
    out[axes[-1]] = out[axes[-1]] // 2 + 1 if out[axes[-1]] >= 0 else -1
    return [(et, out + [2])]
