"""Each fact rnnconv states is written in one place (issue 20): a search of the package's source for the copies
that were there, so that one coming back fails here, naming the file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rnnconv
from tests.conftest import FIXTURES, fixture_feeds

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = Path(rnnconv.__file__).resolve().parent  # the source tree, or the installed wheel (CI's wheel job)
SOURCES = {path.relative_to(PACKAGE.parent).as_posix(): path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}

# Copies kept on purpose: the IR interpreter restates the OpenVINO spec's gate order and bias layout, so that a
# wrong dialect table makes the writer and the interpreter disagree (engine/ir_graph.py says why).
ORACLES = {"rnnconv/engine/ir_graph.py"}


def holding(pattern: str, flags: int = 0) -> set[str]:
    return {name for name, text in SOURCES.items() if re.search(pattern, text, flags)}


def test_the_recurrent_op_list_is_written_once():
    three = r'"(?:GRU|LSTM|RNN)"'
    found = holding(rf"[(\[{{]\s*{three},\s*{three},\s*{three}\s*,?\s*[)\]}}]")
    assert "rnnconv/layer.py" in found  # the pattern sees the home
    assert found == {"rnnconv/layer.py"}


def test_version_7_is_named_once():
    found = holding(r"\b(?:version|opset)\w*\s*(?:[<>]=?|==)\s*7\b|^\s*\w*(?:SINCE|OPSET)\w*\s*=\s*7\b", re.M)
    assert "rnnconv/dialects/onnx_versions.py" in found
    assert found == {"rnnconv/dialects/onnx_versions.py"}


def test_gates_are_split_and_biases_folded_in_one_place():
    split = holding(r"dict\(zip\([^\n]*np\.split\(")
    assert split - ORACLES == {"rnnconv/layer.py"}
    # B split: ONNX's [Wb gates, Rb gates] in onnx_recurrent.split_bias, OpenVINO's slots in gates.split_direction
    assert holding(r"np\.split\([^\n]*\bB\b") - ORACLES == {"rnnconv/dialects/onnx_recurrent.py",
                                                           "rnnconv/dialects/openvino/gates.py"}
    # folded: OpenVINO's one bias per gate (Wb + Rb) in gates.folded
    assert holding(r"Wb\[[^]\n]+\]\s*\+\s*[\w.]*Rb\[") == set()
    assert holding(r"sum\(getattr\(\w+, \w+\)\[\w+\] for") == {"rnnconv/dialects/openvino/gates.py"}


def _help_texts(text: str):
    """The help texts of a module: the docstring of each `command` and every `help=` (the literal parts of an
    f-string)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == "command" and ast.get_docstring(node):
            yield ast.get_docstring(node)
        elif isinstance(node, ast.keyword) and node.arg == "help":
            yield from (c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                        and isinstance(c.value, str))


# Numbers a help text would copy from their homes: exit codes (errors.py), tolerances (verification/tolerance.py),
# opsets (dialects/onnx_versions.py).
COPIED = [r"\bexit \d", r"\b\d(?:\.\d+)?e-\d+\b", r"\batol \d", r"\brtol \d", r"opset >= \d", r"\bat least \d+,",
          r"\bneeds \d+ or higher"]


@pytest.mark.parametrize("name", sorted(n for n in SOURCES if n.startswith("rnnconv/cli/")))
def test_help_texts_quote_numbers_from_their_homes(name):
    assert name != "rnnconv/cli/verify.py" or len(list(_help_texts(SOURCES[name]))) > 5  # the search sees them
    said = [(s, p) for s in _help_texts(SOURCES[name]) for p in COPIED if re.search(p, s, re.I)]
    assert not said, f"{name}: a help text copies a number (fill it from rnnconv.cli.helptext.FACTS): {said}"


def test_help_texts_are_filled():
    """The numbers the help quotes are the defined ones, and no placeholder is left unfilled."""
    from rnnconv.cli import cli
    from rnnconv.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNSUPPORTED, EXIT_USAGE, EXIT_VERIFY
    from rnnconv.verification.tolerance import DEQUANTIZED_ATOL, DEQUANTIZED_RTOL

    for name, command in cli.commands.items():
        assert not re.search(r"\{[A-Z_]+\}", command.help or ""), name
    verify = " ".join(cli.commands["verify"].help.split())
    assert (f"Exit {EXIT_OK} when they agree, {EXIT_VERIFY} when they do not, {EXIT_USAGE} on a usage error, "
            f"{EXIT_UNSUPPORTED} when an engine") in verify and f"{EXIT_BAD_INPUT} on a bad model" in verify
    assert f"atol {DEQUANTIZED_ATOL:g} + rtol {DEQUANTIZED_RTOL:g}" in cli.commands["dequantize"].help


def test_exit_codes_are_compared_by_name():
    found = holding(r"\b(?:code|exit_code|returncode)\s*[=!]=\s*[1-9]")
    assert not {n for n in found if n.startswith("rnnconv/cli/")}, found


@pytest.mark.skipif(not (ROOT / "rnnconv").is_dir(), reason="the source tree's files (a copy of the tests runs here)")
def test_files_the_packaging_comments_name_exist():
    named = re.findall(r"#[^\n]*?\bsee ([\w./-]+\.py)\b", (ROOT / "pyproject.toml").read_text())
    assert named, "the pattern sees the comments"
    assert [n for n in named if not (ROOT / n).is_file()] == []


@pytest.mark.parametrize("name", ["rnnconv/dialects/onnx_recurrent.py", "rnnconv/dialects/onnx_quantized.py"])
def test_the_onnx_dialect_keeps_no_module_level_cache(name):
    """What a read finds is kept on the tensors it read (tensor.meta), not in a module-level table that outlives
    the model and would have to know when a file changed."""
    empty = []
    for node in ast.parse(SOURCES[name]).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, (ast.Dict, ast.List, ast.Set)) and not getattr(value, "keys", getattr(value, "elts",
                                                                                                     None)):
            empty.append(node.lineno)
        elif isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("dict", "list", "set") \
                and not value.args:
            empty.append(node.lineno)
    assert not empty, f"{name}: module-level mutable containers at lines {empty}"


# -- gate orders, IR spellings, versions, engine names (issue 31) ------------------------------------------------

TREES = {name: ast.parse(text) for name, text in SOURCES.items()}
# The gate names (layer.py, as sets), ONNX's orders (onnx_recurrent.GATES, PEEPHOLES) and OpenVINO's (gates.ORDER);
# every positional use derives from them.
GATE_HOMES = {"rnnconv/layer.py", "rnnconv/dialects/onnx_recurrent.py", "rnnconv/dialects/openvino/gates.py"}
_GATE_SETS = (frozenset("iofc"), frozenset("zrh"))


def _gate_order(node: ast.AST):
    """The gate order an expression writes out: a tuple or list of one-letter gate names ("z", "r", "h"), or a
    string of three or more ("iofc"); None for anything else."""
    if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 2:
        letters = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(letters) < len(node.elts) or any(len(x) != 1 for x in letters):
            return None
        text = "".join(letters)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 3:
        text = node.value
    else:
        return None
    return text if len(set(text)) == len(text) and any(set(text) <= s for s in _GATE_SETS) else None


def test_gate_orders_are_written_in_their_homes():
    found = {name: [(n.lineno, _gate_order(n)) for n in ast.walk(tree) if _gate_order(n)]
             for name, tree in TREES.items()}
    found = {name: where for name, where in found.items() if where}
    assert {"rnnconv/dialects/onnx_recurrent.py", "rnnconv/dialects/openvino/gates.py"} <= set(found)  # seen
    assert {n: w for n, w in found.items() if n not in GATE_HOMES | ORACLES} == {}, \
        "derive the positions from onnx_recurrent.GATES / PEEPHOLES or gates.ORDER"


IR_RECURRENT_NAME = re.compile(r"(?:GRU|LSTM|RNN)?(?:Sequence|Cell)")


def test_the_ir_names_of_the_recurrent_ops_are_written_once():
    """GRUSequence / LSTMCell... (and the bare suffixes a type name would be cut with) only in gates.py."""
    found = {name for name, tree in TREES.items() for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and IR_RECURRENT_NAME.fullmatch(n.value)}
    assert found == {"rnnconv/dialects/openvino/gates.py"}


def test_the_ir_names_are_openvinos():
    """The spelling of OpenVINO's opset pages (GRUSequence-5 ... RNNCell-0), written here, and every recurrent
    layer type in the IR OpenVINO itself wrote (fixtures/openvino) read as its kind."""
    from rnnconv.dialects.openvino import gates

    assert gates.SEQUENCE_OP == {"GRU": "GRUSequence", "LSTM": "LSTMSequence", "RNN": "RNNSequence"}
    assert gates.CELL_OP == {"GRU": "GRUCell", "LSTM": "LSTMCell", "RNN": "RNNCell"}
    written = {m.group(1): m.group(2) for xml in (FIXTURES / "openvino").rglob("*.xml")
               for m in re.finditer(r'type="((GRU|LSTM|RNN)(?:Sequence|Cell))"', xml.read_text())}
    assert {"GRUSequence", "LSTMSequence"} <= set(written)  # the fixtures hold them
    assert {t: {**gates.SEQUENCES, **gates.CELLS}.get(t) for t in written} == written


def test_recurrent_version_numbers_are_named_once():
    """The versions of GRU / LSTM / RNN (1, 3, 7, 14, 22) are compared, registered and quoted by their names in
    onnx_versions (a 22 written in an adapter or a message would stay behind when onnx adds a version)."""
    numbers = {3, 7, 14, 22}
    found = set()
    RECURRENT = ("GRU", "LSTM", "RNN")
    for name, tree in TREES.items():
        for n in ast.walk(tree):
            if isinstance(n, ast.Compare) and re.search(r"version", ast.unparse(n)):
                if any(isinstance(c, ast.Constant) and c.value in numbers for c in (n.left, *n.comparators)):
                    found.add((name, n.lineno))
            elif isinstance(n, ast.Call) and getattr(n.func, "id", "") == "register" and n.args:
                recurrent = getattr(n.args[0], "id", "") == "_op" or getattr(n.args[0], "value", "") in RECURRENT
                if recurrent and any(isinstance(a, ast.Constant) and a.value in numbers for a in n.args[1:]):
                    found.add((name, n.lineno))
            elif isinstance(n, ast.JoinedStr):
                text = "".join(v.value for v in n.values if isinstance(v, ast.Constant))
                if re.search(r"\b(?:opset|version)s? (?:3|7|14|22)\b", text):
                    found.add((name, n.lineno))
    assert found == set()


def test_the_recurrent_versions_are_onnx_schemas():
    """onnx_versions against onnx's own schemas: every version of each op, and the one that brought each change."""
    from onnx import defs

    from rnnconv.dialects import onnx_versions as v
    from rnnconv.layer import KINDS

    def history(op: str) -> dict:
        versions = sorted({s.since_version for s in defs.get_all_schemas_with_history() if s.name == op
                           and s.domain == ""})
        return {n: defs.get_schema(op, n) for n in versions}

    def first(schemas: dict, holds) -> int:
        return min(n for n, s in schemas.items() if holds(s))

    def bfloat16(s) -> bool:
        return any("tensor(bfloat16)" in c.allowed_type_strs for c in s.type_constraints)

    for op in KINDS:
        schemas = history(op)
        assert v.VERSIONS[op] == tuple(schemas), op
        assert v.MODERN_SINCE == first(schemas, lambda s: "output_sequence" not in s.attributes), op
        assert v.LAYOUT_SINCE == first(schemas, lambda s: "layout" in s.attributes), op
        assert v.BFLOAT16_SINCE == first(schemas, bfloat16) == max(schemas), op
    assert v.LINEAR_BEFORE_RESET_SINCE == first(history("GRU"), lambda s: "linear_before_reset" in s.attributes)
    assert v.CAST_BFLOAT16_SINCE == first(history("Cast"), bfloat16)


def test_what_onnxruntime_refuses_of_a_recurrent_node_is_measured():
    """runtimes.node_findings (what `check` and the verification expect) and the engine's partition (what it
    runs itself) against onnxruntime running each synthetic fixture on its inputs (float64 GRU and LSTM are
    refused at the run, the rest when the session is made): a refusal is said exactly where onnxruntime refuses,
    and rnnconv's engine runs every node onnxruntime refuses."""
    import onnxruntime as ort

    from rnnconv import io, runtimes
    from rnnconv.dialects import onnx_recurrent
    from rnnconv.engine import partition

    options = ort.SessionOptions()
    options.log_severity_level = 4
    wrong = []
    for path in sorted(FIXTURES.glob("*.onnx")):
        try:
            ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None,
                                                                                             fixture_feeds(path))
            refused = False
        except Exception:
            refused = True
        model = io.load(path)
        nodes = onnx_recurrent.find(model)
        said = [f.problem for rn in nodes for f in runtimes.node_findings(rn, "onnxruntime")
                if f.effect == runtimes.REFUSES]
        own = [partition.rnnconv_reason(rn.node, model.opset_imports, {}) for rn in nodes]
        if bool(said) != refused or (refused and not any(own)):
            wrong.append((path.name, refused, said, own))
    assert len(list(FIXTURES.glob("*.onnx"))) > 90 and wrong == []


# The names of the engines, of to-openvino's routes and of check's targets: listed in rnnconv/engine/__init__.py,
# compared by those names everywhere else (a misspelt literal would be a branch never taken).
NAME_HOME = "rnnconv/engine/__init__.py"
LISTS = [{"rnnconv", "onnxruntime", "openvino"}, {"auto", "rnnconv", "openvino"},
         {"onnxruntime", "openvino", "onnx-reference"}]
NAMES = set().union(*LISTS)


def test_engine_route_and_target_names_are_listed_once():
    found = {name for name, tree in TREES.items() for n in ast.walk(tree)
             if isinstance(n, (ast.Tuple, ast.List, ast.Set))
             and any(names <= {e.value for e in n.elts if isinstance(e, ast.Constant)} for names in LISTS)}
    assert found == {NAME_HOME}


def test_engine_route_and_target_names_are_compared_by_name():
    found = []
    for name, tree in TREES.items():
        for n in ast.walk(tree):
            if not isinstance(n, ast.Compare):
                continue
            sides = (n.left, *n.comparators)
            named = [s for s in sides if isinstance(s, ast.Constant) and s.value in NAMES]
            others = " ".join(ast.unparse(s) for s in sides if s not in named)
            if named and re.search(r"engine|target|route|place|\beng\b|\bt\b", others):
                found.append(f"{name}:{n.lineno}")
    assert found == []


def test_the_names_users_type_are_the_documented_ones():
    """The names the docs tell users to type (docs/verification.md, openvino.md, commands.md), written here:
    --engine, --route and --target take these (a renamed engine or route breaks every script naming it)."""
    from rnnconv.cli import cli

    def choices(command: str) -> dict:
        return {p.name: list(p.type.choices) for p in cli.commands[command].params if hasattr(p.type, "choices")}

    assert choices("verify")["engine"] == ["rnnconv", "onnxruntime", "openvino", "all"]
    assert choices("to-openvino")["route"] == ["auto", "rnnconv", "openvino"]
    assert choices("check")["targets"] == ["onnxruntime", "openvino", "onnx-reference"]
    defaults = {p.name: p.default for c in ("verify", "to-openvino") for p in cli.commands[c].params}
    assert (defaults["engine"], defaults["route"]) == ("rnnconv", "auto")
