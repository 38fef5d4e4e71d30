"""ONNX -> OpenVINO IR through OpenVINO's own ONNX import, every GRU/LSTM/RNN node through rnnconv's exact mapping.

OpenVINO's ONNX frontend converts the graph; a conversion extension for each recurrent op
(`openvino.frontend.onnx.ConversionExtension(op, fn)`) replaces OpenVINO's translator, which drops LSTM
peepholes and input_forget, ignores layout and per-direction activations. For each recurrent node (If, Loop and
Scan bodies included: the frontend calls the extension there too) `fn` gets the node's inputs as OpenVINO outputs
and its attributes; rnnconv rebuilds the node as a one-node ONNX model from them (constant inputs as views of
OpenVINO's Constants, other inputs with the shapes OpenVINO inferred), converts it with the caller's
translation (`from_onnx`), writes that IR to a temporary folder of the call's own, reads it back with
`Core.read_model` (which maps the .bin: no heap copy of the weights), deletes the folder and grafts the IR: each of
its Parameters' uses take the extension's input, its Results' sources are returned, one per ONNX output position.

Two users: `convert` (to-openvino's OpenVINO route: the ONNX model at hand, every node kept for the checks and
every refusal raised at the end as an rnnconv error) and `extensions` (`rnnconv.openvino_extensions()` for
`ov.convert_model(..., extension=...)`: nothing kept, a refusal raised into OpenVINO's own error).

What the extension cannot see, and how (measured on openvino 2026.4.1): the NodeContext gives no node name, op
version or output names. With the model, the node is found in it by its input tensor names (every hook input
carries the ONNX name of its value) and its attributes, name and version are the ONNX node's; without it, its
attributes are asked of the context (`_from_context`: the version from what they hold; messages name the node by
its X). An absent middle input is a `NullNode`; bf16 Constants return their bits typed float16. OpenVINO turns
every exception of the extension into one OpConversionFailure per op type, KeyboardInterrupt and SystemExit
included, so `convert` keeps every refusal and any interruption itself and raises them as rnnconv errors (or as
themselves). `ov.convert_model(extension=...)` imports openvino.frontend.pytorch, and with it torch when installed
(seconds): `convert` uses the frontend directly; the two offline passes `convert_model` applies after it are the
runtime's (`engine.openvino_runtime.offline_transforms`). fp16 is applied by `ov.save_model(compress_to_fp16=True)`
(rnnconv's own f16 Consts would be folded back to f32 by those passes).

This is, with rnnconv.engine.openvino_runtime, the one module that imports openvino.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import onnx_ir as ir

from rnnconv import schemas
from rnnconv.dialects import onnx_quantized, onnx_recurrent
from rnnconv.dialects.openvino import writer as ov_writer
from rnnconv.dialects.openvino.from_onnx import Conversion
from rnnconv.errors import BadInput, RnnconvError, Unsupported, first_line

# Chains of these ops over Constants are evaluated (Node.evaluate) and given to rnnconv as constants: an fp16
# initializer behind a Cast, a weight stored transposed. Anything else is a run-time input.
FOLDABLE = {"Convert", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Gather",
            "Multiply", "Add", "Subtract"}


@dataclasses.dataclass
class Mapped:
    """One recurrent node rnnconv converted: the ONNX node, the node alone as OpenVINO's import fed it (its real
    constant inputs, the shapes OpenVINO inferred for the others) and what rnnconv made of it (grafted)."""

    node: onnx_recurrent.RecurrentNode
    single: ir.Model
    conversion: Conversion
    keep: list = dataclasses.field(default_factory=list)  # OpenVINO Constants whose data `single` views


@dataclasses.dataclass
class FrontendConversion:
    model: object  # openvino.Model
    mapped: list[Mapped]
    imported: Counter  # op type -> ONNX nodes OpenVINO's own import converted (every node but the recurrent ones)

    def imported_note(self) -> str:
        n = sum(self.imported.values())
        ops = ", ".join(f"{op} {k}" for op, k in sorted(self.imported.items(), key=lambda kv: (-kv[1], kv[0])))
        mapped = f"rnnconv mapped {len(self.mapped)} recurrent node(s)"
        return f"OpenVINO's ONNX import converted the other {n} node(s) ({ops}); {mapped}" if n else mapped


def import_onnx(path, model: ir.Model, map_node: Callable[[ir.Model], Conversion], *,
                tmpdir: Optional[str] = None) -> FrontendConversion:
    """The ONNX file at `path` (loaded as `model`) as an openvino.Model, as OpenVINO's import leaves it (before
    convert_model's offline passes): each recurrent node mapped by rnnconv (`map_node`) and grafted. Every node
    rnnconv refuses is named in one Unsupported (or BadInput); what OpenVINO's import refuses is Unsupported with
    its reason. `tmpdir`: where each node's IR passes."""
    from openvino.frontend import FrontEndManager

    hook = _Hook(model, map_node, tmpdir)
    fe = FrontEndManager().load_by_framework("onnx")
    for extension in _extensions(hook):
        fe.add_extension(extension)
    try:
        ov_model = fe.convert(fe.load(str(path)))
    except Exception as err:
        hook.raise_collected()
        raise Unsupported(f"OpenVINO's ONNX import refuses the model: {_refusal(err, model)}") from None
    hook.raise_collected()
    imported = Counter(node.op_type for node, _, _ in onnx_recurrent.walk(model)
                       if not (node.domain in ("", "ai.onnx") and node.op_type in onnx_recurrent.OPS))
    return FrontendConversion(ov_model, hook.mapped, imported)


def extensions(map_node: Callable[[ir.Model], Conversion], model: Optional[ir.Model] = None) -> list:
    """The conversion extensions for `ov.convert_model(..., extension=...)`: every recurrent node OpenVINO's ONNX
    import meets mapped by rnnconv (`map_node`) and grafted, nothing kept between calls. `model`: the ONNX model
    being converted, for node names and versions in messages (without it, a node is read from its context
    alone)."""
    return _extensions(_Hook(model, map_node, keep=False, collect=False))


def _extensions(hook: "_Hook") -> list:
    from openvino.frontend.onnx import ConversionExtension

    # com.microsoft DynamicQuantizeLSTM too: rnnconv's lowering of onnxruntime's run-time quantization (OpenVINO's
    # own translator computes the float LSTM of the dequantized weights)
    return [*(ConversionExtension(op, hook) for op in onnx_recurrent.OPS),
            ConversionExtension(onnx_quantized.OP, onnx_quantized.DOMAIN, hook)]


def save(converted: FrontendConversion, xml_path, bin_path, *, fp16: bool = False) -> None:
    """Serialize as IR v11 into `xml_path` and `bin_path`; fp16: float weights compressed to f16 (grafted ones and
    those of bodies included), decompressed at load."""
    import openvino as ov

    xml_path, bin_path = Path(xml_path), Path(bin_path)
    ov.save_model(converted.model, str(xml_path), compress_to_fp16=fp16)
    written = xml_path.with_suffix(".bin")
    if written != bin_path:
        os.replace(written, bin_path)


def _refusal(err: BaseException, model: ir.Model) -> str:
    """OpenVINO's conversion failure in one line: each ONNX node it failed on (named: OpenVINO's message names a
    node by its first output), its op and OpenVINO's reason, without source paths; and, for a node OpenVINO needs a
    static rank for, the If node upstream whose branches give values of different ranks (decided at run time)."""
    text = str(err)
    by_output = {v.name: n for n, _, _ in onnx_recurrent.walk(model) for v in n.outputs if v is not None and v.name}
    noise = ("Check ", "At:", "File ", "While validating", "FrontEnd API failed", "Model wasn't", "Summary", "--",
             "[ONNX Frontend]")
    parts, failed_nodes = [], []
    # One block per op type: "-- Conv-16 with a message:" ... up to the next block or the summary.
    for op, block in re.findall(r"^-- (\S+) with a message:\n(.*?)(?=^-- |^Summary:|\Z)", text, re.S | re.M):
        reasons = list(dict.fromkeys(ln.strip() for ln in block.splitlines() if ln.strip()
                                     and not ln.strip().startswith(noise) and not _FRAME.search(ln)))
        names = re.findall(r"<Node\(\w+\): ([^>]*)>", block)
        nodes = [by_output[n] for n in dict.fromkeys(names) if n in by_output]
        failed_nodes += nodes
        where = _named(nodes) or op
        parts.append(f"{where} ({op}): {'; '.join(reasons) or 'no reason given'}")
    for listed in re.findall(r"No conversion rule found for operations: *(.*)", text):
        for op in (o.strip() for o in listed.split(",") if o.strip()):
            nodes = [n for n, _, _ in onnx_recurrent.walk(model) if n.op_type == op.rsplit("-", 1)[0]]
            where = _named(nodes) or op
            parts.append(f"{where} ({op}): no conversion rule in OpenVINO's ONNX import")
    if not parts:
        parts = [type(err).__name__]
    cause = _rank_decided_at_run_time(failed_nodes) if "rank" in text or "dynamic" in text else None
    return "failed on " + " | ".join(parts) + (f"; {cause}" if cause else "")


_FRAME = re.compile(r"(\.py|>)\(\d+\): ")  # a Python stack frame OpenVINO quotes from a conversion extension


def _named(nodes: list, most: int = 3) -> str:
    text = ", ".join(f"{n.op_type} node {onnx_recurrent.node_label(n)!r}" for n in nodes[:most])
    return text + (f" and {len(nodes) - most} more" if len(nodes) > most else "")


def _rank_decided_at_run_time(nodes: list) -> Optional[str]:
    """The nearest If node upstream of `nodes` whose then and else branches declare one output with two different
    ranks: OpenVINO's If then has a dynamic rank, which its Conv, Reduce... refuse."""
    seen, queue = set(), list(nodes)
    while queue:
        node = queue.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op_type == "If" and node.domain in ("", "ai.onnx"):
            branches = [node.attributes[k].value for k in ("then_branch", "else_branch") if k in node.attributes]
            if len(branches) == 2:
                for k, (a, b) in enumerate(zip(*(g.outputs for g in branches))):
                    ranks = [None if v.shape is None else len(v.shape) for v in (a, b)]
                    if None not in ranks and ranks[0] != ranks[1]:
                        return (f"the rank of what they read is decided at run time by If node "
                                f"{onnx_recurrent.node_label(node)!r} (output {k}: rank {ranks[0]} in then_branch, "
                                f"{ranks[1]} in else_branch); OpenVINO needs it static")
            for g in branches:  # what the branches read from outside them is upstream too
                queue.extend(n for n in g)
        queue.extend(v.producer() for v in node.inputs if v is not None and v.producer() is not None)
    return None


class _Hook:
    """The conversion extension's callable: one call per recurrent node OpenVINO's import meets. With the ONNX
    model (`model`), each call's node is found in it (its name and version for messages and reports); without it,
    the node is read from the call's context alone. `keep`: keep what each call converted (`mapped`, for
    to-openvino's checks); `collect`: keep refusals, interruptions and bugs to be raised after the conversion
    (`raise_collected`), since OpenVINO folds every exception into its own error."""

    def __init__(self, model: Optional[ir.Model], map_node, tmpdir: Optional[str] = None, *, keep: bool = True,
                 collect: bool = True):
        self.map_node = map_node
        self.nodes: Optional[dict[tuple, list]] = None
        if model is not None:
            self.nodes = {}
            for rn in [*onnx_recurrent.find(model), *onnx_quantized.find(model)]:
                self.nodes.setdefault((rn.op, _input_names(rn.node)), []).append(rn)
        self.tmpdir = tmpdir
        self.keep, self.collect = keep, collect
        self.core = None
        self.mapped: list[Mapped] = []
        self.refused: list[RnnconvError] = []
        self.interrupted: Optional[BaseException] = None
        self.bug: Optional[BaseException] = None

    def raise_collected(self) -> None:
        """What the calls kept, in order of precedence: an interruption, a bug, then every refusal at once."""
        if self.interrupted is not None:
            raise self.interrupted
        if self.bug is not None:
            raise self.bug
        if self.refused:
            kind = Unsupported if all(isinstance(e, Unsupported) for e in self.refused) else \
                next(type(e) for e in self.refused if not isinstance(e, Unsupported))
            fixes = tuple(dict.fromkeys(f for e in self.refused for f in e.fixes))
            raise kind(" | ".join(e.message for e in self.refused), fixes=fixes)

    def __call__(self, ctx) -> list:
        if self.interrupted is not None:  # Ctrl-C in an earlier call: no more work
            raise RuntimeError("interrupted")
        try:
            return self._convert(ctx)
        except (KeyboardInterrupt, SystemExit) as err:  # OpenVINO would turn it into OpConversionFailure
            self.interrupted = err
            raise
        except _Cascade:
            raise
        except RnnconvError as err:
            if self.collect:
                self.refused.append(err)
            raise
        except Exception as err:
            if not self.collect:  # OpenVINO's message is all the caller sees: say whose bug it is
                raise RuntimeError(f"rnnconv's mapping failed (a bug in rnnconv: please report it): "
                                   f"{type(err).__name__}: {err}") from err
            self.bug = self.bug or err
            raise

    def _convert(self, ctx) -> list:
        op = ctx.get_op_type("")
        inputs = [ctx.get_input(i) for i in range(ctx.get_input_size())]
        if any(o.get_element_type().is_dynamic() and not _absent(o) for o in inputs):
            raise _Cascade()  # an input's producer failed: OpenVINO reports that node, or it was refused here
        node = self._identify(op, inputs) if self.nodes is not None else _from_context(op, ctx, inputs)
        single, keep = self._single(node, inputs)
        try:
            conversion = self.map_node(single)
        except RnnconvError as err:
            raise type(err)(f"{node.label}: {_strip_label(err.message)}", fixes=err.fixes) from None
        for r in conversion.rewrites:
            r["node"] = node.name
        outs = self._graft(conversion, inputs, node)
        rn = node.recurrent
        if self.keep and rn is not None and not any(m.node is rn for m in self.mapped):
            # a body converted twice is one node to check and report
            self.mapped.append(Mapped(rn, single, conversion, keep))
        return outs

    def _identify(self, op: str, inputs: list) -> "_Node":
        """The ONNX node of this call: input i carries the ONNX name of the node's input i among its tensor names;
        an absent input is a NullNode."""
        got = [set() if _absent(o) else set(o.get_names()) for o in inputs]
        while got and not got[-1]:
            got.pop()
        hits = [rn for (kind, names), rns in self.nodes.items() if kind == op and len(names) == len(got)
                and all((n == "" and not g) or n in g for n, g in zip(names, got)) for rn in rns]
        if not hits:
            raise BadInput(f"OpenVINO's ONNX import passed rnnconv an {op} node it cannot find in the model by its "
                           f"input names ({', '.join(sorted(n for g in got for n in g)) or 'none'}): the model "
                           f"given to rnnconv is not the one OpenVINO converts")
        rn = hits[0]  # several: the same inputs and op, told apart by nothing rnnconv maps differently
        quantized = onnx_quantized.is_quantized_lstm(rn.node)
        attributes = [ir.Attr(a.name, a.type, a.value) for a in rn.node.attributes.values()]
        return _Node(rn.op, rn.node.domain if quantized else "", rn.version, attributes, rn.name,
                     f"{rn.op} node {rn.name!r}", rn.layer.input_size, rn)

    def _single(self, node: "_Node", inputs: list) -> tuple[ir.Model, list]:
        """The node alone, as OpenVINO's import feeds it: constant inputs (folded chains of Constants included)
        become initializers viewing OpenVINO's data, the others graph inputs with OpenVINO's partial shapes, where
        it leaves a dim (or the rank) open, the spec's: N and T named, sizes from the weights."""
        values: list[Optional[ir.Value]] = []
        graph_inputs, initializers, keep = [], [], []
        roles, results = _roles(node.op)
        if len(inputs) > len(roles):
            raise BadInput(f"{node.label}: {len(inputs)} inputs, {node.op} takes at most {len(roles)}")
        for i, (out, role) in enumerate(zip(inputs, roles)):
            name = f"in{i}"
            if _absent(out):
                values.append(None)
                continue
            array = _constant(out, keep)
            if array is not None:
                v = ir.Value(name=name, shape=ir.Shape(array.shape), type=ir.TensorType(_dtype(out, array)),
                             const_value=ir.Tensor(array, name=name, dtype=_dtype(out, array)))
                initializers.append(v)
            else:
                v = ir.Value(name=name, shape=_shape(out, _spec_dims(node, role, inputs)),
                             type=ir.TensorType(_dtype(out)))
                graph_inputs.append(v)
            values.append(v)
        x_type = values[0].type if values and values[0] is not None else ir.TensorType(ir.DataType.FLOAT)
        outputs = [ir.Value(name=f"out{k}", type=x_type) for k in range(len(results))]
        quantized = node.op == onnx_quantized.OP
        onnx_node = ir.Node(node.domain, node.op, values, attributes=node.attributes, outputs=outputs,
                            name=node.name)
        opset = 14 if quantized else node.version
        imports = {"": opset, onnx_quantized.DOMAIN: 1} if quantized else {"": opset}
        graph = ir.Graph(graph_inputs, outputs, nodes=[onnx_node], initializers=initializers, opset_imports=imports,
                         name="rnnconv-node")
        return ir.Model(graph, ir_version=max(4, schemas.min_ir_version(opset))), keep

    def _graft(self, conversion: Conversion, inputs: list, node: "_Node") -> list:
        """rnnconv's IR read by OpenVINO (from a temporary .bin it maps; unlinked at once, the mapping keeps it),
        wired to the extension's inputs; the sources of its Results, one per ONNX output position."""
        import openvino as ov

        if self.core is None:
            self.core = ov.Core()
        # A folder of its own for each call, gone when the call returns: nothing is left behind even when the
        # extension's caller never says the conversion ended (ov.convert_model).
        with tempfile.TemporaryDirectory(prefix=".rnnconv-node.", dir=self.tmpdir) as folder:
            xml_path, bin_path = Path(folder) / "node.xml", Path(folder) / "node.bin"
            try:
                with open(bin_path, "wb") as f:
                    xml = ov_writer.write_to(conversion.graph, f)
                xml_path.write_bytes(xml)
                sub = self.core.read_model(str(xml_path), str(bin_path))
            finally:
                for p in (xml_path, bin_path):
                    with contextlib.suppress(OSError):
                        os.unlink(p)
        by_name = {o.get_any_name(): o for o in sub.outputs}
        outs = [by_name[f"out{k}"].get_node().input_value(0) for k in range(len(_roles(node.op)[1]))]
        for op in sub.get_ordered_ops():  # rnnconv's names stay inside: OpenVINO names the outputs after ONNX's
            if op.get_type_name() not in ("Parameter", "Result"):
                for o in op.outputs():
                    o.get_tensor().set_names(set())
        for p in sub.get_parameters():
            src = inputs[int(p.get_friendly_name()[2:])]  # "in{i}"
            if p.get_element_type() != src.get_element_type():
                raise AssertionError(f"{node.name}: rnnconv's IR wants {p.get_element_type()} at "
                                     f"{p.get_friendly_name()}, OpenVINO gives {src.get_element_type()}")
            for target in list(p.output(0).get_target_inputs()):
                target.replace_source_output(src)
        # The temporary Results would stay consumers of the grafted outputs as long as `sub` lives: detached.
        zero = ov.op.Constant(np.zeros((), np.float32))
        for r in sub.get_results():
            r.input(0).replace_source_output(zero.output(0))
        return outs


class _Cascade(Exception):
    """An input comes from a node that failed to convert: that node's failure is the one to report."""

    def __init__(self):
        super().__init__("not converted: an input comes from a node OpenVINO's import failed on (read that node's "
                         "error)")


@dataclasses.dataclass
class _Node:
    """The recurrent node of one call, as rnnconv rebuilds it: from the ONNX model when the hook has it, else from
    OpenVINO's node context (attributes, input types and shapes)."""

    op: str
    domain: str
    version: int
    attributes: list[ir.Attr]
    name: str
    label: str  # how messages name it
    input_size: Optional[int] = None  # the model's, where OpenVINO's shapes leave it open
    recurrent: Optional[object] = None  # the model's RecurrentNode / QuantizedLSTM


# Each attribute a recurrent node may carry (any version), and its type: what is asked of a node context.
_ATTRIBUTES = {"hidden_size": ir.AttributeType.INT, "direction": ir.AttributeType.STRING,
               "activations": ir.AttributeType.STRINGS, "activation_alpha": ir.AttributeType.FLOATS,
               "activation_beta": ir.AttributeType.FLOATS, "clip": ir.AttributeType.FLOAT,
               "layout": ir.AttributeType.INT, "linear_before_reset": ir.AttributeType.INT,
               "input_forget": ir.AttributeType.INT, "output_sequence": ir.AttributeType.INT}


def _from_context(op: str, ctx, inputs: list) -> _Node:
    """The node of a call without the model: its attributes from the node context. The context gives no version:
    an `output_sequence` attribute says it is below 7 (whose equations are 7's: only attributes differ), bfloat16
    needs 22, anything else reads as 14 (7 and 14 differ by `layout`, which defaults to 0). Messages name it by
    its X (the context gives no node name)."""
    quantized = op == onnx_quantized.OP
    x = sorted(inputs[0].get_names()) if inputs and not _absent(inputs[0]) else []
    label = f"{op} node with input X {x[0]!r}" if x else f"{op} node"
    attributes = []
    for name, kind in _ATTRIBUTES.items():
        if ctx.has_attribute(name):
            try:
                value = ctx.get_attribute(name)
            except Exception as err:  # an attribute of another type than the spec's
                raise BadInput(f"{label}: attribute {name!r} cannot be read as the spec's "
                               f"{kind.name.lower()} ({first_line(err)})") from None
            attributes.append(ir.Attr(name, kind, list(value) if isinstance(value, (list, tuple)) else value))
    present = {a.name for a in attributes}
    if quantized:
        version = 1
    elif "output_sequence" in present:
        version = 3 if op == "GRU" and "linear_before_reset" in present else 1
    elif any(not _absent(o) and o.get_element_type().get_type_name() == "bf16" for o in inputs):
        version = onnx_recurrent.VERSIONS[op][-1]
    else:
        version = onnx_recurrent.LAYOUT_SINCE
    return _Node(op, onnx_quantized.DOMAIN if quantized else "", version, attributes, "", label)


def _input_names(node: ir.Node) -> tuple[str, ...]:
    names = [v.name if v is not None else "" for v in node.inputs]
    while names and names[-1] == "":
        names.pop()
    return tuple(names)


def _roles(op: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The node's input and output roles (ONNX GRU/LSTM/RNN, or com.microsoft DynamicQuantizeLSTM)."""
    if op == onnx_quantized.OP:
        return onnx_quantized.INPUTS, onnx_quantized.OUTPUTS
    return onnx_recurrent.INPUTS[op], onnx_recurrent.OUTPUTS[op]


def _absent(out) -> bool:
    return out.get_node().get_type_name() == "NullNode"


def _strip_label(message: str) -> str:
    """A message about the one-node model, without its own node label (the caller names the real node)."""
    for op in (*onnx_recurrent.OPS, onnx_quantized.OP):
        if message.startswith(f"{op} node "):
            head, sep, rest = message.partition(": ")
            return rest if sep else message
    return message


def _spec_dims(node: _Node, role: str, inputs: list) -> Optional[list]:
    """The spec's dims of a run-time input (ints where the node's attributes and weights say, N / T named, None
    unknown); None for a weight."""
    attrs = {a.name: a.value for a in node.attributes}
    D = 2 if attrs.get("direction") == "bidirectional" else 1
    quantized = node.op == onnx_quantized.OP
    # W [D, I, 4H] and R [D, H, 4H] there, W [D, G*H, I] and R [D, G*H, H] here
    H = attrs.get("hidden_size") or _static_dim(inputs, 2, 1 if quantized else -1)
    size = _static_dim(inputs, 1, 1 if quantized else -1) or node.input_size
    by_layout = {"X": (["T", "N", size], ["N", "T", size]), "initial_h": ([D, "N", H], ["N", D, H]),
                 "sequence_lens": (["N"], ["N"])}
    by_layout["initial_c"] = by_layout["initial_h"]
    spec = by_layout.get(role)
    return None if spec is None else list(spec[0 if quantized else int(attrs.get("layout", 0))])


def _static_dim(inputs: list, index: int, axis: int) -> Optional[int]:
    """Dim `axis` of input `index` where OpenVINO knows it."""
    if index >= len(inputs) or _absent(inputs[index]):
        return None
    ps = inputs[index].get_partial_shape()
    if ps.rank.is_dynamic or not -ps.rank.get_length() <= axis < ps.rank.get_length():
        return None
    d = ps[axis]
    return d.get_length() if d.is_static else None


def _shape(out, spec: Optional[list]) -> Optional[ir.Shape]:
    """OpenVINO's partial shape of `out`, its open dims (or rank) filled from `spec`."""
    ps = out.get_partial_shape()
    if ps.rank.is_dynamic or (spec is not None and ps.rank.get_length() != len(spec)):
        return None if spec is None else ir.Shape(spec)
    return ir.Shape([d.get_length() if d.is_static else (spec[k] if spec is not None else None)
                     for k, d in enumerate(ps)])


def _dtype(out, array: Optional[np.ndarray] = None) -> ir.DataType:
    name = out.get_element_type().get_type_name()
    if name == "bf16":
        return ir.DataType.BFLOAT16
    if array is not None:
        return ir.DataType.from_numpy(array.dtype)
    return ir.DataType.from_numpy(np.dtype(out.get_element_type().to_dtype()))


def _constant(out, keep: list) -> Optional[np.ndarray]:
    """The value of an input made of Constants: a read-only view of a Constant's data (memory-mapped for external
    data), or a chain of FOLDABLE ops over Constants evaluated by OpenVINO's own kernels; None otherwise."""
    import openvino as ov

    node = out.get_node()
    kind = node.get_type_name()
    if kind == "Constant":
        keep.append(node)  # the view lives in the Constant's buffer
        data = node.get_data()
        if node.get_element_type() == ov.Type.bf16:  # returned as float16 bits
            import ml_dtypes

            data = data.view(ml_dtypes.bfloat16)
        return data.reshape(tuple(node.get_shape()))
    if kind not in FOLDABLE or node.get_output_size() != 1 or not out.get_partial_shape().is_static \
            or out.get_element_type() == ov.Type.bf16:
        return None
    args = []
    for v in node.input_values():
        a = _constant(v, keep)
        if a is None or a.dtype.name == "bfloat16":
            return None
        args.append(ov.Tensor(np.ascontiguousarray(a)))
    result = ov.Tensor(out.get_element_type(), out.get_shape())
    if not node.evaluate([result], args):
        return None
    return np.array(result.data)
