"""`rnnconv verify`: agrees on real conversions, disagrees (exit 1, the right output named) on broken pairs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import rnnconv
from rnnconv.cli import cli
from rnnconv.commands import verify as verify_cmd
from rnnconv.verification import inputs as vinputs
from rnnconv.verification import model as vmodel
from rnnconv.verification import report as vreport
from rnnconv.verification import results as vresults
from rnnconv.verification import specs as vspecs
from rnnconv.verification import time_axis as vtime
from rnnconv.verification import tolerance as vtol

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def recurrent_model(path, op="LSTM", *, T=3, N=3, I=4, H=5, seed=0, P=False, seq_lens=False, use_seq_lens=True,
                    attrs=None, weights=None, transpose_y=False, outputs=("Y", "Y_h"), dynamic=False):
    """One recurrent node, layout 0; `weights` overrides the seeded W, R, B (and P) so tests can break them."""
    rng = np.random.default_rng(seed)
    G = GATES[op]
    w = {"W": rng.uniform(-1, 1, (1, G * H, I)), "R": rng.uniform(-1, 1, (1, G * H, H)),
         "B": rng.uniform(-1, 1, (1, 2 * G * H))}
    if P:
        w["P"] = rng.uniform(-1, 1, (1, 3 * H))
    w.update(weights or {})
    w = {k: np.asarray(v, dtype=np.float32) for k, v in w.items()}
    t, n = ("T", "N") if dynamic else (T, N)
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [t, n, I])]
    node_in = ["X", "W", "R", "B"]
    if op == "LSTM" or seq_lens:
        node_in += ["sequence_lens" if seq_lens and use_seq_lens else ""]
    if seq_lens:
        inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [n]))
    if op == "LSTM" and "P" in w:
        node_in += ["", "", "P"]
    while node_in[-1] == "":
        node_in.pop()
    all_out = {"LSTM": ("Y", "Y_h", "Y_c"), "GRU": ("Y", "Y_h"), "RNN": ("Y", "Y_h")}[op]
    node_out = [(("Y_raw" if transpose_y and o == "Y" else o) if o in outputs else "") for o in all_out]
    while node_out[-1] == "":
        node_out.pop()
    nodes = [helper.make_node(op, node_in, node_out, name=op.lower(), hidden_size=H, **(attrs or {}))]
    if transpose_y:  # [T, D, N, H] -> [N, D, T, H]: the same shape when T == N
        nodes.append(helper.make_node("Transpose", ["Y_raw"], ["Y"], perm=[2, 1, 0, 3]))
    shapes = {"Y": [t, 1, n, H], "Y_h": [1, n, H], "Y_c": [1, n, H]}
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outputs]
    inits = [numpy_helper.from_array(v, k) for k, v in w.items()]
    graph = helper.make_graph(nodes, "g", inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return {k: v.copy() for k, v in w.items()}


def run_cli(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], standalone_mode=False, catch_exceptions=True)
    code = result.exit_code
    if isinstance(result.exception, SystemExit):
        code = result.exception.code
    elif result.exception is not None and hasattr(result.exception, "exit_code"):
        code = result.exception.exit_code
    elif result.exception is not None:
        raise result.exception
    return code, result.output


def failing(report) -> dict[str, list[str]]:
    return {c.subject: [o.name for o in c.outputs if not o.ok] for c in report.checks if not c.ok}


# -- agreement on real conversions ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gru1_bidirectional_seq_lens_initial_h", "lstm1_bidirectional_peepholes_input_forget",
                                  "rnn1_activations_seq_lens_initial_h", "gru3_linear_before_reset"])
def test_agrees_with_upgraded_model(name, tmp_path):
    src = FIXTURES / f"{name}.onnx"
    out = tmp_path / "up.onnx"
    rnnconv.upgrade(str(src), str(out))
    for engine in ("rnnconv", "onnxruntime"):  # the source runs in neither onnxruntime nor (correctly) OpenVINO
        report = rnnconv.verify(str(src), str(out), candidate_engine=engine, runs=2)
        assert report.ok, report.lines()
        assert len(report.checks) == 2 and report.baseline == "reference[rnnconv]"


CONVERSIONS = {
    "layout-to-0": ("lstm14_layout1_all_features", lambda src, out: rnnconv_layout(src, out, to=0)),
    "layout-to-1": ("gru14_forward", lambda src, out: rnnconv_layout(src, out, to=1)),
    "downgrade": ("lstm14_layout1_bidirectional", lambda src, out: rnnconv.downgrade(src, out, opset=7)),
    "to-openvino": ("rnn7_bidirectional_seq_lens_initial_h", None),
    "from-openvino": ("gru7_bidirectional_linear_before_reset_seq_lens_initial_h", None),
}


def rnnconv_layout(src, out, to):
    from rnnconv.commands.layout import convert_layout

    return convert_layout(src, out, to=to)


@pytest.mark.parametrize("kind", list(CONVERSIONS))
def test_agrees_on_every_conversion_command(kind, tmp_path):
    name, convert = CONVERSIONS[kind]
    src = str(FIXTURES / f"{name}.onnx")
    if kind in ("to-openvino", "from-openvino"):
        from rnnconv.commands.to_openvino import to_openvino

        to_openvino(src, str(tmp_path / "m.xml"))
        out = str(tmp_path / "m.xml")
        if kind == "from-openvino":
            from rnnconv.commands.from_openvino import from_openvino

            from_openvino(out, str(tmp_path / "back.onnx"))
            out = str(tmp_path / "back.onnx")
    else:
        out = str(tmp_path / "out.onnx")
        convert(src, out)
    # every engine that `rnnconv check` says runs the candidate right (OpenVINO runs an IR candidate right)
    from rnnconv.commands import check

    engines = ["rnnconv"] + [t for t in ("onnxruntime", "openvino")
                             if (out.endswith(".xml") and t == "openvino")
                             or (out.endswith(".onnx") and not check.findings(out, [t]))]
    assert len(engines) >= 2 or kind == "layout-to-1"  # layout 1: onnxruntime refuses it, OpenVINO misreads it
    for engine in engines:
        report = rnnconv.verify(src, out, candidate_engine=engine, runs=2)
        assert report.ok, report.lines()


def test_agrees_with_own_openvino_conversion(tmp_path):
    from rnnconv.commands.to_openvino import to_openvino

    src = FIXTURES / "lstm7_bidirectional_peepholes_input_forget_seq_lens_initial_states.onnx"
    xml = tmp_path / "m.xml"
    to_openvino(str(src), str(xml))
    code, out = run_cli("verify", src, xml, "--cand-engine", "all")
    assert code == 0, out
    assert "candidate[openvino]" in out and "agree" in out


def test_torch_export_with_its_recorded_inputs(tmp_path):
    src = FIXTURES / "torch" / "lstm_batch_first_bidirectional_two_layers_initial_state_legacy14.onnx"
    data = np.load(src.with_suffix(".npz"))
    model = onnx.load(str(src))
    names = {i.name for i in model.graph.input}
    np.savez(tmp_path / "in.npz", **{k: data[k] for k in data.files if k in names})
    code, out = run_cli("verify", src, src, "--ref-engine", "onnxruntime", "--inputs", tmp_path / "in.npz",
                        "--save-outputs", tmp_path / "out.npz")
    assert code == 0, out
    saved = np.load(tmp_path / "out.npz")
    for o in model.graph.output:
        if o.name in data.files:
            np.testing.assert_allclose(saved[f"candidate.rnnconv/{o.name}"], data[o.name], atol=1e-5)


# -- disagreement on broken pairs ----------------------------------------------------------------------------

def test_gates_swapped(tmp_path):
    w = recurrent_model(tmp_path / "ref.onnx", "LSTM", outputs=("Y_h",))
    H = 5
    W = w["W"].copy()
    W[0, :H], W[0, 2 * H:3 * H] = w["W"][0, 2 * H:3 * H], w["W"][0, :H]  # i and f swapped in W only
    recurrent_model(tmp_path / "cand.onnx", "LSTM", outputs=("Y_h",), weights={"W": W})
    code, out = run_cli("verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx")
    assert code == 1
    assert "BAD Y_h" in out and "DISAGREE: candidate[rnnconv] on Y_h" in out


def test_bias_unfolded_wrong(tmp_path):
    """GRU linear_before_reset=1: Rbh is multiplied by r, so it cannot be folded into Wbh."""
    H = 5
    w = recurrent_model(tmp_path / "ref.onnx", "GRU", attrs={"linear_before_reset": 1})
    B = w["B"].copy()
    B[0, 2 * H:3 * H] += B[0, 5 * H:6 * H]
    B[0, 5 * H:6 * H] = 0
    recurrent_model(tmp_path / "cand.onnx", "GRU", attrs={"linear_before_reset": 1}, weights={"B": B})
    report = rnnconv.verify(str(tmp_path / "ref.onnx"), str(tmp_path / "cand.onnx"))
    assert not report.ok
    assert failing(report) == {"candidate[rnnconv]": ["Y", "Y_h"]}
    # the same folding is exact without linear_before_reset: verify must agree there
    w = recurrent_model(tmp_path / "ref0.onnx", "GRU")
    B = w["B"].copy()
    B[0, 2 * H:3 * H] += B[0, 5 * H:6 * H]
    B[0, 5 * H:6 * H] = 0
    recurrent_model(tmp_path / "cand0.onnx", "GRU", weights={"B": B})
    assert rnnconv.verify(str(tmp_path / "ref0.onnx"), str(tmp_path / "cand0.onnx")).ok


def test_transposed_output_of_the_same_shape(tmp_path):
    """batch == seq: a transposed Y has Y's shape; a tool that matches by shape would call this a pass."""
    recurrent_model(tmp_path / "ref.onnx", "GRU", T=3, N=3)
    recurrent_model(tmp_path / "cand.onnx", "GRU", T=3, N=3, transpose_y=True)
    code, out = run_cli("verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["agree"] is False
    outputs = {o["name"]: o for o in doc["checks"][0]["outputs"]}
    assert outputs["Y"]["ok"] is False and outputs["Y"]["shape"] == [3, 1, 3, 5]
    assert outputs["Y_h"]["ok"] is True


def test_sequence_lens_ignored(tmp_path):
    recurrent_model(tmp_path / "ref.onnx", "LSTM", T=6, seq_lens=True, dynamic=True)
    recurrent_model(tmp_path / "cand.onnx", "LSTM", T=6, seq_lens=True, use_seq_lens=False, dynamic=True)
    code, out = run_cli("verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--dim", "T=6", "--dim",
                        "batch=4", "--save-inputs", tmp_path / "in.npz")
    assert code == 1, out
    assert "BAD Y " in out and "BAD Y_h" in out
    lens = np.load(tmp_path / "in.npz")["sequence_lens"]
    # Y is wrong only past the shortest length: the report names those time steps
    assert f"steps {lens.min()}-5 of 6" in out
    assert lens.shape == (4,) and lens.min() >= 1 and lens.max() <= 6 and lens.min() < 6
    assert "sequence_lens of LSTM 'lstm'" in out


def test_peepholes_dropped_and_openvino_import_disagreement(tmp_path):
    """The candidate is what OpenVINO's own import makes of an LSTM with peepholes (ov.convert_model)."""
    ov = pytest.importorskip("openvino")
    recurrent_model(tmp_path / "ref.onnx", "LSTM", P=True, outputs=("Y", "Y_h", "Y_c"))
    ov.save_model(ov.convert_model(str(tmp_path / "ref.onnx")), str(tmp_path / "ov.xml"), compress_to_fp16=False)
    code, out = run_cli("verify", tmp_path / "ref.onnx", tmp_path / "ov.xml", "--engine", "all")
    assert code == 1
    report = rnnconv.verify(str(tmp_path / "ref.onnx"), str(tmp_path / "ov.xml"), engine="all")
    bad = failing(report)
    assert bad["reference[openvino]"] == ["Y", "Y_h", "Y_c"]  # OpenVINO's ONNX import itself is wrong
    assert "candidate[rnnconv]" in bad and "candidate[openvino]" in bad
    assert "reference[onnxruntime]" not in bad
    assert {"side": "candidate", "engine": "onnxruntime", "reason": "onnxruntime reads ONNX only"} in report.skipped
    # without peepholes the same import agrees everywhere
    recurrent_model(tmp_path / "ref0.onnx", "LSTM", outputs=("Y", "Y_h", "Y_c"))
    ov.save_model(ov.convert_model(str(tmp_path / "ref0.onnx")), str(tmp_path / "ov0.xml"), compress_to_fp16=False)
    assert rnnconv.verify(str(tmp_path / "ref0.onnx"), str(tmp_path / "ov0.xml"), engine="all").ok


def test_peepholes_dropped_onnx_pair(tmp_path):
    w = recurrent_model(tmp_path / "ref.onnx", "LSTM", P=True)
    recurrent_model(tmp_path / "cand.onnx", "LSTM", weights={k: v for k, v in w.items() if k != "P"})
    report = rnnconv.verify(str(tmp_path / "ref.onnx"), str(tmp_path / "cand.onnx"), engine="onnxruntime")
    assert failing(report) == {"candidate[onnxruntime]": ["Y", "Y_h"]}


# -- inputs ----------------------------------------------------------------------------------------------------

def embedding_model(path, vocab=7):
    rng = np.random.default_rng(1)
    E, H = 4, 3
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, (vocab, E)).astype(np.float32), "emb"),
             numpy_helper.from_array(rng.uniform(-1, 1, (1, 3 * H, E)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-1, 1, (1, 3 * H, H)).astype(np.float32), "R")]
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["x"], axis=0),
             helper.make_node("GRU", ["x", "W", "R", "", "lens"], ["", "h"], hidden_size=H)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["seq", "batch"]),
                                           helper.make_tensor_value_info("lens", TensorProto.INT32, ["batch"])],
                              [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "batch", H])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    onnx.save(model, str(path))


def test_integer_inputs_in_valid_ranges(tmp_path):
    embedding_model(tmp_path / "m.onnx", vocab=7)
    m = vmodel.open_model(str(tmp_path / "m.onnx"))
    specs = vspecs.merge_specs(m, m)
    rng = np.random.default_rng(0)
    feeds, described = vinputs.draw_inputs(specs, rng, {"seq": 40, "batch": 8}, {})
    assert feeds["ids"].shape == (40, 8) and feeds["ids"].min() >= 0 and feeds["ids"].max() == 6
    assert feeds["lens"].shape == (8,) and feeds["lens"].min() >= 1 and feeds["lens"].max() <= 40
    assert {d["name"]: d["range"] for d in described} == {"ids": [0, 6], "lens": [1, 40]}
    # the ids feed the GRU's X: their axis 0 is time, so the lengths follow --dim seq
    feeds, _ = vinputs.draw_inputs(specs, rng, {"ids:0": 3}, {})
    assert feeds["ids"].shape[0] == 3 and feeds["lens"].max() <= 3
    # onnxruntime raises on an out-of-range id: these inputs run
    report = rnnconv.verify(str(tmp_path / "m.onnx"), str(tmp_path / "m.onnx"), engine="onnxruntime", runs=3,
                            dims={"seq": 9})
    assert report.ok


def test_seed_range_runs_and_inputs_file(tmp_path):
    recurrent_model(tmp_path / "m.onnx", "RNN", seq_lens=True, dynamic=True)
    a = rnnconv.verify(str(tmp_path / "m.onnx"), str(tmp_path / "m.onnx"), seed=3, runs=2,
                       save_inputs=tmp_path / "a.npz", ranges={"X": (5.0, 6.0), "sequence_lens": (2, 2)})
    b = rnnconv.verify(str(tmp_path / "m.onnx"), str(tmp_path / "m.onnx"), seed=3, runs=2,
                       save_inputs=tmp_path / "b.npz", ranges={"X": (5.0, 6.0), "sequence_lens": (2, 2)})
    assert a.ok and b.ok and len(a.checks) == 2
    fa, fb = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    assert sorted(fa.files) == ["run0/X", "run0/sequence_lens", "run1/X", "run1/sequence_lens"]
    for k in fa.files:
        np.testing.assert_array_equal(fa[k], fb[k])
    assert fa["run0/X"].min() >= 5 and fa["run0/X"].max() <= 6 and set(fa["run1/sequence_lens"]) == {2}
    assert not np.array_equal(fa["run0/X"], fa["run1/X"])
    # the saved file reproduces the runs
    code, out = run_cli("verify", tmp_path / "m.onnx", tmp_path / "m.onnx", "--inputs", tmp_path / "a.npz",
                        "--save-inputs", tmp_path / "c.npz")
    assert code == 0, out
    fc = np.load(tmp_path / "c.npz")
    for k in fa.files:
        np.testing.assert_array_equal(fa[k], fc[k])


def test_per_output_tolerances(tmp_path):
    w = recurrent_model(tmp_path / "ref.onnx", "GRU")
    recurrent_model(tmp_path / "cand.onnx", "GRU", weights={"W": w["W"] + 1e-3})
    ref, cand = tmp_path / "ref.onnx", tmp_path / "cand.onnx"
    assert run_cli("verify", ref, cand)[0] == 1
    assert run_cli("verify", ref, cand, "--atol", "0.1")[0] == 0
    code, out = run_cli("verify", ref, cand, "--atol", "Y=0.1")
    assert code == 1 and "on Y_h" in out and "on Y," not in out
    assert run_cli("verify", ref, cand, "--atol", "Y=0.1", "--atol", "Y_h=0.1")[0] == 0
    assert run_cli("verify", ref, cand, "--atol", "nope=0.1")[0] == 2


def test_exit_codes_for_bad_usage_and_bad_input(tmp_path):
    recurrent_model(tmp_path / "m.onnx", "GRU")
    m = tmp_path / "m.onnx"
    assert run_cli("verify", m, m, "--dim", "oops")[0] == 2
    assert run_cli("verify", m, m, "--dim", "nosuchdim=3")[0] == 2
    assert run_cli("verify", m, m, "--dim", "X:0=999")[0] == 2  # a static axis only at its own size
    assert run_cli("verify", m, m, "--range", "X:1")[0] == 2
    assert run_cli("verify", m, m, "--engine", "tensorrt")[0] == 2
    assert run_cli("verify", m, tmp_path / "missing.onnx")[0] == 4
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    assert run_cli("verify", m, tmp_path / "junk.onnx")[0] == 4
    np.savez(tmp_path / "bad.npz", Z=np.zeros(3, np.float32))
    assert run_cli("verify", m, m, "--inputs", tmp_path / "bad.npz")[0] == 4
    np.savez(tmp_path / "shape.npz", X=np.zeros((2, 3, 4), np.float32))
    assert run_cli("verify", m, m, "--inputs", tmp_path / "shape.npz")[0] == 4
    # sizes are estimated before anything is allocated; given lengths are checked against T
    code, out = run_cli("verify", m, m, "--dim", f"X:0={1 << 40}")
    assert code == 2  # X:0 is static in this model
    recurrent_model(tmp_path / "d.onnx", "LSTM", seq_lens=True, dynamic=True)
    d = tmp_path / "d.onnx"
    assert run_cli("verify", d, d, "--dim", f"T={1 << 40}")[0] == 4
    np.savez(tmp_path / "lens.npz", X=np.zeros((5, 2, 4), np.float32), sequence_lens=np.array([6, 1], np.int32))
    assert run_cli("verify", d, d, "--inputs", tmp_path / "lens.npz")[0] == 4
    # an engine that cannot run a model it was asked for explicitly
    code, out = run_cli("verify", FIXTURES / "gru14_layout1.onnx", FIXTURES / "gru14_layout1.onnx",
                        "--engine", "onnxruntime")
    assert code == 3


def test_shapes_are_never_guessed_and_nan_is_reported():
    c = vresults.compare("Y", np.zeros((2, 3)), np.zeros((3, 2)), 1e-5, 1e-5)
    assert not c.ok and "shape" in c.problem
    a = np.ones((4, 2))
    b = a.copy()
    b[2, 1] = np.nan
    c = vresults.compare("Y", a, b, 1e-5, 1e-5, time_axis=0)
    assert not c.ok and c.nan == (0, 1) and "NaN" in c.problem and c.worst_index == (2, 1)
    same = vresults.compare("Y", b, b, 1e-5, 1e-5)
    assert same.ok and same.nan == (1, 1)


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    recurrent_model(tmp_path / "ref.onnx", "LSTM", seq_lens=True)
    recurrent_model(tmp_path / "cand.onnx", "LSTM", seq_lens=True, use_seq_lens=False)
    code, _ = run_cli("verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--plot", tmp_path / "e.png")
    assert code == 1
    assert (tmp_path / "e.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_api_report_and_module_stay_usable(tmp_path):
    recurrent_model(tmp_path / "m.onnx", "RNN")
    report = verify_cmd.verify(str(tmp_path / "m.onnx"), str(tmp_path / "m.onnx"))
    assert isinstance(report, vreport.VerifyReport) and isinstance(report, vreport.Report)
    assert report.ok and report.verdict().startswith("agree")
    doc = json.loads(report.to_json())
    out = doc["checks"][0]["outputs"][0]
    for key in ("max_abs", "max_rel", "mean_abs", "n_bad", "frac_bad", "worst_index", "nan", "inf", "atol", "rtol"):
        assert key in out
    assert rnnconv.verify is verify_cmd.verify  # the public name


def test_ir_reference_against_onnx_candidate_with_dynamic_dims(tmp_path):
    """Inputs of an IR reference take their symbol names and valid ranges from the ONNX side."""
    from rnnconv.commands.to_openvino import to_openvino

    src = FIXTURES / "lstm7_batch_first.onnx"
    to_openvino(str(src), str(tmp_path / "m.xml"))
    report = rnnconv.verify(str(tmp_path / "m.xml"), str(src), engine="all", dims={"batch": 2, "seq": 7})
    assert report.ok, report.lines()
    assert report.inputs[0][0]["shape"] == [2, 7, 4]
    assert report.baseline == "reference[rnnconv]"


def test_openvino_bfloat16_inputs_and_outputs_keep_their_bits():
    """OpenVINO's Python API types bf16 tensors as float16 arrays: values must be moved as bits."""
    pytest.importorskip("openvino")
    path = str(FIXTURES / "gru22_bfloat16.onnx")
    report = rnnconv.verify(path, path, candidate_engine="openvino")
    assert report.ok, report.lines()
    assert report.checks[0].outputs[0].atol == vtol.TOLERANCES["bfloat16"][0]


def test_time_axis_followed_to_the_graph_outputs(tmp_path):
    """Per-step errors need the time axis of each output: through Squeeze and a MatMul head, and in IR Y."""
    assert vtime.time_axes(vmodel.open_model(str(FIXTURES / "lstm14_squeeze_head.onnx"))) == {"logits": 0}
    assert vtime.time_axes(vmodel.open_model(str(FIXTURES / "lstm14_layout1.onnx"))) == {"Y": 1}
    recurrent_model(tmp_path / "t.onnx", "GRU", transpose_y=True)
    assert vtime.time_axes(vmodel.open_model(str(tmp_path / "t.onnx"))) == {"Y": 2}
    from rnnconv.commands.to_openvino import to_openvino

    to_openvino(str(FIXTURES / "gru7_forward.onnx"), str(tmp_path / "m.xml"))
    assert vtime.time_axes(vmodel.open_model(str(tmp_path / "m.xml"))) == {"Y": 0}
