"""The fixtures folder: reproducible, valid, and (for the torch exports) numerically right in onnxruntime."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.conftest import FIXTURES, TORCH, run_onnxruntime

TOL = 1e-5


def _load_maker():
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses looks its module up there
    keep, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ inside fixtures/
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.dont_write_bytecode = keep
    return mod


def _index(folder: Path) -> dict:
    return json.loads((folder / "index.json").read_text())


SYNTHETIC = _index(FIXTURES)["fixtures"]
TORCH_FIXTURES = _index(TORCH)["fixtures"] if (TORCH / "index.json").exists() else []


def test_regenerated_fixtures_are_byte_identical(tmp_path):
    maker = _load_maker()
    maker.generate(str(tmp_path), check_ort=False)
    made = sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".onnx", ".npz"))
    committed = sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".onnx", ".npz"))
    assert made == committed, "fixtures/ holds files the script no longer makes, or misses some"
    differ = [n for n in made if (tmp_path / n).read_bytes() != (FIXTURES / n).read_bytes()]
    assert not differ, f"regenerated files differ from the committed ones: {differ}"
    # index.json too, except what onnxruntime said (that depends on the installed onnxruntime).
    new, old = _index(tmp_path), _index(FIXTURES)
    for doc in (new, old):
        for e in doc["fixtures"]:
            e.pop("onnxruntime"), e.pop("onnxruntime_error")
    assert new == old


@pytest.mark.parametrize("entry", SYNTHETIC, ids=[e["file"] for e in SYNTHETIC])
def test_synthetic_fixture(entry):
    path = FIXTURES / entry["file"]
    assert path.stat().st_size < 1 << 20
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import] == [entry["version"]]
    assert sum(n.op_type == entry["op"] for n in model.graph.node) == entry["recurrent_nodes"]
    samples = np.load(FIXTURES / entry["samples"])
    needed = {i["name"] for i in entry["inputs"] if not i["has_initializer"]}
    assert set(samples.files) == needed
    if entry["onnxruntime"]:
        outs = run_onnxruntime(path, {k: samples[k] for k in samples.files})
        assert all(np.all(np.isfinite(o.astype(np.float32))) for o in outs.values())


def test_synthetic_coverage():
    have = {(e["op"], e["version"]) for e in SYNTHETIC}
    want = {("GRU", v) for v in (1, 3, 7, 14, 22)} | {(op, v) for op in ("LSTM", "RNN") for v in (1, 7, 14, 22)}
    assert want <= have
    feats = {f for e in SYNTHETIC for f in e["features"]}
    for f in ("forward", "reverse", "bidirectional", "layout1", "sequence_lens", "initial_h", "initial_c",
              "peepholes", "no_bias", "input_forget", "linear_before_reset", "clip", "activation_alpha",
              "float64", "float16", "bfloat16", "output_sequence", "no_Y", "weights_input", "weights_constant"):
        assert f in feats, f
    assert (FIXTURES / "lstm.onnx").exists()


@pytest.mark.parametrize("entry", TORCH_FIXTURES, ids=[e["file"] for e in TORCH_FIXTURES])
def test_torch_fixture_matches_torch_in_onnxruntime(entry):
    path = TORCH / entry["file"]
    assert not list(TORCH.glob(entry["file"] + "?*")), "external data beside the model"
    model = onnx.load(str(path), load_external_data=False)
    onnx.checker.check_model(model, full_check=True)
    if not entry.get("onnxruntime"):
        pytest.skip(entry.get("onnxruntime_error", "onnxruntime cannot run it"))
    data = np.load(TORCH / entry["data"])
    inputs = [i.name for i in model.graph.input]
    outputs = [o.name for o in model.graph.output]
    got = run_onnxruntime(path, {k: data[k] for k in inputs})
    for name in outputs:
        np.testing.assert_allclose(got[name], data[name], rtol=0, atol=TOL, err_msg=f"{entry['file']}: {name}")


def test_fixtures_folder_is_small():
    total = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    assert total < 3 << 20, total
    assert not list(FIXTURES.rglob("*.data"))
    # The dynamo exporter writes stack traces into node metadata; they must not carry local paths.
    leaky = [f.name for f in FIXTURES.rglob("*.onnx") if b'File "/' in f.read_bytes()]
    assert not leaky
