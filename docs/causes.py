#!/usr/bin/env python3
"""Writes the tables of causes in the docs from the registry (src/pcapq/causes/): in
docs/diagnosis.md the causes with their rules and their materiality (the blocks between
`<!-- causes -->` and `<!-- /causes -->`, and `<!-- materiality -->` and `<!-- /materiality -->`) and
the facts the core declares with their rules (`<!-- facts -->`),
in docs/json.md the values of a finding's `cause` (`<!-- json-causes -->`), and in
docs/evidence.md the counters that confirm each cause (`<!-- counters -->`).

    python3 docs/causes.py           # rewrite the table
    python3 docs/causes.py --check   # exit 1 if it is out of date (tests/test_causes_doc.py)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DIAGNOSIS = REPO / "docs" / "diagnosis.md"
JSON = REPO / "docs" / "json.md"
EVIDENCE = REPO / "docs" / "evidence.md"


def block(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- {name} -->\n)(.*?)(<!-- /{name} -->)", re.DOTALL)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table() -> str:
    from pcapq.causes.proxy_log import LINES
    from pcapq.causes.registry import CAUSES

    rows = ["| cause | scope | evidence it needs | exclusions it checks | confidence | what would disprove it | what the proxy logged | kernel or RFC |",
            "|---|---|---|---|---|---|---|---|"]
    for c in CAUSES.values():
        rows.append("| " + " | ".join([
            f"`{c.slug}` ({cell(c.title)})",
            c.scope,
            cell(c.evidence),
            "; ".join(cell(e) for e in c.exclusions) or "-",
            cell(c.confidence) or "-",
            "; ".join(cell(d) for d in c.disproved_by) or "-",
            "; ".join(cell(LINES[k]) for k in c.proxy_log) or "-",
            cell(c.kernel) or "-",
        ]) + " |")
    return "\n".join(rows) + "\n"


def materiality_table() -> str:
    from pcapq.causes.registry import CAUSES

    rows = ["| cause | a panel when | why |", "|---|---|---|"]
    for c in CAUSES.values():
        rows.append(f"| `{c.slug}` | {cell(c.materiality.words())} | {cell(c.materiality.reason)} |")
    return "\n".join(rows) + "\n"


def json_table() -> str:
    from pcapq.causes.registry import CAUSES

    rows = ["| `cause` | title | scope |", "|---|---|---|"]
    for c in CAUSES.values():
        rows.append(f"| `{c.slug}` | {cell(c.title)} | {c.scope} |")
    return "\n".join(rows) + "\n"


def facts_table() -> str:
    """docs/diagnosis.md: each fact the core declares, with the rule in words declared with it
    (`VOCABULARY["fact_rules"]`, src/detect/facts.rs)."""
    from pcapq._core import VOCABULARY

    rows = ["| fact | rule |", "|---|---|"]
    rows += [f"| `{fact}` | {cell(rule)} |" for fact, rule in VOCABULARY["fact_rules"].items()]
    return "\n".join(rows) + "\n"


def counters_table() -> str:
    """docs/evidence.md: per cause, the counters whose rise confirms a finding and what it means
    when none rose (`Cause.counters`)."""
    from pcapq.causes.registry import CAUSES

    rows = ["| finding | confirmed by | contradicted by |", "|---------|--------------|-----------------|"]
    for c in CAUSES.values():
        if c.counters is None:
            continue
        names = [f"`{n}`" for n in c.counters.rise]
        rose = (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]) + " moved"
        if c.counters.cleared_says:
            flat = ("it did not: " if len(names) == 1 else "none of them did: ") + c.counters.cleared_says
        elif c.counters.none_rose:
            flat = ("it did not: " if len(names) == 1 else "none of them did: ") + c.counters.none_rose
        else:
            flat = "-"
        rows.append(f"| `{c.slug}` | {cell(rose)} | {cell(flat)} |")
    return "\n".join(rows) + "\n"


# Each document and the blocks written in it.
BLOCKS = ((DIAGNOSIS, (("causes", table), ("materiality", materiality_table), ("facts", facts_table))), (JSON, (("json-causes", json_table),)),
          (EVIDENCE, (("counters", counters_table),)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    stale = []
    for doc, blocks in BLOCKS:
        text = doc.read_text()
        new = text
        for name, make in blocks:
            match = block(name).search(new)
            if not match:
                print(f"docs/{doc.name} has no <!-- {name} --> block", file=sys.stderr)
                return 1
            new = new[: match.start(2)] + make() + new[match.end(2):]
        if new == text:
            continue
        if args.check:
            stale.append(f"docs/{doc.name}")
        else:
            doc.write_text(new)
    if stale:
        print(f"{', '.join(stale)}: a table of causes is out of date; run python3 docs/causes.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
