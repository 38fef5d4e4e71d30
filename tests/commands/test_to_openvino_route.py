"""to-openvino's route, and what it refuses: rnnconv's own writer whenever every op is in its table (no openvino
package needed), OpenVINO's ONNX import otherwise; without openvino, ops outside the table exit 3 naming them and
the install command; every recurrent node rnnconv refuses is named in one error; DynamicQuantizeLSTM is refused on
both routes; an interruption or a bug inside OpenVINO's conversion comes out as itself, not as a refusal."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest
from onnx import TensorProto, helper

from rnnconv.commands import to_openvino as command
from rnnconv.commands.to_openvino import to_openvino
from rnnconv.errors import EXIT_UNSUPPORTED, Unsupported
from tests.conftest import FIXTURES, conv_lstm, dynamic_quantize_lstm, if_lstm, run_cli

INSTALL = "pip install 'rnnconv[openvino]'"


@pytest.fixture
def without_openvino(monkeypatch):
    """As if the openvino package were not installed: find_spec finds nothing and `import openvino` fails."""
    for name in [m for m in sys.modules if m == "openvino" or m.startswith("openvino.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "openvino", None)


def test_without_openvino_ops_outside_the_table_exit_3_naming_them(tmp_path, without_openvino):
    with pytest.raises(Unsupported) as err:
        to_openvino(conv_lstm("1d"), tmp_path / "m.xml")
    assert "InstanceNormalization" in str(err.value) and err.value.fixes == (INSTALL,)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(Unsupported, match="If"):
        to_openvino(if_lstm(), tmp_path / "i.xml")


def test_without_openvino_the_cli_names_the_install_command(tmp_path):
    path = tmp_path / "c.onnx"
    onnx.save(conv_lstm("2d"), path)
    hide = "import sys; sys.modules['openvino'] = None; import runpy; runpy.run_module('rnnconv', run_name='__main__')"
    res = subprocess.run([sys.executable, "-c", hide, "to-openvino", str(path), "-o", str(tmp_path / "c.xml")],
                         capture_output=True, text=True)
    assert res.returncode == EXIT_UNSUPPORTED, res.stderr
    assert "InstanceNormalization" in res.stderr and INSTALL in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "c.xml").exists()


def test_without_openvino_models_in_the_table_still_convert(tmp_path, without_openvino):
    report = to_openvino(FIXTURES / "lstm7_peepholes.onnx", tmp_path / "m.xml").report
    assert report.ok and any(c.subject == "model" for c in report.checks)
    assert any("openvino not installed" in s for s in report.skipped)
    with pytest.raises(Unsupported, match="needs the openvino package"):
        to_openvino(FIXTURES / "lstm7_peepholes.onnx", tmp_path / "o.xml", route="openvino")


def test_own_writer_only_when_asked(tmp_path):
    pytest.importorskip("openvino")
    with pytest.raises(Unsupported, match="outside rnnconv's own OpenVINO table: InstanceNormalization") as err:
        to_openvino(conv_lstm("1d"), tmp_path / "m.xml", route="rnnconv")
    assert err.value.fixes == ("route=auto",)


def test_every_node_rnnconv_refuses_is_named_at_once(tmp_path):
    """Two LSTMs whose explicit recurrence needs an input size nobody knows (X and W both of dynamic size):
    OpenVINO itself would quote only the first; rnnconv names both, exit 3, nothing written."""
    pytest.importorskip("openvino")
    H = 3
    value = helper.make_tensor_value_info
    inputs = [value("X", TensorProto.FLOAT, ["T", "N", "I"])]
    nodes = []
    for name in ("lstm_a", "lstm_b"):
        inputs += [value(f"{name}_W", TensorProto.FLOAT, [1, 4 * H, "I"]),
                   value(f"{name}_R", TensorProto.FLOAT, [1, 4 * H, H]),
                   value(f"{name}_P", TensorProto.FLOAT, [1, 3 * H])]
        nodes.append(helper.make_node("LSTM", ["X", f"{name}_W", f"{name}_R", "", "", "", "", f"{name}_P"],
                                      [f"{name}_Y"], hidden_size=H, name=name))
    graph = helper.make_graph(nodes, "two", inputs, [value(f"{n}_Y", TensorProto.FLOAT, ["T", 1, "N", H])
                                                     for n in ("lstm_a", "lstm_b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    with pytest.raises(Unsupported) as err:
        to_openvino(model, tmp_path / "m.xml", route="openvino")
    assert "LSTM node 'lstm_a'" in str(err.value) and "LSTM node 'lstm_b'" in str(err.value)
    assert "static input size" in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_what_openvinos_import_refuses_is_unsupported(tmp_path):
    pytest.importorskip("openvino")
    value = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="org.example")], "g",
                              [value("x", TensorProto.FLOAT, [2])], [value("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("org.example", 1)],
                              ir_version=8)
    with pytest.raises(Unsupported, match=r"OpenVINO's ONNX import refuses the model: failed on .*Frobnicate"):
        to_openvino(model, tmp_path / "m.xml")


def test_dynamic_quantize_lstm_with_computed_weights_is_refused_with_dequantize_as_the_fix(tmp_path):
    model = dynamic_quantize_lstm()
    (w,) = [t for t in model.graph.initializer if t.name == "W_q"]
    model.graph.initializer.remove(w)  # W a graph input: the lowering needs constant weights
    model.graph.input.append(helper.make_tensor_value_info("W_q", TensorProto.INT8, list(w.dims)))
    with pytest.raises(Unsupported) as err:
        to_openvino(model, tmp_path / "m.xml")
    assert "'lstm_quant': its weights are computed at run time" in str(err.value)
    assert err.value.fixes == ("dequantize",)
    path = tmp_path / "dq.onnx"
    onnx.save(model, path)
    code, _, stderr = run_cli(["to-openvino", str(path), "-o", str(tmp_path / "dq.xml")])
    assert code == EXIT_UNSUPPORTED and "DynamicQuantizeLSTM" in stderr and "dequantize" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dq.onnx"]


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, ZeroDivisionError])
def test_what_the_hook_raises_beyond_refusals_comes_out_as_itself(tmp_path, monkeypatch, raised):
    """OpenVINO turns every exception of a conversion extension into OpConversionFailure: Ctrl-C (exit 130) and
    rnnconv's own bugs (exit 70) must not become a refusal (exit 3)."""
    pytest.importorskip("openvino")

    def hook_fails(model, *args, **kwargs):
        raise raised()

    monkeypatch.setattr(command, "onnx_to_ir", hook_fails)
    with pytest.raises(raised):
        to_openvino(conv_lstm("1d"), tmp_path / "m.xml")
    assert list(tmp_path.iterdir()) == []
