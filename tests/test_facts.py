"""Each fact rnnconv states is written in one place (issue 20): a search of the package's source for the copies
that were there, so that one coming back fails here, naming the file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rnnconv

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
