"""`layout --to 1` on 2-layer unidirectional batch_first stacks exported by torch's legacy exporter at opset 14
(LSTM, GRU, RNN), with the batch size fixed or dynamic: the exporter reads each layer's batch size off its input
(Shape -> Gather) for the next layer's zero initial state, and in the fixed case broadcasts a constant (Expand).
No Transpose is left on the recurrent path (x -> layers -> y) nor between layers, no more Transposes in the model
than the source has; back at layout 0 the model gives torch's numbers in onnxruntime."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import onnx
import pytest

import rnnconv
from rnnconv import io
from tests.conftest import run_onnxruntime
from tests.passes.test_layout_stacks import between_layers, dead

torch = pytest.importorskip("torch")
N, T, I, H = 3, 6, 4, 5


def export(kind: str, dynamic: bool, path) -> tuple[onnx.ModelProto, dict, dict]:
    torch.manual_seed(0)
    net = getattr(torch.nn, kind)(I, H, num_layers=2, batch_first=True).eval()
    x = torch.randn(N, T, I)
    outputs = ["y", "h", "c"] if kind == "LSTM" else ["y", "h"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x,), str(path), dynamo=False, opset_version=14, input_names=["x"],
                          output_names=outputs, dynamic_axes={"x": {0: "batch", 1: "time"}} if dynamic else None)
    with torch.no_grad():
        y, state = net(x)
    states = state if kind == "LSTM" else (state,)
    return onnx.load(str(path)), {"x": x.numpy()}, dict(zip(outputs, [y.numpy(), *[s.numpy() for s in states]]))


def transposes_on_path(model: onnx.ModelProto, output: str = "y") -> int:
    producer = {o: n for n in model.graph.node for o in n.output}
    count, value = 0, output
    while value in producer:
        node = producer[value]
        count += node.op_type == "Transpose"
        value = node.input[0]
    return count


@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed-batch", "dynamic-batch"])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_legacy_torch_stack_to_layout_1(tmp_path, kind, dynamic):
    source, feeds, want = export(kind, dynamic, tmp_path / "s.onnx")
    result = rnnconv.convert_layout(source, to=1)
    assert result.report.ok
    l1 = io.to_proto(result.model)
    counts, before = (collections.Counter(n.op_type for n in m.graph.node) for m in (l1, source))
    assert [a.i for n in l1.graph.node if n.op_type == kind for a in n.attribute if a.name == "layout"] == [1, 1]
    assert transposes_on_path(l1) == 0 and between_layers(l1) == 0, counts
    assert counts["Transpose"] <= before["Transpose"], (counts, before)
    assert dead(l1) == []
    back = io.to_proto(rnnconv.convert_layout(l1, to=0).model)
    assert transposes_on_path(back) <= transposes_on_path(source)
    got = run_onnxruntime(back, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)
