#!/usr/bin/env python3
"""Writes the table of metrics in docs/monitoring.md from the table in src/pcapq/metrics.py: the
block between `<!-- metrics -->` and `<!-- /metrics -->`.

    python3 docs/metrics.py           # rewrite the table
    python3 docs/metrics.py --check   # exit 1 if it is out of date (tests/test_metrics.py)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent / "monitoring.md"
BLOCK = re.compile(r"(<!-- metrics -->\n)(.*?)(<!-- /metrics -->)", re.DOTALL)


def main() -> int:
    from pcapq.metrics import markdown_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = DOC.read_text()
    match = BLOCK.search(text)
    if not match:
        print("docs/monitoring.md has no <!-- metrics --> block", file=sys.stderr)
        return 1
    new = text[: match.start(2)] + markdown_table() + text[match.end(2):]
    if args.check:
        if new != text:
            print("docs/monitoring.md: the table of metrics is out of date; run python3 docs/metrics.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
