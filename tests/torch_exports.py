"""PyTorch modules that exporters write out as unrolled steps, exported with either exporter, and their outputs in
torch (the oracle `fuse` is held against). Tests that use these skip when torch is not installed."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path

import numpy as np

I, H, N = 3, 4, 2


def _torch():
    import torch

    return torch


class CellLoop:
    """Builds a torch module applying `cell` (LSTMCell, GRUCell, RNNCell) once per step of x [T, N, I]."""

    @staticmethod
    def make(kind: str, *, bias: bool = True, state: bool = True, nonlinearity: str = "tanh",
             shared: bool = True, T: int = 6, seed: int = 0):
        torch = _torch()
        cls = {"lstm": torch.nn.LSTMCell, "gru": torch.nn.GRUCell, "rnn": torch.nn.RNNCell}[kind]
        kw = {"nonlinearity": nonlinearity} if kind == "rnn" else {}
        torch.manual_seed(seed)
        cells = torch.nn.ModuleList([cls(I, H, bias=bias, **kw) for _ in range(1 if shared else T)])

        class Loop(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.cells = cells

            def forward(self, x, *hx):
                outs, s = [], (hx if kind == "lstm" else hx[0]) if hx else None
                for t in range(x.shape[0]):
                    s = self.cells[t % len(self.cells)](x[t], s)
                    outs.append(s[0] if kind == "lstm" else s)
                y = torch.stack(outs)
                return (y, s[1]) if kind == "lstm" else y

        module = Loop().eval()
        g = torch.Generator().manual_seed(1)
        args = [torch.randn(T, N, I, generator=g)]
        if state:
            args += [torch.randn(N, H, generator=g) for _ in range(2 if kind == "lstm" else 1)]
        return module, tuple(args)


def nn_rnn(*, layers: int = 1, bidirectional: bool = False, batch_first: bool = False, bias: bool = True,
           state: bool = False, nonlinearity: str = "tanh", T: int = 6, size: int = H):
    """An nn.RNN (input and hidden `size`) and its example inputs (x, and h0 when `state`)."""
    torch = _torch()
    torch.manual_seed(0)
    I, H = size if size != globals()["H"] else globals()["I"], size
    rnn = torch.nn.RNN(I, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias,
                       nonlinearity=nonlinearity)

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn

        def forward(self, x, *h0):
            return self.rnn(x, *h0)

    g = torch.Generator().manual_seed(1)
    x = torch.randn(*((N, T) if batch_first else (T, N)), I, generator=g)
    args = (x,) + ((torch.randn(layers * (2 if bidirectional else 1), N, H, generator=g),) if state else ())
    return Wrap().eval(), args


def export(module, args, path: Path, exporter: str) -> Path:
    """Write `module` with the "dynamo" or "legacy" exporter (quietly); returns the path."""
    torch = _torch()
    names = ["x", "h", "c"][: len(args)]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            if exporter == "dynamo":
                torch.onnx.export(module, args, str(path), dynamo=True, input_names=names, verbose=False)
            else:
                torch.onnx.export(module, args, str(path), dynamo=False, input_names=names, opset_version=17)
        finally:
            logging.disable(logging.NOTSET)
    return path


def outputs(module, args) -> list[np.ndarray]:
    """The module's outputs in torch, flattened as the exporters flatten them."""
    torch = _torch()
    with torch.no_grad():
        out = module(*args)
    flat = []

    def walk(o):
        if isinstance(o, (tuple, list)):
            for x in o:
                walk(x)
        else:
            flat.append(o.numpy())

    walk(out)
    return flat
