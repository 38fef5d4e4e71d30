"""`fuse`: recurrences written out as primitive ops (cells applied in a Python loop, dynamo's unrolled nn.RNN)
come back as ONNX RNN / GRU / LSTM nodes, checked like every rewrite: the matched nodes against the new node and
its glue, then the whole model (rnnconv.passes.fuse_cells says what is matched and what is left alone); with
--free-sequence, the freed model also on a longer sequence (a `Longer` comparison of its plan)."""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np
import onnx_ir as ir

from rnnconv import conversion
from rnnconv.dialects import onnx_recurrent
from rnnconv.engine import ONNXRUNTIME
from rnnconv.errors import Unsupported
from rnnconv.passes import free_sequence as freeing
from rnnconv.passes.fuse_cells import FusePass, survey
from rnnconv.verification import engines
from rnnconv.verification.checks import input_sets
from rnnconv.verification.model import Model, onnx_model
from rnnconv.verification.options import CheckOptions, check_keywords
from rnnconv.verification.plan import Longer
from rnnconv.verification.specs import input_specs

LONGER = 3  # the freed model also runs this many steps longer, checked on the export's steps

# Measured at T = 100, batch 32, 256 -> 256, one thread (benchmarks/fuse.py): onnxruntime's RNN kernel runs the
# recurrence slower than the unrolled MatMul chain it replaces; OpenVINO compiles the RNN node about 10x faster and
# runs it about as fast (both forms run at its f32 matrix-multiply rate, which bounds them at this size).
ORT_RNN_NOTE = ("onnxruntime runs a fused RNN node slower than the unrolled steps (its RNN kernel: about 2x at "
                "T=100, batch 32, hidden 256), though it loads the model much faster; OpenVINO compiles it much "
                "faster and runs it about as fast")
# The one fused form OpenVINO runs slower than its source (benchmarks/fuse.py, same sizes, OpenVINO 2026.4): dynamo's
# bidirectional nn.RNN. Its CPU plugin runs each direction with oneDNN's RNN kernel, whose per-step matrix product
# for one gate ran at 0.89x the rate of the unrolled chain's FullyConnected layers (one forward RNN node 9.7 ms,
# half of the two unrolled chains 8.7 ms); one bidirectional node or two single-direction ones, it runs the two in
# turn, as it runs the two chains on one thread.
OPENVINO_BIDI_RNN_NOTE = ("OpenVINO ran a fused bidirectional RNN at 0.81-0.86x the speed of the unrolled steps it "
                          "replaces (T=100, batch 32, hidden 256, one thread; 1.1-1.5x faster at batch 1), and "
                          "compiles it much faster; no exact fused form ran faster there")
# Measured with OpenVINO 2026.4 (CPU, f32): where two recurrent nodes read one sequence, at batch above 1, its ONNX
# import runs the first one on X untransposed (the forward half of dynamo's fused two-layer nn.RNN: 0.73 off; see
# dialects/openvino/from_onnx._outputs). rnnconv's IR avoids it, and one bidirectional node runs right.
OPENVINO_TWO_NODES_NOTE = ("OpenVINO 2026.4's ONNX import computes two recurrent nodes reading one sequence wrongly "
                           "at batch above 1 (measured; rnnconv to-openvino writes an IR it computes right): "
                           "--bidirectional writes a forward and a reverse node as one, which it imports right")


def plan(model: ir.Model, report, bidirectional: bool = False) -> list:
    """FusePass; Unsupported when there is nothing to fuse, with the near-misses and why."""
    fusions, misses = survey(model)
    if not fusions:
        why = "; ".join(str(m) for m in misses)
        nodes = onnx_recurrent.find(model)
        have = f"; its {len(nodes)} recurrent node(s) are ONNX recurrent nodes already" if nodes else ""
        raise Unsupported("nothing to fuse: " + (why if why else "the model holds no unrolled RNN, GRU or LSTM step "
                                                 "that fuse recognizes (cells applied step by step, dynamo's "
                                                 "unrolled nn.RNN, Scan or Loop bodies of one step, Keras' "
                                                 "cells through tf2onnx)") + have)
    if any(f.op == "RNN" for f in fusions):
        report.notes.append(ORT_RNN_NOTE)
    def directions(ops) -> set:
        return {n.attributes["direction"].value if "direction" in n.attributes else "forward"
                for f in fusions if f.op in ops for n in f.nodes if n.op_type in ops}

    if {"forward", "reverse"} <= directions({"RNN"}):
        report.notes.append(OPENVINO_BIDI_RNN_NOTE)
    if not bidirectional and {"forward", "reverse"} <= directions(set(onnx_recurrent.GATES)):
        report.notes.append(OPENVINO_TWO_NODES_NOTE)
    return [FusePass(bidirectional=bidirectional)]


@check_keywords
def fuse(source, output=None, *, free_sequence: bool = False, bidirectional: bool = False, verify: str = "full",
         force: bool = False, external_data: Optional[bool] = None, progress=None,
         options: Optional[CheckOptions] = None) -> conversion.Result:
    """Replace each chain of unrolled recurrent steps of `source` by one ONNX RNN/GRU/LSTM node (and the glue that
    keeps the interface); Unsupported when there is none to fuse, with the near-misses and why.

    `free_sequence`: also make the sequence length the export froze symbolic (an interface change, stated in the
    report; refused unless every recurrent node runs forward over a graph input, see passes/free_sequence.py).
    `bidirectional`: a forward and a reverse recurrence over one sequence as one bidirectional node (OpenVINO runs
    the two-node default slightly faster, see passes/fuse_bidi.py).
    `options` (or the check options by name: seed, runs, dims...): how rewrites are verified (see CheckOptions)."""
    translator = conversion.Passes("fuse", functools.partial(plan, bidirectional=bidirectional),
                                   external_data=external_data, last=_free if free_sequence else None)
    return conversion.run_conversion(source, translator, options, output=output, verify=verify, force=force,
                                     progress=progress)


def _free(model: ir.Model, before: Optional[Model], job: conversion.Job) -> tuple[Longer, ...]:
    """Free the sequence length of the fused model. Which outputs have a time axis is measured: the model run in
    onnxruntime at the export's length and LONGER steps more. The whole-model comparisons hold it at the export's
    length against the source; the comparison returned holds it on a longer sequence whose first steps are the
    same inputs (a forward recurrence's first outputs depend on the first inputs alone) against the source on
    those steps."""
    report, options = job.report, job.options
    axes = freeing.sequence_axes(model)
    backward = [onnx_recurrent.node_label(n) for n in model.graph if n.op_type in onnx_recurrent.OPS
                and (n.attributes.get("direction") is not None and n.attributes["direction"].value != "forward")]
    if backward:
        raise Unsupported(f"cannot free the sequence length: {', '.join(backward)} do not run forward (a freed model "
                          f"is checked on longer sequences whose first steps are the source's)")
    feeds, _ = input_sets(input_specs(onnx_model(model)), options)[0]  # at the export's length
    T = freeing.free(axes)
    declared = [v.shape for v in model.graph.outputs]
    outputs = set(id(v) for v in model.graph.outputs)
    for node in model.graph:  # shapes inferred at the frozen length would contradict the longer runs
        for v in node.outputs:
            if id(v) not in outputs:
                v.shape = None
    for v in model.graph.outputs:
        v.shape = None
    longer = dict(feeds)
    for value, axis in axes:
        more = list(feeds[value.name].shape)
        more[axis] = LONGER
        longer[value.name] = np.concatenate([feeds[value.name], np.zeros(more, feeds[value.name].dtype)], axis=axis)
    try:
        at_t = engines.run_once(ONNXRUNTIME, onnx_model(model), feeds)
        at_longer = engines.run_once(ONNXRUNTIME, onnx_model(model), longer)
    except engines.CannotRun as err:
        raise Unsupported(f"cannot free the sequence length: the freed model does not run ({err})") from err
    time_axes, fixed = {}, []
    for v, shape in zip(model.graph.outputs, declared):
        a, b = np.shape(at_t[v.name]), np.shape(at_longer[v.name])
        moved = [k for k, (p, q) in enumerate(zip(a, b)) if p != q]
        if len(a) != len(b) or any(b[k] != a[k] + LONGER for k in moved) or len(moved) > 1:
            raise Unsupported(f"cannot free the sequence length: output {v.name!r} is {list(a)} at {T} steps and "
                              f"{list(b)} at {T + LONGER}, not longer along one time axis")
        if moved:
            time_axes[v.name] = moved[0]
        else:
            fixed.append(v.name)
        dims = list(shape) if shape is not None else list(a)
        if moved:
            dims[moved[0]] = ir.SymbolicDim(freeing.SEQUENCE)
        v.shape = ir.Shape(dims)
    inputs = ", ".join(f"{v.name} axis {a}" for v, a in axes)
    report.notes.append(f"sequence length freed on request (an interface change): input(s) {inputs} and output(s) "
                        f"{', '.join(f'{k} axis {a}' for k, a in time_axes.items()) or 'none'} are now "
                        f"'{freeing.SEQUENCE}' (the export froze {T})"
                        + (f"; {', '.join(fixed)} keep their shape and are checked at {T} steps only" if fixed else ""))
    if before is None or not time_axes:
        return ()
    return (Longer(before, onnx_model(model), tuple((v.name, a) for v, a in axes), tuple(time_axes.items()), T,
                   LONGER),)
