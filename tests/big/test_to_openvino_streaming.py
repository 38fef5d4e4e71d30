"""to-openvino on big models: reordered weights stay views of the memory-mapped source until the writer streams
them into the .bin (page-aligned, each source view released once written; gates not cast copied by the kernel)."""

from __future__ import annotations

import numpy as np
import pytest

from rnnconv import io
from rnnconv.commands.to_openvino import onnx_to_ir
from rnnconv.dialects import onnx_recurrent
from rnnconv.dialects.openvino import gates
from rnnconv.dialects.openvino import graph as ovir
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.dialects.openvino import writer as ov_writer
from tests.conftest import lstm_file, recurrent_model, to_openvino_and_check


def test_pieces_are_written_as_their_joined_array():
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((3, 1024), dtype=np.float32) for _ in range(4)]
    joined = np.concatenate(parts).reshape(2, 6, 1024)
    for dtype in (np.float32, np.float16):
        streamed, whole = ovir.IRGraph("s"), ovir.IRGraph("s")
        for g, value in ((streamed, ovir.Pieces(parts, joined.shape, dtype)), (whole, joined.astype(dtype))):
            g.result(g.op("Relu", g.const(value)))
        xml, bin_ = ov_writer.serialize(streamed)
        assert (xml, bin_) == ov_writer.serialize(whole)
        back = ov_reader.parse(xml, bin_)
        const = next(layer for layer in back.layers if layer.type == "Const")
        np.testing.assert_array_equal(const.value, joined.astype(dtype))


def test_big_constants_start_on_a_page_and_small_ones_are_shared():
    g = ovir.IRGraph("m")
    small = [g.const(np.arange(3, dtype=np.int64)) for _ in range(2)]
    big = g.const(np.ones((ov_writer.PAGE,), np.float32))
    g.result(g.op("Add", g.op("Convert", small[0], destination_type="f32"),
                  g.op("Convert", small[1], destination_type="f32")))
    g.result(big)
    xml, bin_ = ov_writer.serialize(g)
    root = ov_reader.parse_xml(xml)
    data = {el.attrib["name"]: el.find("data").attrib for el in root.find("layers").findall("layer")
            if el.attrib["type"] == "Const"}
    offsets = {int(d["offset"]) for name, d in data.items() if d["element_type"] == "i64"}
    assert offsets == {0}
    assert [int(d["offset"]) % ov_writer.PAGE for d in data.values() if d["element_type"] == "f32"] == [0]


@pytest.mark.parametrize("fp16", [False, True])
def test_reordered_weights_stream_from_the_memory_map(fp16, tmp_path, monkeypatch):
    monkeypatch.setattr(ov_writer, "VIEW_BYTES", 0)
    model = io.load(lstm_file(tmp_path / "m.onnx", H=16, I=8))
    (rn,) = onnx_recurrent.find(model)
    source = {k: model.graph.initializers[k].const_value.numpy() for k in ("W", "R")}
    released = []
    conversion = onnx_to_ir(model, fp16, release=released.append)
    consts = [layer.value for layer in conversion.graph.layers if isinstance(layer.value, ovir.Pieces)]
    assert len(consts) == 2  # W and R, in OpenVINO gate order, not copied
    for pieces, k in zip(consts, ("W", "R")):
        assert all(np.shares_memory(p, source[k]) for p in pieces.parts)
    with open(tmp_path / "o.bin", "wb") as f:
        xml = ov_writer.write_to(conversion.graph, f)
    assert sum(v.nbytes for v in released) == sum(v.nbytes for v in source.values())
    (tmp_path / "o.xml").write_bytes(xml)
    back = ov_reader.read(tmp_path / "o.xml")
    want = gates.sequence_tensors(rn.layer)
    seq = next(layer for layer in back.layers if layer.type == "LSTMSequence")
    producers, by_id = back.producers(), back.by_id()

    def value(port):
        layer = by_id[producers[(seq.id, port)][0]]
        if layer.type == "Convert":
            layer = by_id[producers[(layer.id, 0)][0]]
        return layer.value

    for port, k in ((4, "W"), (5, "R"), (6, "B")):
        np.testing.assert_array_equal(value(port), want[k].astype(np.float16 if fp16 else np.float32))


def test_a_direction_of_pieces_stays_pieces():
    parts = [np.full((2, 3), k, np.float32) for k in range(4)]
    w = ovir.Pieces(parts, (2, 4, 3), np.float32)
    second = w[1:2]
    assert isinstance(second, ovir.Pieces) and all(np.shares_memory(a, b) for a, b in zip(second.parts, parts[2:]))
    np.testing.assert_array_equal(second, np.asarray(w)[1:2])
    np.testing.assert_array_equal(w[0], np.asarray(w)[0])


SHAPES = [
    ("split per direction", "GRU", {"direction": "bidirectional", "activations": ["Sigmoid", "Tanh", "Sigmoid",
                                                                                  "Relu"]}),
    ("lowered", "LSTM", {"peepholes": True, "direction": "bidirectional"}),
    ("fused", "RNN", {"direction": "reverse"}),
]


@pytest.mark.parametrize("what,kind,kwargs", SHAPES, ids=[c[0] for c in SHAPES])
def test_every_shape_of_ir_right_with_weights_as_views(what, kind, kwargs, tmp_path, monkeypatch):
    monkeypatch.setattr(ov_writer, "VIEW_BYTES", 0)
    to_openvino_and_check(tmp_path, recurrent_model(kind, **kwargs))


@pytest.mark.parametrize("fp16", [False, True])
def test_unchanged_weight_bytes_are_copied_by_the_kernel(fp16, tmp_path, monkeypatch):
    # Gates reordered but not cast are copied file to file; the .bin is the same as when streamed.
    monkeypatch.setattr(ov_writer, "VIEW_BYTES", 0)
    model = io.load(lstm_file(tmp_path / "m.onnx", H=16, I=8))
    conversion = onnx_to_ir(model, fp16=fp16)
    copied = []
    with io.KernelCopier(model) as copier:
        def copy(view, fd, offset):
            done = copier(view, fd, offset)
            copied.append(done)
            return done

        with open(tmp_path / "copied.bin", "wb") as f:
            xml = ov_writer.write_to(conversion.graph, f, copy)
    with open(tmp_path / "streamed.bin", "wb") as f:
        assert ov_writer.write_to(conversion.graph, f) == xml
    assert (tmp_path / "copied.bin").read_bytes() == (tmp_path / "streamed.bin").read_bytes()
    assert copied == ([] if fp16 else [True] * 16)  # 2 directions x 4 gates x (W, R); fp16 casts instead


def test_kernel_copier_refuses_what_is_not_a_file_view(tmp_path):
    model = io.load(lstm_file(tmp_path / "m.onnx", H=16, I=8))
    w = model.graph.initializers["W"].const_value.numpy()
    with io.KernelCopier(model) as copy, open(tmp_path / "o.bin", "wb") as f:
        assert not copy(np.array(w), f.fileno(), 0)  # in memory
        assert not copy(w[:, :, :3], f.fileno(), 0)  # not contiguous
        assert copy(w[1], f.fileno(), 0)
        f.flush()
    np.testing.assert_array_equal(np.fromfile(tmp_path / "o.bin", w.dtype).reshape(w[1].shape), w[1])
