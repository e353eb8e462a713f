"""The core's live metrics (issue 30, `LiveInput.metrics`): shipped captures piped through the
live path (`analyze_stdin(watch=True)` on standard input) give, per listener, the counts the
batch analysis of the same file gives."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import typing
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO

import pcapq
import pcapq._core as core

CAPTURES = REPO / "captures"
FOUR = ["accept_queue_overflow", "healthy", "abort_on_overflow", "syn_queue_overflow"]

# Runs in a process of its own: analyze_stdin reads file descriptor 0.
LIVE = """
import json, sys
import pcapq._core as core
live = core.LiveInput()
kwargs = json.loads(sys.argv[1])
core.analyze_stdin(live, watch=True, **kwargs)
print(json.dumps(live.metrics()))
"""

TOP_KEYS = {"segments", "latest_time", "dropped", "listeners_other", "buckets", "listeners"}
LISTENER_KEYS = {
    "listener", "connections", "answered", "ended", "signs", "resets", "icmp", "handshake_seconds",
    "first_byte_seconds", "retransmission_delay_seconds", "waiting", "episode_open", "episode_signs",
}


def live_metrics(capture: Path | bytes, **kwargs: object) -> dict:
    """The snapshot once the capture, piped to standard input, ended."""
    data = capture if isinstance(capture, bytes) else capture.read_bytes()
    proc = subprocess.run([sys.executable, "-c", LIVE, json.dumps(kwargs)], input=data, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


def check_schema(m: dict) -> None:
    assert set(m) == TOP_KEYS
    assert m["buckets"] == core.VOCABULARY["metric_buckets"]
    for row in m["listeners"]:
        assert set(row) == LISTENER_KEYS
        assert list(row["ended"]) == core.VOCABULARY["outcomes"]
        assert list(row["signs"]) == core.VOCABULARY["live_signs"]
        assert all(r["count"] > 0 and r["answered"] in core.VOCABULARY["reset_answers"] for r in row["resets"])
        assert all(n > 0 and kind in core.VOCABULARY["icmp_kinds"] for kind, n in row["icmp"].items())
        for name in ("handshake_seconds", "first_byte_seconds", "retransmission_delay_seconds"):
            h = row[name]
            assert len(h["counts"]) == len(m["buckets"]) + 1 and sum(h["counts"]) == h["count"]
    named = [row["listener"] for row in m["listeners"] if row["listener"] != "other"]
    assert [row["listener"] for row in m["listeners"]][: len(named)] == named


@pytest.mark.parametrize("name", FOUR)
@pytest.mark.parametrize("keep_connections", [False, True])
def test_live_metrics_match_the_batch_analysis(name: str, keep_connections: bool) -> None:
    path = CAPTURES / f"{name}.pcap"
    m = live_metrics(path, keep_connections=keep_connections)
    check_schema(m)
    a = pcapq.analyze([str(path)])
    (server,) = a.servers()
    conns = a.connections()
    (row,) = m["listeners"]
    assert row["listener"] == server["server"]
    assert m["segments"] == a.summary()["tcp_segments"]
    assert m["latest_time"] == pytest.approx(max(c["last_time"] for c in conns))
    assert (m["dropped"], m["listeners_other"]) == (None, 0)

    # Every connection ended with the input, with the outcome the batch analysis gives it.
    assert row["ended"] == {o: server["outcomes"].get(o, 0) for o in core.VOCABULARY["outcomes"]}
    assert row["connections"] == sum(1 for c in conns if not c["partial"])
    assert row["answered"] == server["answered"]
    assert row["waiting"] == 0

    # A sign is a segment, a symptom a connection: each sign seen is a symptom of some connection,
    # and each symptom the live reading knows shows a sign. A SYN-ACK re-sent after the client's
    # ACK is read live as final_ack_dropped only.
    symptoms = {s for s, n in server["symptoms"].items() if n}
    signs = {s for s, n in row["signs"].items() if n}
    assert signs <= symptoms
    expected = symptoms & set(core.VOCABULARY["live_signs"])
    if "final_ack_dropped" in signs:
        expected.discard("synack_retransmitted")
    assert signs == expected
    for sign in signs:
        assert row["signs"][sign] >= server["symptoms"][sign]

    # First RSTs by who sent them and what they answered.
    resets = Counter((c["reset"]["from"], "other" if c["reset"]["answers"] == "nothing" else c["reset"]["answers"]) for c in conns if c["reset"])
    assert Counter({(r["side"], r["answered"]): r["count"] for r in row["resets"]}) == resets

    # Histograms: one handshake time per handshake completed, one first byte per answer, and
    # what retransmissions added as the batch analysis times it.
    shaken = [c["handshake"]["duration"] for c in conns if c["handshake"]["completed"] and not c["partial"]]
    assert row["handshake_seconds"]["count"] == len(shaken)
    assert row["handshake_seconds"]["sum"] == pytest.approx(sum(shaken), abs=1e-6)
    first_bytes = [c["request"]["answered"] - c["handshake"]["syn_time"] for c in conns if c["request"]["answered"] and c["handshake"]["syn_time"]]
    assert row["first_byte_seconds"]["count"] == len(first_bytes) == server["answered"]
    assert row["first_byte_seconds"]["sum"] == pytest.approx(sum(first_bytes), abs=1e-6)
    delays = [c["added_latency"] for c in conns if c["added_latency"] > 0]
    assert row["retransmission_delay_seconds"]["count"] == len(delays)
    assert row["retransmission_delay_seconds"]["sum"] == pytest.approx(sum(delays), abs=1e-6)


def test_accept_queue_overflow_is_an_open_episode_with_final_ack_dropped() -> None:
    overflow = live_metrics(CAPTURES / "accept_queue_overflow.pcap")["listeners"][0]
    assert overflow["signs"]["final_ack_dropped"] > 0 and overflow["episode_open"]
    assert "final_ack_dropped" in overflow["episode_signs"]
    healthy = live_metrics(CAPTURES / "healthy.pcap")["listeners"][0]
    assert healthy["signs"]["final_ack_dropped"] == 0 and not healthy["episode_open"]
    assert healthy["episode_signs"] == []


def test_many_listeners_are_bounded_and_every_connection_is_counted_once() -> None:
    path = CAPTURES / "connect_scan.pcap"
    m = live_metrics(path, keep_connections=False, metrics_listeners=3)
    check_schema(m)
    listeners = [row["listener"] for row in m["listeners"]]
    assert len(listeners) == 4 and listeners[-1] == "other"
    a = pcapq.analyze([str(path)])
    assert len(a.servers()) > 3
    outcomes = Counter()
    for server in a.servers():
        outcomes.update(server["outcomes"])
    ended = Counter()
    for row in m["listeners"]:
        ended.update(row["ended"])
    assert +ended == +outcomes
    assert sum(row["connections"] for row in m["listeners"]) == sum(1 for c in a.connections() if not c["partial"])
    assert m["listeners_other"] > 0


def test_metrics_without_watching_name_no_listener() -> None:
    m = core.LiveInput().metrics()
    assert m == {"segments": 0, "latest_time": None, "dropped": None, "listeners_other": 0, "buckets": core.VOCABULARY["metric_buckets"], "listeners": []}


def _pcapng_with_drops(pcap: bytes, dropped: int) -> bytes:
    """The classic pcap `pcap` as pcapng (little-endian, microseconds), with an Interface
    Statistics Block at the end that says `dropped` packets were dropped by the OS (isb_osdrop)."""

    def block(kind: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        length = 12 + len(body)
        return struct.pack("<II", kind, length) + body + struct.pack("<I", length)

    magic, _, _, _, _, snaplen, linktype = struct.unpack("<IHHiIII", pcap[:24])
    assert magic == 0xA1B2C3D4
    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", linktype, 0, snaplen))
    at, last = 24, 0
    while at < len(pcap):
        seconds, micros, caplen, length = struct.unpack("<IIII", pcap[at : at + 16])
        ticks = seconds * 1_000_000 + micros
        out += block(6, struct.pack("<IIIII", 0, ticks >> 32, ticks & 0xFFFFFFFF, caplen, length) + pcap[at + 16 : at + 16 + caplen])
        at, last = at + 16 + caplen, ticks
    isb_osdrop = struct.pack("<HHQ", 7, 8, dropped) + struct.pack("<HH", 0, 0)
    return out + block(5, struct.pack("<III", 0, last >> 32, last & 0xFFFFFFFF) + isb_osdrop)


def test_dropped_is_what_the_capture_says() -> None:
    pcap = (CAPTURES / "healthy.pcap").read_bytes()
    ng = live_metrics(_pcapng_with_drops(pcap, 42))
    assert ng["dropped"] == 42
    plain = live_metrics(pcap)
    assert plain["dropped"] is None
    # The same capture either way.
    assert ng["listeners"] == plain["listeners"]


def test_stub_reset_answers_match_the_core() -> None:
    text = Path(core.__file__).with_name("_core.pyi").read_text()
    start = text.index("\nResetAnswer = Literal[") + 1
    namespace: dict = {"Literal": typing.Literal}
    exec(text[start : text.index("]", start) + 1], namespace)
    assert list(typing.get_args(namespace["ResetAnswer"])) == core.VOCABULARY["reset_answers"]
    roles = core.VOCABULARY["packet_roles"]
    assert core.VOCABULARY["reset_answers"] == [*roles, "other"]
