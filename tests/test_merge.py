"""Analyses of two time-adjacent captures merge into the analysis of both in one run."""

from __future__ import annotations

import io
import json

import pytest

import pcapq
from craft import Conversation, write_pcap


def spanning_conversations() -> list:
    """Connections whose lives cross any split point: SYN retries, data retransmits, port reuse."""
    packets: list = []
    # 0: a SYN retried twice (same ISN) before the server answers, then a short exchange.
    a = Conversation(client=("10.0.0.1", 40001), client_isn=111, packets=packets)
    a.syn(0.0)
    a.syn(1.0)
    a.syn(2.0)
    a.synack(2.0001)
    a.ack("client", 2.0002)
    a.send("client", 2.01, 300)
    a.segment("server", 2.02, "A")
    a.send("server", 2.03, 900)
    a.close(2.5)
    # 1: the accept-queue pattern: ACK dropped, SYN-ACK re-sent, request re-sent into the void.
    b = Conversation(client=("10.0.0.1", 40002), client_isn=2**32 - 50, packets=packets)
    b.handshake(0.1)
    b.send("client", 0.11, 400)
    b.resend("client", 0.31)
    b.resend("server", 1.1002, index=0)
    b.segment("client", 1.1003, "A")
    b.resend("client", 0.71 + 0.4)
    b.segment("server", 1.2, "A")
    b.send("server", 1.21, 1200)
    b.rst("client", 3.0)
    # 2: a long transfer, more segments than a merge prefix holds, with a late retransmit.
    c = Conversation(client=("10.0.0.3", 50000), server_isn=2**32 - 10, packets=packets)
    c.handshake(0.2)
    c.send("client", 0.21, 100)
    for i in range(30):
        c.send("server", 0.3 + i * 0.01, 1448)
        if i % 2:
            c.segment("client", 0.305 + i * 0.01, "A")
    c.resend("server", 0.9, index=3)
    c.segment("client", 0.91, "A")
    c.segment("client", 0.92, "A")
    c.close(1.0)
    # 3 and 4: the same 4-tuple used twice, the second time with a new ISN.
    d = Conversation(client=("10.0.0.4", 40004), client_isn=7000, packets=packets)
    d.handshake(0.3)
    d.send("client", 0.31, 50)
    d.close(0.4)
    e = Conversation(client=("10.0.0.4", 40004), client_isn=9_000_000, server_isn=123, packets=packets)
    e.handshake(2.2)
    e.send("client", 2.21, 60)
    e.rst("server", 2.3)
    packets.sort(key=lambda p: p.time)
    return packets


def _document(analysis: pcapq.Analysis) -> dict:
    out = io.StringIO()
    analysis.write_json(out)
    return json.loads(out.getvalue())


def test_merge_equals_one_run_at_every_split(tmp_path):
    packets = spanning_conversations()
    whole = tmp_path / "whole.pcap"
    write_pcap(whole, packets)
    for split in range(1, len(packets)):
        first = write_pcap(tmp_path / "a.pcap", packets[:split])
        second = write_pcap(tmp_path / "b.pcap", packets[split:])
        one_run = _document(pcapq.analyze([str(first), str(second)]))
        earlier = pcapq.analyze([str(first)], mergeable=True)
        later = pcapq.analyze([str(second)], mergeable=True)
        merged = _document(earlier.merge(later))
        assert merged["connections"] == one_run["connections"], f"split after packet {split}"
        assert merged["summary"] == one_run["summary"], f"split after packet {split}"


def test_one_run_of_two_files_equals_one_file(tmp_path):
    """Files given together are one capture: only file/frame references differ."""
    packets = spanning_conversations()
    whole = _document(pcapq.analyze([str(write_pcap(tmp_path / "w.pcap", packets))]))
    split = len(packets) // 2
    a = write_pcap(tmp_path / "a.pcap", packets[:split])
    b = write_pcap(tmp_path / "b.pcap", packets[split:])
    parts = _document(pcapq.analyze([str(a), str(b)]))

    def strip(doc: dict) -> list:
        conns = json.loads(json.dumps(doc["connections"]))
        for c in conns:
            c.pop("first_file"), c.pop("first_frame")
            for e in c["events"]:
                for k in ("file", "frame", "original", "dup_of", "answers_frame"):
                    e.pop(k, None)
            for series in c["series"]:
                for send in series["sends"]:
                    send.pop("file"), send.pop("frame")
            if c["reset"]:
                for k in ("file", "frame", "answers_frame"):
                    c["reset"].pop(k)
        return conns

    assert strip(parts) == strip(whole)
    assert parts["summary"]["connections"] == 5


def test_merge_labels_syn_retry_across_boundary(tmp_path):
    packets = spanning_conversations()
    # Split between the first and second SYN of connection 0.
    split = next(i for i, p in enumerate(packets) if p.time >= packets[0].time + 1.0)
    earlier = pcapq.analyze([str(write_pcap(tmp_path / "a.pcap", packets[:split]))], mergeable=True)
    later = pcapq.analyze([str(write_pcap(tmp_path / "b.pcap", packets[split:]))], mergeable=True)
    merged = _document(earlier.merge(later))
    first = merged["connections"][0]
    kinds = [e["kind"] for e in first["events"]]
    assert kinds[:3] == ["syn", "syn_retransmit", "syn_retransmit"]
    assert first["events"][1]["file"] == 1 and first["events"][1]["attempt"] == 2
    assert first["handshake"]["syn_attempts"] == 3
    assert merged["summary"]["connections"] == 5


def test_merge_uses_up_its_inputs(tmp_path):
    path = write_pcap(tmp_path / "a.pcap", spanning_conversations())
    a = pcapq.analyze([str(path)])
    b = pcapq.analyze([str(path)], mergeable=True)
    merged = a.merge(b)
    assert len(a) == 0 and len(b) == 0
    assert len(merged) >= 5


@pytest.mark.parametrize("keep_events", [True, False])
def test_merge_without_events_keeps_counts(tmp_path, keep_events):
    packets = spanning_conversations()
    split = len(packets) // 3
    a = write_pcap(tmp_path / "a.pcap", packets[:split])
    b = write_pcap(tmp_path / "b.pcap", packets[split:])
    one_run = pcapq.analyze([str(a), str(b)], keep_events=keep_events).summary()
    merged = pcapq.analyze([str(a)], keep_events=keep_events, mergeable=True).merge(
        pcapq.analyze([str(b)], keep_events=keep_events, mergeable=True)
    )
    assert merged.summary() == one_run


# --- merging analyses that did not keep every connection (fold mode), and the parallel path ---


def _fold_view(analysis: pcapq.Analysis) -> dict:
    """Everything a fold-mode analysis reports: summary, servers, port pressure, the kept
    connections with a problem, warnings."""
    return {
        "summary": analysis.summary(),
        "servers": analysis.servers(),
        "ports": analysis.port_pressure(),
        "problems": analysis.connections(),
        "warnings": analysis.warnings(),
    }


def _fold(paths, **kw) -> pcapq.Analysis:
    return pcapq.analyze([str(p) for p in paths], keep_connections=False, keep_events=False, **kw)


def _busy_spanning_conversations() -> list:
    """The spanning conversations among enough short connections for sweeps to retire some."""
    from test_memory_model import filler

    packets = spanning_conversations()
    filler(packets, 0.0, 2.0, every=0.0008)
    packets.sort(key=lambda p: p.time)
    return packets


def test_fold_merge_equals_one_run_at_every_split(tmp_path):
    packets = spanning_conversations()
    for split in range(1, len(packets)):
        first = write_pcap(tmp_path / "a.pcap", packets[:split])
        second = write_pcap(tmp_path / "b.pcap", packets[split:])
        one_run = _fold_view(_fold([first, second]))
        merged = _fold([first], mergeable=True).merge(_fold([second], mergeable=True))
        assert _fold_view(merged) == one_run, f"split after packet {split}"


def test_fold_merge_of_many_parts_with_retired_connections(tmp_path):
    packets = _busy_spanning_conversations()
    n = len(packets)
    for cuts in ([n // 2], [n // 5, n // 2, 4 * n // 5], [137, 2000, 2001, 9000, n - 3]):
        bounds = [0, *cuts, n]
        paths = [write_pcap(tmp_path / f"p{i}.pcap", packets[a:b]) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]
        one_run = _fold_view(_fold(paths))
        parts = [_fold([p], mergeable=True) for p in paths]
        merged = parts[0]
        for later in parts[1:]:
            merged = merged.merge(later)
        assert _fold_view(merged) == one_run, f"cuts {cuts}"
        assert one_run["summary"]["connections"] > 2000


@pytest.mark.parametrize("jobs", [1, 3])
@pytest.mark.parametrize("keep", [False, True])
def test_parallel_parts_joined_equal_one_run(tmp_path, jobs, keep):
    packets = _busy_spanning_conversations()
    n = len(packets)
    cuts = [n // 7, 2 * n // 7, n // 2, 5 * n // 7]
    bounds = [0, *cuts, n]
    paths = [str(write_pcap(tmp_path / f"p{i}.pcap", packets[a:b])) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    parts = pcapq._core.analyze_parts(paths, jobs=jobs, keep_connections=keep, keep_events=keep)
    merged = parts[0]
    for later in parts[1:]:
        merged = merged.merge(later)
    if keep:
        assert _document(merged) == _document(pcapq.analyze(paths))
    else:
        assert _fold_view(merged) == _fold_view(_fold(paths))


def test_fold_merge_refuses_mixed_and_read_analyses(tmp_path):
    path = write_pcap(tmp_path / "a.pcap", spanning_conversations())
    with pytest.raises(ValueError, match="kept every connection"):
        pcapq.analyze([str(path)]).merge(_fold([path], mergeable=True))
    read = _fold([path], mergeable=True)
    read.summary()
    with pytest.raises(ValueError, match="already read"):
        read.merge(_fold([path], mergeable=True))
    with pytest.raises(ValueError, match="not made mergeable"):
        _fold([path]).merge(_fold([path], mergeable=True))


def test_analyze_parts_raises_for_the_first_bad_file(tmp_path):
    good = str(write_pcap(tmp_path / "a.pcap", spanning_conversations()))
    with pytest.raises(pcapq.CaptureError) as raised:
        pcapq._core.analyze_parts([good, str(tmp_path / "missing.pcap"), str(tmp_path / "gone.pcap")], jobs=2)
    assert "missing.pcap" in raised.value.args[0]
