"""The command-line contract under structure-aware mutants (issue 25): every command run on a mutated ONNX model
or OpenVINO IR either succeeds with a valid output, or fails with one error line and a documented exit code.

For each mutant and command (run in this process, as the console script runs it):
- the exit code is a documented one (rnnconv.errors: never 70, never a signal; `check` exits 1 on findings);
- a failure prints exactly one `rnnconv: error: ` line (warnings aside) and no traceback, and writes nothing;
- nothing is written outside the output folder (the model's folder and the working directory are unchanged), and
  the input files are unchanged;
- exit 0 comes with a valid output: an ONNX model that passes onnx.checker's full check (external data
  beside it), or an IR that OpenVINO's own reader reads; and IR is accepted only when OpenVINO's reader reads it.

The mutants are made here from small seed models by a seeded generator (about 40 operators: attributes, dims,
element types, opsets and imports, node wiring, initializers, NaN/Inf, value_info, If bodies, Constant nodes and
external data, byte flips and truncations; IR layer versions, port dims, <data> attributes, edges, .bin offsets
and sizes, DOCTYPE). RNNCONV_FUZZ_SCALE=N runs N times as many; RNNCONV_FUZZ_SEED=S another seed. A failure
names the seed, the case number and the mutations, so it reproduces.
"""

from __future__ import annotations

import importlib.util
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
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import FIXTURES, recurrent_model, run_cli

SCALE = float(os.environ.get("RNNCONV_FUZZ_SCALE", "1"))
SEED = int(os.environ.get("RNNCONV_FUZZ_SEED", "25"))
ONNX_CASES = int(300 * SCALE)
IR_CASES = int(150 * SCALE)
HEADER_CASES = int(200 * SCALE)
HEADER_BYTES = 64  # the IR version, producer, and the first node's names and attributes
CASE_SECONDS = 60  # one command longer than this on a model this small is a hang

# Exit codes documented in rnnconv.errors, repeated here so a change there fails this test.
DOCUMENTED = {0, 1, 2, 3, 4, 5}
ERROR = re.compile(r"^rnnconv: error: \S")
FRAME = re.compile(r"(\.py|>)\(\d+\): ")  # "frontend.py(247): _identify": a traceback folded into one line


# -- seed models -------------------------------------------------------------------------------------------

def onnx_seeds() -> list[onnx.ModelProto]:
    small = dict(T=3, N=2, I=3, H=2)
    seeds = [recurrent_model("LSTM", opset=14, **small), recurrent_model("GRU", opset=7, lbr=1, **small),
             recurrent_model("RNN", opset=14, direction="bidirectional", **small),
             recurrent_model("LSTM", opset=7, peepholes=True, initial_h=True, initial_c=True, **small),
             recurrent_model("GRU", opset=14, layout=1, dynamic=True, **small)]
    seeds += [onnx.load(str(FIXTURES / name)) for name in ("lstm7_forward.onnx", "gru3_bidirectional.onnx")]
    return seeds


def ir_seeds() -> list[tuple[str, bytes]]:
    out = []
    for name in ("lstm_batch_first_legacy14", "gru_bidirectional_dynamo"):
        xml = FIXTURES / "openvino" / f"{name}.xml"
        out.append((xml.read_text(), xml.with_suffix(".bin").read_bytes()))
    return out


# -- ONNX mutations: each changes the model in place (and may write files beside it) ----------------------------

def _recurrent(m):
    return [n for n in m.graph.node if n.op_type in ("LSTM", "GRU", "RNN")] or list(m.graph.node)


def _set_attr(node, name, value):
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute(name, value)])


def m_attribute(rng, m, folder):
    node = rng.choice(_recurrent(m))
    name, value = rng.choice([
        ("hidden_size", rng.choice([0, -1, 1, 3, 2**31, 2**62])), ("direction", rng.choice(["", "reverse", "up"])),
        ("layout", rng.choice([1, 2, -1])), ("clip", rng.choice([0.0, -1.0, float("nan"), float("inf")])),
        ("activations", rng.choice([["Sigmoid"], ["Nope", "Tanh", "Tanh"], [], ["Affine", "Tanh", "Elu"]])),
        ("activation_alpha", [float("nan")]), ("linear_before_reset", rng.choice([1, 5])),
        ("input_forget", 1), ("output_sequence", 1), ("bogus", 1)])
    _set_attr(node, name, value)


def m_drop_attribute(rng, m, folder):
    node = rng.choice(_recurrent(m))
    if node.attribute:
        del node.attribute[rng.randrange(len(node.attribute))]


def _dims(m):
    return [vi.type.tensor_type.shape.dim for vi in (*m.graph.input, *m.graph.output, *m.graph.value_info)
            if vi.type.tensor_type.HasField("shape") and len(vi.type.tensor_type.shape.dim)]


def m_dim(rng, m, folder):
    dims = rng.choice(_dims(m) or [None])
    if dims is None:
        return
    d = dims[rng.randrange(len(dims))]
    choice = rng.choice([-7, -1, 0, 1, 9, 2**40, 2**62, "sym"])
    if choice == "sym":
        d.dim_param = "S"
    else:
        d.dim_value = choice


def m_rank(rng, m, folder):
    vi = rng.choice(list(m.graph.input) + list(m.graph.output))
    shape = vi.type.tensor_type.shape
    if rng.random() < 0.5 and len(shape.dim):
        del shape.dim[-1]
    else:
        shape.dim.add().dim_value = 1


def m_elem_type(rng, m, folder):
    vi = rng.choice(list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info) or [None])
    if vi is not None:
        vi.type.tensor_type.elem_type = rng.choice([0, 7, 10, 11, 16, 99, 1])


def m_opset(rng, m, folder):
    kind = rng.randrange(4)
    if kind == 0:
        m.opset_import[0].version = rng.choice([0, 1, 5, 6, 13, 22, 99])
    elif kind == 1:
        m.opset_import.append(helper.make_opsetid("", rng.choice([7, 22])))
    elif kind == 2:
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    else:
        m.ir_version = rng.choice([0, 1, 3, 99])


def m_rewire(rng, m, folder):
    node = rng.choice(list(m.graph.node))
    if not node.input:
        return
    i = rng.randrange(len(node.input))
    names = [v.name for v in m.graph.input] + [t.name for t in m.graph.initializer] + ["", "nowhere"]
    node.input[i] = rng.choice(names)


def m_drop_input(rng, m, folder):
    node = rng.choice(_recurrent(m))
    if len(node.input) > 1:
        del node.input[rng.randrange(len(node.input))]


def m_extra_input(rng, m, folder):
    node = rng.choice(_recurrent(m))
    node.input.extend([node.input[0]] * rng.randint(1, 6))


def m_duplicate_node(rng, m, folder):
    node = rng.choice(list(m.graph.node))
    copy = m.graph.node.add()
    copy.CopyFrom(node)


def m_output(rng, m, folder):
    kind = rng.randrange(3)
    if kind == 0 and len(m.graph.output) > 1:
        del m.graph.output[rng.randrange(len(m.graph.output))]
    elif kind == 1:
        m.graph.output.add().CopyFrom(m.graph.output[0])
    else:
        m.graph.output[0].name = rng.choice([m.graph.input[0].name, "nowhere"])


def _weights(m):
    return [t for t in m.graph.initializer if t.data_type in (TensorProto.FLOAT, TensorProto.DOUBLE)]


def m_nonfinite(rng, m, folder):
    t = rng.choice(_weights(m) or [None])
    if t is None:
        return
    a = numpy_helper.to_array(t).copy()
    a.flat[rng.randrange(a.size)] = rng.choice([np.nan, np.inf, -np.inf, 3e38])
    t.CopyFrom(numpy_helper.from_array(a, t.name))


def m_initializer_dims(rng, m, folder):
    t = rng.choice(list(m.graph.initializer) or [None])
    if t is None or not t.dims:
        return
    t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, -1, 1000, 2**40])


def m_initializer_bytes(rng, m, folder):
    t = rng.choice(_weights(m) or [None])
    if t is None:
        return
    raw = numpy_helper.to_array(t).tobytes()
    t.ClearField("float_data")
    t.ClearField("double_data")
    t.raw_data = raw[: rng.randrange(len(raw))] if rng.random() < 0.5 else raw + b"\0" * 4


def m_initializer_type(rng, m, folder):
    t = rng.choice(list(m.graph.initializer) or [None])
    if t is not None:
        t.data_type = rng.choice([0, 6, 7, 10, 11, 16, 40, 999])


def m_value_info(rng, m, folder):
    node = rng.choice(_recurrent(m))
    out = node.output[-1] if node.output else ""
    if not out:
        return
    middle = out + "_mid"
    for g_out in m.graph.output:
        if g_out.name == out:
            node.output[len(node.output) - 1] = middle
            m.graph.node.append(helper.make_node("Identity", [middle], [out]))
            break
    m.graph.value_info.append(helper.make_tensor_value_info(
        middle if any(o.name == out for o in m.graph.output) else out, rng.choice([1, 7, 11]),
        rng.choice([[9, 9], [1], None, [-3, 2, 2]])))


def m_wrap_if(rng, m, folder):
    g = m.graph
    else_outputs = list(g.output) if rng.random() < 0.5 else list(g.output)[:1]
    then_g = helper.make_graph(list(g.node), "then", [], list(g.output), list(g.initializer))
    else_g = helper.make_graph(list(g.node), "else", [], else_outputs, list(g.initializer))
    outs = [onnx.ValueInfoProto() for _ in g.output]
    for o, src in zip(outs, g.output):
        o.CopyFrom(src)
        o.name = src.name + "_if"
    node = helper.make_node("If", ["cond"], [o.name for o in outs], then_branch=then_g, else_branch=else_g)
    inputs = [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])] + [
        vi for vi in g.input if vi.name not in {t.name for t in g.initializer}]
    new = helper.make_graph([node], "wrapped", inputs, outs)
    g.CopyFrom(new)


def m_constant_external(rng, m, folder):
    """A weight moved into a Constant node whose value is external data: in the folder, escaping it, missing,
    or short."""
    t = rng.choice(_weights(m) or [None])
    if t is None:
        return
    array = numpy_helper.to_array(t)
    location = rng.choice(["w.bin", "w.bin", "../w.bin", "/etc/hostname", "missing.bin", "sub/../w.bin"])
    data = array.tobytes()
    (folder / "w.bin").write_bytes(data[: len(data) // 2] if rng.random() < 0.2 else data)
    value = TensorProto(name=t.name + "_value", data_type=t.data_type, dims=t.dims,
                        data_location=TensorProto.EXTERNAL)
    for k, v in {"location": location, "offset": "0", "length": str(len(data))}.items():
        entry = value.external_data.add()
        entry.key, entry.value = k, v
    kept = [x for x in m.graph.initializer if x.name != t.name]
    del m.graph.initializer[:]
    m.graph.initializer.extend(kept)
    kept_inputs = [vi for vi in m.graph.input if vi.name != t.name]
    del m.graph.input[:]
    m.graph.input.extend(kept_inputs)
    m.graph.node.insert(0, helper.make_node("Constant", [], [t.name], value=value))


def m_function(rng, m, folder):
    """A model-local function around an Identity, called on the first input, imports odd or not."""
    imports = [helper.make_opsetid("", 14)] + ([helper.make_opsetid("", 7)] if rng.random() < 0.5 else [])
    f = helper.make_function("local", "Id", ["a"], ["b"], [helper.make_node("Identity", ["a"], ["b"])], imports)
    m.functions.append(f)
    if rng.random() < 0.7:
        m.opset_import.append(helper.make_opsetid("local", 1))
    x = m.graph.input[0].name
    for node in m.graph.node:
        for i, name in enumerate(node.input):
            if name == x:
                node.input[i] = x + "_f"
    m.graph.node.insert(0, helper.make_node("Id", [x], [x + "_f"], domain="local"))


ONNX_MUTATIONS = [m_attribute, m_drop_attribute, m_dim, m_rank, m_elem_type, m_opset, m_rewire, m_drop_input,
                  m_extra_input, m_duplicate_node, m_output, m_nonfinite, m_initializer_dims, m_initializer_bytes,
                  m_initializer_type, m_value_info, m_wrap_if, m_constant_external, m_function]


def byte_mutation(rng, data: bytes) -> bytes:
    if rng.random() < 0.5:
        return data[: rng.randrange(1, len(data))]
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


# -- IR mutations: (xml text, bin bytes) -> (xml text, bin bytes) ------------------------------------------

def _sub_one(rng, pattern, repl, text, flags=0):
    spots = list(re.finditer(pattern, text, flags))
    if not spots:
        return text
    s = rng.choice(spots)
    return text[: s.start()] + s.expand(repl) + text[s.end():]


def i_version(rng, x, b):
    v = rng.choice(["opset99", "opset0", "", "opset1", "opset17", "banana"])
    return _sub_one(rng, r'version="opset\d+"', f'version="{v}"', x), b


def i_port_dim(rng, x, b):
    return _sub_one(rng, r"<dim>-?\d+</dim>", f"<dim>{rng.choice([-5, -1, 0, 7, 2**62, 'x'])}</dim>", x), b


def i_drop_data(rng, x, b):
    return _sub_one(rng, r"<data [^>]*/>", "", x), b


def i_attribute(rng, x, b):
    name = rng.choice(["hidden_size", "activations", "activations_alpha", "clip", "direction", "output_type",
                       "element_type", "offset", "size", "shape", "axis"])
    value = rng.choice(["", "x,y", "-1", "0", str(2**62), "nan", "sigmoid", "up", "f99", "1,2,3"])
    return _sub_one(rng, rf'{name}="[^"]*"', f'{name}="{value}"', x), b


def i_edge(rng, x, b):
    edges = re.findall(r"<edge [^>]*/>", x)
    if not edges:
        return x, b
    e = rng.choice(edges)
    kind = rng.randrange(3)
    if kind == 0:
        return x.replace(e, e + "\n" + e, 1), b
    if kind == 1:
        return x.replace(e, "", 1), b
    return x.replace(e, re.sub(r'to-port="\d+"', f'to-port="{rng.randrange(9)}"', e), 1), b


def i_bin(rng, x, b):
    if rng.random() < 0.5:
        return x, b[: rng.randrange(len(b))]
    b = bytearray(b)
    for _ in range(rng.randint(1, 16)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return x, bytes(b)


def i_doctype(rng, x, b):
    head = '<?xml version="1.0"?>\n<!DOCTYPE net [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>\n'
    return head + re.sub(r"^<\?xml[^>]*\?>\s*", "", x), b


def i_truncate(rng, x, b):
    return x[: rng.randrange(len(x))], b


IR_MUTATIONS = [i_version, i_port_dim, i_drop_data, i_attribute, i_edge, i_bin, i_doctype, i_truncate]
# IR made by these alone is accepted only when OpenVINO's reader reads it. Not yet the others: OpenVINO's reader
# also runs shape inference on Const values and on the defaults of attributes left out (a Transpose order from
# the .bin, a MatMul without its <data>), which rnnconv's reader checks only where it runs the graph.
HELD_TO_OPENVINO = {i_version, i_port_dim, i_edge, i_doctype, i_truncate}


# -- running one case ---------------------------------------------------------------------------------------

ONNX_COMMANDS = [("inspect", 1), ("check", 1), ("upgrade", 4), ("downgrade", 3), ("layout", 2), ("verify", 2),
                 ("to-openvino", 1)]
IR_COMMANDS = [("from-openvino", 2), ("verify", 1)]


def argv_for(command: str, model: Path, out: Path, rng) -> list:
    return {
        "inspect": ["inspect", model],
        "check": ["check", model, "--target", "onnxruntime"],
        "upgrade": ["upgrade", model, "-o", out / "o.onnx"],
        "downgrade": ["downgrade", model, "-o", out / "o.onnx", "--opset", rng.choice([7, 13, 14])],
        "layout": ["layout", model, "-o", out / "o.onnx", "--to", rng.choice([0, 1]), "--opset", 14],
        "verify": ["verify", model, model],
        "to-openvino": ["to-openvino", model, "-o", out / "o.xml"],
        "from-openvino": ["from-openvino", model, "-o", out / "o.onnx"],
    }[command]


def snapshot(*folders: Path) -> dict:
    out = {}
    for folder in folders:
        for p in folder.rglob("*"):
            if p.is_file() and not p.is_symlink():
                out[p] = p.read_bytes()
            else:
                out[p] = None
    return out


def run_case(label: str, command: str, model: Path, out: Path, cwd: Path, rng, held: bool = False) -> int:
    folder = model.parent
    before = snapshot(folder, cwd)
    argv = argv_for(command, model, out, rng)

    def hang(*_):
        raise TimeoutError(f"{label}: {command} ran longer than {CASE_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(CASE_SECONDS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code, stdout, stderr = run_cli(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    where = f"{label}: rnnconv {' '.join(map(str, argv))}"
    assert code in DOCUMENTED, f"{where}: exit {code}\n{stderr}"
    assert "Traceback" not in stderr + stdout, f"{where}\n{stderr}"
    assert snapshot(folder, cwd) == before, f"{where}: wrote or changed files beside the model or in the cwd"
    if command == "check" and code == 1:
        assert stdout.strip() and "Traceback" not in stderr, f"{where}: exit 1 without findings"  # findings
    elif code != 0:
        # One error line, the last; before it only warnings and the indented verification report (exit 1).
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("rnnconv: error: ")]
        assert len(errors) == 1 and ERROR.match(lines[-1]), f"{where}: exit {code}, stderr:\n{stderr}"
        assert not FRAME.search(lines[-1]), f"{where}: a stack trace in the error line:\n{lines[-1]}"
        assert all(ln.startswith(("rnnconv: warning: ", " ")) or ln == lines[-1] or code == 1 for ln in lines), \
            f"{where}: exit {code}, stderr:\n{stderr}"
        assert not out.exists() or not any(out.iterdir()), f"{where}: exit {code} but wrote {list(out.iterdir())}"
    else:
        _valid_output(command, out, where)
        if model.suffix == ".xml" and held:
            _openvino_reads(model, where)
    return code


_CORE: list = []


def _openvino_reads(xml: Path, where: str) -> None:
    """IR rnnconv accepts, OpenVINO's reader accepts too (rnnconv guesses no semantics for what it refuses)."""
    ov = pytest.importorskip("openvino")
    if not _CORE:
        _CORE.append(ov.Core())
    try:
        _CORE[0].read_model(str(xml))
    except Exception as err:
        pytest.fail(f"{where}: exit 0 on IR OpenVINO refuses: {' '.join(str(err).split())[:300]}")


def _valid_output(command: str, out: Path, where: str) -> None:
    if command in ("upgrade", "downgrade", "layout", "from-openvino"):
        path = out / "o.onnx"
        assert path.is_file(), f"{where}: exit 0 without its output"
        try:
            onnx.checker.check_model(str(path), full_check=True)
        except Exception as err:
            pytest.fail(f"{where}: exit 0 but the output fails onnx.checker: {err}")
    elif command == "to-openvino":
        xml = out / "o.xml"
        assert xml.is_file() and xml.with_suffix(".bin").is_file(), f"{where}: exit 0 without its output"
        if importlib.util.find_spec("openvino") is None:
            return  # OpenVINO's reader is the judge; without it the rest of the run still holds the contract
        import openvino as ov

        try:
            ov.Core().read_model(str(xml))
        except Exception as err:
            pytest.fail(f"{where}: exit 0 but OpenVINO cannot read the IR: {err}")


def _pick(rng, weighted):
    return rng.choices([c for c, _ in weighted], weights=[w for _, w in weighted])[0]


def _report(name: str, codes: dict, started: float, capsys) -> None:
    with capsys.disabled():
        detail = ", ".join(f"exit {k}: {v}" for k, v in sorted(codes.items()))
        print(f"\n[fuzz] {name}: {sum(codes.values())} cases in {time.monotonic() - started:.1f} s ({detail})")


@pytest.mark.slow(seconds=8)  # hundreds of mutants through every command
def test_contract_on_onnx_mutants(tmp_path, monkeypatch, capsys):
    rng = random.Random(SEED)
    seeds = onnx_seeds()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "w.bin").write_bytes(b"\x11" * 64)  # a decoy external-data file: must never be read nor changed
    monkeypatch.chdir(cwd)
    codes: dict = {}
    started = time.monotonic()
    for case in range(ONNX_CASES):
        folder = tmp_path / f"c{case}" / "model"
        folder.mkdir(parents=True)
        model = onnx.ModelProto()
        model.CopyFrom(rng.choice(seeds))
        names = []
        for _ in range(rng.randint(1, 2)):
            mutate = rng.choice(ONNX_MUTATIONS)
            names.append(mutate.__name__)
            try:
                mutate(rng, model, folder)
            except (ValueError, TypeError, IndexError):  # a mutation that does not apply to this seed
                pass
        data = model.SerializeToString()
        if rng.random() < 0.1:
            data = byte_mutation(rng, data)
            names.append("bytes")
        path = folder / "m.onnx"
        path.write_bytes(data)
        command = _pick(rng, ONNX_COMMANDS)
        code = run_case(f"seed {SEED} case {case} ({', '.join(names)})", command, path, tmp_path / f"c{case}" /
                        "out", cwd, rng)
        codes[code] = codes.get(code, 0) + 1
    _report("ONNX mutants through every command", codes, started, capsys)
    assert set(codes) != {0}, "no mutant was refused: the mutations do not bite"


@pytest.mark.slow(seconds=8)  # hundreds of mutants through every command
def test_contract_on_flipped_headers(tmp_path, monkeypatch, capsys):
    """Byte flips in the first bytes of the shipped models (synthetic fixtures and PyTorch's exports, as their
    exporters wrote them): the IR version, producer strings, the first names and attributes, and the protobuf
    tags and lengths around them. A flipped byte in a name makes a string protobuf reads back as bytes."""
    from tests.conftest import fixture_cases

    rng = random.Random(SEED + 2)
    files = [(name, (FIXTURES / name).read_bytes()) for name in fixture_cases()]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    codes: dict = {}
    started = time.monotonic()
    for case in range(HEADER_CASES):
        name, data = rng.choice(files)
        flipped = bytearray(data)
        spots = sorted(rng.sample(range(min(HEADER_BYTES, len(data))), rng.randint(1, 3)))
        for k in spots:
            flipped[k] = rng.randrange(256)
        folder = tmp_path / f"c{case}" / "model"
        folder.mkdir(parents=True)
        path = folder / "m.onnx"
        path.write_bytes(bytes(flipped))
        command = _pick(rng, ONNX_COMMANDS)
        code = run_case(f"seed {SEED + 2} case {case} ({name}, bytes {spots} flipped)", command, path,
                        tmp_path / f"c{case}" / "out", cwd, rng)
        codes[code] = codes.get(code, 0) + 1
    _report("shipped models' first bytes flipped, through every command", codes, started, capsys)
    assert set(codes) != {0} and len(codes) > 1, "every flip refused, or none: the flips do not bite"


@pytest.mark.slow(seconds=8)  # hundreds of mutants through every command
def test_contract_on_ir_mutants(tmp_path, monkeypatch, capsys):
    pytest.importorskip("openvino")
    rng = random.Random(SEED + 1)
    seeds = ir_seeds()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    codes: dict = {}
    started = time.monotonic()
    for case in range(IR_CASES):
        folder = tmp_path / f"c{case}" / "model"
        folder.mkdir(parents=True)
        xml, bin_ = rng.choice(seeds)
        names, held = [], True
        for _ in range(rng.randint(1, 2)):
            mutate = rng.choice(IR_MUTATIONS)
            names.append(mutate.__name__)
            held = held and mutate in HELD_TO_OPENVINO
            xml, bin_ = mutate(rng, xml, bin_)
        path = folder / "m.xml"
        path.write_text(xml)
        (folder / "m.bin").write_bytes(bin_)
        command = _pick(rng, IR_COMMANDS)
        code = run_case(f"seed {SEED + 1} case {case} ({', '.join(names)})", command, path, tmp_path / f"c{case}" /
                        "out", cwd, rng, held)
        codes[code] = codes.get(code, 0) + 1
    _report("IR mutants through from-openvino and verify", codes, started, capsys)
    assert set(codes) != {0}, "no mutant was refused: the mutations do not bite"
