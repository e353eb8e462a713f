#!/usr/bin/env python3
"""Writes the `Literal` types of src/pcapq/_core.pyi (and of src/pcapq/lean.py, the named tuples
the core builds, whose two words the stub re-exports) from the core's vocabulary
(`_core.VOCABULARY`): the core declares each word once (src/slugs.rs), the stub follows.

    python3 tools/stub_literals.py           # rewrite them
    python3 tools/stub_literals.py --check   # exit 1 if one is out of date (tests/test_vocabulary.py)
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "pcapq"
STUB = PACKAGE / "_core.pyi"
LEAN = PACKAGE / "lean.py"

# VOCABULARY key -> the stub's type alias.
TYPES = {
    "outcomes": "Outcome",
    "symptoms": "Symptom",
    "facts": "Fact",
    "checks": "CheckName",
    "signs": "SignName",
    "event_kinds": "EventKind",
    "packet_roles": "PacketRole",
    "log_kinds": "LogKind",
    "log_shapes": "LogShape",
    "icmp_kinds": "IcmpKind",
    "live_signs": "LiveSign",
    "episode_events": "EpisodeEventKind",
}
# VOCABULARY key -> the type alias of pcapq.lean (the stub imports these from there).
LEAN_TYPES = {
    "schedules": "Schedule",
    "series_kinds": "SeriesKind",
}
# Each file and the words it declares.
FILES = {STUB: TYPES, LEAN: LEAN_TYPES}
WIDTH = 120


def literal(name: str, words: list[str]) -> str:
    """`Name = Literal["a", "b"]`, on one line when it fits, else wrapped four spaces in."""
    items = ", ".join(f'"{w}"' for w in words)
    one = f"{name} = Literal[{items}]"
    if len(one) <= WIDTH:
        return one
    body = textwrap.fill(items + ",", width=WIDTH, initial_indent="    ", subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)
    return f"{name} = Literal[\n{body}\n]"


def written(text: str, vocabulary: dict[str, list[str]], types: dict[str, str] = TYPES, path: Path = STUB) -> str:
    for key, name in types.items():
        pattern = re.compile(rf"^{name} = Literal\[.*?\]$", re.DOTALL | re.MULTILINE)
        if not pattern.search(text):
            raise SystemExit(f"{path}: no `{name} = Literal[...]`")
        text = pattern.sub(lambda _m: literal(name, list(vocabulary[key])), text, count=1)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the stub is out of date; write nothing")
    args = parser.parse_args()
    sys.path.insert(0, str(STUB.parent.parent))
    from pcapq._core import VOCABULARY

    stale = 0
    for path, types in FILES.items():
        text = path.read_text()
        new = written(text, VOCABULARY, types, path)
        if args.check:
            if new != text:
                print(f"{path} is out of date: run python3 tools/stub_literals.py", file=sys.stderr)
                stale = 1
        elif new != text:
            path.write_text(new)
    return stale


if __name__ == "__main__":
    sys.exit(main())
