"""Input drawing (verification/specs.py, inputs.py): integer inputs take values the model can use (indices
within the table they index, lengths within the sequence they measure)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import rnnconv
from rnnconv.verification import inputs as vinputs
from rnnconv.verification import model as vmodel
from rnnconv.verification import specs as vspecs


def embedding_model(path, vocab=7):
    """Gather(embedding table, ids) -> GRU with sequence_lens: int64 ids and int32 lengths as graph inputs."""
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
