"""`timeline --conn` takes the ids the reports show (issue 14, item 6)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, run_pcapq
from pcapq.exitcodes import ExitCode

ACCEPT = REPO / "captures" / "accept_queue_overflow.pcap"


def _shown(*args: str) -> tuple[list[int], str]:
    proc = run_pcapq("timeline", "--format", "json", *args, str(ACCEPT))
    assert proc.returncode == 0, proc.stderr
    return [c["id"] for c in json.loads(proc.stdout)["connections"]], proc.stderr.decode()


@pytest.mark.parametrize("conn", ["3", "#3", "id:3"])
def test_r14_conn_takes_the_id_of_the_reports(conn: str) -> None:
    ids, said = _shown("--conn", conn)
    assert ids == [3]
    assert f"--conn {conn} is a connection id: connection 3, 10.231.1.1:52210 → 10.231.1.2:9000" in said


def test_r14_conn_still_takes_a_client_port_and_says_so() -> None:
    ids, said = _shown("--conn", "52206")
    assert ids == [2]
    assert "is a client port" in said


def test_r14_conn_id_shown_by_analyze_is_the_one_timeline_shows() -> None:
    """The worst-connections table's first id, given back to timeline, is that connection."""
    text = run_pcapq("analyze", str(ACCEPT)).stdout.decode()
    row = next(line for line in text.splitlines() if line.strip().startswith("2 │"))
    port = row.split("│")[1].strip()
    ids, _ = _shown("--conn", "2")
    doc = json.loads(run_pcapq("timeline", "--format", "json", "--conn", "2", str(ACCEPT)).stdout)
    assert ids == [2] and doc["connections"][0]["client"].endswith(":" + port)


@pytest.mark.parametrize("conn", ["1000", "#99"])
def test_r14_conn_matching_nothing_is_an_error(conn: str) -> None:
    proc = run_pcapq("timeline", "--conn", conn, str(ACCEPT))
    assert proc.returncode == ExitCode.USAGE
    assert b"matches no connection" in proc.stderr
    assert proc.stdout == b""
