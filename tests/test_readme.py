"""The examples of README.md and of every page of docs/ (those the README's Documentation table names) are a test:
they print what the page shows, run as the README says, every page in order in one folder (a reader's clone: no
page may write a file an earlier page wrote), and each page alone in a fresh folder (no page depends on another).
Run with the openvino package and without it (a sitecustomize.py on PYTHONPATH blocks `import openvino`, in every
child process too): all pages in order with it, each page alone without it (without the package installed, both
without it).

Conventions (the README's "Reading the examples" says them to readers):
- ```console and ```text blocks are examples alike. A line `$ CMD` is a command; the lines after it, up to the
  next `$` line or the end of the block, are what it prints (stdout and stderr together, in order). CMD is
  `rnnconv ...` (run as `python -m rnnconv ...`), `python ...` (this interpreter) or `echo $?`.
- `$ echo $?` prints the previous command's exit code, compared exactly. A command that does not exit 0 must be
  followed by it: a failure example shows its `rnnconv: error:` line and its exit code.
- A line (command or output) ending in `# with openvino` or `# without openvino` (after two spaces or more) belongs
  to that run only.
- Output is compared line by line after masking numbers (ints, floats, exponents -> <n>; digits inside names such
  as `lstm7` or `float32` stay), the run folder's path and other temporary paths, and runs of spaces (table
  columns move with their numbers): numbers may move, words may not.
- ```python blocks run too, in order, as scripts (exit 0; their output is not compared); a block with a line
  ending in `# with openvino` (an import, say) runs only in that run. The README's first ```bash block's
  `rnnconv` command (the install line) runs first. A docs page has no ```bash block.
- Examples start in a folder holding only `fixtures` (a link to the shipped ones): a file an example reads must be
  shipped or made by an earlier example of the same page. Everything they write lands under `out/`, which
  .gitignore lists, each page under names of its own.
- The README's ```python block runs twice in a row (a reader runs it again): it must not fail the second time.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# A docs page, as the README's Documentation table names it.
PAGE = re.compile(r"^\| `(docs/[\w.-]+\.md)` \|", re.M)
MODES = ("with openvino", "without openvino")
MARK = re.compile(r"\s{2,}# (with|without) openvino$")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)
# A number not glued to a name: `LSTM-7`, `opset 7`, `8.94e-08`, `[5,3,4]`, `-0.038`, but not `lstm7`, `float32`.
NUMBER = re.compile(r"(?<![A-Za-z_\d.])-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
TEMP = re.compile(re.escape(tempfile.gettempdir()) + r"/\S*")
BLOCK_OPENVINO = "import sys\nsys.modules['openvino'] = None  # `import openvino` raises ImportError\n"


@dataclasses.dataclass
class Step:
    page: str  # README.md or docs/NAME.md
    line: int  # 1-based line of the page
    kind: str  # "rnnconv", "python", "script" (a python block), "echo" ($ echo $?)
    text: str  # the command (or the script)
    expected: list[tuple[int, str, Optional[str]]] = dataclasses.field(default_factory=list)  # (line, text, mode)
    mode: Optional[str] = None  # None: both runs
    shown: bool = True  # False: the README shows no output (the install line)

    def argv(self) -> list[str]:
        if self.kind == "script":
            return [sys.executable, "-c", self.text]
        words = shlex.split(self.text)
        return [sys.executable, *(["-m", "rnnconv"] if self.kind == "rnnconv" else []), *words[1:]]

    def expected_in(self, mode: str) -> list[tuple[int, str]]:
        return [(n, t) for n, t, m in self.expected if m in (None, mode)]


def _marked(text: str) -> tuple[str, Optional[str]]:
    m = MARK.search(text)
    return (text[: m.start()], f"{m.group(1)} openvino") if m else (text, None)


def parse(text: str, page: str = "README.md") -> list[Step]:
    steps: list[Step] = []
    first_bash = page == "README.md"
    for fence in FENCE.finditer(text):
        lang, body = fence.group(1), fence.group(2)
        start = text.count("\n", 0, fence.start(2)) + 1
        if lang == "bash":
            assert page == "README.md", f"{page} line {start}: a docs page shows its commands in ```console blocks"
        if lang == "bash" and first_bash:
            first_bash = False
            command = body.split("&& rnnconv ", 1)
            assert len(command) == 2, "the first ```bash block installs rnnconv and runs one rnnconv command"
            steps.insert(0, Step(page, start, "rnnconv", "rnnconv " + command[1].strip(), shown=False))
        elif lang == "python":
            modes = {mode for mode in (_marked(line.rstrip())[1] for line in body.splitlines()) if mode}
            assert len(modes) <= 1, f"{page} line {start}: a python block runs with or without openvino, not both"
            steps.append(Step(page, start, "script", body, mode=next(iter(modes), None), shown=False))
        elif lang in ("console", "text"):
            current = None
            for i, raw in enumerate(body.splitlines()):
                text_, mode = _marked(raw.rstrip())
                if text_.startswith("$ "):
                    cmd = text_[2:].strip()
                    kind = "echo" if cmd == "echo $?" else cmd.split()[0]
                    assert kind in ("rnnconv", "python", "echo"), f"{page} line {start + i}: cannot run {cmd!r}"
                    current = Step(page, start + i, kind, cmd, mode=mode)
                    steps.append(current)
                else:
                    assert current is not None, f"{page} line {start + i}: output before any `$` command"
                    current.expected.append((start + i, text_, mode))
    return steps


def normalize(line: str, folder: Path) -> str:
    line = line.replace(f"{folder}/", "").replace(str(folder), ".")
    return " ".join(NUMBER.sub("<n>", TEMP.sub("<tmp>", line)).split())


@dataclasses.dataclass
class Ran:
    step: Step
    code: int
    output: list[str]
    seconds: float


def environment(blocker: Optional[Path] = None) -> dict:
    """The child processes import the rnnconv this test imports (from any folder), unbuffered so that stdout and
    stderr interleave as written; `blocker`: a folder whose sitecustomize.py blocks openvino."""
    import rnnconv

    paths = [str(Path(rnnconv.__file__).resolve().parent.parent)]
    paths += [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join([str(blocker)] * bool(blocker) + paths))


def walk(steps: list[Step], mode: str, folder: Path, blocker: Optional[Path]) -> list[Ran]:
    """Every step of `mode`, in order, in `folder` (made, with its `fixtures` link, when new); the exit code of a
    command is what its `echo $?` prints."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "fixtures").exists():
        (folder / "fixtures").symlink_to(ROOT / "fixtures")
    env = environment(blocker if mode == "without openvino" else None)
    ran: list[Ran] = []
    for step in steps:
        if step.mode not in (None, mode):
            continue
        if step.kind == "echo":
            code = ran[-1].code if ran else 0
            ran.append(Ran(step, 0, [str(code)], 0.0))
            continue
        start = time.perf_counter()
        proc = subprocess.run(step.argv(), cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=600)
        ran.append(Ran(step, proc.returncode, proc.stdout.splitlines(), time.perf_counter() - start))
    return ran


def differences(ran: list[Ran], mode: str, folder: Path) -> list[str]:
    """What a page gets wrong in `mode`, one entry per example."""
    problems = []
    for k, r in enumerate(ran):
        step = r.step
        where = f"{step.page} line {step.line}: `{step.text.splitlines()[0]}`"
        if step.kind == "echo":
            want = [t.strip() for _, t in step.expected_in(mode)]
            if want != r.output:
                problems.append(f"{where}: exit code {r.output[0]}, the page says {want}")
            continue
        shown = k + 1 < len(ran) and ran[k + 1].step.kind == "echo"
        if r.code != 0 and not shown:
            problems.append(f"{where}: exit code {r.code} without `$ echo $?` after it:\n    "
                            + "\n    ".join(r.output[-5:]))
        if not step.shown:
            continue
        want = [(n, normalize(t, folder)) for n, t in step.expected_in(mode)]
        got = [normalize(t, folder) for t in r.output]
        while got and not got[-1]:
            got.pop()
        for i in range(max(len(want), len(got))):
            w = want[i] if i < len(want) else (None, "(nothing)")
            g = got[i] if i < len(got) else "(nothing)"
            if w[1] != g:
                problems.append(f"{where}, output line {i + 1} (line {w[0] or '-'}):\n"
                                f"    page: {w[1]}\n    printed: {g}\n  printed in full:\n    "
                                + "\n    ".join(r.output))
                break
    return problems


PAGES = ["README.md", *PAGE.findall(README.read_text())]
STEPS = {page: parse((ROOT / page).read_text(), page) for page in PAGES}
WITH_EXAMPLES = [page for page in PAGES if STEPS[page]]
OPENVINO = importlib.util.find_spec("openvino") is not None
IN_ORDER_MODE = MODES[0] if OPENVINO else MODES[1]  # all pages in order in one folder
ALONE_MODE = MODES[1]  # each page alone in a fresh folder


def _again(steps: list[Step]) -> list[Step]:
    """The README's python block a second time, right after the first (a reader runs it again)."""
    out = []
    for step in steps:
        out.append(step)
        if step.page == "README.md" and step.kind == "script":
            out.append(dataclasses.replace(step, text=step.text))
    return out


@pytest.fixture(scope="module")
def blocker(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("no-openvino")
    (folder / "sitecustomize.py").write_text(BLOCK_OPENVINO)
    return folder


def _problems(ran: list[Ran], mode: str, folder: Path) -> str:
    problems = differences(ran, mode, folder)
    left = sorted(p.name for p in folder.iterdir())
    if left != ["fixtures", "out"]:
        problems.append(f"the examples left {left} beside out/ (they write under out/ only)")
    return "\n".join(problems)


@pytest.mark.slow(seconds=80)  # every example of every page, one after another
def test_examples_of_every_page_in_order_in_one_clone(tmp_path, blocker):
    """The README's promise: every page's examples, the pages in the Documentation table's order, run from one
    clone and print what the pages show. A page that writes an output name an earlier page wrote fails here
    ("exists (try --force)")."""
    steps = _again([step for page in WITH_EXAMPLES for step in STEPS[page]])
    ran = walk(steps, IN_ORDER_MODE, tmp_path / "clone", blocker)
    problems = _problems(ran, IN_ORDER_MODE, tmp_path / "clone")
    assert not problems, f"the examples differ {IN_ORDER_MODE}, every page in order in one folder:\n{problems}"


@pytest.mark.parametrize("page", WITH_EXAMPLES)
def test_examples_of_each_page_alone(page, tmp_path, blocker):
    """Each page in a folder of its own: a page reads only shipped files and what its own examples wrote."""
    ran = walk(STEPS[page], ALONE_MODE, tmp_path / "alone", blocker)
    problems = _problems(ran, ALONE_MODE, tmp_path / "alone")
    assert not problems, f"{page}'s examples differ {ALONE_MODE}, the page alone:\n{problems}"


def test_out_is_ignored_by_git():
    gitignore = ROOT / ".gitignore"
    if not gitignore.exists():  # not in an unpacked source distribution
        pytest.skip(".gitignore is not beside this copy of the tests")
    assert "/out/" in gitignore.read_text().splitlines()


def test_readme_masks_numbers_not_words():
    folder = Path("/nowhere")
    assert normalize("  ok   model [engine vs onnxruntime] max abs 8.94e-08, max rel 1.66e-06", folder) \
        == normalize("  ok   model [engine vs onnxruntime] max abs 0, max rel 12", folder)
    assert normalize("GRU-1 -> GRU-22 in out/lstm7.onnx, float32[5,3,4]", folder) \
        == "GRU-<n> -> GRU-<n> in out/lstm7.onnx, float32[<n>,<n>,<n>]"
    temporary = f"{tempfile.gettempdir()}/x/y"
    assert normalize(f"wrote {folder}/out/a.onnx and {temporary}", folder) == "wrote out/a.onnx and <tmp>"
    assert normalize("ok   node lstm", folder) != normalize("BAD  node lstm", folder)


def test_readme_has_no_relative_links():
    """A package index shows the README without the source tree: a relative link would lead nowhere."""
    links = re.findall(r"\]\(([^)]*)\)", README.read_text())
    assert [link for link in links if not re.match(r"https?://|#", link)] == []


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading: `## upgrade and downgrade` -> `upgrade-and-downgrade`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", FENCE.sub("", text), flags=re.M)}


@pytest.mark.parametrize("page", PAGES[1:])
def test_docs_links_lead_somewhere(page):
    """A docs page's relative link names a file of the source tree, and its `#anchor` a heading of that page."""
    text = (ROOT / page).read_text()
    links = re.findall(r"\]\(([^)]*)\)", FENCE.sub("", text))
    assert links, f"{page} links to no other page"
    for link in links:
        if re.match(r"https?://", link):
            continue
        target, _, anchor = link.partition("#")
        path = (ROOT / page).parent / target if target else ROOT / page
        assert path.is_file(), f"{page}: {link} leads to no file"
        if anchor:
            assert anchor in _anchors(path.read_text()), f"{page}: {link} leads to no heading"


def test_readme_test_command_is_the_one_ci_runs():
    run = ROOT / ".ci" / "run"
    if not run.exists():  # not in CI's copy of the suite
        pytest.skip(".ci/run is not beside this copy of the tests")
    bash = [m.group(2) for m in FENCE.finditer(README.read_text()) if m.group(1) == "bash"]
    assert len(bash) >= 2
    command = bash[1].strip().split(" && ", 2)[-1]  # after creating and activating the environment
    assert command in run.read_text().splitlines()


# -- every command's --help shows an example that runs ------------------------------------------------------------

def _helps() -> dict[str, str]:
    from rnnconv.cli import COMMANDS, cli

    helps = {"rnnconv": cli.get_help(click.Context(cli, info_name="rnnconv", terminal_width=100))}
    for name in COMMANDS:
        name = name.replace("_", "-")
        command = cli.commands[name]
        helps[name] = command.get_help(click.Context(command, info_name=f"rnnconv {name}", terminal_width=100))
    return helps


HELPS = _helps()
# An example that exits 1 on purpose: `check` reports what it found with exit 1.
EXAMPLE_EXIT = {"check": 1}


def _example(help_text: str) -> str:
    lines = help_text.splitlines()
    found = [i for i, line in enumerate(lines) if line.strip().startswith("Example:")]
    assert len(found) == 1, "one `Example:` line"
    i = found[0]
    assert i + 1 == len(lines) or not lines[i + 1].strip(), "the example is one line, not wrapped"
    return lines[i].strip()[len("Example:"):].strip()


@pytest.mark.parametrize("name", list(HELPS))
def test_help_example_runs_as_written(name, tmp_path, monkeypatch):
    """From the repository root, on the shipped fixtures (here: a folder holding only `fixtures`), in this
    process as the console script runs it."""
    from tests.conftest import run_cli

    example = _example(HELPS[name])
    words = shlex.split(example)
    assert words[0] == "rnnconv" and (name == "rnnconv" or words[1] == name), example
    reads = [w for before, w in zip(["", *words], words)
             if before not in ("-o", "--output", "--out-dir", "--report") and re.search(r"\.(onnx|xml)$", w)]
    assert reads and all(w.startswith("fixtures/") for w in reads), f"{example}: reads what is not shipped"
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(words[1:])
    output = (out + err).splitlines()
    assert sorted(p.name for p in tmp_path.iterdir()) in (["fixtures"], ["fixtures", "out"])
    assert code == EXAMPLE_EXIT.get(name, 0), "\n".join(output)
    assert not any(line.startswith("rnnconv: error") for line in output), "\n".join(output)


@pytest.mark.parametrize("name", list(HELPS))
def test_help_usage_names_what_the_text_names(name):
    """Every argument the usage line names is one the text speaks of, and the text names no other in capitals."""
    from rnnconv.cli import cli

    command = cli if name == "rnnconv" else cli.commands[name]
    arguments = {p.human_readable_name.rstrip(".") for p in command.params if isinstance(p, click.Argument)}
    usage = HELPS[name].splitlines()[0]
    text = command.help or ""
    for argument in arguments:
        assert argument in usage and argument in text, argument
    metavars = {m for p in command.params if isinstance(p, click.Option) and p.metavar
                for m in re.findall(r"[A-Z][A-Z_]+", p.metavar)}
    capitals = set(re.findall(r"\b[A-Z][A-Z_]{2,}\b(?![.\w])", text)) - arguments - metavars
    assert capitals <= KNOWN_CAPITALS, capitals


# Capitalized words of the help texts that are names of things, not of arguments.
KNOWN_CAPITALS = {"ONNX", "GRU", "LSTM", "RNN", "CPU", "JSON", "DIR", "IR", "STFT"}


# -- facts the pages and the help quote, against the code that holds them -----------------------------------------

def _page(name: str) -> str:
    return (ROOT / name).read_text()


def test_docs_and_help_quote_the_tolerance_policy():
    from rnnconv.verification.tolerance import DEQUANTIZED_ATOL, DEQUANTIZED_RTOL, TOLERANCES

    rows = re.findall(r"^\| (\w+) \| ([\d.e-]+) \| ([\d.e-]+) \|$", _page("docs/verification.md"), flags=re.M)
    assert {k: (float(a), float(r)) for k, a, r in rows} == TOLERANCES
    said = re.findall(r"(b?float\d+) ([\d.]+e-\d+)", HELPS["verify"])  # "float64 1e-7, ... (atol and rtol alike)"
    assert {k: (float(x), float(x)) for k, x in said} == {k: v for k, v in TOLERANCES.items() if k != "dequantized"}
    assert f"atol {DEQUANTIZED_ATOL:g} + rtol {DEQUANTIZED_RTOL:g}" in " ".join(HELPS["dequantize"].split())


def test_docs_count_the_op_table():
    from rnnconv.dialects.openvino import ops

    text = " ".join(_page("docs/openvino.md").split())
    assert f"({len(ops.TABLE)} ONNX op types" in text
    assert f"({len(ops.REVERSE)} IR layer types" in text


def test_docs_list_every_exit_code():
    from rnnconv.errors import EXIT_CODES, exit_codes_help

    section = _page("docs/errors.md").split("\n## ", 1)[0]
    assert {int(c) for c in re.findall(r"^\| (\d+) \|", section, flags=re.M)} == set(EXIT_CODES)
    assert exit_codes_help() in " ".join(README.read_text().split()), "the README's one line is --help's"
