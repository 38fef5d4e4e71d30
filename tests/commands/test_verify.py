"""`rnnconv verify`: agrees on real conversions, disagrees (exit 1, the right output named) on broken pairs; seeds,
runs, input files, tolerances and exit codes; a TensorIterator IR runs without the IR -> ONNX conversion."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

import rnnconv
from rnnconv.commands import check
from rnnconv.commands import verify as verify_cmd
from rnnconv.commands.from_openvino import from_openvino
from rnnconv.commands.layout import convert_layout
from rnnconv.commands.to_openvino import to_openvino
from rnnconv.verification import report as vreport
from tests.conftest import (
    FIXTURES,
    OPENVINO,
    TORCH,
    initializers,
    openvino_ir,
    recurrent_model,
    run_cli,
    tensor_iterator_ir,
    with_transposed_y,
    write_model,
)

H = 5  # recurrent_model's hidden size


def write(path, op, *, transpose_y=False, ignore_lens=False, **kw) -> dict:
    """One recurrent node (T == N, so a transposed Y keeps Y's shape; Y and Y_h unless told) written to `path`;
    `ignore_lens` keeps the sequence_lens input but does not feed it to the node. Returns the weights."""
    model = recurrent_model(op, **{"T": 3, "N": 3, "I": 4, "outputs": ("Y", "Y_h"), **kw})
    if transpose_y:
        model = with_transposed_y(model)
    if ignore_lens:
        model.graph.node[0].input[4] = ""
    write_model(model, path)
    return initializers(model)


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
    return convert_layout(src, out, to=to)


@pytest.mark.parametrize("kind", list(CONVERSIONS))
def test_agrees_on_every_conversion_command(kind, tmp_path):
    name, convert = CONVERSIONS[kind]
    src = str(FIXTURES / f"{name}.onnx")
    if kind in ("to-openvino", "from-openvino"):
        to_openvino(src, str(tmp_path / "m.xml"))
        out = str(tmp_path / "m.xml")
        if kind == "from-openvino":
            from_openvino(out, str(tmp_path / "back.onnx"))
            out = str(tmp_path / "back.onnx")
    else:
        out = str(tmp_path / "out.onnx")
        convert(src, out)
    # every engine that `rnnconv check` says runs the candidate right (OpenVINO runs an IR candidate right)
    # (without the openvino package: rnnconv's own, and onnxruntime on ONNX)
    engines = ["rnnconv"] + [t for t in ("onnxruntime", "openvino")[:1 + OPENVINO]
                             if (out.endswith(".xml") and t == "openvino")
                             or (out.endswith(".onnx") and not check.findings(out, [t]))]
    # layout 1: onnxruntime refuses it, OpenVINO misreads it; an IR: OpenVINO alone runs it beside rnnconv
    assert len(engines) >= 2 or kind == "layout-to-1" or (kind == "to-openvino" and not OPENVINO)
    for engine in engines:
        report = rnnconv.verify(src, out, candidate_engine=engine, runs=2)
        assert report.ok, report.lines()


def test_agrees_with_own_openvino_conversion(tmp_path):
    src = FIXTURES / "lstm7_bidirectional_peepholes_input_forget_seq_lens_initial_states.onnx"
    xml = tmp_path / "m.xml"
    to_openvino(str(src), str(xml))
    code, out, err = run_cli(["verify", src, xml, "--cand-engine", "all"])
    assert code == 0, out + err
    assert "candidate[openvino]" in out and "agree" in out


def test_torch_export_with_its_recorded_inputs(tmp_path):
    src = TORCH / "lstm_batch_first_bidirectional_two_layers_initial_state_legacy14.onnx"
    data = np.load(src.with_suffix(".npz"))
    model = onnx.load(str(src))
    names = {i.name for i in model.graph.input}
    np.savez(tmp_path / "in.npz", **{k: data[k] for k in data.files if k in names})
    code, out, err = run_cli(["verify", src, src, "--ref-engine", "onnxruntime", "--inputs", tmp_path / "in.npz",
                              "--save-outputs", tmp_path / "out.npz"])
    assert code == 0, out + err
    saved = np.load(tmp_path / "out.npz")
    for o in model.graph.output:
        if o.name in data.files:
            np.testing.assert_allclose(saved[f"candidate.rnnconv/{o.name}"], data[o.name], atol=1e-5)


# -- disagreement on broken pairs ----------------------------------------------------------------------------

def test_gates_swapped(tmp_path):
    w = write(tmp_path / "ref.onnx", "LSTM", outputs=("Y_h",))
    W = w["W"].copy()
    W[0, :H], W[0, 2 * H:3 * H] = w["W"][0, 2 * H:3 * H], w["W"][0, :H]  # i and f swapped in W only
    write(tmp_path / "cand.onnx", "LSTM", outputs=("Y_h",), weights={"W": W})
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx"])
    assert code == 1
    assert "BAD Y_h" in out and "DISAGREE: candidate[rnnconv] on Y_h" in out


def test_bias_unfolded_wrong(tmp_path):
    """GRU linear_before_reset=1: Rbh is multiplied by r, so it cannot be folded into Wbh."""
    w = write(tmp_path / "ref.onnx", "GRU", lbr=1)
    B = w["B"].copy()
    B[0, 2 * H:3 * H] += B[0, 5 * H:6 * H]
    B[0, 5 * H:6 * H] = 0
    write(tmp_path / "cand.onnx", "GRU", lbr=1, weights={"B": B})
    report = rnnconv.verify(str(tmp_path / "ref.onnx"), str(tmp_path / "cand.onnx"))
    assert not report.ok
    assert failing(report) == {"candidate[rnnconv]": ["Y", "Y_h"]}
    # the same folding is exact without linear_before_reset: verify must agree there
    w = write(tmp_path / "ref0.onnx", "GRU")
    B = w["B"].copy()
    B[0, 2 * H:3 * H] += B[0, 5 * H:6 * H]
    B[0, 5 * H:6 * H] = 0
    write(tmp_path / "cand0.onnx", "GRU", weights={"B": B})
    assert rnnconv.verify(str(tmp_path / "ref0.onnx"), str(tmp_path / "cand0.onnx")).ok


def test_transposed_output_of_the_same_shape(tmp_path):
    """batch == seq: a transposed Y has Y's shape; a tool that matches by shape would call this a pass."""
    write(tmp_path / "ref.onnx", "GRU")
    write(tmp_path / "cand.onnx", "GRU", transpose_y=True)
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--json"])
    assert code == 1
    doc = json.loads(out)
    assert doc["agree"] is False
    outputs = {o["name"]: o for o in doc["checks"][0]["outputs"]}
    assert outputs["Y"]["ok"] is False and outputs["Y"]["shape"] == [3, 1, 3, 5]
    assert outputs["Y_h"]["ok"] is True


def test_sequence_lens_ignored(tmp_path):
    write(tmp_path / "ref.onnx", "LSTM", sequence_lens=True, dynamic=True)
    write(tmp_path / "cand.onnx", "LSTM", sequence_lens=True, dynamic=True, ignore_lens=True)
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--dim", "T=6", "--dim",
                            "batch=4", "--save-inputs", tmp_path / "in.npz"])
    assert code == 1, out
    assert "BAD Y " in out and "BAD Y_h" in out
    lens = np.load(tmp_path / "in.npz")["sequence_lens"]
    # Y is wrong only past the shortest length: the report names those time steps
    assert f"steps {lens.min()}-5 of 6" in out
    assert lens.shape == (4,) and lens.min() >= 1 and lens.max() <= 6 and lens.min() < 6
    assert "sequence_lens of LSTM 'lstm'" in out


def test_peepholes_dropped_and_openvino_import_disagreement(tmp_path):
    """The candidate is what OpenVINO's own import makes of an LSTM with peepholes (ov.convert_model)."""
    pytest.importorskip("openvino")
    write(tmp_path / "ref.onnx", "LSTM", peepholes=True, outputs=("Y", "Y_h", "Y_c"))
    openvino_ir(tmp_path / "ref.onnx", tmp_path / "ov.xml")
    code, _, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "ov.xml", "--engine", "all"])
    assert code == 1
    report = rnnconv.verify(str(tmp_path / "ref.onnx"), str(tmp_path / "ov.xml"), engine="all")
    bad = failing(report)
    assert bad["reference[openvino]"] == ["Y", "Y_h", "Y_c"]  # OpenVINO's ONNX import itself is wrong
    assert "candidate[rnnconv]" in bad and "candidate[openvino]" in bad
    assert "reference[onnxruntime]" not in bad
    assert {"side": "candidate", "engine": "onnxruntime", "reason": "onnxruntime reads ONNX only"} in report.skipped
    # without peepholes the same import agrees everywhere
    write(tmp_path / "ref0.onnx", "LSTM", outputs=("Y", "Y_h", "Y_c"))
    openvino_ir(tmp_path / "ref0.onnx", tmp_path / "ov0.xml")
    assert rnnconv.verify(str(tmp_path / "ref0.onnx"), str(tmp_path / "ov0.xml"), engine="all").ok


def test_peepholes_dropped_onnx_pair(tmp_path):
    w = write(tmp_path / "ref.onnx", "LSTM", peepholes=True)
    write(tmp_path / "cand.onnx", "LSTM", weights={k: v for k, v in w.items() if k != "P"})
    report = rnnconv.verify(str(tmp_path / "ref.onnx"), str(tmp_path / "cand.onnx"), engine="onnxruntime")
    assert failing(report) == {"candidate[onnxruntime]": ["Y", "Y_h"]}


# -- inputs, tolerances, exit codes, outputs ---------------------------------------------------------------

def test_seed_range_runs_and_inputs_file(tmp_path):
    write(tmp_path / "m.onnx", "RNN", sequence_lens=True, dynamic=True)
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
    code, out, err = run_cli(["verify", tmp_path / "m.onnx", tmp_path / "m.onnx", "--inputs", tmp_path / "a.npz",
                              "--save-inputs", tmp_path / "c.npz"])
    assert code == 0, out + err
    fc = np.load(tmp_path / "c.npz")
    for k in fa.files:
        np.testing.assert_array_equal(fa[k], fc[k])


def test_per_output_tolerances(tmp_path):
    w = write(tmp_path / "ref.onnx", "GRU")
    write(tmp_path / "cand.onnx", "GRU", weights={"W": w["W"] + 1e-3})
    ref, cand = tmp_path / "ref.onnx", tmp_path / "cand.onnx"
    assert run_cli(["verify", ref, cand])[0] == 1
    assert run_cli(["verify", ref, cand, "--atol", "0.1"])[0] == 0
    code, out, _ = run_cli(["verify", ref, cand, "--atol", "Y=0.1"])
    assert code == 1 and "on Y_h" in out and "on Y," not in out
    assert run_cli(["verify", ref, cand, "--atol", "Y=0.1", "--atol", "Y_h=0.1"])[0] == 0
    assert run_cli(["verify", ref, cand, "--atol", "nope=0.1"])[0] == 2


def test_exit_codes_for_bad_usage_and_bad_input(tmp_path):
    m = tmp_path / "m.onnx"
    write(m, "GRU")
    assert run_cli(["verify", m, m, "--dim", "oops"])[0] == 2
    assert run_cli(["verify", m, m, "--dim", "nosuchdim=3"])[0] == 2
    assert run_cli(["verify", m, m, "--dim", "X:0=999"])[0] == 2  # a static axis only at its own size
    assert run_cli(["verify", m, m, "--range", "X:1"])[0] == 2
    assert run_cli(["verify", m, m, "--engine", "tensorrt"])[0] == 2
    assert run_cli(["verify", m, tmp_path / "missing.onnx"])[0] == 4
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    assert run_cli(["verify", m, tmp_path / "junk.onnx"])[0] == 4
    np.savez(tmp_path / "bad.npz", Z=np.zeros(3, np.float32))
    assert run_cli(["verify", m, m, "--inputs", tmp_path / "bad.npz"])[0] == 4
    np.savez(tmp_path / "shape.npz", X=np.zeros((2, 3, 4), np.float32))
    assert run_cli(["verify", m, m, "--inputs", tmp_path / "shape.npz"])[0] == 4
    # sizes are estimated before anything is allocated; given lengths are checked against T
    code, _, _ = run_cli(["verify", m, m, "--dim", f"X:0={1 << 40}"])
    assert code == 2  # X:0 is static in this model
    write(tmp_path / "d.onnx", "LSTM", sequence_lens=True, dynamic=True)
    d = tmp_path / "d.onnx"
    assert run_cli(["verify", d, d, "--dim", f"T={1 << 40}"])[0] == 4
    np.savez(tmp_path / "lens.npz", X=np.zeros((5, 2, 4), np.float32), sequence_lens=np.array([6, 1], np.int32))
    assert run_cli(["verify", d, d, "--inputs", tmp_path / "lens.npz"])[0] == 4
    # an engine that cannot run a model it was asked for explicitly
    code, _, _ = run_cli(["verify", FIXTURES / "gru14_layout1.onnx", FIXTURES / "gru14_layout1.onnx",
                          "--engine", "onnxruntime"])
    assert code == 3


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    write(tmp_path / "ref.onnx", "LSTM", sequence_lens=True)
    write(tmp_path / "cand.onnx", "LSTM", sequence_lens=True, ignore_lens=True)
    code, _, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--plot", tmp_path / "e.png"])
    assert code == 1
    assert (tmp_path / "e.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_api_report_and_module_stay_usable(tmp_path):
    write(tmp_path / "m.onnx", "RNN")
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
    src = FIXTURES / "lstm7_batch_first.onnx"
    to_openvino(str(src), str(tmp_path / "m.xml"))
    report = rnnconv.verify(str(tmp_path / "m.xml"), str(src), engine="all", dims={"batch": 2, "seq": 7})
    assert report.ok, report.lines()
    assert report.inputs[0][0]["shape"] == [2, 7, 4]
    assert report.baseline == "reference[rnnconv]"


@pytest.mark.parametrize("kind,kw", [("LSTM", {}), ("GRU", dict(lbr=True, clip=1.0)), ("RNN", dict(reverse=True))])
def test_verify_runs_tensor_iterator_without_from_openvino(tmp_path, kind, kw):
    """`rnnconv verify` runs a TensorIterator of cells in rnnconv's IR interpreter (against the OpenVINO runtime)
    in a fresh process that never imports the IR -> ONNX conversion."""
    ov = pytest.importorskip("openvino")
    xml = tmp_path / "ti.xml"
    ov.save_model(tensor_iterator_ir(kind, **kw), str(xml))
    code = ("import sys\n"
            "from rnnconv.cli import main\n"
            "try:\n"
            "    main(sys.argv[1:])\n"
            "finally:\n"
            "    print(sorted({'rnnconv.commands.from_openvino', 'rnnconv.dialects.openvino.to_onnx'} & set(sys.modules)),\n"
            "          file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code, "verify", str(xml), str(xml), "--ref-engine", "openvino",
                           "--cand-engine", "rnnconv", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1:] == ["[]"], proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and [c["engines"] for c in report["checks"]] == ["candidate[rnnconv] vs reference[openvino]"]


def test_a_model_no_engine_runs_at_any_drawn_size_is_bad_input_with_every_engines_reason(tmp_path):
    """x [n] reshaped to [3, 4] runs at n = 12 only, a size nothing in the model states: with every engine, the
    refusal says why each failed and what to give (exit 4, as the conversions say it)."""
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    g = h.make_graph([h.make_node("Reshape", ["x", "shape"], ["y"])], "g",
                     [h.make_tensor_value_info("x", TP.FLOAT, ["n"])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [3, 4])],
                     initializer=[nh.from_array(np.array([3, 4], np.int64), "shape")])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    code, _, err = run_cli(["verify", path, path, "--engine", "all"])
    assert code == 4, err
    assert "no engine runs it (rnnconv: " in err and "onnxruntime: " in err and "(try --dim" in err
    assert "--verify node" not in err
    code, _, err = run_cli(["verify", path, path, "--engine", "all", "--dim", "n=12"])
    assert code == 0, err
