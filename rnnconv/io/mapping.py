"""Memory-mapped weights: dropping read pages from the resident set, and copying mapped bytes file to file in the
kernel (copy_file_range), so big weights never pass through this process's memory."""

from __future__ import annotations

import contextlib
import mmap
import os
from typing import Optional

import numpy as np
import onnx_ir as ir


def _copy_range(src: int, dst: int, src_offset: int, dst_offset: int, length: int) -> None:
    """Copy bytes file to file in the kernel (copy_file_range); plain reads and writes where it is unavailable."""
    kernel = hasattr(os, "copy_file_range")
    while length > 0:
        if kernel:
            try:
                n = os.copy_file_range(src, dst, min(length, 1 << 30), src_offset, dst_offset)
            except OSError:  # another file system, or a kernel without it
                kernel = False
                continue
        else:
            chunk = os.pread(src, min(length, 1 << 24), src_offset)
            n = os.pwrite(dst, chunk, dst_offset) if chunk else 0
        if n == 0:
            raise OSError(f"external data ended {length} bytes early")
        src_offset, dst_offset, length = src_offset + n, dst_offset + n, length - n


def release_pages(view: np.ndarray) -> None:
    """Drop the pages of a memory-mapped array view from this process's resident set once they are read.

    The kernel keeps them in its page cache (a later read faults them back in cheaply), so scanning a multi-GB
    weight costs one chunk of resident memory, not the weight. A no-op for arrays that are not memory-mapped.
    """
    found = _mapped(view)
    if found is None or not hasattr(found[0], "madvise") or view.nbytes == 0:
        return
    mm, start = found
    with contextlib.suppress(Exception):
        stop = min(start + view.nbytes, len(mm))
        start -= start % mmap.PAGESIZE
        mm.madvise(mmap.MADV_DONTNEED, start, stop - start)


def _mapped(view) -> Optional[tuple[mmap.mmap, int]]:
    """The mmap an array view reads from and the view's start in it, or None (not memory-mapped)."""
    mm, base = view, None
    while isinstance(mm, (np.ndarray, memoryview)) and not isinstance(mm, mmap.mmap):
        if isinstance(mm, memoryview):
            base, mm = mm, mm.obj
        else:
            mm = mm.base
    if not isinstance(mm, mmap.mmap) or base is None:
        return None
    try:
        return mm, view.__array_interface__["data"][0] - np.frombuffer(base, np.uint8).__array_interface__["data"][0]
    except (TypeError, ValueError):
        return None


class KernelCopier:
    """`copier(view, fd, offset)`: copies a C-contiguous view of `model`'s memory-mapped external data to
    `offset` of the open file `fd` by the kernel (copy_file_range), so the bytes never enter this process; False
    for any other view. onnx_ir maps each data file whole, so a view's place in its map is its place in the file."""

    def __init__(self, model: ir.Model):
        self._tensors = [v.const_value for g in model.graphs() for v in g.initializers.values()
                         if isinstance(v.const_value, ir.ExternalTensor)]
        self._files: dict[str, int] = {}

    def __call__(self, view, fd: int, offset: int) -> bool:
        if not isinstance(view, np.ndarray) or not view.flags.c_contiguous or view.nbytes == 0:
            return False
        found = _mapped(view)
        path = None if found is None else next((t.path for t in self._tensors if t.raw is found[0]), None)
        if path is None:
            return False
        if path not in self._files:
            self._files[path] = os.open(path, os.O_RDONLY)
        _copy_range(self._files[path], fd, found[1], offset, view.nbytes)
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


def release_external(model: ir.Model) -> None:
    """release_pages for every external weight of `model` that has been read."""
    for graph in model.graphs():
        for v in graph.initializers.values():
            t = v.const_value
            if isinstance(t, ir.ExternalTensor) and t.raw is not None:
                release_pages(t.numpy())
