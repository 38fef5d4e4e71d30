"""Layout change of one recurrent node: the node gets the target layout, Transposes keep the interface.

ONNX (>= 14) layout 0: X [T,N,I], Y [T,D,N,H], states [D,N,H]; layout 1: X [N,T,I], Y [N,T,D,H], states [N,D,H].
"""

from __future__ import annotations

import onnx_ir as ir

from rnnconv.passes.rewrite import Names, NodeRewrite, transpose

# perm applied to a tensor in layout `src` to give it layout `dst`.
X_PERM = (1, 0, 2)
STATE_PERM = (1, 0, 2)
Y_PERM = {(0, 1): (2, 0, 1, 3), (1, 0): (1, 2, 0, 3)}
STATE_INPUTS = ("initial_h", "initial_c")
STATE_OUTPUTS = ("Y_h", "Y_c")


def transpose_inputs(rn, inputs: list, to: int, names: Names) -> tuple[list[ir.Node], list]:
    """Transposes X and the initial states (positions of `rn`'s inputs) into layout `to`."""
    before, inputs = [], list(inputs)
    for i, key in enumerate(_input_names(rn)):
        value = inputs[i]
        if value is None or (key != "X" and key not in STATE_INPUTS):
            continue
        t, inputs[i] = transpose(value, X_PERM if key == "X" else STATE_PERM, names, f"{value.name}_layout{to}")
        before.append(t)
    return before, inputs


def transpose_outputs(rn, inner: dict, to: int, names: Names) -> tuple[list[ir.Node], dict]:
    """Transposes Y / Y_h / Y_c of a node in layout `to` back to `rn`'s own layout."""
    src = rn.layer.layout
    after, replaced = [], {}
    for key, value in inner.items():
        perm = Y_PERM[(to, src)] if key == "Y" else STATE_PERM
        t, replaced[key] = transpose(value, perm, names, f"{rn.outputs[key].name}_layout{src}")
        after.append(t)
    return after, replaced


def relayout(rn, to: int, names: Names) -> NodeRewrite:
    """Rewrite `rn` (layout a) as Transposes -> the node with layout `to` -> Transposes back to layout a."""
    original = rn.node
    before, inputs = transpose_inputs(rn, list(original.inputs), to, names)
    attrs = [a for k, a in original.attributes.items() if k != "layout"]
    if to:
        attrs.append(ir.AttrInt64("layout", to))
    outs = [ir.Value(name=names(f"{o.name}_layout{to}")) if o is not None and o.name else ir.Value(name="")
            for o in original.outputs]
    node = ir.Node(original.domain, original.op_type, inputs=inputs, outputs=outs, name=original.name,
                   attributes=attrs, version=original.version)
    inner = {k: v for k, v in zip(_output_names(rn), outs) if rn.outputs.get(k) is not None}
    after, replaced = transpose_outputs(rn, inner, to, names)
    return NodeRewrite(rn, [*before, node, *after], replaced, [f"layout {rn.layer.layout} -> {to} with Transposes"])


def _input_names(rn):
    from rnnconv.dialects.onnx_recurrent import INPUTS

    return INPUTS[rn.op][: len(rn.node.inputs)]


def _output_names(rn):
    from rnnconv.dialects.onnx_recurrent import OUTPUTS

    return OUTPUTS[rn.op][: len(rn.node.outputs)]
