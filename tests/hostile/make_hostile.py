"""Build the corpus of broken and hostile inputs for tests/hostile/test_hostile_corpus.py, in a folder of your
choice.

Nothing hostile is committed: every case is made here, from small seeded models. Each case names the file(s)
it made, the exit code and the one-line message (a regular expression) every command must give for it.

    python -m tests.hostile.make_hostile OUTDIR      # from the repository: writes the corpus, one line per case
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rnnconv.dialects.openvino import reader as ov_reader
from tests.conftest import GATES, recurrent_model

T, N, I, H = 5, 2, 3, 4
HUGE = 1 << 40  # elements: a tensor no machine allocates; must be refused before allocating

# Exit codes (rnnconv.errors): repeated here so a wrong mapping there fails these tests.
VERIFY, USAGE, UNSUPPORTED, BAD_INPUT, IO = 1, 2, 3, 4, 5


@dataclasses.dataclass
class Case:
    """One hostile input. `commands`: which CLI commands get it (see argv_for in test_hostile_corpus)."""

    name: str
    kind: str  # "onnx", "ir" or "npz"
    path: Path  # the model (.onnx / .xml) or, for npz, the inputs file
    exit_code: int
    message: str  # a regular expression the one-line error must match
    commands: tuple[str, ...] = ()
    model: Optional[Path] = None  # npz cases: the model the inputs are for
    extra: tuple[str, ...] = ()  # more argv for every command
    warning: str = ""  # a regular expression a stderr warning must match (exit_code 0 cases)
    # Known gaps in modules the corpus does not own: command ("*" for every command) -> the reason.
    xfail: dict[str, str] = dataclasses.field(default_factory=dict)

    def xfail_reason(self, command: str) -> str:
        return self.xfail.get(command, self.xfail.get("*", ""))


ONNX_COMMANDS = ("inspect", "upgrade", "downgrade", "layout", "to-openvino", "check", "verify")
IR_COMMANDS = ("from-openvino", "verify")


# -- valid models to break ----------------------------------------------------------------------------------

# One GRU/LSTM/RNN node at the corpus's sizes (Y and Y_h), to break: see recurrent_model for the keywords.
recurrent = functools.partial(recurrent_model, "LSTM", T=T, N=N, I=I, H=H, outputs=("Y", "Y_h"))


def two_adds(nodes, inputs=("x",), outputs=("z",), inits=()) -> onnx.ModelProto:
    """A plain float graph: for graph-level breakage (cycles, dangling inputs, duplicate names)."""
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in inputs]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in outputs]
    graph = helper.make_graph(nodes, "g", vi, vo, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _save(model: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def _external(folder: Path, name: str, location: str, *, nbytes: Optional[int] = None) -> Path:
    """A valid LSTM whose W lives in external data at `location` (written as given, not checked)."""
    model = recurrent()
    w = next(t for t in model.graph.initializer if t.name == "W")
    raw = numpy_helper.to_array(w).tobytes()
    w.ClearField("float_data")
    w.raw_data = b""
    w.data_location = TensorProto.EXTERNAL
    info = {"location": location, "offset": "0", "length": str(len(raw) if nbytes is None else nbytes)}
    if nbytes == -1:  # no length: the shape says how many bytes
        del info["length"]
    for k, v in info.items():
        entry = w.external_data.add()
        entry.key, entry.value = k, v
    return _save(model, folder / name), raw


# -- the corpus ---------------------------------------------------------------------------------------------

def onnx_cases(folder: Path) -> list[Case]:
    folder.mkdir(parents=True, exist_ok=True)
    cases: list[Case] = []

    def add(name, data_or_model, code, message, **kw):
        path = folder / f"{name}.onnx"
        if isinstance(data_or_model, onnx.ModelProto):
            _save(data_or_model, path)
        else:
            path.write_bytes(data_or_model)
        cases.append(Case(name, "onnx", path, code, message, kw.pop("commands", ONNX_COMMANDS), **kw))

    valid = recurrent().SerializeToString()
    rng = np.random.default_rng(9)
    add("garbage_bytes", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(), BAD_INPUT, r"not an ONNX model")
    add("empty_file", b"", BAD_INPUT, r"not an ONNX model")
    add("truncated", valid[: len(valid) // 2], BAD_INPUT, r"not an ONNX model")
    add("truncated_one_byte_short", valid[:-1], BAD_INPUT, r"not an ONNX model|invalid model|malformed")
    add("text_file", b"<?xml version='1.0'?><net version='11'></net>\n", BAD_INPUT, r"not an ONNX model")
    add("empty_graph", helper.make_model(helper.make_graph([], "g", [], []), ir_version=8,
                                         opset_imports=[helper.make_opsetid("", 14)]),
        BAD_INPUT, r"graph has no outputs")
    cycle = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Add", ["a", "x"], ["b"]),
             helper.make_node("Identity", ["a"], ["z"])]
    add("cycle", two_adds(cycle), BAD_INPUT, r"invalid model: .*(topologically sorted|not output of any)")
    add("dangling_input", two_adds([helper.make_node("Add", ["x", "nowhere"], ["z"])]), BAD_INPUT,
        r"invalid model: .*nowhere")
    add("dangling_output", two_adds([helper.make_node("Identity", ["x"], ["y"])]), BAD_INPUT,
        r"Graph output 'z' is not an output of any node")
    dup = [helper.make_node("Identity", ["x"], ["z"]), helper.make_node("Neg", ["x"], ["z"])]
    add("duplicate_value_names", two_adds(dup), BAD_INPUT, r"invalid model: .*(SSA|static single assignment)")
    one = numpy_helper.from_array(np.ones(2, np.float32), "c")
    add("duplicate_initializers", two_adds([helper.make_node("Add", ["x", "c"], ["z"])], inits=[one, one]),
        BAD_INPUT, r"(duplicate|SSA|more than once).*'?c'?")
    add("duplicate_graph_inputs", two_adds([helper.make_node("Identity", ["x"], ["z"])], inputs=("x", "x")),
        BAD_INPUT, r"(duplicate|SSA|more than once)")

    G = GATES["LSTM"]
    f32 = np.float32
    add("x_rank_2", recurrent(x_shape=[T, I]), BAD_INPUT, r"LSTM node 'lstm': X has rank 2, expected 3")
    add("w_rank_2", recurrent(weights={"W": np.zeros((G * H, I), f32)}), BAD_INPUT,
        r"LSTM node 'lstm': W has shape \[16, 3\]")
    add("r_wrong_shape", recurrent(weights={"R": np.zeros((1, G * H, H + 1), f32)}), BAD_INPUT,
        r"LSTM node 'lstm': R has shape \[1, 16, 5\], expected \[1, 16, 4\]")
    add("b_wrong_shape", recurrent(weights={"B": np.zeros((1, G * H), f32)}), BAD_INPUT,
        r"LSTM node 'lstm': B has shape")
    add("w_disagrees_with_x", recurrent(x_shape=[T, N, I + 2]), BAD_INPUT,
        r"LSTM node 'lstm': X has input size 5, W has 3")
    add("initial_h_wrong_shape", recurrent(initial_h=np.zeros((1, N + 1, H))), BAD_INPUT,
        r"LSTM node 'lstm': initial_h has shape \[1, 3, 4\], expected \[1, 2, 4\]")
    add("hidden_size_0", recurrent(attrs={"hidden_size": 0}), BAD_INPUT, r"hidden_size must be positive, got 0")
    add("hidden_size_negative", recurrent(attrs={"hidden_size": -3}), BAD_INPUT,
        r"hidden_size must be positive, got -3")
    add("hidden_size_disagrees", recurrent(attrs={"hidden_size": H + 1}), BAD_INPUT,
        r"W has shape \[1, 16, 3\], expected \[1, 20, 3\] for hidden_size=5")
    add("weights_int32", recurrent(weights={"W": np.ones((1, G * H, I), np.int32)}), BAD_INPUT,
        r"W has dtype int32, expected a floating-point type")
    add("weights_float64_x_float32", recurrent(weights={"R": np.zeros((1, G * H, H), np.float64)}), BAD_INPUT,
        r"R is float64 but X is float32")
    add("sequence_lens_above_T", recurrent(sequence_lens=np.array([T, T + 3], np.int32)), BAD_INPUT,
        r"sequence_lens must lie in \[0, 5\], got \[5, 8\]")
    add("sequence_lens_negative", recurrent(sequence_lens=np.array([-1, 2], np.int32)), BAD_INPUT,
        r"sequence_lens must lie in \[0, 5\], got \[-1, 2\]")
    add("sequence_lens_float", recurrent(sequence_lens=np.array([1.0, 2.0], np.float32)), BAD_INPUT,
        r"sequence_lens has dtype float32, expected int32")
    add("direction_bogus", recurrent(attrs={"direction": "sideways"}), BAD_INPUT, r"direction 'sideways'")
    add("layout_2", recurrent(attrs={"layout": 2}), BAD_INPUT, r"layout must be 0 or 1, got 2")
    add("activation_unknown", recurrent(attrs={"activations": ["Sigmoid", "Nope", "Tanh"]}), BAD_INPUT,
        r"Nope")
    add("attribute_unknown", recurrent(attrs={"bogus": 1}), BAD_INPUT,
        r"Unrecognized attribute: bogus|attribute\(s\) \['bogus'\]")
    no_w = recurrent()
    no_w.graph.node[0].input[1] = ""
    add("w_missing", no_w, BAD_INPUT, r"input 1 is marked single but has an empty string|X, W and R are required")
    add("opset_from_the_future", recurrent(opset=999), UNSUPPORTED,
        r"default-domain opset 999 is newer than the installed onnx knows")
    future_ir = recurrent()
    future_ir.ir_version = 999
    add("ir_version_from_the_future", future_ir, BAD_INPUT, r"IR version|ir_version")

    # Non-finite weights: a warning on stderr, and every command still runs (verification included).
    nan_w = np.random.default_rng(1).uniform(-1, 1, (1, G * H, I)).astype(f32)
    nan_w[0, 0, 0] = np.nan
    inf_r = np.random.default_rng(2).uniform(-1, 1, (1, G * H, H)).astype(f32)
    inf_r[0, 1, 1] = np.inf
    for name, weights, what in (("nan_in_w", {"W": nan_w}, "W"), ("inf_in_r", {"R": inf_r}, "R")):
        add(name, recurrent(weights=weights), 0, "", warning=rf"LSTM node 'lstm': {what} holds 1 non-finite value",
            commands=("inspect", "upgrade", "verify"))

    # External data: refused unless it is a file inside the model's folder holding every declared byte.
    sub = folder / "ext"
    sub.mkdir(exist_ok=True)
    outside = folder / "outside.bin"
    path, raw = _external(sub, "abs.onnx", str(outside.resolve()))
    outside.write_bytes(raw)
    cases.append(Case("external_absolute", "onnx", path, BAD_INPUT, r"external data location .* is outside",
                      ONNX_COMMANDS))
    path, _ = _external(sub, "dotdot.onnx", "../outside.bin")
    cases.append(Case("external_dotdot", "onnx", path, BAD_INPUT, r"external data location '\.\./outside\.bin' "
                      r"is outside", ONNX_COMMANDS))
    path, _ = _external(sub, "symlink.onnx", "link.bin")
    link = sub / "link.bin"
    if not link.is_symlink():
        os.symlink(outside.resolve(), link)
    cases.append(Case("external_symlink_outside", "onnx", path, BAD_INPUT, r"'link\.bin' resolves outside",
                      ONNX_COMMANDS))
    path, _ = _external(sub, "short.onnx", "short.bin")
    (sub / "short.bin").write_bytes(raw[: len(raw) // 2])
    cases.append(Case("external_shorter_than_declared", "onnx", path, BAD_INPUT, r"holds 96 bytes, needs 192",
                      ONNX_COMMANDS))
    path, _ = _external(sub, "short_by_shape.onnx", "short2.bin", nbytes=-1)
    (sub / "short2.bin").write_bytes(raw[:-4])
    cases.append(Case("external_shorter_than_shape", "onnx", path, BAD_INPUT, r"holds 188 bytes, needs 192",
                      ONNX_COMMANDS))
    path, _ = _external(sub, "length_0.onnx", "short2.bin", nbytes=0)
    cases.append(Case("external_length_disagrees_with_shape", "onnx", path, BAD_INPUT,
                      r"declares 0 bytes, its shape \[1, 16, 3\] needs 192", ONNX_COMMANDS))
    const = numpy_helper.from_array(np.zeros(2, np.float32), "c")
    const.ClearField("raw_data")
    const.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "../outside.bin"), ("length", "8")):
        entry = const.external_data.add()
        entry.key, entry.value = k, v
    graph = two_adds([helper.make_node("Constant", [], ["c"], value=const), helper.make_node("Add", ["x", "c"], ["z"])])
    path = _save(graph, sub / "constant_dotdot.onnx")
    cases.append(Case("external_constant_node_dotdot", "onnx", path, BAD_INPUT,
                      r"initializer 'c': external data location '\.\./outside\.bin' is outside", ONNX_COMMANDS))
    path, _ = _external(sub, "bad_offset.onnx", "short.bin")
    model = onnx.load(str(path), load_external_data=False)
    entry = model.graph.initializer[0].external_data.add()
    entry.key, entry.value = "offset", "twelve"
    _save(model, path)
    cases.append(Case("external_offset_not_integer", "onnx", path, BAD_INPUT, r"are not integers", ONNX_COMMANDS))
    path, _ = _external(sub, "missing.onnx", "missing.bin")
    cases.append(Case("external_missing", "onnx", path, BAD_INPUT, r"external data file 'missing\.bin' is missing",
                      ONNX_COMMANDS))
    path, _ = _external(sub, "dir.onnx", ".")
    cases.append(Case("external_is_directory", "onnx", path, BAD_INPUT, r"external data location '\.'",
                      ONNX_COMMANDS))
    if hasattr(os, "mkfifo"):  # reading a FIFO blocks forever: refused before it is opened
        fifo = folder / "fifo.onnx"
        if not fifo.exists():
            os.mkfifo(fifo)
        cases.append(Case("model_is_a_fifo", "onnx", fifo, BAD_INPUT, r"not a regular file", ONNX_COMMANDS))
        path, _ = _external(sub, "fifo_data.onnx", "fifo.bin")
        if not (sub / "fifo.bin").exists():
            os.mkfifo(sub / "fifo.bin")
        cases.append(Case("external_data_is_a_fifo", "onnx", path, BAD_INPUT, r"'fifo\.bin' is not a regular file",
                          ONNX_COMMANDS))

    # A declared input of 2^40 elements: every command that runs the model must refuse before allocating.
    add("huge_static_input", recurrent(x_shape=[HUGE, N, I]), BAD_INPUT, r"\d TiB",
        commands=("upgrade", "verify"))
    return cases


# -- OpenVINO IR ---------------------------------------------------------------------------------------------

def valid_ir(folder: Path) -> tuple[bytes, bytes]:
    """(xml, bin) of a small LSTM written by rnnconv's own to-openvino (no verification, so no runtime needed)."""
    from rnnconv.commands.to_openvino import to_openvino

    src = _save(recurrent(), folder / "ir_source.onnx")
    out = folder / "ir_source.xml"
    if not out.exists():
        to_openvino(src, out, verify=False)
    return out.read_bytes(), out.with_suffix(".bin").read_bytes()


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<net name="&lol9;" version="11"><layers/><edges/></net>
"""


def _external_entity(target: Path) -> bytes:
    return (f'<?xml version="1.0"?>\n<!DOCTYPE net [<!ENTITY secret SYSTEM "file://{target}">]>\n'
            f'<net name="&secret;" version="11"><layers/><edges/></net>\n').encode()


def _const_layer(xml: bytes, attrs: dict[str, str]) -> bytes:
    """The IR with the <data> attributes of its first f32 Const layer (a weight) replaced by `attrs`."""

    text = xml.decode()
    start = 0
    while True:
        start = text.index('type="Const"', start + 1)
        data_start = text.index("<data ", start)
        data_end = text.index("/>", data_start)
        root = ov_reader.parse_xml(text[data_start:data_end + 2].encode())
        if root.attrib.get("element_type") == "f32":
            break
    merged = {**root.attrib, **attrs}
    new = "<data " + " ".join(f'{k}="{v}"' for k, v in merged.items()) + " />"
    return (text[:data_start] + new + text[data_end + 2:]).encode()


def _edit(xml: bytes, old: str, new: str, count: int = 1) -> bytes:
    text = xml.decode()
    if old not in text:
        raise AssertionError(f"make_hostile: {old!r} not in the IR")
    return text.replace(old, new, count).encode()


def ir_cases(folder: Path) -> list[Case]:
    folder.mkdir(parents=True, exist_ok=True)
    xml, weights = valid_ir(folder)
    cases: list[Case] = []

    def add(name, xml_bytes, code, message, *, bin_bytes=weights, **kw):
        path = folder / f"{name}.xml"
        path.write_bytes(xml_bytes)
        if bin_bytes is not None:
            path.with_suffix(".bin").write_bytes(bin_bytes)
        cases.append(Case(name, "ir", path, code, message, kw.pop("commands", IR_COMMANDS), **kw))

    secret = folder / "secret.txt"
    secret.write_text("do not read me\n")
    add("ir_malformed_xml", xml[: len(xml) // 2], BAD_INPUT, r"not well-formed XML")
    add("ir_garbage", np.random.default_rng(3).integers(0, 256, 2048, dtype=np.uint8).tobytes(), BAD_INPUT,
        r"not XML, so not OpenVINO IR")
    add("ir_empty", b"", BAD_INPUT, r"not well-formed XML|empty XML")
    add("ir_billion_laughs", BILLION_LAUGHS, BAD_INPUT, r"must not contain a DOCTYPE")
    add("ir_external_entity", _external_entity(secret.resolve()), BAD_INPUT, r"must not contain a DOCTYPE")
    add("ir_wrong_root", b'<?xml version="1.0"?><model version="11"/>', BAD_INPUT, r"root element is <model>")
    add("ir_version_9", _edit(xml, 'version="11"', 'version="9"'), BAD_INPUT, r"IR version '9' is not supported")
    add("ir_no_layers", b'<?xml version="1.0"?><net version="11"><edges/></net>', BAD_INPUT, r"no <layers>")
    add("ir_edge_to_nowhere", _edit(xml, 'to-layer="', 'to-layer="9999', 1), BAD_INPUT, r"names no layer")
    add("ir_edge_from_missing_port", _edit(xml, 'from-port="', 'from-port="77', 1), BAD_INPUT,
        r"names output port 770, which it does not have")
    add("ir_id_not_integer", _edit(xml, 'id="0"', 'id="zero"'), BAD_INPUT, r"'zero' is not an integer")
    add("ir_bin_missing", xml, BAD_INPUT, r"ir_bin_missing\.bin, which is missing", bin_bytes=None)
    add("ir_bin_truncated", xml, BAD_INPUT, r"lie outside the \.bin", bin_bytes=weights[: len(weights) // 2])
    add("ir_offset_outside", _const_layer(xml, {"offset": str(len(weights) + 8)}), BAD_INPUT,
        r"lie outside the \.bin")
    add("ir_offset_negative", _const_layer(xml, {"offset": "-8"}), BAD_INPUT, r"negative offset -8")
    add("ir_size_not_shape", _const_layer(xml, {"size": "4"}), BAD_INPUT, r"size 4 does not match shape .* of f32")
    add("ir_unknown_element_type", _const_layer(xml, {"element_type": "f99"}), BAD_INPUT,
        r"unsupported OpenVINO element type 'f99'")
    add("ir_negative_dim", _const_layer(xml, {"shape": "-1, 4"}), BAD_INPUT, r"negative dimension")
    add("ir_const_2_40_elements", _const_layer(xml, {"shape": str(HUGE), "size": str(HUGE * 4)}), BAD_INPUT,
        r"lie outside the \.bin")
    add("ir_const_shape_overflows_int64", _const_layer(xml, {"shape": "4294967296, 4294967296, 16", "size": "0"}),
        BAD_INPUT, r"does not match shape|too large|elements")
    add("ir_const_shape_not_integer", _const_layer(xml, {"shape": "4, x"}), BAD_INPUT, r"'x' is not an integer")
    cycle = _cycle(xml)
    add("ir_cycle", cycle, BAD_INPUT, r"IR graph has a cycle through layer")
    add("ir_parameter_missing_output_port", _drop_parameter_port(xml), BAD_INPUT,
        r"IR Parameter 'X' has no <output> port")
    add("ir_parameter_2_40_elements", _huge_parameter(xml), BAD_INPUT, r"TiB")
    nested = (b'<?xml version="1.0"?><net version="11">'
              + b'<layers><layer id="0" name="ti" type="TensorIterator" version="opset1"><body>' * 5000
              + b"</body></layer></layers>" * 5000 + b"</net>")
    add("ir_deeply_nested_bodies", nested, BAD_INPUT, r"nest deeper than 64 levels")
    return cases


def _cycle(xml: bytes) -> bytes:
    """Add an edge from the last layer's first output port back into the first non-Parameter layer's input."""

    graph = ov_reader.parse(xml, b"\0" * (1 << 20))
    consumer = next(lay for lay in graph.layers if lay.type not in ("Parameter", "Const") and lay.inputs)
    producer = next(lay for lay in reversed(graph.layers) if lay.outputs and lay.id != consumer.id
                    and lay.type != "Result")
    edge = (f'<edge from-layer="{producer.id}" from-port="{producer.outputs[0].id}" '
            f'to-layer="{consumer.id}" to-port="{consumer.inputs[0].id}" />')
    text = xml.decode()
    # Replace the edge that fed that input, so each input port still has one producer.
    import re

    pattern = re.compile(rf'<edge from-layer="\d+" from-port="\d+" to-layer="{consumer.id}" '
                         rf'to-port="{consumer.inputs[0].id}"\s*/>')
    text, n = pattern.subn(edge, text, count=1)
    if n != 1:
        raise AssertionError("make_hostile: no edge to replace for the cycle")
    return text.encode()


def _drop_parameter_port(xml: bytes) -> bytes:
    text = xml.decode()
    start = text.index('type="Parameter"')
    out_start = text.index("<output>", start)
    out_end = text.index("</output>", out_start) + len("</output>")
    return (text[:out_start] + text[out_end:]).encode()


def _huge_parameter(xml: bytes) -> bytes:
    text = xml.decode()
    start = text.index('type="Parameter"')
    dim = text.index("<dim>", start)
    end = text.index("</dim>", dim)
    return (text[:dim] + f"<dim>{HUGE}" + text[end:]).encode()


# -- verification inputs -------------------------------------------------------------------------------------

def npz_cases(folder: Path) -> list[Case]:
    """`verify MODEL MODEL --inputs BAD.npz` with MODEL an LSTM taking X and sequence_lens as graph inputs."""
    folder.mkdir(parents=True, exist_ok=True)
    model = _save(recurrent(sequence_lens=True, x_shape=["T", N, I]), folder / "with_lens.onnx")
    cases: list[Case] = []
    x = np.zeros((T, N, I), np.float32)
    lens = np.array([T, 1], np.int32)

    def add(name, arrays, code, message, **kw):
        path = folder / f"{name}.npz"
        if isinstance(arrays, bytes):
            path.write_bytes(arrays)
        else:
            with open(path, "wb") as f:
                np.savez(f, **arrays)
        cases.append(Case(name, "npz", path, code, message, ("verify",), model=model, **kw))

    add("npz_extra_name", {"X": x, "sequence_lens": lens, "Z": x}, BAD_INPUT, r"'Z' is not an input")
    add("npz_wrong_rank", {"X": x[0], "sequence_lens": lens}, BAD_INPUT, r"'X' has rank 2, the model wants 3")
    add("npz_wrong_shape", {"X": np.zeros((T, N + 1, I), np.float32), "sequence_lens": lens}, BAD_INPUT,
        r"'X' has shape \[5, 3, 3\], axis 1 must be 2")
    add("npz_wrong_dtype", {"X": x, "sequence_lens": lens.astype(np.float32)}, BAD_INPUT,
        r"'sequence_lens' holds float32 values, the model wants int32")
    add("npz_string_dtype", {"X": np.full((T, N, I), "a"), "sequence_lens": lens}, BAD_INPUT,
        r"'X' holds <U1 values, the model wants float32")
    add("npz_sequence_lens_above_T", {"X": x, "sequence_lens": np.array([T + 4, 1], np.int32)}, BAD_INPUT,
        r"sequence_lens must lie in \[0, 5\], got \[9, 1\]")
    add("npz_sequence_lens_negative", {"X": x, "sequence_lens": np.array([-2, 1], np.int32)}, BAD_INPUT,
        r"sequence_lens must lie in \[0, 5\], got \[-2, 1\]")
    add("npz_not_a_zip", b"PK\x03\x04 this is not a zip", BAD_INPUT, r"not a readable \.npz")
    add("npz_pickled_object", _pickled_npz(), BAD_INPUT, r"not a readable \.npz|[Pp]ickle|object")
    add("npz_missing_name_is_drawn", {"X": x}, 0, "")
    return cases


def _pickled_npz() -> bytes:
    """An .npz whose array is a pickled object: loading it with allow_pickle would run code."""
    import io as _io

    buf = _io.BytesIO()
    np.savez(buf, X=np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return buf.getvalue()


def huge_dim_case(folder: Path) -> Case:
    """`verify --dim T=2^40`: the run would need terabytes; estimate first, refuse with the estimate."""
    model = _save(recurrent(x_shape=["T", N, I]), folder / "dynamic_T.onnx")
    return Case("verify_dim_2_40", "npz", model, BAD_INPUT, r"\d TiB", ("verify",), model=model,
                extra=("--dim", f"T={HUGE}"))


def build(folder) -> list[Case]:
    folder = Path(folder)
    return [*onnx_cases(folder / "onnx"), *ir_cases(folder / "ir"), *npz_cases(folder / "npz"),
            huge_dim_case(folder / "npz")]


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.exit("usage: python -m tests.hostile.make_hostile OUTDIR")
    for case in build(argv[0]):
        flag = "".join(f"  [xfail {cmd}: {why}]" for cmd, why in case.xfail.items())
        print(f"{case.kind:5} {case.name:36} exit {case.exit_code}  {case.path}{flag}")


if __name__ == "__main__":
    main()

