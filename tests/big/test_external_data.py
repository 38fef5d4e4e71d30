"""Models whose weights live in external data, through every command: the output's weights in OUT.data (a copy,
never a link; untouched weights copied file to file at the offsets they had, new small tensors inline), the
source untouched."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto

from rnnconv import io
from tests.conftest import initializers, lstm_file, run_cli


def snapshot(folder) -> dict:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}


def external_locations(path) -> set:
    proto = onnx.load(str(path), load_external_data=False)
    return {e.value for t in proto.graph.initializer if t.data_location == TensorProto.EXTERNAL
            for e in t.external_data if e.key == "location"}


ONNX_COMMANDS = {
    "upgrade": ["upgrade"],
    "downgrade": ["downgrade", "--opset", "13"],
    "layout": ["layout", "--to", "1"],
    "layout-opset": ["layout", "--to", "0", "--opset", "13"],
}


@pytest.mark.parametrize("command", sorted(ONNX_COMMANDS))
@pytest.mark.parametrize("one_file", [True, False])
def test_external_data_survives_onnx_commands(command, one_file, tmp_path):
    src = lstm_file(tmp_path / "src" / "m.onnx", one_file=one_file)
    before = snapshot(src.parent)
    out = tmp_path / "out" / "o.onnx"
    code, _, stderr = run_cli([*ONNX_COMMANDS[command][:1], str(src), "-o", str(out),
                               *ONNX_COMMANDS[command][1:]])
    assert code == 0, stderr
    assert external_locations(out) == {"o.onnx.data"}  # where the output says, and only there
    assert sorted(p.name for p in out.parent.iterdir()) == ["o.onnx", "o.onnx.data"]
    assert not any(os.path.samefile(out.parent / "o.onnx.data", p) for p in src.parent.iterdir())  # a copy
    got, want = initializers(out), initializers(src)
    for name in ("W", "R"):  # untouched by every one of these rewrites
        np.testing.assert_array_equal(got[name], want[name])
    assert snapshot(src.parent) == before  # the source is untouched


def test_untouched_weights_keep_their_offsets(tmp_path):
    src = lstm_file(tmp_path / "src" / "m.onnx")
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["upgrade", str(src), "-o", str(out), "--no-verify"])
    assert code == 0, stderr

    def offsets(path):
        proto = onnx.load(str(path), load_external_data=False)
        return {t.name: {e.key: e.value for e in t.external_data if e.key != "location"}
                for t in proto.graph.initializer}

    assert offsets(out) == offsets(src)
    assert (tmp_path / "o.onnx.data").read_bytes() == (src.parent / "w.data").read_bytes()


def test_new_tensors_go_to_the_data_file_or_inline(tmp_path):
    # A bidirectional layout-1 node to opset 13: Transposes (small constants inline), weights copied.
    src = lstm_file(tmp_path / "src" / "m.onnx", layout=1)
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["downgrade", str(src), "-o", str(out), "--opset", "13"])
    assert code == 0, stderr
    model = io.load(out)
    for v in model.graph.initializers.values():
        t = v.const_value
        assert isinstance(t, ir.ExternalTensor) == (t.nbytes > io.SMALL_TENSOR_BYTES)


def test_save_keeps_the_model_as_it_was(tmp_path):
    src = lstm_file(tmp_path / "src" / "m.onnx")
    model = io.load(src)
    extra = ir.Value(name="big", const_value=ir.tensor(np.arange(1000, dtype=np.float32), name="big"),
                     type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1000]))
    model.graph.register_initializer(extra)
    tensors = {n: v.const_value for n, v in model.graph.initializers.items()}
    io.save(model, tmp_path / "o.onnx", external_data=True)
    assert {n: v.const_value for n, v in model.graph.initializers.items()} == tensors
    saved = io.load(tmp_path / "o.onnx", check=False)
    np.testing.assert_array_equal(saved.graph.initializers["big"].const_value.numpy(), np.arange(1000))
    assert saved.graph.initializers["big"].const_value.offset % io.ALIGNMENT == 0


def test_to_openvino_reads_external_data(tmp_path):
    pytest.importorskip("openvino")
    src = lstm_file(tmp_path / "src" / "m.onnx")
    before = snapshot(src.parent)
    out = tmp_path / "out" / "o.xml"
    code, stdout, stderr = run_cli(["to-openvino", str(src), "-o", str(out), "--json"])
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["ok"] and report["checks"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["o.bin", "o.xml"]
    assert snapshot(src.parent) == before


def test_external_data_when_asked(tmp_path):
    src = lstm_file(tmp_path / "m.onnx", external=None)
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["upgrade", str(src), "-o", str(out), "--external-data", "--no-verify"])
    assert code == 0, stderr
    assert external_locations(out) == {"o.onnx.data"}
    np.testing.assert_array_equal(initializers(out)["R"], initializers(src)["R"])


def test_only_referenced_bytes_are_copied(tmp_path):
    # A data file with 3 MiB of bytes no tensor references: the output's data file holds only the tensors.
    src = lstm_file(tmp_path / "src" / "m.onnx")
    proto = onnx.load(str(src), load_external_data=False)
    data = (src.parent / "w.data").read_bytes()
    pad = 3 << 20
    (src.parent / "w.data").write_bytes(b"\0" * pad + data)
    for t in proto.graph.initializer:
        for e in t.external_data:
            if e.key == "offset":
                e.value = str(int(e.value) + pad)
    onnx.save(proto, str(src))
    out = tmp_path / "o.onnx"
    code, _, stderr = run_cli(["upgrade", str(src), "-o", str(out), "--no-verify"])
    assert code == 0, stderr
    assert (tmp_path / "o.onnx.data").stat().st_size < len(data) + io.ALIGNMENT
    for name, array in initializers(src).items():
        np.testing.assert_array_equal(initializers(out)[name], array)
