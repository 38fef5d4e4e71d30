"""`upgrade` and `downgrade`: move a model, recurrent nodes included, to another opset, verified."""

from __future__ import annotations

import functools
from typing import Optional

import onnx_ir as ir

from rnnconv import convert, io
from rnnconv.dialects import onnx_recurrent
from rnnconv.errors import Unsupported, UsageError
from rnnconv.passes import opset_graph, opset_recurrent
from rnnconv.passes.rewrite import Names, NodeRewrite

MIN_OPSET = 1


@functools.lru_cache(maxsize=1)
def newest_common_opset() -> int:
    """The newest default-domain opset that both the installed onnx and onnxruntime accept."""
    import onnxruntime as ort

    latest = io.latest_opset()
    for opset in range(latest, 6, -1):
        x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1]))
        y = ir.Value(name="y", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1]))
        g = ir.Graph([x], [y], nodes=[ir.Node("", "Identity", [x], outputs=[y])], opset_imports={"": opset})
        try:
            io.onnxruntime_session(ir.Model(g, ir_version=io.min_ir_version(opset)))
            return opset
        except Exception:
            continue
    return 7


def _plan(target: int, model: ir.Model, names: Names) -> list[NodeRewrite]:
    out = []
    for rn in onnx_recurrent.find(model):
        version = onnx_recurrent.version_of(rn.op, target)
        p = opset_recurrent.plan(rn, version, target)
        if version == rn.version and not p.what:
            continue
        out.append(opset_recurrent.build(p, names))
    return out


def _graph_pass(target: int, model: ir.Model) -> None:
    opset_graph.OpsetConverter(model, target).run()


def convert_opset(source, output=None, *, opset: int, command: str = "convert-opset", verify: str = "full",
                  atol=None, rtol=None, seed: int = 0, force: bool = False,
                  external_data: Optional[bool] = None, progress=None) -> convert.Result:
    if opset < MIN_OPSET or opset > io.latest_opset():
        raise UsageError(f"--opset {opset} is outside 1..{io.latest_opset()} (the installed onnx)")
    return convert.rewrite_model(
        source, output, command=command, plan=functools.partial(_plan, opset), target_opset=opset,
        graph_pass=functools.partial(_graph_pass, opset), verify_mode=verify, atol=atol, rtol=rtol, seed=seed,
        force=force, external_data=external_data, progress=progress)


def _source_opset(source) -> int:
    return onnx_recurrent.default_opset(io.load(source, check=False) if not isinstance(source, ir.Model) else source)


def upgrade(source, output=None, *, opset: Optional[int] = None, **kwargs) -> convert.Result:
    """Move to `opset` (default: the newest opset both onnx and onnxruntime support); never moves down."""
    target = newest_common_opset() if opset is None else opset
    current = _source_opset(source)
    if target < current:
        raise UsageError(f"upgrade: the model is at opset {current}, above {target}; use `rnnconv downgrade`")
    return convert_opset(source, output, opset=target, command="upgrade", **kwargs)


def downgrade(source, output=None, *, opset: int, **kwargs) -> convert.Result:
    current = _source_opset(source)
    if opset > current:
        raise UsageError(f"downgrade: the model is at opset {current}, below {opset}; use `rnnconv upgrade`")
    return convert_opset(source, output, opset=opset, command="downgrade", **kwargs)


__all__ = ["upgrade", "downgrade", "convert_opset", "newest_common_opset", "Unsupported"]
