"""A cause is one module plus one line in the registry: code outside src/pcapq/causes/ never
branches on a cause's slug, and a cause module never spells its own slug a second time. Read
with `ast`, so neither a comment nor a symptom that shares a slug's name (`mtu_black_hole`)
counts."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

from pcapq.causes.registry import NAMES, SLUGS

PACKAGE = REPO / "src" / "pcapq"
CAUSES_DIR = PACKAGE / "causes"
# What holds a cause's slug: `cause`, `slug`, `x.cause`, `x.slug`, `x["cause"]`.
CAUSE_WORDS = {"cause", "slug"}


def _names_a_cause(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in CAUSE_WORDS
    if isinstance(node, ast.Attribute):
        return node.attr in CAUSE_WORDS
    if isinstance(node, ast.Subscript):
        key = node.slice
        return isinstance(key, ast.Constant) and key.value in CAUSE_WORDS
    return False


def _slugs_in(node: ast.expr) -> list[str]:
    """The slugs `node` spells: a string, or strings in a tuple, list or set."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [x.value for x in items if isinstance(x, ast.Constant) and x.value in SLUGS]


def slug_branches(source: str) -> list[tuple[int, str]]:
    """(line, slug) of each comparison of a cause to a slug's literal, and of each dict keyed by
    a slug's literal (a table per cause)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_names_a_cause(x) for x in operands):
                found += [(node.lineno, slug) for x in operands for slug in _slugs_in(x)]
        elif isinstance(node, ast.Dict):
            found += [(node.lineno, slug) for key in node.keys if key is not None for slug in _slugs_in(key)]
    return sorted(found)


def test_the_check_sees_each_form_of_branch() -> None:
    source = (
        'if f.cause == "closed_port": pass\n'
        'if ctx.cause in ("accept_queue_overflow", "listen_drops"): pass\n'
        'if "network_loss" != cause: pass\n'
        'if d["cause"] in {"syn_flood"}: pass\n'
        'WORDS = {"server_closed": "..."}\n'
        'if conn["symptoms"] == "mtu_black_hole" or f.cause == "no_such_cause": pass\n'
    )
    assert slug_branches(source) == [(1, "closed_port"), (2, "accept_queue_overflow"), (2, "listen_drops"),
                                     (3, "network_loss"), (4, "syn_flood"), (5, "server_closed")]


def test_no_code_outside_the_causes_branches_on_a_cause() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if CAUSES_DIR in path.parents:
            continue
        found += [f"{path.relative_to(REPO)}:{line}: {slug}" for line, slug in slug_branches(path.read_text())]
    assert not found, "declare it on the cause (src/pcapq/causes/cause.py) instead:\n" + "\n".join(found)


def _literal_causes_of_findings(source: str) -> list[int]:
    """Lines where a `Finding(...)` gets its cause as a string literal (positional or `cause=`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Finding":
            given = [node.args[0]] if node.args else []
            given += [k.value for k in node.keywords if k.arg == "cause"]
            lines += [x.lineno for x in given if isinstance(x, ast.Constant) and isinstance(x.value, str)]
    return lines


def test_cause_modules_name_their_findings_with_their_cause() -> None:
    found = [f"{path.name}:{line}" for path in sorted(CAUSES_DIR.glob("*.py"))
             for line in _literal_causes_of_findings(path.read_text())]
    assert not found, "use CAUSE.slug:\n" + "\n".join(found)
    assert _literal_causes_of_findings('Finding("syn_flood", t)\nFinding(cause="port_scan")\nFinding(CAUSE.slug)') == [1, 2]


def _holds_a_cause(path: Path) -> bool:
    return any(isinstance(node, (ast.Assign, ast.AnnAssign)) and "CAUSE" in
               [t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)]
               for node in ast.parse(path.read_text()).body)


def test_every_module_with_a_cause_is_registered() -> None:
    holding = sorted(p.stem for p in CAUSES_DIR.glob("*.py") if _holds_a_cause(p))
    assert holding == sorted(NAMES)
