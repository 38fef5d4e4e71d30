"""ONNX recurrent nodes into OpenVINO IR (dialects/openvino/from_onnx.py and lowering.py): what the Sequence ops
cannot express is split or lowered to an explicit recurrence, never dropped; weights fed at run time are reordered
by IR ops. Each IR runs in the OpenVINO runtime with the ONNX numbers, where OpenVINO's own import is wrong."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from rnnconv.commands.to_openvino import to_openvino
from tests.conftest import (
    assert_close,
    feeds,
    recurrent_model,
    reference,
    run_onnxruntime,
    run_openvino,
    to_openvino_and_check,
)

pytest.importorskip("openvino")


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_weights_as_graph_inputs_become_ir_ops(tmp_path, kind, direction):
    model = recurrent_model(kind, direction=direction, weights_as_inputs=True, lbr=int(kind == "GRU"),
                            sequence_lens=True, initial_h=True)
    xml, _ = to_openvino_and_check(tmp_path, model)
    text = xml.read_text()
    # Reorder and fold are graph ops on Parameters, not folded numbers.
    for name in ("W", "R", "B"):
        assert f'names="{name}"' in text
    assert 'type="Split"' in text and 'type="Concat"' in text
    if kind == "LSTM":
        assert 'type="Add"' in text


def test_layout1_shapes_and_numbers_where_openvino_import_is_wrong(tmp_path):
    model = recurrent_model("LSTM", layout=1, direction="bidirectional", T=4, N=2)
    xml, _ = to_openvino_and_check(tmp_path, model)
    inputs = feeds(model)
    ref = reference(model, inputs)
    assert run_openvino(xml, inputs)["Y"].shape == (2, 4, 2, 5) == ref["Y"].shape
    # OpenVINO's own import never reads layout: wrong shape or wrong numbers (or a failure).
    path = tmp_path / "l1.onnx"
    onnx.save(model, path)
    try:
        theirs = run_openvino(path, inputs)["Y"]
    except RuntimeError:
        theirs = None
    assert theirs is None or theirs.shape != ref["Y"].shape or not np.allclose(theirs, ref["Y"], atol=1e-3)


def test_per_direction_activations_split_into_two_sequences(tmp_path):
    model = recurrent_model("GRU", direction="bidirectional", activations=["Sigmoid", "Tanh", "Sigmoid", "Relu"],
                            sequence_lens=True, initial_h=True)
    xml, report = to_openvino_and_check(tmp_path, model)
    assert xml.read_text().count('type="GRUSequence"') == 2
    assert any("per direction" in r["what"] for r in report.rewrites)


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_dynamic_sequence_lens_lowered_because_openvino_ignores_them(tmp_path, kind, direction):
    """OpenVINO 2026.4 CPU ignores sequence_lengths in Sequence ops when shapes are dynamic; rnnconv writes an
    explicit TensorIterator recurrence instead, right for every batch and sequence size."""
    model = recurrent_model(kind, direction=direction, sequence_lens=True, initial_h=True, initial_c=True,
                            dynamic=True, lbr=int(kind == "GRU"))
    xml, report = to_openvino_and_check(tmp_path, model, shapes=((4, 2), (7, 3), (2, 1)))
    assert 'type="TensorIterator"' in xml.read_text()
    assert any("TensorIterator" in r["what"] for r in report.rewrites)


LOWERED = [
    ("peepholes", "LSTM", {"peepholes": True}),
    ("input_forget", "LSTM", {"input_forget": 1}),
    ("peepholes+input_forget bidirectional", "LSTM", {"peepholes": True, "input_forget": 1,
                                                      "direction": "bidirectional", "sequence_lens": True,
                                                      "initial_h": True, "initial_c": True}),
    ("HardSigmoid/Elu/ScaledTanh", "LSTM", {"activations": ["HardSigmoid", "Elu", "ScaledTanh"]}),
    ("LeakyRelu/Softsign reverse", "GRU", {"activations": ["LeakyRelu", "Softsign"], "direction": "reverse",
                                           "lbr": 1}),
    ("Softplus/Affine/ThresholdedRelu", "LSTM", {"activations": ["Softplus", "Affine", "ThresholdedRelu"]}),
    ("mixed per direction, not all OpenVINO", "RNN", {"activations": ["Tanh", "ScaledTanh"],
                                                      "direction": "bidirectional"}),
]


@pytest.mark.parametrize("what,kind,kwargs", LOWERED, ids=[c[0] for c in LOWERED])
@pytest.mark.parametrize("dynamic", [False, True])
def test_inexpressible_constructs_run_right_in_openvino(tmp_path, what, kind, kwargs, dynamic):
    model = recurrent_model(kind, dynamic=dynamic, **kwargs)
    shapes = ((4, 2), (6, 3)) if dynamic else ((4, 2),)
    xml, report = to_openvino_and_check(tmp_path, model, shapes=shapes)
    text = xml.read_text()
    assert 'type="TensorIterator"' in text
    assert f'type="{kind}Sequence"' not in text


def test_clip_zero_lowered_and_matches_onnxruntime(tmp_path):
    """ONNX clip=0 clips every gate to 0 (onnxruntime agrees); OpenVINO's clip 0 means no clip, so the recurrence
    is lowered. rnnconv's engine refuses clip 0 as invalid, so this is checked against onnxruntime directly."""
    model = recurrent_model("RNN", clip=0.0, direction="bidirectional")
    xml = tmp_path / "c.xml"
    to_openvino(model, xml, verify=False)
    inputs = feeds(model)
    assert_close(run_onnxruntime(model, inputs), run_openvino(xml, inputs), ["Y", "Y_h"])


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
def test_lowering_with_weights_as_graph_inputs(tmp_path, kind):
    """Weights fed at run time (ONNX backend-test style) enter the TensorIterator as invariant inputs."""
    kwargs = {"peepholes": True, "initial_c": True} if kind == "LSTM" else {"lbr": int(kind == "GRU")}
    model = recurrent_model(kind, direction="bidirectional", weights_as_inputs=True, sequence_lens=True,
                            initial_h=True, dynamic=True, **kwargs)
    xml, _ = to_openvino_and_check(tmp_path, model, shapes=((4, 2), (6, 3)))
    assert 'type="TensorIterator"' in xml.read_text()


@pytest.mark.parametrize("what,kwargs", [("peepholes", {"peepholes": True}), ("input_forget", {"input_forget": 1})])
def test_openvino_import_is_wrong_where_rnnconv_is_right(tmp_path, what, kwargs):
    """OpenVINO's ONNX import runs these LSTMs as if P were 0 / input_forget 0; rnnconv's IR gives the ONNX
    numbers."""
    model = recurrent_model("LSTM", T=4, N=2, **kwargs)
    path = tmp_path / "p.onnx"
    onnx.save(model, path)
    inputs = feeds(model)
    ref = run_onnxruntime(model, inputs)
    theirs = run_openvino(path, inputs)["Y"]  # OpenVINO's own ONNX import
    assert np.abs(theirs - ref["Y"]).max() > 1e-3  # silently wrong
    xml, _ = to_openvino_and_check(tmp_path, model)
    assert np.abs(run_openvino(xml, inputs)["Y"] - ref["Y"]).max() < 1e-5


def test_zero_peepholes_are_dropped_exactly(tmp_path):
    """Constant all-zero P changes nothing, so the node stays one LSTMSequence (verified)."""
    model = recurrent_model("LSTM", peepholes=True)
    for init in model.graph.initializer:
        if init.name == "P":
            init.CopyFrom(numpy_helper.from_array(np.zeros((1, 15), np.float32), "P"))
    xml, _ = to_openvino_and_check(tmp_path, model)
    assert 'type="LSTMSequence"' in xml.read_text() and "TensorIterator" not in xml.read_text()
