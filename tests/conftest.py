"""Shared fixtures. Test captures are crafted per test in tmp_path (see craft.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from lab_runs import kernel_run, nginx_lab  # noqa: E402,F401  (session fixtures: one kernel run, many readers)

REPO = Path(__file__).resolve().parent.parent

# A suite started from a background job (a script, a CI runner) inherits SIGINT ignored, and an
# ignored signal stays ignored across exec: the `pcapq` a test interrupts would never see its
# Ctrl-C. With a handler here, every child starts with SIGINT's default disposition.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--refresh-golden",
        action="store_true",
        help="Rewrite tests/golden/ from the current `pcapq analyze` output instead of comparing (test_golden.py).",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that needs the kernel goes to one xdist group: they run one after another on one
    worker (a session fixture's run is made once), beside the tests that need no namespace. First
    of the hooks: an xdist worker reads the groups in its own hook, registered after this file."""
    for item in items:
        if item.get_closest_marker("kernel"):
            item.add_marker(pytest.mark.xdist_group("kernel"))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker per core, and one more for the kernel group, whose runs mostly wait
    on timers (retransmissions, timeouts) rather than use a core."""
    return (os.cpu_count() or 1) + 1
