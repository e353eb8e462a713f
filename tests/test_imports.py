"""No import cycles: among the Python modules of src/pcapq (imports inside functions and those
for the type checker alone included), among its folders, and among the sibling modules of the
core's src/detect. A cycle is two modules each needing the other: one job split in two, or a
fact in the wrong one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import REPO


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def python_modules(with_core: bool = False) -> dict[str, Path]:
    """Every module of src/pcapq by its dotted name (a package by its own name); `with_core`:
    the compiled core too, as its stub says it."""
    root = REPO / "src"
    modules = {}
    for p in (root / "pcapq").rglob("*.py"):
        parts = p.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    if with_core:
        modules["pcapq._core"] = root / "pcapq" / "_core.pyi"
    return modules


def imported(node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The modules of src/pcapq one node imports: `import`, `from ... import`, and
    `import_module("pcapq....")` (an f-string names every module under its constant prefix)."""
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pcapq"):
        found = set()
        for alias in node.names:
            full = f"{node.module}.{alias.name}"
            found.add(full if full in modules else node.module)
        return found & modules.keys()
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in modules}
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "import_module" and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return {arg.value} & modules.keys()
        if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
            prefix = str(arg.values[0].value)
            return {m for m in modules if m.startswith(prefix)}
    return set()


def python_imports(with_core: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of src/pcapq it imports: at the top, inside functions, and for the
    type checker alone (a cycle there is still two modules each needing the other's names).
    `with_core`: the compiled core is a module too, importing what its stub and its bindings'
    `py.import("pcapq....")` name."""
    modules = python_modules(with_core)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            graph[name] |= imported(node, modules) - {name}
    if with_core:
        for rs in (REPO / "src" / "bindings").glob("*.rs"):
            graph["pcapq._core"] |= set(re.findall(r'py\.import\("(pcapq[\w.]*)"\)', rs.read_text())) & modules.keys()
    return graph


def folder(module: str) -> str:
    """The folder a module is in, as the graph of folders counts it: a subpackage of pcapq
    (pcapq.report), or a module at the top (pcapq.cli) as a folder of its own."""
    return ".".join(module.split(".")[:2])


def folder_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Folder -> the folders its modules import. No edge is excused: not even for tests."""
    folders: dict[str, set[str]] = {folder(m): set() for m in graph}
    for module, targets in graph.items():
        folders[folder(module)] |= {folder(t) for t in targets} - {folder(module)}
    return folders


def rust_uses(folder: Path) -> dict[str, set[str]]:
    """Which sibling modules each module of `folder` names (`super::x`, `crate::detect::x`); the
    parent (mod.rs) declares them all and is left out."""
    siblings = {p.stem for p in folder.glob("*.rs")} - {"mod"}
    crate_path = "crate::" + "::".join(folder.relative_to(REPO / "src").parts)
    pattern = re.compile(rf"(?:\bsuper|{re.escape(crate_path)})::(\w+)")
    graph: dict[str, set[str]] = {}
    for name in siblings:
        # The unit tests (a `#[cfg(test)] mod tests` at the end of the file) may use any module.
        text = (folder / f"{name}.rs").read_text().split("#[cfg(test)]\nmod tests", 1)[0]
        graph[name] = {m for m in pattern.findall(text) if m in siblings and m != name}
    return graph


def test_no_python_import_cycle():
    assert cycles(python_imports()) == []


def test_folders_import_downward_only():
    """pcapq.finding below pcapq.causes below pcapq.diagnose below pcapq.report, and so on: no
    two folders (or top-level modules) import each other, even through others."""
    assert cycles(folder_imports(python_imports())) == []


@pytest.mark.xfail(strict=True, reason="the core makes pcapq.diagnose.lean's named tuples (src/bindings/mod.rs), and "
                   "pcapq.diagnose imports the core: lean belongs below the core, which moves the bindings' import")
def test_the_core_imports_no_folder_that_imports_it():
    assert cycles(folder_imports(python_imports(with_core=True))) == []


def test_the_graphs_see_every_kind_of_import():
    graph = python_imports()
    # A deferred import (inside a function), one for the type checker alone, and the registry's
    # import_module of each cause.
    assert "pcapq.diagnose.weigh_evidence" in graph["pcapq.commands.analyze"]
    assert "pcapq.two_points" in graph["pcapq.finding"]
    assert "pcapq.causes.closed_port" in graph["pcapq.causes.registry"]
    assert "pcapq.causes" in folder_imports(graph)["pcapq.diagnose"]
    # The core's own: its stub's import and its bindings' py.import.
    assert python_imports(with_core=True)["pcapq._core"] == {"pcapq.diagnose.lean"}


def test_no_cycle_among_detects_modules():
    assert cycles(rust_uses(REPO / "src" / "detect")) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
