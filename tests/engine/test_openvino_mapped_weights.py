"""OpenVINO's read_model maps the IR's .bin; while its CPU plugin compiles and runs the IR, `MappedWeights` drops
that map's pages from the resident set (the plugin's reordered and packed copies of the weights stay): on a big
LSTM the map is a third of the compile's peak. Held against the file's own bytes, /proc's accounting of the
process's maps and onnxruntime's run of the source model."""

from __future__ import annotations

import mmap
import os

import numpy as np
import onnx
import pytest

from rnnconv.engine import openvino_runtime
from tests.conftest import recurrent_model

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")


def resident(path) -> int:
    """Bytes of this process's maps of the file at `path` that are resident, from /proc/self/smaps."""
    st, total, ours = os.stat(path), 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a map's header line
                ours = int(fields[4]) == st.st_ino and \
                    tuple(int(x, 16) for x in fields[3].split(":")) == (os.major(st.st_dev), os.minor(st.st_dev))
            elif ours and fields[0] == "Rss:":
                total += int(fields[1]) * 1024
    return total


def test_drop_keeps_the_bytes_and_leaves_private_maps(tmp_path):
    path = tmp_path / "w.bin"
    data = np.random.default_rng(0).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    with open(path, "rb") as f:
        shared = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # r--s, as OpenVINO maps the .bin
    with open(path, "r+b") as f:
        private = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # rw-p: its written pages exist nowhere else
    private[5] = (data[5] + 1) % 256
    assert np.frombuffer(shared, np.uint8).sum() == np.frombuffer(data, np.uint8).sum()  # every page read
    before = resident(path)
    assert before >= len(data)

    assert openvino_runtime.MappedWeights(path).drop() == len(data)  # the shared map only
    assert resident(path) <= before - len(data) + (64 << 10)
    assert private[5] == (data[5] + 1) % 256 and private[6] == data[6]  # the private copy kept its write
    assert shared[:] == data  # refaulted from the page cache, unchanged
    shared.close()
    private.close()


def test_no_file_no_thread(tmp_path):
    with openvino_runtime.MappedWeights(None) as gone, openvino_runtime.MappedWeights(tmp_path / "absent.bin"):
        assert gone.drop() == 0


def test_infer_keeps_the_ir_weights_out_of_the_resident_set(tmp_path):
    ov = pytest.importorskip("openvino")
    ort = pytest.importorskip("onnxruntime")
    import rnnconv

    src, xml = tmp_path / "m.onnx", tmp_path / "m.xml"
    onnx.save(recurrent_model("LSTM", direction="bidirectional", T=3, N=2, I=128, H=128), src)  # 1 MiB of W, R
    rnnconv.to_openvino(str(src), str(xml), verify="none")
    bin_path = xml.with_suffix(".bin")
    x = np.random.default_rng(1).standard_normal((3, 2, 128)).astype(np.float32)
    expected = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"X": x})

    held = openvino_runtime.read(xml)  # read_model maps the .bin; the model holds the map
    plain = openvino_runtime.infer(held, {"X": x}, reshape=True)
    assert resident(bin_path) >= 1 << 20  # the plugin read the weights through the map: resident
    del plain
    model = openvino_runtime.read(xml)
    got = openvino_runtime.infer(model, {"X": x}, reshape=True, weights=openvino_runtime.weights_file(xml))
    assert resident(bin_path) < 64 << 10, "the map's pages stayed resident"
    assert isinstance(model, ov.Model)
    for want, out in zip(expected, got):
        np.testing.assert_allclose(out.value, want, rtol=1e-5, atol=1e-6)


def test_weights_file():
    assert openvino_runtime.weights_file("a/m.xml") == os.path.join("a", "m.bin")
    assert openvino_runtime.weights_file("a/m.xml", "b/w.bin") == "b/w.bin"
    assert openvino_runtime.weights_file("a/m.onnx") is None
