"""The core's per-second timeline: the same whether records are kept or not, summed by merges,
and consistent with the summary."""

from __future__ import annotations

import json

import pytest

import pcapq
from craft import write_pcap
from test_merge import spanning_conversations

CAPTURES = ["accept_queue_overflow", "syn_queue_overflow", "closed_port", "packet_loss", "client_timeout_rst", "healthy"]


@pytest.mark.parametrize("name", CAPTURES)
def test_timeline_same_with_and_without_records(repo, name):
    path = str(repo / "captures" / f"{name}.pcap")
    kept = pcapq.analyze([path]).timeline()
    counted = pcapq.analyze([path], keep_connections=False, keep_events=False).timeline()
    assert kept == counted


@pytest.mark.parametrize("name", CAPTURES)
def test_timeline_counts_every_connection_once(repo, name):
    analysis = pcapq.analyze([str(repo / "captures" / f"{name}.pcap")])
    t, s = analysis.timeline(), analysis.summary()
    assert {o: sum(col) for o, col in t["new"].items()} == s["outcomes"]
    assert sum(t["waiting_in"]) == sum(t["waiting_out"]) <= s["handshakes_completed"]
    assert all(len(col) == len(t["seconds"]) for col in [t["retransmissions"], t["waiting_in"], *t["new"].values()])
    assert t["seconds"] == sorted(set(t["seconds"]))


def test_timeline_places_syn_retries_at_their_seconds(tmp_path):
    packets = spanning_conversations()
    start = int(packets[0].time)
    t = pcapq.analyze([str(write_pcap(tmp_path / "c.pcap", packets))]).timeline()
    by_second = dict(zip(t["seconds"], t["retransmissions"]))
    # Connection 0 re-sends its SYN at +1.0 s and +2.0 s.
    assert by_second.get(start + 1, 0) >= 1 and by_second.get(start + 2, 0) >= 1
    assert sum(t["retransmissions"]) >= 2 + 2  # two SYN retries, two request re-sends, ...


def test_merged_timeline_equals_one_run(tmp_path):
    packets = spanning_conversations()
    whole = pcapq.analyze([str(write_pcap(tmp_path / "w.pcap", packets))]).timeline()
    split = len(packets) // 2
    earlier = pcapq.analyze([str(write_pcap(tmp_path / "a.pcap", packets[:split]))], mergeable=True)
    later = pcapq.analyze([str(write_pcap(tmp_path / "b.pcap", packets[split:]))], mergeable=True)
    assert earlier.merge(later).timeline() == whole


def test_progress_reports_bytes_read(repo):
    seen: list[int] = []
    path = repo / "captures" / "packet_loss.pcap"
    pcapq.analyze([str(path)], progress=seen.append)
    # Once at the end at least; pcap record headers plus data: the file minus its 24-byte header.
    assert seen and seen[-1] == path.stat().st_size - 24


def test_progress_exception_is_raised(repo):
    def stop(_: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pcapq.analyze([str(repo / "captures" / "healthy.pcap")], progress=stop)


def test_events_of_problem_connections_without_every_record(repo):
    path = str(repo / "captures" / "accept_queue_overflow.pcap")
    kept = pcapq.analyze([path], keep_connections=False, keep_events=True)
    every = pcapq.analyze([path])
    # The records kept are those with a problem, each with every event.
    assert [json.loads(kept.connection_json(i)) for i in range(len(kept))] == [
        c for c in (json.loads(every.connection_json(i)) for i in range(len(every))) if c["id"] in (2, 3, 4, 5, 6, 7)
    ]
