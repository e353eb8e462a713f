"""The core owns the vocabulary; the stub's Literal types and the Python side mirror it."""

import typing
from pathlib import Path

import pcapq._core as core
from pcapq.causes.registry import CAUSES, MODULES, SLUGS


def _stub_tool():
    """tools/stub_literals.py, which writes the stub's Literal types: its TYPES are the ones checked here."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "tools" / "stub_literals.py"
    spec = importlib.util.spec_from_file_location("stub_literals", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# VOCABULARY key -> the stub's type alias.
STUB_TYPES: dict[str, str] = _stub_tool().TYPES


def _stub_literals() -> dict[str, list[str]]:
    """The Literal types of src/pcapq/_core.pyi, read by executing its type aliases."""
    import pathlib

    text = pathlib.Path(core.__file__).with_name("_core.pyi").read_text()
    namespace: dict = {"Literal": typing.Literal}
    for name in STUB_TYPES.values():
        start = text.index(f"\n{name} = Literal[") + 1
        end = text.index("]", start) + 1
        exec(text[start:end], namespace)
    return {key: list(typing.get_args(namespace[name])) for key, name in STUB_TYPES.items()}


def test_stub_literals_match_the_core():
    stub = _stub_literals()
    for key in STUB_TYPES:
        assert stub[key] == list(core.VOCABULARY[key]), key


def test_lean_literals_match_the_core():
    """The two words pcapq.lean declares for the stub (the named tuples' fields)."""
    from pcapq import lean

    for key, name in _stub_tool().LEAN_TYPES.items():
        assert list(typing.get_args(getattr(lean, name))) == list(core.VOCABULARY[key]), key


def test_stub_literals_are_written_from_the_core():
    """tools/stub_literals.py writes them: a word declared once in the core reaches the stub
    without a hand edit, and the tool's types are the ones checked here."""
    import subprocess
    import sys

    tool = Path(__file__).resolve().parent.parent / "tools" / "stub_literals.py"
    proc = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert set(STUB_TYPES) <= set(core.VOCABULARY)


def test_icmp_facts_are_the_core_s_and_name_every_kind_but_too_big_once():
    from pcapq.causes.icmp_words import CLASSES, IcmpFact

    facts = core.VOCABULARY["icmp_facts"]
    assert list(facts) == list(typing.get_args(IcmpFact))
    assert {fact: set(kinds) for fact, kinds in facts.items()} == CLASSES
    named = [kind for kinds in facts.values() for kind in kinds]
    assert len(named) == len(set(named))
    assert set(core.VOCABULARY["icmp_kinds"]) - set(named) == {"frag_needed", "packet_too_big"}


def test_marks_are_outcomes_then_symptoms_then_facts():
    v = core.VOCABULARY
    assert v["marks"] == v["outcomes"] + v["symptoms"] + v["facts"]
    assert len(set(v["marks"])) == len(v["marks"])


def test_every_cause_is_registered_once_with_its_words():
    assert len(SLUGS) == len(MODULES) == len(set(SLUGS))
    for slug, cause in CAUSES.items():
        assert cause.slug == slug and cause.title and cause.phrase and cause.advice and cause.evidence
        # When a finding earns a panel, and why (tests/test_materiality.py checks the thresholds).
        assert cause.materiality.words() and cause.materiality.reason
        assert cause.scope in ("capture", "episode", "server", "evidence")
    precedences = [c.precedence for c in CAUSES.values()]
    assert precedences == sorted(precedences) and len(set(precedences)) == len(precedences)


def test_rules_name_only_marks_the_core_knows():
    """Every string a rule passes to select or count is a mark (the core raises otherwise, but only
    when the rule runs): read them from the modules' source."""
    import inspect
    import re

    marks = set(core.VOCABULARY["marks"])
    for module in MODULES:
        source = inspect.getsource(module)
        for group in re.findall(r"(?:all_of|any_of|none_of)=\[([^\]]*)\]", source):
            for name in re.findall(r'"([a-z_]+)"', group):
                assert name in marks, f"{module.__name__}: {name}"
        for constant in re.findall(r'^[A-Z_]+(?:: [^=\n]+)? = \[([^\]]*)\]', source, re.M):
            for name in re.findall(r'"([a-z_]+)"', constant):
                assert name in marks, f"{module.__name__}: {name}"


def test_every_check_is_explained_in_the_diagnosis_doc():
    """Each check of a sign's explanations (src/detect/checks.rs) has its row in docs/diagnosis.md,
    its sentences and its citation."""
    from pcapq._core import VOCABULARY

    doc = (Path(__file__).resolve().parent.parent / "docs" / "diagnosis.md").read_text()
    assert VOCABULARY["checks"], "no checks exported"
    for name in VOCABULARY["checks"]:
        assert f"| `{name}` |" in doc, name
        text = VOCABULARY["check_texts"][name]
        assert text["held"] and text["failed"] and text["cites"], name


def test_every_fact_declares_its_rule_in_words():
    """Each fact carries its rule in words where it is declared (src/detect/facts.rs); docs/causes.py
    writes docs/diagnosis.md's table of facts from them (tests/test_causes_doc.py)."""
    rules = core.VOCABULARY["fact_rules"]
    assert list(rules) == list(core.VOCABULARY["facts"])
    assert all(len(rule) > 20 for rule in rules.values()), [f for f, r in rules.items() if len(r) <= 20]
