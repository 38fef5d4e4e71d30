"""Where two runs part (verification/localize.py): each rule held on models built with a known divergence at a known
node (the oracle is the construction, and onnxruntime where a value must be measured)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from rnnconv.verification import exposure, localize
from rnnconv.verification.engines import run_once as run
from rnnconv.verification.model import open_model
from tests.conftest import run_cli

OPS = ["Add", "Mul", "Add", "Tanh", "Add", "Mul", "Sigmoid", "Add", "Mul", "Add", "Relu", "Add"]


def chain(k: int = 0, delta: float = 0.5) -> onnx.ModelProto:
    """x -> n1 ... n12 (elementwise) -> y; node k's constant moved by `delta` (k = 0: none)."""
    nodes, inits, prev = [], [], "x"
    for i, op in enumerate(OPS, start=1):
        out = "y" if i == len(OPS) else f"t{i}"
        if op in ("Add", "Mul"):
            c = np.full([4], 0.1 * i if op == "Add" else 1.0 + 0.01 * i, np.float32) + np.float32(delta * (i == k))
            inits.append(nh.from_array(c, f"c{i}"))
            nodes.append(h.make_node(op, [prev, f"c{i}"], [out], name=f"n{i}"))
        else:
            nodes.append(h.make_node(op, [prev], [out], name=f"n{i}"))
        prev = out
    graph = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", TP.FLOAT, [3, 4])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [3, 4])], initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


@pytest.mark.parametrize("k", [1, 6, 10])
def test_verify_names_the_node_of_a_chain_that_differs(k, tmp_path):
    onnx.save(chain(), tmp_path / "ref.onnx")
    onnx.save(chain(k), tmp_path / "cand.onnx")
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx"])
    assert code == 1, out
    line = next(ln for ln in out.splitlines() if "first divergence:" in ln)
    assert f"{OPS[k - 1]} 'n{k}' (tensor t{k}): the node computes differently given identical inputs" in line
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--json"])
    assert code == 1
    found = json.loads(out)["checks"][0]["first_divergence"]
    assert (found["node"], found["op_type"], found["cause"]) == (f"n{k}", OPS[k - 1], "node")
    if OPS[k - 1] == "Add":
        assert found["alone_max_abs"] == pytest.approx(0.5, rel=1e-6)  # the constant moved by 0.5, alone
    assert found["input_max_abs"] == 0.0 and found["computes_differently"] == []  # the rest only carries it


def test_a_cut_model_runs_each_node_alone_on_the_values_fed(tmp_path):
    """exposure.cut: t6 fed a value of our choosing, n7 computes Sigmoid of exactly that (numpy's, the oracle),
    in onnxruntime and, through the IR rnnconv writes, in the IR interpreter."""
    from rnnconv.commands.to_openvino import to_openvino

    onnx.save(chain(), tmp_path / "ref.onnx")
    to_openvino(tmp_path / "ref.onnx", tmp_path / "ref.xml", verify="none")
    fed = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    x = np.zeros([3, 4], np.float32)
    for path, engine in ((tmp_path / "ref.onnx", "onnxruntime"), (tmp_path / "ref.xml", "rnnconv")):
        model, feeds = exposure.cut(open_model(path), {"t6": fed, "t2": fed}, ["t7", "t3"])
        got = run(engine, model, {"x": x, **feeds})
        np.testing.assert_allclose(got["t7" + exposure.ALONE], 1 / (1 + np.exp(-fed.astype(np.float64))), rtol=1e-6)
        np.testing.assert_allclose(got["t3" + exposure.ALONE], fed + np.float32(0.3), rtol=1e-6)


def _edited_ir(tmp_path, layer: str, delta: float):
    """The chain's IR as to-openvino writes it, with Const `layer` moved by `delta` by hand."""
    from rnnconv.commands.to_openvino import to_openvino
    from rnnconv.dialects.openvino import reader, writer

    onnx.save(chain(), tmp_path / "ref.onnx")
    to_openvino(tmp_path / "ref.onnx", tmp_path / "ref.xml", verify="none")
    graph = reader.read(tmp_path / "ref.xml")
    const = next(x for x in graph.layers if x.name == layer)
    const.value = np.asarray(const.value) + np.float32(delta)
    writer.write(graph, tmp_path / "bad.xml")
    return tmp_path / "ref.onnx", tmp_path / "bad.xml"


def test_an_ir_edited_by_hand_is_localized_in_the_ir_interpreter(tmp_path):
    src, ir = _edited_ir(tmp_path, "c6", 0.25)
    code, out, _ = run_cli(["verify", src, ir, "--json"])
    assert code == 1
    found = json.loads(out)["checks"][0]["first_divergence"]
    assert (found["node"], found["op_type"], found["cause"]) == ("n6", "Mul", "node")


def test_an_ir_edited_by_hand_is_localized_in_the_openvino_runtime(tmp_path):
    pytest.importorskip("openvino")
    src, ir = _edited_ir(tmp_path, "c10", 0.25)
    code, out, _ = run_cli(["verify", src, ir, "--ref-engine", "onnxruntime", "--cand-engine", "openvino", "--json"])
    assert code == 1
    found = json.loads(out)["checks"][0]["first_divergence"]
    assert (found["node"], found["cause"]) == ("n10", "node")
    # the IR's own ops differ (the edit), not the runtime: rnnconv's IR interpreter computes them so too
    assert found["which_runtime"] == "rnnconv's IR interpreter computes the IR's node Add 'n10' differently too"


# -- run-time rounding ---------------------------------------------------------------------------------------

def quantized(shift: float = 0.0, w_scale: float = 0.1) -> onnx.ModelProto:
    """x -> Add c (`shift` at column 1) -> DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul scale -> Mul
    w_scale: onnxruntime's dynamic quantization of a MatMul, written out."""
    c = np.zeros([4], np.float32)
    c[1] = shift
    wq = (np.arange(12).reshape(4, 3) % 7 - 3).astype(np.int8)
    nodes = [h.make_node("Add", ["x", "c"], ["t"], name="shift"),
             h.make_node("DynamicQuantizeLinear", ["t"], ["q", "s", "z"], name="quantize"),
             h.make_node("MatMulInteger", ["q", "wq", "z"], ["acc"], name="matmul"),
             h.make_node("Cast", ["acc"], ["accf"], to=TP.FLOAT, name="cast"),
             h.make_node("Mul", ["accf", "s"], ["scaled"], name="scale"),
             h.make_node("Mul", ["scaled", "ws"], ["y"], name="wscale")]
    graph = h.make_graph(nodes, "q", [h.make_tensor_value_info("x", TP.FLOAT, [2, 4])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
                         initializer=[nh.from_array(c, "c"), nh.from_array(wq, "wq"),
                                      nh.from_array(np.array(w_scale, np.float32), "ws")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


# t = x + c: column 1 of row 0 is 2.5, a tie of DynamicQuantizeLinear's rounding at scale 1 (max 255, min 0)
X = np.array([[255, 2.5, 1, 0], [3, 4, 5, 6]], np.float32)
ULP = float(np.spacing(np.float32(2.5)))


def _ort(model: onnx.ModelProto, names) -> dict:
    import onnxruntime as ort

    for name in names:
        model.graph.output.append(h.make_empty_tensor_value_info(name))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": X})))


@pytest.fixture
def rounding_pair(tmp_path):
    """(reference, tipped candidate, tipped candidate with a wrong w_scale, inputs): the candidate's Add moves t
    by one ulp where the reference quantizes a tie; measured in onnxruntime, the oracle: t within a last bit,
    q one step apart at that one element."""
    ref, tip = _ort(quantized(), ["t", "q"]), _ort(quantized(ULP), ["t", "q"])
    assert np.abs(ref["t"] - tip["t"]).max() <= ULP
    assert np.argwhere(ref["q"] != tip["q"]).tolist() == [[0, 1]]
    assert abs(int(ref["q"][0, 1]) - int(tip["q"][0, 1])) == 1
    paths = [tmp_path / f"{n}.onnx" for n in ("ref", "tip", "wrong")]
    for path, model in zip(paths, (quantized(), quantized(ULP), quantized(ULP, 0.11))):
        onnx.save(model, path)
    np.savez(tmp_path / "x.npz", x=X)
    return (*paths, tmp_path / "x.npz")


def test_a_tip_at_the_sources_quantizer_passes_with_a_warning(rounding_pair):
    ref, tip, _, x = rounding_pair
    code, out, _ = run_cli(["verify", ref, tip, "--inputs", x])
    assert code == 0, out
    assert "first divergence: DynamicQuantizeLinear 'quantize' (tensor q): the node agrees given identical inputs; " \
           "its inputs already differed by 2.38e-07 (a rounding step at DynamicQuantizeLinear quantize)" in out
    warning = next(ln for ln in out.splitlines() if "warning:" in ln)
    assert "faithful up to run-time rounding" in warning and "DynamicQuantizeLinear quantize" in warning
    assert "argmax over the last axis agrees: y 100.0%" in warning
    code, out, _ = run_cli(["verify", ref, tip, "--inputs", x, "--json"])
    check = json.loads(out)["checks"][0]
    assert code == 0 and check["ok"] and "faithful" in check["warning"]
    assert [(t["node"], t["tensor"]) for t in check["first_divergence"]["tipped"]] == [("quantize", "q")]


def test_a_wrong_node_after_a_tip_fails_naming_it(rounding_pair):
    ref, _, wrong, x = rounding_pair
    code, out, _ = run_cli(["verify", ref, wrong, "--inputs", x, "--json"])
    assert code == 1
    check = json.loads(out)["checks"][0]
    assert not check["ok"] and "warning" not in check
    found = check["first_divergence"]
    assert found["cause"] == "upstream" and found["node"] == "quantize"
    assert [(d["node"], d["op_type"]) for d in found["computes_differently"]] == [("wscale", "Mul")]
    assert "Mul 'wscale' computes differently given identical inputs" in found["text"]


def test_a_quantizer_the_openvino_runtime_rounds_otherwise_at_a_tie(rounding_pair, tmp_path):
    """OpenVINO's import writes DynamicQuantizeLinear as Round(half_to_even) and friends; its runtime is measured
    here (in-process, the oracle) rounding the tie 2.5 as onnxruntime does, or not. Where it does not, the
    conversion is still faithful: one value rounded the other way at a rounding boundary, given identical
    inputs, the warning says so and names whose."""
    ov_ = pytest.importorskip("openvino")
    from rnnconv.commands.to_openvino import to_openvino

    ref, _, _, x = rounding_pair
    to_openvino(ref, tmp_path / "ref.xml", verify="none")
    core = ov_.Core()
    model = core.read_model(str(tmp_path / "ref.xml"))
    model.add_outputs(["q"])
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled.create_infer_request().infer({"x": X})
    ov_q = next(np.asarray(result[p]) for p in compiled.outputs if "q" in p.get_names())
    ort_q = _ort(quantized(), ["q"])["q"]
    code, out, _ = run_cli(["verify", ref, tmp_path / "ref.xml", "--ref-engine", "onnxruntime", "--cand-engine",
                            "openvino", "--inputs", x, "--json"])
    check = json.loads(out)["checks"][0]
    assert code == 0 and check["ok"]
    if np.array_equal(ov_q, ort_q):
        assert "first_divergence" not in check
        return
    assert np.argwhere(ov_q != ort_q).tolist() == [[0, 1]] and int(ov_q[0, 1]) - int(ort_q[0, 1]) in (-1, 1)
    found = check["first_divergence"]
    assert (found["node"], found["tensor"], found["cause"]) == ("quantize", "q", "rounding")
    assert found["tipped"][0]["elements"] == 1
    assert found["tipped"][0]["which_runtime"].startswith("OpenVINO runtime computes the IR's node Convert")
    assert "faithful up to run-time rounding" in check["warning"]


def threshold(shift: float, rounding: bool) -> onnx.ModelProto:
    """x -> Add c (`shift` at [0]) -> y = (t > 3), as Greater -> Cast, or (`rounding`) as Clip(Floor(t - 2), 0, 1):
    the same values everywhere but at t = 3 exactly."""
    c = np.array([shift, 0, 0, 0], np.float32)
    head = [h.make_node("Add", ["x", "c"], ["t"], name="shift")]
    inits = [nh.from_array(c, "c")]
    if rounding:
        body = [h.make_node("Sub", ["t", "two"], ["u"], name="sub"), h.make_node("Floor", ["u"], ["f"], name="floor"),
                h.make_node("Clip", ["f", "zero", "one"], ["y"], name="clip")]
        inits += [nh.from_array(np.array(v, np.float32), n) for n, v in (("two", 2), ("zero", 0), ("one", 1))]
    else:
        body = [h.make_node("Greater", ["t", "three"], ["g"], name="greater"),
                h.make_node("Cast", ["g"], ["y"], to=TP.FLOAT, name="cast")]
        inits.append(nh.from_array(np.array(3, np.float32), "three"))
    graph = h.make_graph(head + body, "t", [h.make_tensor_value_info("x", TP.FLOAT, [1, 4])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [1, 4])], initializer=inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])


def test_the_rounding_verdict_reads_the_sources_ops_not_the_candidates(tmp_path):
    """The source thresholds (Greater: no rounding at run time), the candidate rounds (Floor); a last bit moves t
    onto 3 in the candidate. Every node agrees given identical inputs, yet the tip is no run-time quantizer of the
    source: FAILED, the tip named (reading the candidate's Floor would have passed it)."""
    x = np.array([[np.nextafter(np.float32(3), np.float32(0)), 1, 5, 0.5]], np.float32)
    assert x[0, 0] < 3 and x[0, 0] + np.spacing(x[0, 0]) == np.float32(3)
    onnx.save(threshold(0.0, False), tmp_path / "src.onnx")
    onnx.save(threshold(float(np.spacing(x[0, 0])), True), tmp_path / "cand.onnx")
    np.savez(tmp_path / "x.npz", x=x)
    code, out, _ = run_cli(["verify", tmp_path / "src.onnx", tmp_path / "cand.onnx", "--inputs", tmp_path / "x.npz",
                            "--json"])
    assert code == 1
    found = json.loads(out)["checks"][0]["first_divergence"]
    assert found["tensor"] == "y" and found["cause"] == "upstream" and found["tipped"] == []
    assert [(u["node"], u["tensor"]) for u in found["unexplained"]] == [("cast", "y")]
    assert found["region"] == ["greater"]


# -- failures to localize ------------------------------------------------------------------------------------

def test_a_failure_to_localize_is_one_line_and_the_verdict_stands(tmp_path, monkeypatch):
    onnx.save(chain(), tmp_path / "ref.onnx")
    onnx.save(chain(6), tmp_path / "cand.onnx")

    def broken(model):
        raise ZeroDivisionError("a bug of localization's own")

    monkeypatch.setattr(exposure, "view", broken)
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx"])
    assert code == 1
    assert "     first divergence: not localized: localization failed: ZeroDivisionError: a bug of localization's own\n" \
        in out


def test_a_candidate_whose_tensors_are_named_otherwise_is_localized_at_what_it_shares(tmp_path):
    renamed = chain(6)
    for node in renamed.graph.node:
        node.output[:] = [o if o == "y" else f"other_{o}" for o in node.output]
        node.input[:] = [i if i in ("x",) or i.startswith("c") else f"other_{i}" for i in node.input]
    onnx.save(chain(), tmp_path / "ref.onnx")
    onnx.save(renamed, tmp_path / "cand.onnx")
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--json"])
    assert code == 1
    found = json.loads(out)["checks"][0]["first_divergence"]
    # y alone is shared: its region is the whole chain, and it is what differs
    assert found["node"] == "n12" and found["cause"] == "node" and len(found["region"]) == 11


def test_tensors_above_the_size_limit_are_left_out_and_said(tmp_path, monkeypatch):
    """A tensor above the limit is not compared: the node reading it runs alone with the nodes before it, back to
    tensors that are; the outputs are always compared. Node 6 broadcasts to [2, 3, 4] (96 bytes, the tensors before
    it 48): with the limit at 60, t6 ... t11 are left out, and y's region runs from n6 to n12."""
    monkeypatch.setattr(localize, "TENSOR_BYTES", 60)
    wide = chain(6)
    next(i for i in wide.graph.initializer if i.name == "c6").CopyFrom(nh.from_array(
        np.full([2, 3, 4], 1.06 + 0.5, np.float32), "c6"))
    narrow = onnx.ModelProto()
    narrow.CopyFrom(wide)
    next(i for i in narrow.graph.initializer if i.name == "c6").CopyFrom(nh.from_array(
        np.full([2, 3, 4], 1.06, np.float32), "c6"))
    for model in (wide, narrow):
        model.graph.output[0].CopyFrom(h.make_tensor_value_info("y", TP.FLOAT, [2, 3, 4]))
    onnx.save(narrow, tmp_path / "ref.onnx")
    onnx.save(wide, tmp_path / "cand.onnx")
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--json"])
    assert code == 1
    found = json.loads(out)["checks"][0]["first_divergence"]
    assert (found["node"], found["cause"], found["left_out"]) == ("n12", "node", "6 tensor(s) above the size limit")
    assert found["region"] == ["n11", "n10", "n9", "n8", "n7", "n6"]
    assert "Add 'n12' (tensor y) with 'n11', 'n10', 'n9' ... before it (tensors not compared): the node computes " \
           "differently given identical inputs" in found["text"]
    monkeypatch.setattr(localize, "TENSOR_BYTES", 40)  # every tensor but the output: all in one region
    code, out, _ = run_cli(["verify", tmp_path / "ref.onnx", tmp_path / "cand.onnx", "--json"])
    found = json.loads(out)["checks"][0]["first_divergence"]
    assert code == 1 and found["left_out"] == "11 tensor(s) above the size limit" and len(found["region"]) == 11


def test_from_openvino_keeps_the_irs_tensor_names_so_a_divergence_is_localized_by_them(tmp_path):
    """IR -> ONNX: the ONNX model from-openvino writes names its values after the IR's tensors (t1 ... t11, as
    the source named them), so verifying an IR against it matches them; a constant of node 6 moved by hand in the
    ONNX model is found at node 6 (the IR's layer n6, the reference)."""
    from rnnconv.commands.from_openvino import from_openvino
    from rnnconv.commands.to_openvino import to_openvino

    onnx.save(chain(), tmp_path / "src.onnx")
    to_openvino(tmp_path / "src.onnx", tmp_path / "ir.xml", verify="none")
    from_openvino(tmp_path / "ir.xml", tmp_path / "back.onnx", verify="none")
    back = onnx.load(str(tmp_path / "back.onnx"))
    assert {f"t{i}" for i in range(1, 12)} <= {o for n in back.graph.node for o in n.output}
    mul = next(n for n in back.graph.node if list(n.output) == ["t6"])
    const = next(i for i in back.graph.initializer if i.name in mul.input)
    const.CopyFrom(nh.from_array(nh.to_array(const) + np.float32(0.25), const.name))
    onnx.save(back, tmp_path / "bad.onnx")
    code, out, _ = run_cli(["verify", tmp_path / "ir.xml", tmp_path / "bad.onnx", "--json"])
    assert code == 1
    found = json.loads(out)["checks"][0]["first_divergence"]
    assert (found["node"], found["tensor"], found["cause"], found["region"]) == ("n6", "t6", "node", [])
