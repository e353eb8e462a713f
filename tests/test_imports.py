"""No import cycles: among the Python modules of src/pcapq (imports inside functions and those
for the type checker alone included) and among its folders; and in the core among the files and
folders of every folder of src/ (`use`, `crate::` and `super::` paths, a name re-exported by a
mod.rs counted as the file it comes from). A cycle is two modules each needing the other: one
job split in two, or a fact in the wrong one. And the core's layers in the order src/lib.rs
states: a layer imports none after it.

Test-only code is left out of the core's graph: items under `#[cfg(test)]` (the unit tests at
the end of a file) and the files only tests compile (`TEST_ONLY_FILES`); the edges against the
layer order that test code alone makes are named in `TEST_ONLY_UPWARD`."""

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


# Files compiled only for tests (`#[cfg(test)] mod x;`), as paths under src/.
TEST_ONLY_FILES = {"align/tests.rs", "flow/wire.rs"}

# Layer a's test code importing layer b, after it: `flow`'s unit tests drive the tracker with
# the census as its counter (`census::Census`) and read the outcomes it counted (`detect::Outcome`).
TEST_ONLY_UPWARD = {("flow", "census"), ("flow", "detect")}


def module_of(path: Path, src: Path) -> tuple[str, ...]:
    parts = path.relative_to(src).with_suffix("").parts
    return parts[:-1] if parts[-1] in ("mod", "lib") else parts


# Comments, and string and character literals: what names no module and may hold braces.
NOT_CODE = re.compile(r"""//[^\n]*|/\*.*?\*/|(?<!\w)r(#*)".*?"\1|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)'""", re.DOTALL)


def code_only(text: str) -> str:
    return NOT_CODE.sub(lambda m: '""' if m.group().endswith(('"', "#")) else "", text)


def split_tests(text: str) -> tuple[str, str]:
    """(the code, the test code): each item after `#[cfg(test)]`, to its closing brace or `;`."""
    code, tests, i = [], [], 0
    while (j := text.find("#[cfg(test)]", i)) >= 0:
        code.append(text[i:j])
        k, depth = j + len("#[cfg(test)]"), 0
        while k < len(text):
            c = text[k]
            k += 1
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            elif c == ";" and depth == 0:
                break
        tests.append(text[j:k])
        i = k
    code.append(text[i:])
    return "".join(code), "".join(tests)


TOKEN = re.compile(r"\s*(\w+|\*|\{)")


def use_tree(text: str, i: int) -> tuple[list[list[str]], int]:
    """The paths of `a::b::{c, d::e}` starting at `i`, and where it ends."""
    segs: list[str] = []
    while m := TOKEN.match(text, i):
        i = m.end()
        if m.group(1) == "*":
            break
        if m.group(1) == "{":
            paths = []
            while True:
                sub, i = use_tree(text, i)
                paths += [segs + s for s in sub]
                sep = re.compile(r"\s*(,\s*\}|,|\})").match(text, i)
                if not sep:
                    return paths, i
                i = sep.end()
                if sep.group(1) != ",":
                    return paths, i
        segs.append(m.group(1))
        if not (m := re.compile(r"\s*::").match(text, i)):
            break
        i = m.end()
    return [segs], i


def absolute(segs: list[str], here: tuple[str, ...]) -> tuple[str, ...]:
    base, rest = (), segs[1:]
    if segs[0] != "crate":
        base, rest = here, segs
        while rest and rest[0] in ("super", "self"):
            base = base[:-1] if rest[0] == "super" else base
            rest = rest[1:]
    return tuple(base) + tuple(rest)


class Core:
    """Every module of the core and the paths each names, its code's and its tests' apart."""

    def __init__(self, src: Path):
        self.src = src
        self.texts = {module_of(p, src): code_only(p.read_text()) for p in sorted(src.rglob("*.rs"))}
        self.children: dict[tuple[str, ...], set[str]] = {}
        for m in self.texts:
            for k in range(len(m)):
                self.children.setdefault(m[:k], set()).add(m[k])
        self.test_only = {m + (d,) for m, t in self.texts.items()
                          for d in re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;", t)}
        # A name a mod.rs re-exports (`pub use child::...::Name`) stands for that child.
        self.reexports = {}
        for m, t in self.texts.items():
            for use in re.finditer(r"pub(?:\([\w:]+\))?\s+use\s+", split_tests(t)[0]):
                for segs in use_tree(t, use.end())[0]:
                    if segs and segs[0] in self.children.get(m, ()):
                        self.reexports[(m, segs[-1])] = segs[0]
        self.code: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
        self.tests: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
        for m, t in self.texts.items():
            code, tests = split_tests(t)
            if self.is_test_only(m):
                code, tests = "", t
            self.code[m], self.tests[m] = self.paths(code, m), self.paths(tests, m)

    def is_test_only(self, m: tuple[str, ...]) -> bool:
        return any(m[: k + 1] in self.test_only for k in range(len(m)))

    def paths(self, text: str, here: tuple[str, ...]) -> set[tuple[str, ...]]:
        found = set()
        for start in re.finditer(r"(?<![\w:])(?:crate|super|self)::", text):
            for segs in use_tree(text, start.start())[0]:
                path = absolute(segs, here)
                canon = []
                for i, s in enumerate(path):
                    if s not in self.children.get(path[:i], ()) and (path[:i], s) in self.reexports:
                        canon.append(self.reexports[(path[:i], s)])
                    canon.append(s)
                found.add(tuple(canon))
        return found

    def graph(self, folder: tuple[str, ...], tests: bool = False) -> dict[str, set[str]]:
        """Which files and folders of `folder` each one names (its mod.rs, the parent, aside)."""
        n = len(folder)
        nodes = {c for c in self.children.get(folder, ()) if not self.is_test_only(folder + (c,))}
        graph: dict[str, set[str]] = {c: set() for c in nodes}
        for m, paths in (self.tests if tests else self.code).items():
            if len(m) > n and m[:n] == folder and m[n] in nodes:
                graph[m[n]] |= {p[n] for p in paths if len(p) > n and p[:n] == folder and p[n] in nodes and p[n] != m[n]}
        return graph

    def folders(self) -> list[tuple[str, ...]]:
        return sorted(m for m in self.children if self.src.joinpath(*m).is_dir())


def layers() -> list[str]:
    """The layers in the order src/lib.rs lists them (`//! 1. `reader`: ...`)."""
    return re.findall(r"^//! \d+\. `(\w+)`", (REPO / "src" / "lib.rs").read_text(), re.MULTILINE)


def upward(graph: dict[str, set[str]], order: list[str]) -> set[tuple[str, str]]:
    return {(a, b) for a, bs in graph.items() for b in bs if order.index(b) > order.index(a)}


def test_no_python_import_cycle():
    assert cycles(python_imports()) == []


def test_folders_import_downward_only():
    """pcapq.finding below pcapq.causes below pcapq.diagnose below pcapq.report, and so on: no
    two folders (or top-level modules) import each other, even through others."""
    assert cycles(folder_imports(python_imports())) == []


def test_the_core_imports_no_folder_that_imports_it():
    """The core builds pcapq.lean's named tuples: that module is below it and imports nothing of
    pcapq, so no folder both imports the core and is imported by it."""
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
    assert python_imports(with_core=True)["pcapq._core"] == {"pcapq.lean"}


def test_no_cycle_in_any_folder_of_the_core():
    core = Core(REPO / "src")
    assert {"/".join(f) or "src": cycles(core.graph(f)) for f in core.folders()} == {"/".join(f) or "src": [] for f in core.folders()}


def test_layers_import_only_the_ones_before_them():
    core = Core(REPO / "src")
    order = layers()
    assert sorted(order) == sorted(core.children[()] - {"lib"}), "src/lib.rs lists every layer once"
    assert upward(core.graph(()), order) == set()
    assert upward(core.graph((), tests=True), order) == TEST_ONLY_UPWARD


def test_test_only_files_are_the_named_ones():
    core = Core(REPO / "src")
    assert {"/".join(m) + ".rs" for m in core.test_only} == TEST_ONLY_FILES


def test_a_cycle_among_rust_files_is_found(tmp_path):
    files = {
        "lib.rs": "//! 1. `flow`: connections\npub mod flow;\n",
        "flow/mod.rs": "pub mod key;\npub mod seq;\npub mod store;\npub use key::FlowKey;\n",
        "flow/key.rs": "use super::store::{table::Table, Counter};\n",
        # Through the re-export: `FlowKey` is key.rs's.
        "flow/seq.rs": "use crate::flow::FlowKey;\n",
        "flow/store/mod.rs": "pub mod records;\npub mod table;\n",
        "flow/store/records.rs": "// super::super::seq, in a comment\nconst S: &str = \"super::super::seq\";\n",
        # Test code, braces in literals or not, is not the code's.
        "flow/store/table.rs": "#[cfg(test)]\nmod tests {\n    const B: char = '}';\n    const S: &str = \"}\";\n    use crate::flow::key::Key;\n}\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    core = Core(tmp_path)
    assert core.graph(("flow",)) == {"key": {"store"}, "seq": {"key"}, "store": set()}
    assert core.graph(("flow",), tests=True) == {"key": set(), "seq": set(), "store": {"key"}}
    assert cycles(core.graph(("flow",))) == []
    (tmp_path / "flow/store/records.rs").write_text("use crate::flow::seq::SeqNumber;\n")
    assert cycles(Core(tmp_path).graph(("flow",))) == [["key", "seq", "store"]]


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
