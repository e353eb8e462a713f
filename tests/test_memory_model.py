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


def test_events_follow_the_records_kept_and_merges_do_not_mix_the_two(tmp_path):
    path = write_pcap(tmp_path / "a.pcap", spanning_conversations())
    # Without every record, the connections kept (those with a problem) keep their events.
    with_events = pcapq.analyze([str(path)], keep_connections=False)
    assert len(with_events) > 0
    assert all(json.loads(with_events.connection_json(i))["events"] for i in range(len(with_events)))
    dropped = pcapq.analyze([str(path)], keep_connections=False, keep_events=False)
    # Only the connections with a problem are kept.
    with_problems = [c["id"] for c in pcapq.analyze([str(path)]).connections(problems_only=True)]
    assert [c["id"] for c in dropped.connections()] == with_problems
    assert len(dropped) == len(with_problems) > 0
    with pytest.raises(ValueError):
        pcapq.analyze([str(path)]).merge(dropped)


def test_established_connection_silent_past_keepalive_is_finalised(tmp_path):
    """An established connection silent for longer than the kernel's keepalive gives up
    (7200 s + 9 x 75 s) is forgotten; a packet after that starts a new, partial connection."""
    packets: list = []
    quiet = Conversation(client=("10.0.0.1", 40001), packets=packets)
    quiet.handshake(0.0)
    quiet.send("client", 0.01, 100)
    quiet.send("server", 0.02, 100)
    fillers = filler(packets, 7880.0, 7905.0, every=0.005)  # long enough for a full sweep (every 15 s)
    quiet.send("client", 7910.0, 100)
    packets.sort(key=lambda p: p.time)
    kept, dropped = both_ways(write_pcap(tmp_path / "quiet.pcap", packets))
    assert kept == dropped
    assert kept["connections"] == fillers + 2
    assert kept["partial"] == 1


def test_established_connection_silent_for_an_hour_stays_one(tmp_path):
    packets: list = []
    quiet = Conversation(client=("10.0.0.1", 40001), packets=packets)
    quiet.handshake(0.0)
    quiet.send("client", 0.01, 100)
    fillers = filler(packets, 3600.0, 3606.0)
    quiet.send("server", 3610.0, 100)
    packets.sort(key=lambda p: p.time)
    kept, dropped = both_ways(write_pcap(tmp_path / "hour.pcap", packets))
    assert kept == dropped
    assert kept["connections"] == fillers + 1 and kept["partial"] == 0


def _open_connections(n: int, packets: list, start: float = 0.0) -> list:
    convs = []
    for i in range(n):
        c = Conversation(client=("10.1.0.1", 30000 + i), server=("10.1.0.2", 9000), packets=packets)
        c.handshake(start + i * 0.001)
        convs.append(c)
    return convs


def test_max_connections_finalises_the_idlest_and_says_so(tmp_path):
    packets: list = []
    _open_connections(1000, packets)
    path = write_pcap(tmp_path / "open.pcap", packets)
    unlimited = pcapq.analyze([str(path)], keep_connections=False, keep_events=False)
    limited = pcapq.analyze([str(path)], keep_connections=False, keep_events=False, max_connections=100)
    # Every connection is still counted once, with the same outcome.
    assert limited.summary() == unlimited.summary()
    assert unlimited.warnings() == []
    (warning,) = limited.warnings()
    assert "finalised early" in warning and "at most 100 live at once" in warning
    evicted = int(warning.split()[0])
    assert 900 <= evicted <= 1000


def test_max_connections_late_packets_start_partial_connections(tmp_path):
    packets: list = []
    convs = _open_connections(300, packets)
    for c in convs[:10]:  # the oldest ones speak again, after they were finalised
        c.send("client", 5.0, 100)
    packets.sort(key=lambda p: p.time)
    path = write_pcap(tmp_path / "late.pcap", packets)
    limited = pcapq.analyze([str(path)], keep_connections=False, keep_events=False, max_connections=50)
    s = limited.summary()
    assert s["connections"] == 310 and s["partial"] == 10
    assert "finalised early" in limited.warnings()[0]


def test_max_connections_from_the_command_line(tmp_path):
    packets: list = []
    _open_connections(200, packets)
    path = write_pcap(tmp_path / "open.pcap", packets)
    proc = subprocess.run(["pcapq", "analyze", "--max-connections", "20", str(path)], capture_output=True, timeout=60)
    assert proc.returncode == 0
    err = proc.stderr.decode()
    assert err.startswith("pcapq: warning: ") and "finalised early" in err and "--max-connections" in err
