"""Every OpenVINO IR a test writes is checked as it is written: by rnnconv's own writer (every path to it goes
through `writer.write_to`) and by OpenVINO's save on to-openvino's OpenVINO route (`frontend.save`, read back).
Both ends of every edge must agree in element type and dims (`validate.edge_mismatches`) and the reader-side checks
must pass (`validate.validate`): stale port shapes are what OpenVINO's reader and rnnconv's own refuse."""

from __future__ import annotations

import pytest


def check_ir(graph, where: str = "IR") -> None:
    from rnnconv.dialects.openvino import validate

    validate.validate(graph, where)
    bad = validate.edge_mismatches(graph, where)
    assert not bad, "\n".join(bad[:5])


@pytest.fixture(autouse=True)
def _every_written_ir_is_checked(monkeypatch):
    from rnnconv.dialects.openvino import frontend, reader, writer

    write_to, save = writer.write_to, frontend.save

    def checked_write_to(graph, *args, **kwargs):
        check_ir(graph, f"IR {graph.name!r} as rnnconv writes it")
        return write_to(graph, *args, **kwargs)

    def checked_save(converted, xml_path, bin_path, **kwargs):
        save(converted, xml_path, bin_path, **kwargs)
        check_ir(reader.read(xml_path, bin_path), f"{xml_path} as OpenVINO saved it")

    monkeypatch.setattr(writer, "write_to", checked_write_to)
    monkeypatch.setattr(frontend, "save", checked_save)
