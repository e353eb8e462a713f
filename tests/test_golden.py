"""Golden tests: the JSON report (`pcapq analyze --format json --pretty`) of every capture in the
catalog is checked in under tests/golden/ (captures/NAME.pcap -> tests/golden/NAME.json,
captures/crafted/NAME.pcap -> tests/golden/crafted/NAME.json) and compared field by field.

After a change that is meant to alter pcapq's output, refresh them and review the diff:

    pytest tests/test_golden.py --refresh-golden && git diff tests/golden/

The only environment-dependent field, each capture's `path`, is kept stable by running pcapq
from the repository root with the path relative to it; nothing else is normalised. The command
runs in this process (tests/inprocess.py); tests/test_cli.py runs the console script itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO
from inprocess import run_main, working_directory

GOLDEN = REPO / "tests" / "golden"
# The two nmap scans: 1,000 connections each, 3.4 MB of JSON apiece. Their findings are checked
# by tests/test_diagnosis_captures.py.
NOT_GOLDEN = {"syn_scan.pcap", "connect_scan.pcap"}
CAPTURES = [c for c in sorted((REPO / "captures").glob("*.pcap")) + sorted((REPO / "captures" / "crafted").glob("*.pcap"))
            if c.name not in NOT_GOLDEN]


def golden_path(capture: Path) -> Path:
    relative = capture.relative_to(REPO / "captures")
    return GOLDEN / relative.with_suffix(".json")


def report(capture: Path) -> str:
    with working_directory(REPO):
        code, out, err = run_main("analyze", "--format", "json", "--pretty", str(capture.relative_to(REPO)))
    assert code in (0, 1), err
    # 1 exactly when there is a finding (docs/exit-codes.md).
    assert code == (1 if json.loads(out)["findings"] else 0)
    return out


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(REPO / "captures")))
def test_report_matches_golden(capture: Path, request: pytest.FixtureRequest) -> None:
    fresh = report(capture)
    golden = golden_path(capture)
    if request.config.getoption("--refresh-golden"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(fresh)
        return
    assert golden.exists(), f"no golden file for {capture.name}: run pytest tests/test_golden.py --refresh-golden"
    assert json.loads(fresh) == json.loads(golden.read_text())


def test_no_golden_file_without_its_capture() -> None:
    expected = {golden_path(c) for c in CAPTURES}
    assert set(GOLDEN.rglob("*.json")) == expected
