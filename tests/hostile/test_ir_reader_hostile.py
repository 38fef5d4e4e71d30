"""The IR reader on hostile files: entities never expanded nor fetched, sizes checked before anything is
allocated, a .bin that is not a regular file never read (dialects/openvino/reader.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.errors import BadInput
from tests.hostile import make_hostile


def test_ir_reader_refuses_entities_without_expanding_or_reading(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    for data in (make_hostile.BILLION_LAUGHS, make_hostile._external_entity(secret)):
        with pytest.raises(BadInput, match="must not contain a DOCTYPE") as info:
            ov_reader.parse(data, b"")
        assert "TOP SECRET" not in str(info.value) and "lollol" not in str(info.value)


def test_ir_reader_refuses_parameter_entities(tmp_path):
    xml = b'<?xml version="1.0"?><!DOCTYPE net [<!ENTITY % p SYSTEM "http://example.invalid/x.dtd"> %p;]><net/>'
    with pytest.raises(BadInput, match="DOCTYPE"):
        ov_reader.parse(xml, b"")


def test_ir_reader_refuses_a_const_larger_than_its_bin_before_allocating(tmp_path):
    xml, weights = make_hostile.valid_ir(tmp_path)
    huge = make_hostile._const_layer(xml, {"shape": f"{1 << 20}, {1 << 20}", "size": str((1 << 40) * 4)})
    with pytest.raises(BadInput, match=r"lie outside the \.bin"):
        ov_reader.parse(huge, weights)


@pytest.mark.parametrize("shape", ["4294967296, 4294967296, 16", "18446744073709551616"])
def test_ir_reader_const_shape_overflow_is_bad_input(shape, tmp_path):
    xml, weights = make_hostile.valid_ir(tmp_path)
    overflow = make_hostile._const_layer(xml, {"shape": shape, "size": "0"})
    with pytest.raises(BadInput):
        ov_reader.parse(overflow, weights)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_ir_bin_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    xml, _ = make_hostile.valid_ir(tmp_path)
    (tmp_path / "m.xml").write_bytes(xml)
    os.mkfifo(tmp_path / "m.bin")
    proc = subprocess.run([sys.executable, "-m", "rnnconv", "from-openvino", str(tmp_path / "m.xml"), "-o",
                           str(tmp_path / "o.onnx")], capture_output=True, text=True, timeout=8)
    assert proc.returncode == 4 and "not a regular file" in proc.stderr


@pytest.mark.parametrize("kind", ["directory", "device"])
def test_ir_bin_that_is_not_a_regular_file_is_refused_unread(kind, tmp_path):
    xml, _ = make_hostile.valid_ir(tmp_path)
    (tmp_path / "m.xml").write_bytes(xml)
    if kind == "directory":
        (tmp_path / "m.bin").mkdir()
    elif os.path.exists("/dev/zero"):
        (tmp_path / "m.bin").symlink_to("/dev/zero")  # read to its end, it would fill memory
    else:
        pytest.skip("no /dev/zero")
    with pytest.raises(BadInput, match=r"m\.bin: not a regular file"):
        ov_reader.read(tmp_path / "m.xml")
