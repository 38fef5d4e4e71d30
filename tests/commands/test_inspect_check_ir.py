"""`rnnconv inspect` and `rnnconv check` on OpenVINO IR (.xml) (issue 30): every IR in fixtures/openvino, held
against the XML itself (read here with xml.etree: layer counts, recurrent layers and their attributes), and what
they claim of the runtimes held against the runtimes: onnxruntime runs what from-openvino writes, OpenVINO's CPU
plugin refuses an IR activation it cannot compile (its own save of an ONNX GRU with HardSigmoid), from-openvino
refuses that IR too (exit 4)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest

from rnnconv.errors import EXIT_BAD_INPUT, EXIT_VERIFY
from tests.conftest import FIXTURES, recurrent_model, run_cli, tensor_iterator_ir

IRS = sorted((FIXTURES / "openvino").rglob("*.xml"))
RECURRENT = {"GRUSequence", "LSTMSequence", "RNNSequence", "GRUCell", "LSTMCell", "RNNCell", "TensorIterator", "Loop"}


def _layers(root) -> list:
    """Every <layer> of the IR, those of bodies included, with the path of names from-openvino gives them."""
    out = []

    def walk(layers, path):
        for layer in layers.findall("layer"):
            out.append((path + layer.get("name"), layer))
            body = layer.find("body")
            if body is not None:
                walk(body.find("layers"), f"{path}{layer.get('name')}/body/")

    walk(root.find("layers"), "")
    return out


@pytest.mark.parametrize("xml", IRS, ids=[str(p.relative_to(FIXTURES)) for p in IRS])
def test_inspect_and_check_read_every_ir_fixture(xml):
    layers = _layers(ET.parse(xml).getroot())
    code, out, err = run_cli(["inspect", xml, "--json"])
    assert code == 0, err
    info = json.loads(out)
    assert info["format"] == "openvino-ir" and info["ir_version"] == int(ET.parse(xml).getroot().get("version"))
    assert info["layers"] == dict(Counter(layer.get("type") for _, layer in layers))
    recurrent = [(path, layer) for path, layer in layers if layer.get("type") in RECURRENT]
    assert [n["name"] for n in info["nodes"]] == [path for path, _ in recurrent]
    for row, (_, layer) in zip(info["nodes"], recurrent):
        data = layer.find("data").attrib
        assert row["type"] == layer.get("type") and row["version"] == layer.get("version")
        assert row["hidden_size"] == int(data["hidden_size"]) and row["direction"] == data.get("direction", "forward")
        assert row["activations"] == [a.strip() for a in data["activations"].split(",")]
        assert row["from_openvino"].startswith(f"{layer.get('type')}-5 -> ONNX {layer.get('type')[:-8]} (layout 0)")
        assert row["runs_in"] == {"onnxruntime": True, "openvino": True}
    code, out, err = run_cli(["inspect", xml])
    assert code == 0 and out.startswith(f"{xml}: OpenVINO IR version "), out + err

    code, out, err = run_cli(["check", xml, "--target", "onnxruntime"])
    assert code == 0, out + err
    assert f"onnxruntime: runs all {len(recurrent)} recurrent layer(s) after rnnconv from-openvino {xml} -o " \
           f"{xml.stem}.onnx" in out.splitlines()
    code, out, _ = run_cli(["check", xml, "--target", "onnxruntime", "--target", "openvino", "--json"])
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["recurrent_nodes"] == len(recurrent)
    assert [r["name"] for r in report["layers"]] == [path for path, _ in recurrent]


def test_the_command_check_names_is_what_onnxruntime_then_runs(tmp_path):
    xml = FIXTURES / "openvino" / "lstm_batch_first_legacy14.xml"
    code, out, _ = run_cli(["check", xml, "--target", "onnxruntime", "--json"])
    via = json.loads(out)["via"].split()
    assert code == 0 and via[:3] == ["rnnconv", "from-openvino", str(xml)]
    code, out, err = run_cli([*via[1:-1], tmp_path / via[-1], "--verify", "none"])
    assert code == 0, out + err
    model = onnx.load(str(tmp_path / via[-1]))
    assert [n.op_type for n in model.graph.node if n.op_type == "LSTM"] == ["LSTM"]
    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])  # no refusal


def test_a_tensor_iterator_of_one_cell_is_one_recurrent_layer(tmp_path):
    ov = pytest.importorskip("openvino")
    xml = tmp_path / "ti.xml"
    ov.save_model(tensor_iterator_ir("GRU", lbr=True), str(xml))
    code, out, err = run_cli(["inspect", xml, "--json"])
    assert code == 0, err
    (row,) = json.loads(out)["nodes"]
    assert row["type"] == "TensorIterator" and row["kind"] == "GRU" and row["cells"] == ["GRUCell"]
    assert row["hidden_size"] == 5 and row["input_size"] == 3 and row["linear_before_reset"] is True
    assert row["from_openvino"].startswith("TensorIterator") and "ONNX GRU" in row["from_openvino"]
    code, out, _ = run_cli(["inspect", xml])
    assert code == 0 and "TensorIterator-1 (GRUCell)" in out


def test_an_explicit_recurrence_rnnconv_wrote_is_listed_as_a_loop(tmp_path):
    xml = tmp_path / "p.xml"
    code, out, err = run_cli(["to-openvino", FIXTURES / "lstm7_peepholes.onnx", "-o", xml])
    assert code == 0, out + err
    code, out, err = run_cli(["inspect", xml, "--json"])
    (row,) = json.loads(out)["nodes"]
    assert row["type"] == "TensorIterator" and row["kind"] is None
    assert row["from_openvino"].startswith("TensorIterator -> ONNX Loop (its body of ")


_SAVE = """
import sys
import openvino as ov
ov.save_model(ov.convert_model(sys.argv[1]), sys.argv[2])
try:
    ov.Core().compile_model(sys.argv[2], "CPU")
    print("compiled")
except Exception as err:
    print("refused:", str(err).splitlines()[0])
"""


def test_an_activation_the_cpu_plugin_cannot_compile_is_found_in_the_ir(tmp_path):
    """OpenVINO's own save of an ONNX GRU with HardSigmoid: its CPU plugin refuses to compile the IR (checked in a
    child process), and from-openvino refuses it: check says both."""
    pytest.importorskip("openvino")
    onnx.save(recurrent_model("GRU", activations=["HardSigmoid", "Tanh"], clip=1.5), tmp_path / "g.onnx")
    xml = tmp_path / "g.xml"
    proc = subprocess.run([sys.executable, "-c", _SAVE, str(tmp_path / "g.onnx"), str(xml)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.startswith("refused:"), proc.stdout + proc.stderr
    code, out, err = run_cli(["check", xml, "--target", "openvino", "--target", "onnxruntime", "--json"])
    assert code == EXIT_VERIFY, err
    found = {f["target"]: f for f in json.loads(out)["findings"]}
    assert found["openvino"]["effect"] == "refuses" and "hardsigmoid" in found["openvino"]["problem"]
    assert found["onnxruntime"]["node"] == "(model)" and "from-openvino cannot convert" in \
        found["onnxruntime"]["problem"]
    code, out, err = run_cli(["from-openvino", xml, "-o", tmp_path / "g_back.onnx"])
    assert code == EXIT_BAD_INPUT and "activation 'hardsigmoid' is not one of relu, sigmoid, tanh" in err
    assert "activation 'hardsigmoid' is not one of relu, sigmoid, tanh" in found["onnxruntime"]["problem"]
    code, out, _ = run_cli(["inspect", xml])
    assert code == 0 and "from-openvino: refuses: " in out
