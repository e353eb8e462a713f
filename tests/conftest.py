"""Shared fixtures. Test captures are crafted per test in tmp_path (see craft.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

REPO = Path(__file__).resolve().parent.parent


def run_pcapq(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Runs the installed `pcapq` command as a user would."""
    return subprocess.run(["pcapq", *args], input=input, capture_output=True, timeout=120)


def exit_for(doc: dict) -> int:
    """The exit code `pcapq analyze` gives for its JSON document: 1 exactly when there is a
    finding, in any capture point (docs/exit-codes.md)."""
    reports = [p["report"] for p in doc["capture_points"]] if "capture_points" in doc else [doc]
    return 1 if any(r["findings"] for r in reports) else 0


def analyze_json(*paths: str | Path) -> dict:
    """The JSON document for the given captures, through the CLI."""
    proc = run_pcapq("analyze", "--format", "json", *map(str, paths))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    doc = json.loads(proc.stdout)
    # 1 exactly when there is a finding (docs/exit-codes.md).
    assert proc.returncode == (1 if doc["findings"] else 0), doc["findings"]
    return doc


@pytest.fixture
def repo() -> Path:
    return REPO
