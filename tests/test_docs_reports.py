"""docs/reports.md shows real output: every ```console block that starts with `$ pcapq ...`, and
every ````markdown block after its command, is what that command prints today (a terminal of
100 columns, run from the repository). When a report changes on purpose, regenerate the blocks: `python tests/test_docs_reports.py`."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest
from conftest import REPO

DOC = REPO / "docs" / "reports.md"
BLOCK = re.compile(r"```console\n\$ (pcapq [^\n]+)\n(.*?)```", re.DOTALL)
# Markdown output, after the sentence that gives its command: `pcapq ... --format markdown ...`:
MARKDOWN = re.compile(r"`(pcapq [^`]*--format markdown[^`]*)`\)?:\n\n````markdown\n(.*?)````", re.DOTALL)


def _run(command: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["COLUMNS"] = "100"
    return subprocess.run(shlex.split(command), capture_output=True, cwd=REPO, env=env, timeout=120)


def _printed(proc: subprocess.CompletedProcess[bytes]) -> str:
    return "\n".join(line.rstrip() for line in proc.stdout.decode().splitlines()).strip("\n")


def _blocks() -> list[tuple[str, str]]:
    text = DOC.read_text()
    return BLOCK.findall(text) + MARKDOWN.findall(text)


def test_doc_has_console_blocks():
    assert len(_blocks()) >= 9


@pytest.mark.parametrize("command, shown", _blocks(), ids=[c for c, _ in _blocks()])
def test_doc_output_is_current(command, shown):
    proc = _run(command)
    assert proc.returncode in (0, 1), proc.stderr
    assert _printed(proc) == shown.strip("\n")


def refresh() -> None:
    """Rewrites every block of the doc with what its command prints now."""

    def replace(match: re.Match[str]) -> str:
        start, end = match.span(2)
        return match.group(0)[: start - match.start()] + _printed(_run(match.group(1))) + "\n" + match.group(0)[end - match.start() :]

    text = DOC.read_text()
    text = MARKDOWN.sub(replace, BLOCK.sub(replace, text))
    DOC.write_text(text)


if __name__ == "__main__":
    refresh()
