"""No import cycles: among the Python modules of src/pcapq (imports inside functions included,
those for the type checker alone aside), and among the sibling modules of the core's
src/detect. A cycle is two modules each needing the other: one job split in two, or a fact in
the wrong one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

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


def python_imports() -> dict[str, set[str]]:
    root = REPO / "src"
    modules = {}
    for p in (root / "pcapq").rglob("*.py"):
        parts = p.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                       for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pcapq"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    graph[name].add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
    return graph


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


def test_no_cycle_among_detects_modules():
    assert cycles(rust_uses(REPO / "src" / "detect")) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
