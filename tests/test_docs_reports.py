"""docs/reports.md shows real output: every ```console block that starts with `$ pcapq ...`, and
every ````markdown block after its command, is what that command prints today (a terminal of
100 columns, run from the repository). When a report changes on purpose, regenerate the block."""

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


def _blocks() -> list[tuple[str, str]]:
    text = DOC.read_text()
    return BLOCK.findall(text) + MARKDOWN.findall(text)


def test_doc_has_console_blocks():
    assert len(_blocks()) >= 9


@pytest.mark.parametrize("command, shown", _blocks(), ids=[c for c, _ in _blocks()])
def test_doc_output_is_current(command, shown):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["COLUMNS"] = "100"
    proc = subprocess.run(shlex.split(command), capture_output=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    got = "\n".join(line.rstrip() for line in proc.stdout.decode().splitlines()).strip("\n")
    assert got == shown.strip("\n")
