#!/usr/bin/env python3
"""Regenerates the figures of docs/guide.md from the catalog: every block between

    <!-- figure: COMMAND -->
    ```text
    ...
    ```
    <!-- /figure -->

is replaced by COMMAND's output, run with bash from the repository root (COLUMNS=100, no colour),
and every picture

    <!-- picture: docs/figures/NAME.svg: COMMAND -->

is written from COMMAND's output (an SVG ladder from `pcapq explain --format svg`) to that file.
Exit status 1 is accepted (`pcapq analyze` found a problem); an empty output is not.

    python3 docs/figures.py           # rewrite the figures
    python3 docs/figures.py --check   # exit 1 if a figure is out of date (tests/test_guide.py)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "guide.md"
PICTURE = re.compile(r"<!-- picture: (?P<path>docs/figures/[\w.-]+\.svg): (?P<command>.+?) -->")
FIGURE = re.compile(r"(<!-- figure: (?P<command>.+?) -->\n```text\n)(?P<body>.*?)(```\n<!-- /figure -->)", re.DOTALL)


def run(command: str) -> str:
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1", TERM="dumb")
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    # 1: `pcapq analyze` found a problem, which is what most figures show.
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise SystemExit(f"figure command failed ({proc.returncode}): {command}\n{proc.stderr}")
    return "\n".join(line.rstrip() for line in proc.stdout.rstrip("\n").splitlines()) + "\n"


def render(text: str) -> str:
    return FIGURE.sub(lambda m: m.group(1) + run(m.group("command")) + m.group(4), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the figures are up to date")
    args = parser.parse_args()
    text = GUIDE.read_text()
    fresh = render(text)
    pictures = {REPO / m.group("path"): run(m.group("command")) for m in PICTURE.finditer(text)}
    if args.check:
        stale = [str(path.relative_to(REPO)) for path, svg in pictures.items()
                 if not path.exists() or path.read_text() != svg]
        if fresh != text or stale:
            what = ", ".join(["docs/guide.md"] * (fresh != text) + stale)
            print(f"{what}: figures out of date; run python3 docs/figures.py", file=sys.stderr)
            return 1
        return 0
    GUIDE.write_text(fresh)
    for path, svg in pictures.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
