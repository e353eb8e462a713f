"""Parquet output (docs/parquet.md) against the JSON of the same captures, the DuckDB queries of
docs/queries.md run as written on a fleet of captures, and the streamed JSON (every connection
handed to a temporary file as it finishes) against the document of an analysis that kept every
connection in memory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

# pyarrow, duckdb, pandas and polars are in the test extra: imported, not skipped without them.
import duckdb
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

from conftest import REPO
from pcapq import _core
from pcapq.causes.registry import CAUSES
from pcapq.diagnose import diagnose

CAPTURES = REPO / "captures"
GNU_TIME = "/usr/bin/time"
# Several outcomes and causes: an accept-queue overflow, nothing wrong, a SYN-queue overflow,
# a slow server (resets and abandons), an overflow answered with RSTs, loss, ICMP, port reuse.
COMPARED = [
    "accept_queue_overflow.pcap", "healthy.pcap", "syn_queue_overflow.pcap", "nginx_php_fpm_slow.pcap",
    "abort_on_overflow.pcap", "packet_loss.pcap", "icmp_port_unreachable.pcap", "time_wait_reuse.pcap",
]
FLEET = {
    "web1": "accept_queue_overflow.pcap", "web2": "healthy.pcap", "web3": "syn_queue_overflow.pcap",
    "web4": "nginx_php_fpm_slow.pcap", "web5": "abort_on_overflow.pcap",
}


def pcapq(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(["pcapq", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def json_report(capture: Path) -> dict:
    proc = pcapq("analyze", "--format", "json", str(capture))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def epoch_us(t) -> int:
    """A timestamp column's value (UTC) as epoch microseconds."""
    return round(t.timestamp() * 1e6)


def expected_cause(doc: dict) -> dict[int, str]:
    """Each connection's cause: that of the first finding, in precedence order, listing it."""
    out: dict[int, str] = {}
    for f in sorted(doc["findings"], key=lambda f: CAUSES[f["cause"]].precedence):
        for i in f["connections"]["ids"]:
            out.setdefault(i, f["cause"])
    return out


@pytest.mark.parametrize("name", COMPARED)
def test_parquet_has_the_json_connections_and_outcomes(name: str, tmp_path: Path) -> None:
    capture = CAPTURES / name
    doc = json_report(capture)
    proc = pcapq("analyze", "--format", "parquet", "-o", f"{tmp_path}/", str(capture))
    assert proc.returncode in (0, 1), proc.stderr
    table = pq.read_table(tmp_path / "connections.parquet")
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == [c["id"] for c in doc["connections"]]
    causes = expected_cause(doc)
    for row, c in zip(rows, doc["connections"]):
        ip, port = row["client_ip"], row["client_port"]
        assert c["client"] in (f"{ip}:{port}", f"[{ip}]:{port}")
        assert row["server"] == c["server"]
        assert (row["outcome"], row["symptoms"], row["state"]) == (c["outcome"], c["symptoms"], c["state"])
        assert (row["first_file"], row["first_frame"]) == (c["first_file"], c["first_frame"])
        assert epoch_us(row["first_time"]) == round(c["first_time"] * 1e6)
        assert epoch_us(row["last_time"]) == round(c["last_time"] * 1e6)
        assert row["added_latency"] == pytest.approx(c["added_latency"])
        assert (row["syn_attempts"], row["synack_attempts"]) == (c["handshake"]["syn_attempts"], c["handshake"]["synack_attempts"])
        for side in ("client", "server"):
            assert row[f"{side}_packets"] == c["sides"][side]["packets"]
            assert row[f"{side}_data_retransmits"] == c["sides"][side]["data_retransmits"]
        assert row["cause"] == causes.get(c["id"])
    events = pq.read_table(tmp_path / "events.parquet")
    assert events.num_rows == sum(len(c["events"]) for c in doc["connections"])
    findings = pq.read_table(tmp_path / "findings.parquet").to_pylist()
    assert sorted((f["cause"], f["connections"]) for f in findings) == sorted(
        (f["cause"], f["connections"]["count"]) for f in doc["findings"]
    )


def test_parquet_metadata_names_schema_and_version(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    proc = pcapq("analyze", "--format", "parquet", "-o", str(out), str(CAPTURES / "healthy.pcap"))
    assert proc.returncode == 0, proc.stderr
    meta = pq.read_metadata(out).metadata
    assert meta[b"pcapq.schema"] == b"pcapq.connections"
    assert meta[b"pcapq.schema_version"] == str(_core.PARQUET_SCHEMA_VERSION).encode()
    assert not (tmp_path / "events.parquet").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"], "the temporary file is gone"


def test_parquet_schema_matches_the_doc(tmp_path: Path) -> None:
    out = tmp_path / "t"
    assert pcapq("analyze", "--format", "parquet", "-o", f"{out}/", str(CAPTURES / "healthy.pcap")).returncode == 0
    doc = (REPO / "docs" / "parquet.md").read_text()
    for table in ("connections", "events", "findings"):
        section = doc.split(f"## `{table}.parquet`", 1)[1].split("\n## ", 1)[0]
        documented = re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
        assert documented == pq.read_schema(out / f"{table}.parquet").names, table


def test_parquet_without_output_is_a_one_line_usage_error() -> None:
    proc = pcapq("analyze", "--format", "parquet", str(CAPTURES / "healthy.pcap"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("pcapq: parquet is a binary table") and proc.stderr.count("\n") == 1


def test_parquet_opens_in_pandas_and_polars(tmp_path: Path) -> None:
    out = tmp_path / "c.parquet"
    assert pcapq("analyze", "--format", "parquet", "-o", str(out), str(CAPTURES / "syn_queue_overflow.pcap")).returncode == 1
    frame = pd.read_parquet(out)
    assert len(frame) == 9 and set(frame["outcome"]) == {"completed", "abandoned"}
    assert pl.read_parquet(out).filter(pl.col("cause") == "syn_queue_overflow").height == 9


# --- the DuckDB queries of docs/queries.md ---


def doc_queries() -> dict[str, str]:
    text = (REPO / "docs" / "queries.md").read_text()
    blocks = re.findall(r"```sql\n(.*?)```", text, re.S)
    return {re.match(r"-- name: (\w+)", b).group(1): b for b in blocks}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    root = tmp_path_factory.mktemp("fleet")
    docs = {}
    for host, name in FLEET.items():
        proc = pcapq("analyze", "--format", "parquet", "-o", f"{root}/fleet/host={host}/", str(CAPTURES / name))
        assert proc.returncode in (0, 1), proc.stderr
        docs[host] = json_report(CAPTURES / name)
    return root, docs


def run(root: Path, sql: str) -> list[tuple]:
    con = duckdb.connect()
    con.execute(f"SET file_search_path = '{root}'")
    return con.execute(sql).fetchall()


def test_doc_queries_all_run(fleet) -> None:
    root, _ = fleet
    queries = doc_queries()
    assert set(queries) == {
        "failures_per_second", "added_latency_by_outcome", "overflows", "overflow_seconds", "symptoms", "worst_connection_events",
    }
    for name, sql in queries.items():
        assert run(root, sql) is not None, name


def test_doc_failures_per_second_add_up_to_the_failed_connections(fleet) -> None:
    root, docs = fleet
    rows = run(root, doc_queries()["failures_per_second"])
    per_host: dict[str, int] = {}
    for host, server, second, failures in rows:
        per_host[host] = per_host.get(host, 0) + failures
        assert second.microsecond == 0 and failures > 0
    expected = {h: sum(1 for c in d["connections"] if c["outcome"] not in ("completed", "open")) for h, d in docs.items()}
    assert per_host == {h: n for h, n in expected.items() if n}
    assert per_host["web4"] == 16 and "web2" not in per_host


def test_doc_added_latency_by_outcome_counts_every_connection(fleet) -> None:
    root, docs = fleet
    rows = run(root, doc_queries()["added_latency_by_outcome"])
    counts = {outcome: n for outcome, n, *_ in rows}
    expected: dict[str, int] = {}
    for d in docs.values():
        for c in d["connections"]:
            expected[c["outcome"]] = expected.get(c["outcome"], 0) + 1
    assert counts == expected
    for outcome, n, mean, p99, top in rows:
        assert 0 <= mean <= p99 <= top or (n == 1 and mean == top)


def test_doc_overflows_name_the_hosts_that_overflowed(fleet) -> None:
    root, docs = fleet
    rows = run(root, doc_queries()["overflows"])
    assert {(host, cause) for host, cause, *_ in rows} == {
        ("web1", "accept_queue_overflow"), ("web3", "syn_queue_overflow"), ("web5", "accept_queue_overflow")
    }
    assert [r[3] for r in rows] == sorted(r[3] for r in rows), "earliest first"
    seconds = run(root, doc_queries()["overflow_seconds"])
    claimed = {h: sum(n for host, _, _, n in seconds if host == h) for h in ("web1", "web3", "web5")}
    assert claimed == {h: sum(f["connections"]["count"] for f in docs[h]["findings"]) for h in claimed}


def test_doc_worst_connection_events_are_their_packets(fleet) -> None:
    root, docs = fleet
    rows = run(root, doc_queries()["worst_connection_events"])
    assert rows
    for host, conn_id, _, file, frame, _, kind, _, _ in rows:
        (c,) = [c for c in docs[host]["connections"] if c["id"] == conn_id]
        assert (file, frame, kind) in {(e["file"], e["frame"], e["kind"]) for e in c["events"]}


# --- streamed JSON ---


@pytest.mark.parametrize("name", ["nginx_php_fpm_slow.pcap", "time_wait_reuse.pcap", "syn_scan.pcap"])
def test_streamed_json_is_the_document_of_every_connection_kept(name: str, tmp_path: Path) -> None:
    """The CLI hands connections to a temporary file as they finish; the document is byte for
    byte the one written from an analysis that kept every connection in memory."""
    capture = CAPTURES / name
    for pretty in ([], ["--pretty"]):
        out = tmp_path / "streamed.json"
        proc = pcapq("analyze", "--format", "json", *pretty, "-o", str(out), str(capture))
        assert proc.returncode in (0, 1), proc.stderr
        kept = _core.analyze([str(capture)], keep_connections=True, keep_events=True)
        expected = tmp_path / "kept.json"
        kept.write_json(str(expected), pretty=bool(pretty), extra=json.dumps(diagnose(kept).to_json(), indent=2 if pretty else None))
        assert out.read_bytes() == expected.read_bytes()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json", "streamed.json"]


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_standard_input_streams_as_a_file_does(fmt: str, tmp_path: Path) -> None:
    """`pcapq analyze -` hands its connections to a temporary file as a file's analysis does:
    the same document (but the capture's name), and no more memory than the file's run but
    the 4 MiB of chunks standard input may have on their way (src/reader/live.rs: 64 of 64 KiB). 300,000
    packets of bench/generate.py hold about 26,000 connections: kept in memory with their
    events, the piped run peaked 16 MiB above the file's."""
    if not os.access(GNU_TIME, os.X_OK):
        pytest.skip(f"needs GNU time ({GNU_TIME}) for the peak RSS of each run")
    capture = tmp_path / "gen.pcap"
    subprocess.run([sys.executable, str(REPO / "bench" / "generate.py"), "--packets", "300000", "--out", str(capture)], check=True, capture_output=True, timeout=120)
    peaks, outputs = {}, {}
    for source in ("file", "stdin"):
        out = tmp_path / f"{source}.{fmt}"
        command = [GNU_TIME, "-f", "%M", "pcapq", "analyze", "--format", fmt, "-o", str(out)]
        with open(capture, "rb") as stdin:
            proc = subprocess.run([*command, str(capture) if source == "file" else "-"], stdin=stdin if source == "stdin" else None, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1, proc.stderr
        peaks[source] = int(proc.stderr.strip().splitlines()[-1])
        outputs[source] = json.loads(out.read_text()) if fmt == "json" else pq.read_table(out).to_pylist()
    if fmt == "json":
        for name in ("file", "stdin"):
            outputs[name].pop("captures")
    else:
        for name in ("file", "stdin"):
            for row in outputs[name]:
                row.pop("capture_point"), row.pop("first_file")
    assert outputs["stdin"] == outputs["file"]
    assert peaks["stdin"] < peaks["file"] + 4096 + 4096, peaks


def test_spilled_analysis_revives_a_whole_record_for_a_late_packet(tmp_path: Path) -> None:
    """A connection retired and then revived by a late packet is written whole, as when every
    record is kept (time_wait_reuse has a late packet after the grace)."""
    capture = str(CAPTURES / "time_wait_reuse.pcap")
    (spilled,) = _core.analyze_many([[capture]], keep_connections=False, spill_dir=str(tmp_path))
    kept = _core.analyze([capture], keep_connections=True, keep_events=True)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    spilled.write_json(str(a))
    kept.write_json(str(b))
    assert json.loads(a.read_text())["connections"] == json.loads(b.read_text())["connections"]
    assert spilled.summary() == kept.summary()


def test_parquet_of_two_capture_points_in_one_file(tmp_path: Path) -> None:
    out = tmp_path / "two.parquet"
    proc = pcapq("analyze", "--format", "parquet", "-o", str(out), "captures/healthy.pcap", "captures/packet_loss.pcap")
    assert proc.returncode == 1, proc.stderr
    rows = pq.read_table(out).to_pylist()
    per_point: dict[str, list[dict]] = {}
    for r in rows:
        per_point.setdefault(r["capture_point"], []).append(r)
    assert {p: len(v) for p, v in per_point.items()} == {"healthy.pcap": 20, "packet_loss.pcap": 20}
    assert {r["cause"] for r in per_point["healthy.pcap"]} == {None}
    assert sum(r["cause"] == "network_loss" for r in per_point["packet_loss.pcap"]) == 15


def test_parquet_from_standard_input_keeps_every_connection(tmp_path: Path) -> None:
    capture = CAPTURES / "syn_queue_overflow.pcap"
    proc = subprocess.run(
        ["pcapq", "analyze", "--format", "parquet", "-o", f"{tmp_path}/", "-"],
        input=capture.read_bytes(), capture_output=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    rows = pq.read_table(tmp_path / "connections.parquet").to_pylist()
    assert [r["cause"] for r in rows] == ["syn_queue_overflow"] * 9


def test_parquet_into_a_directory_that_cannot_be_made_exits_74(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = pcapq("analyze", "--format", "parquet", "-o", f"{blocker}/sub/", str(CAPTURES / "healthy.pcap"))
    assert proc.returncode == 74
    assert proc.stderr.startswith("pcapq: cannot make the directory") and proc.stderr.count("\n") == 1


def test_parquet_proxy_log_columns_are_the_json_proxy_log(tmp_path: Path) -> None:
    # nginx's error and access logs beside a real overflow: the tied line of each connection,
    # in the table as in the JSON document.
    base = CAPTURES / "nginx_php_fpm"
    logs = ["--log", f"{base}.error.log", "--log", f"{base}.access.log"]
    doc = json.loads(pcapq("analyze", *logs, "--format", "json", f"{base}.pcap").stdout)
    expected = {c["id"]: c["proxy_log"] for c in doc["connections"] if "proxy_log" in c}
    assert len(expected) >= 20
    out = tmp_path / "c.parquet"
    proc = pcapq("analyze", *logs, "--format", "parquet", "-o", str(out), f"{base}.pcap")
    assert proc.returncode in (0, 1), proc.stderr
    table = pq.read_table(out).to_pylist()
    got = {r["id"]: r for r in table if r["proxy_log_file"] is not None}
    assert got.keys() == expected.keys()
    for i, note in expected.items():
        row = got[i]
        assert (row["proxy_log_file"], row["proxy_log_line"], row["proxy_log_kind"], row["proxy_log_status"],
                row["proxy_log_exact"], row["proxy_log_text"]) == (
            note["file"], note["line"], note["kind"], note["status"], note["exact"], note["text"])
    assert all(r["proxy_log_kind"] is None for r in table if r["id"] not in expected)


def test_parquet_directory_with_logs_is_made_as_without(tmp_path: Path) -> None:
    # With --log every connection is kept in memory (nothing waits beside the output), and the
    # directory is still made.
    base = CAPTURES / "nginx_php_fpm"
    out = tmp_path / "new" / "tables"
    proc = pcapq("analyze", "--log", f"{base}.error.log", "--format", "parquet", "-o", f"{out}/", f"{base}.pcap")
    assert proc.returncode in (0, 1), proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["connections.parquet", "events.parquet", "findings.parquet"]
    assert any(r["proxy_log_file"] is not None for r in pq.read_table(out / "connections.parquet").to_pylist())


def test_parquet_without_logs_has_null_proxy_log_columns(tmp_path: Path) -> None:
    out = tmp_path / "c.parquet"
    assert pcapq("analyze", "--format", "parquet", "-o", str(out), str(CAPTURES / "healthy.pcap")).returncode == 0
    rows = pq.read_table(out).to_pylist()
    assert rows and all(r["proxy_log_line"] is None and r["proxy_log_text"] is None for r in rows)
