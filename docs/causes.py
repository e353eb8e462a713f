#!/usr/bin/env python3
"""Writes the table of causes and the table of their materiality in docs/diagnosis.md from the
registry (src/pcapq/causes/): the blocks between `<!-- causes -->` and `<!-- /causes -->`, and
between `<!-- materiality -->` and `<!-- /materiality -->`.

    python3 docs/causes.py           # rewrite the table
    python3 docs/causes.py --check   # exit 1 if it is out of date (tests/test_causes_doc.py)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "diagnosis.md"


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = DOC.read_text()
    new = text
    for name, make in (("causes", table), ("materiality", materiality_table)):
        match = block(name).search(new)
        if not match:
            print(f"docs/diagnosis.md has no <!-- {name} --> block", file=sys.stderr)
            return 1
        new = new[: match.start(2)] + make() + new[match.end(2):]
    if args.check:
        if new != text:
            print("docs/diagnosis.md: the table of causes or of materiality is out of date; run python3 docs/causes.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
