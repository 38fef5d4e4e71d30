"""Fuzz the readers with hypothesis: mutated bytes and mutated graphs of the ONNX fixtures through io.load,
inspect and upgrade (verify="none"), mutated IR .xml/.bin through the IR reader. Nothing may escape but
rnnconv's own errors, no example may hang, no file may be left behind.

Deterministic by default (derandomize), a few thousand cases in well under two minutes; RNNCONV_FUZZ_SCALE=10
runs ten times as many, randomly. Each test prints how many cases it tried.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

from rnnconv import io
from rnnconv.commands.from_openvino import from_openvino
from rnnconv.commands.inspect import inspect
from rnnconv.commands.upgrade import upgrade
from rnnconv.dialects.openvino import reader as ov_reader
from rnnconv.errors import RnnconvError
from tests.conftest import FIXTURES, openvino_ir, recurrent_model, tensor_iterator_ir
from tests.hostile.make_hostile import BILLION_LAUGHS

SCALE = float(os.environ.get("RNNCONV_FUZZ_SCALE", "1"))
EXAMPLE_SECONDS = 20  # one example longer than this is a hang


def fuzz_settings(examples: int):
    return settings(max_examples=max(1, int(examples * SCALE)), deadline=None, derandomize=SCALE == 1,
                    database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])


@contextlib.contextmanager
def bounded(seconds: int = EXAMPLE_SECONDS):
    """Fail an example that runs longer than `seconds` (SIGALRM: a loop in Python or numpy is interrupted)."""
    def timeout(*_):
        raise TimeoutError(f"example ran longer than {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def expect_only_rnnconv_errors(fn, *args, **kwargs):
    """Run fn; rnnconv's own errors are answers, anything else is a bug. Returns the result or the error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs)
        except RnnconvError as err:
            assert str(err).strip(), f"{type(err).__name__} without a message"
            assert "\n" not in str(err).strip() or len(str(err)) < 2000
            return err


def report(name: str, counts: dict, capsys, started: float) -> None:
    """Print the number of cases (shown even under -q) so CI logs record it."""
    with capsys.disabled():
        detail = ", ".join(f"{k} {v}" for k, v in counts.items() if k != "cases")
        print(f"\n[fuzz] {name}: {counts['cases']} cases in {time.monotonic() - started:.1f} s ({detail})")


# -- inputs ------------------------------------------------------------------------------------------------

ONNX_FIXTURES = sorted(p for p in FIXTURES.glob("*.onnx"))
ONNX_BYTES = {p.name: p.read_bytes() for p in ONNX_FIXTURES}

position = st.floats(min_value=0, max_value=1, exclude_max=True)
byte_mutation = st.one_of(
    st.tuples(st.just("flip"), position, st.integers(0, 7)),
    st.tuples(st.just("set"), position, st.integers(0, 255)),
    st.tuples(st.just("truncate"), position, st.just(0)),
    st.tuples(st.just("insert"), position, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), position, st.integers(1, 64)),
    st.tuples(st.just("repeat"), position, st.integers(1, 64)),
)


def mutate_bytes(data: bytes, mutations) -> bytes:
    buf = bytearray(data)
    for kind, where, arg in mutations:
        if not buf:
            break
        i = int(where * len(buf))
        if kind == "flip":
            buf[i] ^= 1 << arg
        elif kind == "set":
            buf[i] = arg
        elif kind == "truncate":
            del buf[i:]
        elif kind == "insert":
            buf[i:i] = arg
        elif kind == "delete":
            del buf[i:i + arg]
        elif kind == "repeat":
            buf[i:i] = buf[i:i + arg]
    return bytes(buf)


def check_no_leftovers(folder: Path, allowed: set[str]) -> None:
    left = {p.name for p in folder.iterdir()} - allowed
    assert not left, f"left behind: {sorted(left)}"


# -- ONNX: bytes ---------------------------------------------------------------------------------------------

@pytest.mark.slow(seconds=15)  # thousands of generated cases
def test_fuzz_onnx_bytes(tmp_path, capsys):
    counts = {"cases": 0, "loaded": 0, "refused": 0}
    started = time.monotonic()
    model_path = tmp_path / "m.onnx"

    @fuzz_settings(2500)
    @given(st.sampled_from(sorted(ONNX_BYTES)), st.lists(byte_mutation, min_size=1, max_size=4))
    def run(name, mutations):
        counts["cases"] += 1
        model_path.write_bytes(mutate_bytes(ONNX_BYTES[name], mutations))
        with bounded():
            model = expect_only_rnnconv_errors(io.load, model_path)
            if isinstance(model, RnnconvError):
                counts["refused"] += 1
                return
            counts["loaded"] += 1
            expect_only_rnnconv_errors(inspect, model)
        check_no_leftovers(tmp_path, {"m.onnx"})

    run()
    report("onnx bytes -> io.load + inspect", counts, capsys, started)


# -- ONNX: graphs --------------------------------------------------------------------------------------------

ints = st.one_of(st.integers(-3, 12), st.sampled_from([0, -1, 1 << 31, 1 << 40, (1 << 63) - 1]))
floats = st.floats(allow_nan=True, allow_infinity=True, width=32)
texts = st.one_of(st.sampled_from(["forward", "reverse", "bidirectional", "Tanh", "Sigmoid", "Relu", "", "X", "W",
                                   "Y", "Y_h"]), st.text(max_size=6))
ATTRIBUTES = ["hidden_size", "direction", "layout", "clip", "activations", "activation_alpha",
              "activation_beta", "linear_before_reset", "input_forget", "output_sequence", "perm", "axes"]

graph_mutation = st.one_of(
    st.tuples(st.just("attr_int"), st.sampled_from(ATTRIBUTES), ints),
    st.tuples(st.just("attr_float"), st.sampled_from(ATTRIBUTES), floats),
    st.tuples(st.just("attr_text"), st.sampled_from(ATTRIBUTES), texts),
    st.tuples(st.just("attr_texts"), st.sampled_from(ATTRIBUTES), st.lists(texts, max_size=6)),
    st.tuples(st.just("attr_floats"), st.sampled_from(ATTRIBUTES), st.lists(floats, max_size=6)),
    st.tuples(st.just("attr_drop"), st.sampled_from(ATTRIBUTES), st.just(None)),
    st.tuples(st.just("init_dims"), position, st.lists(ints, max_size=4)),
    st.tuples(st.just("init_dtype"), position, st.sampled_from(sorted(TensorProto.DataType.values()))),
    st.tuples(st.just("init_value"), position, floats),
    st.tuples(st.just("input_dims"), position, st.lists(st.one_of(ints, texts), max_size=4)),
    st.tuples(st.just("input_dtype"), position, st.sampled_from(sorted(TensorProto.DataType.values()))),
    st.tuples(st.just("rename_input"), position, texts),
    st.tuples(st.just("rename_output"), position, texts),
    st.tuples(st.just("drop_node_input"), position, st.just(None)),
    st.tuples(st.just("extra_node_input"), position, texts),
    st.tuples(st.just("drop_node"), position, st.just(None)),
    st.tuples(st.just("duplicate_node"), position, st.just(None)),
    st.tuples(st.just("op_type"), position, st.sampled_from(["GRU", "LSTM", "RNN", "Transpose", "Foo", ""])),
    st.tuples(st.just("opset"), position, st.integers(-1, 30)),
    st.tuples(st.just("ir_version"), position, st.integers(-1, 14)),
)


def _pick(seq, where: float):
    return seq[int(where * len(seq))] if len(seq) else None


def _set_attr(node, name: str, value, kind: str) -> None:
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    if kind == "attr_drop":
        return
    node.attribute.append(onnx.helper.make_attribute(name, value))


def mutate_graph(proto: onnx.ModelProto, mutations) -> onnx.ModelProto:
    g = proto.graph
    for kind, where, arg in mutations:
        nodes = list(g.node)
        if kind.startswith("attr_"):
            node = next((n for n in nodes if n.op_type in ("GRU", "LSTM", "RNN")), _pick(nodes, 0.0))
            if node is not None:
                with contextlib.suppress(ValueError, TypeError):
                    _set_attr(node, where, arg, kind)
        elif kind == "init_dims" and len(g.initializer):
            t = _pick(g.initializer, where)
            del t.dims[:]
            t.dims.extend(max(min(d, (1 << 62)), -(1 << 62)) for d in arg)
        elif kind == "init_dtype" and len(g.initializer):
            _pick(g.initializer, where).data_type = arg
        elif kind == "init_value" and len(g.initializer):
            t = _pick(g.initializer, where)
            with contextlib.suppress(Exception), np.errstate(all="ignore"):
                array = onnx.numpy_helper.to_array(t).copy()
                if array.size and array.dtype.kind == "f":
                    array.reshape(-1)[0] = arg
                    t.CopyFrom(onnx.numpy_helper.from_array(array, t.name))
        elif kind in ("input_dims", "input_dtype") and len(g.input):
            tt = _pick(g.input, where).type.tensor_type
            if kind == "input_dtype":
                tt.elem_type = arg
                continue
            tt.shape.Clear()
            for d in arg:
                dim = tt.shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = max(min(d, (1 << 62)), -(1 << 62))
                else:
                    dim.dim_param = d
        elif kind == "rename_input" and nodes:
            node = _pick(nodes, where)
            if len(node.input):
                node.input[int(where * 97) % len(node.input)] = arg
        elif kind == "rename_output" and nodes:
            node = _pick(nodes, where)
            if len(node.output):
                node.output[int(where * 97) % len(node.output)] = arg
        elif kind == "drop_node_input" and nodes:
            node = _pick(nodes, where)
            if len(node.input):
                del node.input[-1]
        elif kind == "extra_node_input" and nodes:
            _pick(nodes, where).input.append(arg)
        elif kind == "drop_node" and nodes:
            g.node.remove(_pick(nodes, where))
        elif kind == "duplicate_node" and nodes:
            g.node.append(_pick(nodes, where))
        elif kind == "op_type" and nodes:
            _pick(nodes, where).op_type = arg
        elif kind == "opset" and len(proto.opset_import):
            proto.opset_import[0].version = arg
        elif kind == "ir_version":
            proto.ir_version = arg
    return proto


@pytest.mark.slow(seconds=15)  # thousands of generated cases
def test_fuzz_onnx_graphs(tmp_path, capsys):
    counts = {"cases": 0, "loaded": 0, "upgraded": 0, "refused": 0}
    started = time.monotonic()
    model_path, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    protos = {name: onnx.load_from_string(data) for name, data in ONNX_BYTES.items()}

    @fuzz_settings(1500)
    @given(st.sampled_from(sorted(protos)), st.lists(graph_mutation, min_size=1, max_size=3),
           st.integers(0, 3))
    def run(name, mutations, upgrade_every):
        counts["cases"] += 1
        proto = onnx.ModelProto()
        proto.CopyFrom(protos[name])
        proto = mutate_graph(proto, mutations)
        try:
            data = proto.SerializeToString()
        except Exception:  # protobuf refuses to serialize some mutations (e.g. invalid UTF-8): not our input
            return
        model_path.write_bytes(data)
        with bounded():
            model = expect_only_rnnconv_errors(io.load, model_path)
            if isinstance(model, RnnconvError):
                counts["refused"] += 1
                return
            counts["loaded"] += 1
            expect_only_rnnconv_errors(inspect, model)
            if upgrade_every == 0:  # a quarter of the loaded models also go through upgrade and save
                result = expect_only_rnnconv_errors(upgrade, model_path, out, verify="none", force=True)
                if not isinstance(result, RnnconvError):
                    counts["upgraded"] += 1
                    assert out.exists()
                    out.unlink()
                    with contextlib.suppress(FileNotFoundError):
                        (tmp_path / "out.onnx.data").unlink()
        check_no_leftovers(tmp_path, {"m.onnx"})

    run()
    report("onnx graphs -> io.load + inspect + upgrade(verify=none)", counts, capsys, started)


# -- OpenVINO IR ----------------------------------------------------------------------------------------------

def _valid_irs(folder: Path) -> dict[str, tuple[bytes, bytes]]:
    from rnnconv.commands.to_openvino import to_openvino

    out = {}
    for name in ("lstm7_bidirectional_peepholes_input_forget_seq_lens_initial_states", "gru7_bidirectional",
                 "rnn7_stacked", "gru14_bidirectional_head", "lstm14_layout1"):
        path = FIXTURES / f"{name}.onnx"
        if not path.exists():
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                to_openvino(path, folder / f"{name}.xml", verify=False)
            except RnnconvError:  # constructs OpenVINO cannot express (peepholes...): not a fuzz seed
                continue
        out[name] = ((folder / f"{name}.xml").read_bytes(), (folder / f"{name}.bin").read_bytes())
    return out


NUMBER = re.compile(rb"(?<=[\">])-?\d+(?=[\"<,])")
WORD = re.compile(rb'(?<=")[a-zA-Z_][\w.]*(?=")')

ir_mutation = st.one_of(
    st.tuples(st.just("xml_bytes"), st.lists(byte_mutation, min_size=1, max_size=3)),
    st.tuples(st.just("number"), st.tuples(position, st.one_of(ints, st.sampled_from(
        [1 << 40, 1 << 62, 1 << 64, -(1 << 40), 4294967296]), st.integers(-2, 64)))),
    st.tuples(st.just("word"), st.tuples(position, st.sampled_from(
        [b"f99", b"u1", b"bf16", b"FP32", b"", b"Const", b"Parameter", b"Result", b"LSTMSequence", b"opset99",
         b"dynamic", b"...", b"?", b"-1"]))),
    st.tuples(st.just("drop_line"), position),
    st.tuples(st.just("repeat_line"), position),
    st.tuples(st.just("bin_bytes"), st.lists(byte_mutation, min_size=1, max_size=3)),
)


def mutate_ir(xml: bytes, weights: bytes, mutations) -> tuple[bytes, bytes]:
    for kind, arg in mutations:
        if kind == "xml_bytes":
            xml = mutate_bytes(xml, arg)
        elif kind == "bin_bytes":
            weights = mutate_bytes(weights, arg)
        elif kind in ("number", "word"):
            where, value = arg
            spans = [m.span() for m in (NUMBER if kind == "number" else WORD).finditer(xml)]
            if spans:
                a, b = spans[int(where * len(spans))]
                xml = xml[:a] + (str(value).encode() if kind == "number" else value) + xml[b:]
        else:
            lines = xml.split(b"\n")
            i = int(arg * len(lines))
            lines[i:i + 1] = [] if kind == "drop_line" else [lines[i], lines[i]]
            xml = b"\n".join(lines)
    return xml, weights


def read_ir(xml: bytes, weights: bytes):
    graph = ov_reader.parse(xml, weights, where="fuzz.xml")
    graph.topological()
    graph.output_names()
    return graph


def test_ir_reader_empty_result_output_names_is_bad_input(tmp_path):
    # Found by the IR fuzz test (RNNCONV_FUZZ_SCALE=4): it raised IndexError.
    xml, weights = _valid_irs(tmp_path)["gru7_bidirectional"]
    xml = re.sub(rb'output_names="[^"]*"', b'output_names=""', xml, count=1)
    with pytest.raises(RnnconvError):
        read_ir(xml, weights)


@pytest.mark.slow(seconds=15)  # thousands of generated cases
def test_fuzz_ir_reader(tmp_path, capsys):
    seeds = _valid_irs(tmp_path)
    assert seeds, "no IR seed could be written"
    counts = {"cases": 0, "read": 0, "refused": 0}
    started = time.monotonic()

    @fuzz_settings(3000)
    @given(st.sampled_from(sorted(seeds)), st.lists(ir_mutation, min_size=1, max_size=3))
    def run(name, mutations):
        counts["cases"] += 1
        xml, weights = mutate_ir(*seeds[name], mutations)
        with bounded():
            result = expect_only_rnnconv_errors(read_ir, xml, weights)
        counts["refused" if isinstance(result, RnnconvError) else "read"] += 1

    run()
    report("IR xml/bin -> ir.parse + topological", counts, capsys, started)


@pytest.mark.parametrize("name", ["billion_laughs", "deep_nesting", "huge_attribute"])
def test_ir_reader_is_bounded_on_pathological_xml(name):
    data = {
        "billion_laughs": BILLION_LAUGHS,
        "deep_nesting": b'<?xml version="1.0"?><net version="11"><layers>' + b"<a>" * 100_000 + b"</a>" * 100_000
                        + b"</layers></net>",
        "huge_attribute": b'<?xml version="1.0"?><net version="11" name="' + b"x" * 50_000_000 + b'"><layers/></net>',
    }[name]
    with bounded(30):
        result = expect_only_rnnconv_errors(read_ir, data, b"")
    # Unknown elements are ignored and a long name is a name: only the entity bomb must be refused.
    assert isinstance(result, RnnconvError) == (name == "billion_laughs")


def test_fuzz_mutated_ir(tmp_path):
    """Seeded mutations of IR written by OpenVINO (numbers, dropped attributes, cut text): every failure is one
    of rnnconv's errors, and nothing is written on one."""
    ov = pytest.importorskip("openvino")
    gru = recurrent_model("GRU", direction="bidirectional", lbr=1, dynamic=True)
    lstm = recurrent_model("LSTM", sequence_lens=True, initial_h=True)
    sources = [openvino_ir(gru, tmp_path / "gru.xml"), openvino_ir(lstm, tmp_path / "lstm.xml", compress=True)]
    ov.save_model(tensor_iterator_ir("LSTM", reverse=True), str(tmp_path / "ti.xml"))
    sources.append(tmp_path / "ti.xml")
    rng = random.Random(0)
    outcomes = {}
    for i in range(150):
        src = rng.choice(sources)
        text = src.read_text()
        for _ in range(rng.randint(1, 3)):
            numbers = [m.span() for m in re.finditer(r'"-?\d+"', text)]
            attrs = [m.span() for m in re.finditer(r' [a-z_]+="[^"]*"', text)]
            r = rng.random()
            if r < 0.5:
                a, b = rng.choice(numbers)
                text = text[:a] + f'"{rng.choice(["0", "-1", "1", "2", "7", "99", "1099511627776", "x"])}"' + text[b:]
            elif r < 0.8:
                a, b = rng.choice(attrs)
                text = text[:a] + text[b:]
            else:
                k = rng.randrange(len(text))
                text = text[:k] + text[k + rng.randint(1, 40):]
        xml = tmp_path / f"case{i}.xml"
        xml.write_text(text)
        out = tmp_path / f"case{i}.onnx"
        try:
            with np.errstate(all="ignore"):
                from_openvino(xml, out, bin=src.with_suffix(".bin"), verify="full" if i % 5 == 0 else "none")
            outcome = "ok"
        except RnnconvError as err:
            outcome = type(err).__name__
            assert not out.exists()
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(f"from-openvino fuzz: {sum(outcomes.values())} cases: {outcomes}")
    assert outcomes.get("BadInput", 0) > 50
