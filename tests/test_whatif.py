"""`pcapq whatif`: a listener's offered load replayed with the settings the capture shows and with
others (the model's own tests are in src/whatif/model.rs)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import REPO

from pcapq import cli
from pcapq.commands.whatif import COUNTS, RANGES, SETTINGS, inferred_value

CAPTURES = REPO / "captures"
# A kernel run of a seeded load against 2 prefork workers on listen(16) (captures/whatif_runs/).
QUEUED = "whatif_runs/prefork_bursts_b16_w2.pcap.gz"


def whatif(*args: str) -> Any:
    return CliRunner().invoke(cli.cli, ["whatif", *args])


def whatif_json(capture: str, *sets: str) -> dict[str, Any]:
    args = [str(CAPTURES / capture), "--format", "json"]
    for s in sets:
        args += ["--set", s]
    result = whatif(*args)
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.output)
    return doc


def test_whatif_json_schema_and_sources() -> None:
    doc = whatif_json(QUEUED, "workers=8", "backlog=64")
    assert doc["schema"] == "pcapq.whatif"
    assert doc["listener"] == "10.231.1.2:9000"
    assert list(doc["settings"]) == [n for n in SETTINGS if n in doc["settings"]]
    assert doc["settings"]["workers"] == {"value": 8, "source": "set"}
    assert doc["settings"]["backlog"] == {"value": 64, "source": "set"}
    assert doc["settings"]["syncookies"]["source"] == "inferred"
    assert list(doc["observed"]) == list(COUNTS)
    for key in ("replayed", "predicted"):
        # A replay's counts, then the ranges of the middle 80 % of its seeded replays.
        assert list(doc[key]) == [*COUNTS, *RANGES.values()]
        for count, span in RANGES.items():
            low, high = doc[key][span]
            assert low <= doc[key][count] <= high


def test_whatif_observed_counts_the_capture() -> None:
    # accept_queue_overflow: 8 connections, all answered, the accept queue of backlog 1
    # dropping handshake ACKs (SYN-ACKs re-sent after the client's ACK).
    observed = whatif_json("accept_queue_overflow.pcap")["observed"]
    assert (observed["connections"], observed["answered"], observed["failed"]) == (8, 8, 0)
    assert observed["listen_overflows"] > 0


def test_whatif_more_workers_and_backlog_remove_the_wait() -> None:
    doc = whatif_json(QUEUED, "workers=8", "backlog=64")
    replayed, predicted = doc["replayed"], doc["predicted"]
    assert predicted["listen_overflows"] == 0
    assert predicted["failed"] == 0
    assert predicted["wait_p99_s"] < replayed["wait_p99_s"]


def test_whatif_same_settings_predict_the_replay() -> None:
    doc = whatif_json(QUEUED)
    assert doc["predicted"] == doc["replayed"]


def test_whatif_settings_the_capture_shows_replay_its_failures() -> None:
    # The capture's clients gave up 5 s after their first SYN (most FINs held behind a re-sent
    # request): the replay times them out too, and fails about as many as the capture shows.
    doc = whatif_json(QUEUED)
    assert doc["settings"]["client_timeout_s"]["source"] == "inferred"
    assert doc["settings"]["workers"] == {"value": 2, "source": "inferred"}
    observed, replayed = doc["observed"], doc["replayed"]
    assert abs(replayed["failed"] - observed["failed"]) <= 0.3 * observed["failed"] + 0.05 * observed["connections"]


def test_whatif_a_capture_without_its_workers_predicts_nothing() -> None:
    # accept_queue_overflow: a listener whose queue overflowed, its server never seen with all
    # its workers busy: no service rate to replay.
    doc = whatif_json("accept_queue_overflow.pcap", "backlog=64")
    assert doc["replayed"] is None and doc["predicted"] is None
    assert "no queue" in doc["note"]


def test_whatif_no_queue_predicts_nothing() -> None:
    # A closed port: no connection was ever served, so no service rate to replay.
    doc = whatif_json("closed_port.pcap", "workers=8")
    assert doc["replayed"] is None and doc["predicted"] is None
    assert "no queue" in doc["note"]


def test_whatif_text_table() -> None:
    result = whatif(str(CAPTURES / QUEUED), "--set", "workers=8")
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "observed" in line)
    assert header.split() == ["observed", "replayed", "predicted"]
    assert "With workers 8:" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "bogus=1"], "--set bogus=1: expected NAME=VALUE"),
        (["--set", "workers"], "--set workers: expected NAME=VALUE"),
        (["--set", "workers=x"], "--set workers=x: workers takes a number"),
        (["--set", "workers=0"], "--set workers=0: workers takes from 1"),
        (["--set", "syncookies=3"], "--set syncookies=3: syncookies takes from 0 to 2"),
        (["--set", "client_timeout_s=-1"], "client_timeout_s takes a number of seconds above 0"),
        (["--listener", "nope"], "--listener nope:"),
        (["--listener", "10.9.9.9:1"], "no connections to 10.9.9.9:1"),
    ],
)
def test_whatif_bad_option_one_line_exit_2(args: list[str], message: str) -> None:
    result = whatif(str(CAPTURES / "healthy.pcap"), *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_whatif_unreadable_capture_exit_3(tmp_path: Any) -> None:
    result = whatif(str(tmp_path / "missing.pcap"))
    assert result.exit_code == 3


def test_inferred_value_takes_a_range_end_or_the_default() -> None:
    assert inferred_value("backlog", {"value": None, "low": 12, "high": 16}) == 16
    assert inferred_value("workers", {"value": None, "low": 2, "high": 6}) == 2
    assert inferred_value("syncookies", {"value": True, "low": None, "high": None}) == 1
    # A lower bound below Linux's default keeps the default; above it, the bound.
    assert inferred_value("synack_retries", {"value": None, "low": 3, "high": None}) is None
    assert inferred_value("synack_retries", {"value": None, "low": 7, "high": None}) == 7
    assert inferred_value("client_timeout_s", {"value": 5.0, "low": 5.0, "high": 5.1}) == 5.0


def test_whatif_says_when_clients_never_give_up() -> None:
    # No client gave up with 4 workers: the replay cannot count timeouts unless told.
    healthy = "whatif_runs/prefork_waves_b16_w4.pcap.gz"
    assert "no client giving up" in whatif_json(healthy)["note"]
    assert "note" not in whatif_json(healthy, "client_timeout_s=5", "backlog=8")
