"""Without `keep_connections`, finished connections are counted and dropped as the capture is
read (docs/performance.md, memory). The summary must not change, late packets included."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import pcapq
from craft import Conversation, write_pcap
from test_merge import spanning_conversations

REPO_BENCH = __import__("pathlib").Path(__file__).resolve().parent.parent / "bench"


def filler(packets: list, start: float, until: float, every: float = 0.002) -> int:
    """Short healthy connections, one every `every` seconds: enough segments for sweeps to run.
    Returns how many."""
    t, port = start, 20000
    while t < until:
        c = Conversation(client=("10.9.0.1", port), server=("10.9.0.2", 9000), packets=packets)
        c.handshake(t)
        c.send("client", t + 0.0003, 100)
        c.send("server", t + 0.0005, 300)
        c.close(t + 0.0007)
        t += every
        port += 1
    return port - 20000


def both_ways(path) -> tuple[dict, dict]:
    kept = pcapq.analyze([str(path)]).summary()
    dropped = pcapq.analyze([str(path)], keep_connections=False, keep_events=False).summary()
    return kept, dropped


def test_late_packets_after_retirement_count_once(tmp_path):
    packets: list = []
    fillers = filler(packets, 0.0, 12.0, every=0.005)
    late = Conversation(client=("10.0.0.1", 40001), packets=packets)
    late.handshake(0.5)
    late.send("client", 0.51, 200)
    late.send("server", 0.52, 900)
    late.close(0.6)
    late.resend("client", 3.0, index=-2)  # the client's FIN again, long after the close
    late.rst("client", 6.0)  # and an RST later still
    reused = Conversation(client=("10.0.0.1", 40001), client_isn=777_777, server_isn=4242, packets=packets)
    reused.handshake(9.0)  # the same 4-tuple with a new ISN: a new connection
    reused.send("client", 9.01, 50)
    reused.close(9.1)
    packets.sort(key=lambda p: p.time)
    path = write_pcap(tmp_path / "late.pcap", packets)

    kept, dropped = both_ways(path)
    assert kept == dropped
    assert kept["reset"] == 1
    assert kept["port_reuse"] == 1
    assert kept["connections"] == 2 + fillers

    doc = pcapq.analyze([str(path)])
    import io, json

    out = io.StringIO()
    doc.write_json(out)
    conns = [c for c in json.loads(out.getvalue())["connections"] if c["client"] == "10.0.0.1:40001"]
    assert [c["follows"] for c in conns] == [None, conns[0]["id"]]
    kinds = [e["kind"] for e in conns[0]["events"]]
    assert kinds[-2:] == ["fin_retransmit", "rst"]


def test_merge_scenario_summary_same_both_ways(tmp_path):
    packets = spanning_conversations()
    fillers = filler(packets, 0.0, 10.0, every=0.004)
    packets.sort(key=lambda p: p.time)
    kept, dropped = both_ways(write_pcap(tmp_path / "mixed.pcap", packets))
    assert kept == dropped
    assert kept["connections"] == 5 + fillers


def test_generated_traffic_summary_same_both_ways(tmp_path):
    out = tmp_path / "gen.pcap"
    subprocess.run(
        [sys.executable, str(REPO_BENCH / "generate.py"), "--packets", "300000", "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    kept, dropped = both_ways(out)
    assert kept == dropped
    assert kept["with_syn_retransmits"] > 0 and kept["with_synack_retransmits"] > 0


def test_merging_needs_the_records_and_events_follow_the_records_kept(tmp_path):
    path = write_pcap(tmp_path / "a.pcap", spanning_conversations())
    # Without every record, the connections kept (those with a problem) keep their events.
    with_events = pcapq.analyze([str(path)], keep_connections=False)
    assert len(with_events) > 0
    assert all(json.loads(with_events.connection_json(i))["events"] for i in range(len(with_events)))
    with pytest.raises(ValueError):
        pcapq.analyze([str(path)], keep_connections=False, keep_events=False, mergeable=True)
    dropped = pcapq.analyze([str(path)], keep_connections=False, keep_events=False)
    # Only the connections with a problem are kept.
    with_problems = [c["id"] for c in pcapq.analyze([str(path)]).connections(problems_only=True)]
    assert [c["id"] for c in dropped.connections()] == with_problems
    assert len(dropped) == len(with_problems) > 0
    with pytest.raises(ValueError):
        pcapq.analyze([str(path)]).merge(dropped)
