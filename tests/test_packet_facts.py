"""Per-packet facts on crafted captures (issue 12): VLAN IDs in the connection key, copies of
frames, and the client/server data milestones of the lean connection dicts
(docs/diagnosis.md, "Duplicate frames", "VLANs", "Facts for the diagnosis")."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pcapq
from conftest import analyze_json
from craft import Captured, Conversation, pcap_bytes

PCAP_HEADER = 24


def write_tagged(path: Path, packets: list[tuple[Captured, tuple[int, ...]]]) -> Path:
    """A classic pcap whose frames each carry their own VLAN tags (in time order)."""
    out = bytearray(pcap_bytes([]))
    for p, vlan in sorted(packets, key=lambda pv: pv[0].time):
        out += pcap_bytes([p], vlan=vlan)[PCAP_HEADER:]
    path.write_bytes(bytes(out))
    return path


def exchange(start_offset: float = 0.0) -> list[Captured]:
    c = Conversation(client=("10.0.0.1", 40000))
    c.handshake(start_offset)
    c.send("client", start_offset + 0.001, 100)
    c.ack("server", start_offset + 0.0012)
    c.send("server", start_offset + 0.002, 300)
    c.ack("client", start_offset + 0.0022)
    c.close(start_offset + 0.01)
    return c.packets


def test_vlan_copies_of_one_flow_are_one_connection_each(tmp_path: Path) -> None:
    # zeek_vlan-collisions: one flow mirrored untagged, on VLAN 42 and on QinQ 10/20, 50 ms apart.
    tagged = [(p, vlan) for i, vlan in enumerate([(), (42,), (10, 20)]) for p in exchange(0.05 * i)]
    doc = analyze_json(write_tagged(tmp_path / "vlans.pcap", tagged))
    conns = doc["connections"]
    assert [c.get("vlan") for c in conns] == [None, [42], [10, 20]]
    assert all(c["outcome"] == "completed" and c["symptoms"] == [] for c in conns), conns
    assert all(c["handshake"]["synack_attempts"] == 1 and c["follows"] is None for c in conns)
    assert doc["findings"] == []


def test_every_frame_captured_twice_is_counted_not_retransmitted(tmp_path: Path) -> None:
    # A bridge copy of every frame 50 us later, before the peer's next packet (same IP ID).
    once = exchange()
    twice = sorted(once + [Captured(p.time + 0.00005, p.ip, p.side, p.flags) for p in once], key=lambda p: p.time)
    single = analyze_json(write_tagged(tmp_path / "once.pcap", [(p, ()) for p in once]))
    doc = analyze_json(write_tagged(tmp_path / "twice.pcap", [(p, ()) for p in twice]))
    s = doc["summary"]
    assert s["duplicate_frames"] == len(once) and single["summary"]["duplicate_frames"] == 0
    assert (s["with_syn_retransmits"], s["with_synack_retransmits"], s["with_data_retransmits"], s["with_dup_acks"]) == (0, 0, 0, 0), s
    (c,) = doc["connections"]
    (plain,) = single["connections"]
    assert c["duplicates"] == len(once) and "duplicates" not in plain
    assert c["sides"] == plain["sides"]
    assert [e["kind"] for e in c["events"]] == [e["kind"] for e in plain["events"]]
    # Events keep the frame numbers of the file: the originals, at odd positions.
    assert [e["frame"] for e in c["events"]] == [2 * e["frame"] - 1 for e in plain["events"]]
    assert doc["findings"] == []


def test_same_frame_after_the_peers_answer_is_a_resend(tmp_path: Path) -> None:
    # Nothing from the peer may come between a frame and its copy: a tool that keeps its IP ID
    # (scapy) sends exactly this as a re-send. A real copy that late is missed (docs/diagnosis.md).
    c = Conversation(client=("10.0.0.1", 40000))
    c.handshake()
    req = c.send("client", 0.001, 100)
    c.ack("server", 0.0012)
    late_copy = Captured(req.time + 0.0005, req.ip, req.side, req.flags)
    doc = analyze_json(write_tagged(tmp_path / "late.pcap", [(p, ()) for p in c.packets + [late_copy]]))
    assert doc["summary"]["duplicate_frames"] == 0
    assert doc["summary"]["with_data_retransmits"] == 1


def test_lean_dict_has_the_data_and_close_milestones(tmp_path: Path) -> None:
    c = Conversation(client=("10.0.0.1", 40000))
    c.handshake()
    c.send("client", 0.001, 100)
    c.ack("server", 0.0012)
    c.send("server", 0.002, 300)
    c.send("client", 0.5, 100)
    c.ack("server", 0.5002)
    c.rst("client", 1.5)
    path = write_tagged(tmp_path / "waited.pcap", [(p, (7,)) for p in c.packets])
    (lean,) = pcapq.analyze([str(path)]).connections(lean=True)
    start = c.start
    got = {k: None if lean[k] is None else round(lean[k] - start, 4)
           for k in ("request_sent", "client_last_data", "server_first_data", "server_last_data", "client_closed")}
    assert got == {"request_sent": 0.001, "client_last_data": 0.5, "server_first_data": 0.002,
                   "server_last_data": 0.002, "client_closed": 1.5}
    assert (lean["duplicates"], lean["vlan"]) == (0, (7,))


def _document(analysis: pcapq.Analysis) -> dict:
    out = io.StringIO()
    analysis.write_json(out)
    return json.loads(out.getvalue())


def test_merge_at_every_split_equals_one_run(tmp_path: Path) -> None:
    # VLAN copies, frame copies, a refused connect tried again and a Fast Open fallback, split
    # between two captures anywhere: the merge must key, count and label as one run does.
    tagged = [(p, vlan) for i, vlan in enumerate([(), (42,)]) for p in exchange(0.05 * i)]
    copies = [(Captured(p.time + 0.00005, p.ip, p.side, p.flags), vlan) for p, vlan in tagged if vlan]
    refused = Conversation(client=("10.0.0.5", 40005))
    for t in (0.0, 0.5, 1.0):
        refused.syn(t)
        refused.rst("server", t + 0.0001)
    tfo = Conversation(client=("10.0.0.6", 40006))
    isn = tfo.sides["client"].isn
    tfo.segment("client", 0.2, "S", b"x" * 100, seq=isn)
    tfo.synack(0.2001)
    tfo.segment("client", 0.2002, "A", seq=isn + 1)
    tfo.segment("client", 0.2003, "PA", b"x" * 100, seq=isn + 1)
    tfo.ack("server", 0.2004)
    packets = sorted(tagged + copies + [(p, ()) for p in refused.packets + tfo.packets], key=lambda pv: pv[0].time)
    for split in range(1, len(packets)):
        first = write_tagged(tmp_path / "a.pcap", packets[:split])
        second = write_tagged(tmp_path / "b.pcap", packets[split:])
        one_run = _document(pcapq.analyze([str(first), str(second)]))
        merged = _document(pcapq.analyze([str(first)], mergeable=True).merge(pcapq.analyze([str(second)], mergeable=True)))
        assert merged["connections"] == one_run["connections"], f"split after packet {split}"
        assert merged["summary"] == one_run["summary"], f"split after packet {split}"
    s = one_run["summary"]
    assert (s["connections"], s["duplicate_frames"]) == (4, len(copies))
    assert {k: s["symptoms"][k] for k in ("syn_after_rst", "tfo_fallback", "syn_retransmitted")} == \
        {"syn_after_rst": 1, "tfo_fallback": 1, "syn_retransmitted": 0}
