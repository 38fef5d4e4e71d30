"""The package's floors, checked on every import statement (function-local ones included): each module imports
only from floors below its own, commands never import each other, dialects hold facts and translations only, and
onnx / onnxruntime / openvino are imported where the rule in rnnconv/io/__init__.py says."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rnnconv

PACKAGE = Path(rnnconv.__file__).resolve().parent  # the source tree, or the installed wheel (CI's wheel job)

# Lowest floor first: a module may import from its own room (same package) and from lower floors only.
FLOORS = ["rnnconv.errors", "rnnconv.activations", "rnnconv.layer", "rnnconv.schemas", "rnnconv.io",
          "rnnconv.dialects", "rnnconv.engine", "rnnconv.passes", "rnnconv.runtimes", "rnnconv.verification",
          "rnnconv.conversion", "rnnconv.commands", "rnnconv.cli", "rnnconv.__main__"]
# Third-party runtimes: which rnnconv modules may import them.
ALLOWED = {
    "onnx": {"rnnconv.io.reading", "rnnconv.schemas", "rnnconv.engine.reference"},
    "onnxruntime": {"rnnconv.engine.onnxruntime_runtime", "rnnconv.engine.ort_worker"},
    # the runtime, and OpenVINO's ONNX import with rnnconv's recurrent mapping grafted in (the to-openvino route
    # for ops outside rnnconv's table)
    "openvino": {"rnnconv.engine.openvino_runtime", "rnnconv.dialects.openvino.frontend"},
}


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path, modules: dict[str, Path] = MODULES) -> list[tuple[str, int]]:
    """Every module an import statement in `path` names, wherever the statement stands: `from package import
    name` names the package (its __init__ runs and must define `name`), `from package import submodule` the
    submodule."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base
                                                                                                    else []))
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            if len(submodules) < len(node.names) or base not in modules:  # a name the package itself defines
                found.append((base, node.lineno))
            found += [(m, node.lineno) for m in submodules]
    return found


def _floor(module: str) -> tuple[int, str]:
    for level, room in enumerate(FLOORS):
        if module == room or module.startswith(room + "."):
            return level, room
    raise AssertionError(f"{module} is on no floor: add it to FLOORS")


def _edges(modules: dict[str, Path] = MODULES, root: Path = PACKAGE.parent):
    for name, path in modules.items():
        for target, line in _imports(name, path, modules):
            yield name, target, f"{path.relative_to(root)}:{line}"


def test_every_module_has_a_floor():
    for name in MODULES:
        if name != "rnnconv":
            _floor(name)


def test_imports_go_down_or_stay_in_their_room():
    bad = []
    for src, dst, where in _edges():
        if not dst.startswith("rnnconv.") or dst not in MODULES:
            continue
        (a, room_a), (b, room_b) = _floor(src), _floor(dst)
        if room_a != room_b and b >= a:
            bad.append(f"{where}: {src} (floor {a}) imports {dst} (floor {b})")
    assert not bad, "\n".join(bad)


def _cycle(modules: dict[str, Path], root: Path) -> list[str]:
    """A cycle of imports among `modules` (files under `root`; empty: none)."""
    graph: dict[str, set[str]] = {}
    for src, dst, _ in _edges(modules, root):
        if dst in modules and dst != src:  # a package's __init__ counts too: importing it runs it
            graph.setdefault(src, set()).add(dst)
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt):] + [node, nxt] if nxt in stack else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, stack + [node]):
                return True
        state[node] = 2
        return False

    for module in sorted(graph):
        if state.get(module) is None and visit(module, []):
            break
    return cycle


def test_no_cycle_between_modules():
    """Also through a package's __init__: a module that imports its own package while the package imports it
    works only in one import order."""
    cycle = _cycle(MODULES, PACKAGE.parent)
    assert not cycle, " -> ".join(cycle)


def test_a_cycle_through_a_package_init_is_seen(tmp_path):
    """The check on a package made for it: cli/__init__.py imports cli/options.py, which reads a name cli/__init__.py
    defines (the cycle that once hid behind an exemption); importing a sibling submodule is no such cycle."""
    package = tmp_path / "pkg"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli" / "__init__.py").write_text("from pkg.cli.options import COMMANDS\nNAMES = ['x']\n")
    (package / "cli" / "run.py").write_text("from pkg.cli import options\n")
    (package / "cli" / "options.py").write_text("COMMANDS = []\n")
    assert _cycle(_modules(package), tmp_path) == []
    (package / "cli" / "options.py").write_text("def names():\n    from pkg.cli import NAMES\n    return NAMES\n")
    assert _cycle(_modules(package), tmp_path) == ["pkg.cli", "pkg.cli.options", "pkg.cli"]


def test_commands_do_not_import_each_other():
    bad = [f"{where}: {src} imports {dst}" for src, dst, where in _edges()
           if src.startswith("rnnconv.commands.") and dst.startswith("rnnconv.commands.")]
    assert not bad, "\n".join(bad)


def test_dialects_are_leaves():
    above = ("rnnconv.engine", "rnnconv.passes", "rnnconv.verification", "rnnconv.conversion", "rnnconv.commands",
             "rnnconv.cli", "rnnconv.runtimes")
    bad = [f"{where}: {src} imports {dst}" for src, dst, where in _edges()
           if src.startswith("rnnconv.dialects") and dst.startswith(above)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("library", sorted(ALLOWED))
def test_runtime_libraries_are_imported_in_their_places(library):
    bad = [f"{where}: {src}" for src, dst, where in _edges()
           if (dst == library or dst.startswith(library + ".")) and src not in ALLOWED[library]]
    assert not bad, f"{library} imported outside {sorted(ALLOWED[library])}:\n" + "\n".join(bad)


def test_no_module_over_600_lines():
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 600}
    assert not long, long
