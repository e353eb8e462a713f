"""pcapq's event labels against tshark's tcp.analysis flags, frame by frame.

Each test crafts a capture (craft.Conversation), runs pcapq on it and runs tshark on it through
pyshark, in two-pass mode (pyshark 0.6 has no option for it; `custom_parameters=["-2"]` puts
tshark's -2 on the command line), and checks with `assert_agree`:

    pcapq                              tshark
    syn_retransmit, synack_retransmit, tcp.analysis.retransmission (tshark also sets it on a
    data_retransmit, fin_retransmit    fast_retransmission and a spurious_retransmission),
                                       or tcp.analysis.out_of_order (see below)
    dup_ack (dup_count, dup_of)        tcp.analysis.duplicate_ack (duplicate_ack_num,
                                       duplicate_ack_frame)
    zero_window                        the first tcp.analysis.zero_window of each stall
    syn of a connection that follows   tcp.analysis.reused_ports
    seq, ack of every event            tcp.seq, tcp.ack (relative)
    connection id                      tcp.stream

Where pcapq differs from tshark on purpose, the test states the difference and asserts it:

- out of order: tshark calls a segment below nextseq sent within the first RTT (3 ms when
  unknown) of the highest one tcp.analysis.out_of_order; pcapq has no timing guess and calls
  every such segment data_retransmit (`out_of_order=` of assert_agree).
- zero window: tshark flags every segment with window 0; pcapq flags the first of each stall
  (until a non-zero window from the same side).
- nextseq landing on 0: tshark keeps 0 as "nextseq not known yet", so when a side's data ends
  exactly at sequence number 0 its retransmission is not flagged; pcapq labels it
  (`missed_by_tshark=`).
"""

from __future__ import annotations

import shutil
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pytest

import pcapq

from conftest import analyze_json
from pcapq.crosscheck.tshark import Frame, read_tshark
from craft import Conversation as _Conversation
from craft import write_pcap


def Conversation(**kw) -> _Conversation:  # noqa: N802
    """A conversation whose IPv4 packets each get a new ID, as a Linux socket sends them: the
    duplicate ACKs here come without the segments they answer in between, and with scapy's
    constant ID they would be copies of one frame (docs/diagnosis.md, "Duplicate frames")."""
    return _Conversation(new_ip_ids=True, **kw)


pyshark = pytest.importorskip("pyshark")
TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")

RETRANSMITS = {"syn_retransmit", "synack_retransmit", "data_retransmit", "fin_retransmit"}
SYN, FIN, RST = 0x02, 0x01, 0x04


def tshark_frames(path: Path) -> dict[int, Frame]:
    """tshark's two-pass analysis of every TCP frame, read through pyshark (as crosscheck does)."""
    packets = pcapq.analyze([str(path)], keep_connections=False, keep_events=False).summary()["packets"]
    return read_tshark(path, packets, method="pyshark").frames


@dataclass
class Compared:
    ts: dict[int, Frame]
    doc: dict
    events: dict[int, list[dict]]  # frame -> pcapq events on it, each with its "conn" id

    def frames(self, *kinds: str) -> list[int]:
        return sorted(f for f, es in self.events.items() if any(e["kind"] in kinds for e in es))

    def event(self, frame: int, kind: str) -> dict:
        (e,) = [e for e in self.events[frame] if e["kind"] == kind]
        return e

    def flagged(self, flag: str) -> list[int]:
        return sorted(f for f, fr in self.ts.items() if flag in fr.analysis)


def first_of_stalls(ts: dict[int, Frame]) -> list[int]:
    """tshark's zero-window frames reduced to pcapq's rule: the first of each stall per side."""
    stalled: dict[tuple[int, str], bool] = {}
    firsts = []
    for n in sorted(ts):
        f = ts[n]
        if f.flags & (SYN | FIN | RST):
            continue
        side = (f.stream, f.source)
        if f.window == 0 and not stalled.get(side):
            assert "zero_window" in f.analysis
            firsts.append(n)
        stalled[side] = f.window == 0
    return firsts


def assert_agree(path: Path, out_of_order: Collection[int] = (), missed_by_tshark: Collection[int] = ()) -> Compared:
    """The frame-by-frame comparison; the documented differences are passed in explicitly."""
    ts = tshark_frames(path)
    doc = analyze_json(path)
    events: dict[int, list[dict]] = {}
    for conn in doc["connections"]:
        for e in conn["events"]:
            events.setdefault(e["frame"], []).append({**e, "conn": conn["id"]})
    got = Compared(ts, doc, events)

    # Retransmissions.
    retransmit = set(got.frames(*RETRANSMITS))
    ts_retransmit = set(got.flagged("retransmission"))
    assert set(got.flagged("out_of_order")) == set(out_of_order), "tshark's out-of-order frames"
    assert not set(missed_by_tshark) & ts_retransmit
    assert retransmit == ts_retransmit | set(out_of_order) | set(missed_by_tshark)
    for f in out_of_order:
        assert got.event(f, "data_retransmit"), f"out-of-order frame {f} is a data_retransmit for pcapq"

    # Duplicate ACKs, with tshark's number and frame.
    dups = {f: got.event(f, "dup_ack") for f in got.frames("dup_ack")}
    ts_dups = {n: (ts[n].dup_num, ts[n].dup_frame) for n in got.flagged("duplicate_ack")}
    assert {f: (e["dup_count"], e["dup_of"]["frame"]) for f, e in dups.items()} == ts_dups

    # Zero windows: pcapq's are the first of each of tshark's stalls.
    assert got.frames("zero_window") == first_of_stalls(ts)

    # Port reuse: the SYN that starts a connection following another one.
    reused = [c["first_frame"] for c in doc["connections"] if c["follows"] is not None]
    assert sorted(reused) == got.flagged("reused_ports")

    # Relative numbers of every event, and connections = tshark's streams.
    stream_of: dict[int, set[int]] = {}
    for f, es in events.items():
        for e in es:
            assert e["seq"] == ts[f].seq, f"seq of {e['kind']} on frame {f}"
            if e["ack"] is not None:
                assert e["ack"] == ts[f].ack, f"ack of {e['kind']} on frame {f}"
            stream_of.setdefault(e["conn"], set()).add(ts[f].stream)
    assert all(len(s) == 1 for s in stream_of.values()), stream_of
    assert len({min(s) for s in stream_of.values()}) == len(stream_of), stream_of
    return got


def capture(tmp_path: Path, packets: list, name: str = "x.pcap") -> Path:
    return write_pcap(tmp_path / name, sorted(packets, key=lambda p: p.time))


def keep_alive(conv: Conversation, side: str, t: float, one_byte: bool = False):
    """A keep-alive: zero or one byte at the next sequence number - 1."""
    seq = conv.sides[side].next_seq - 1
    return conv.segment(side, t, "A", b"\x00" if one_byte else b"", seq=seq, advance=False)


def frame_of(packets: list, p) -> int:
    """1-based frame number of crafted packet `p` in the time-sorted capture."""
    return next(n for n, q in enumerate(sorted(packets, key=lambda q: q.time), start=1) if q is p)


# ---------------------------------------------------------------------------------------------


def test_syn_retransmits(tmp_path):
    packets: list = []
    # Answered after three retries, 1 s, 1 s and 2 s apart.
    a = Conversation(client=("10.0.0.1", 40000), packets=packets)
    for t in (0.0, 1.0, 2.0, 4.0):
        a.syn(t)
    a.synack(4.0001)
    a.ack("client", 4.0002)
    a.send("client", 4.01, 100)
    a.close(4.1)
    # Never answered.
    b = Conversation(client=("10.0.0.1", 40001), client_isn=77, packets=packets)
    for t in (0.5, 1.5, 2.5, 4.5, 8.5):
        b.syn(t)
    # A closed port: the server's RST answers the SYN.
    c = Conversation(client=("10.0.0.1", 40002), client_isn=99, packets=packets)
    c.syn(0.2)
    reset = c.segment("server", 0.2001, "RA", seq=0, ack=100, advance=False)
    got = assert_agree(capture(tmp_path, packets))

    retries = got.frames("syn_retransmit")
    assert len(retries) == 3 + 4
    for f in retries:
        assert got.ts[f].analysis >= {"retransmission", "rto"}
        assert not got.ts[f].analysis & {"fast_retransmission", "spurious_retransmission"}
        e = got.event(f, "syn_retransmit")
        assert e["original"]["frame"] == got.ts[f].rto_frame
        assert e["after_handshake_ack"] is False
    client = {c["id"]: c["client"] for c in got.doc["connections"]}
    by_client: dict[str, list[dict]] = {}
    for f in retries:
        e = got.event(f, "syn_retransmit")
        by_client.setdefault(client[e["conn"]], []).append(e)
    answered, unanswered = by_client["10.0.0.1:40000"], by_client["10.0.0.1:40001"]
    assert [e["attempt"] for e in answered] == [2, 3, 4]
    assert [e["since_previous"] for e in answered] == pytest.approx([1.0, 1.0, 2.0], abs=1e-6)
    assert [e["since_previous"] for e in unanswered] == pytest.approx([1.0, 1.0, 2.0, 4.0], abs=1e-6)
    rst = got.event(frame_of(packets, reset), "rst")
    assert (rst["answers"], rst["after"]) == ("syn", pytest.approx(0.0001, abs=1e-6))
    assert (rst["seq"], rst["ack"]) == (1, 1)


@pytest.mark.parametrize("ending", ["served", "reset"])
def test_accept_queue_full(tmp_path, ending):
    """The server drops the handshake ACK and the request (accept queue full), re-sends its
    SYN-ACK at +1 s and +3 s; the client answers each with a duplicate ACK and re-sends its
    request at +0.2, +0.6, +1.4 s. Then the server either serves it or resets it."""
    conv = Conversation(client_isn=3_000_000_000)
    conv.handshake(0.0)
    request = conv.send("client", 0.001, 200)
    index = len(conv.sides["client"].sent) - 1
    retries = [conv.resend("client", t, index=index) for t in (0.201, 0.601, 1.401)]
    synacks, dups = [], []
    for t in (1.0001, 3.0001):
        synacks.append(conv.resend("server", t, index=0))
        dups.append(conv.segment("client", t + 0.0001, "A"))
    retries.append(conv.resend("client", 3.001, index=index))
    if ending == "served":
        conv.segment("server", 3.0011, "A")
        conv.send("server", 3.002, 1000)
        conv.ack("client", 3.0021)
        conv.close(3.1)
    else:
        reset = conv.segment("server", 3.0011, "R", advance=False)
    path = capture(tmp_path, conv.packets)
    got = assert_agree(path)
    frame = lambda p: frame_of(conv.packets, p)  # noqa: E731

    assert got.frames("synack_retransmit") == [frame(p) for p in synacks]
    for attempt, p in enumerate(synacks, start=2):
        e = got.event(frame(p), "synack_retransmit")
        assert (e["attempt"], e["after_handshake_ack"], e["original"]["frame"]) == (attempt, True, 2)
        assert got.ts[frame(p)].analysis >= {"retransmission", "rto"}
    assert got.frames("data_retransmit") == [frame(p) for p in retries]
    for attempt, p in enumerate(retries, start=2):
        e = got.event(frame(p), "data_retransmit")
        assert (e["attempt"], e["original"]["frame"], e["after_handshake_ack"]) == (attempt, frame(request), True)
        assert not got.ts[frame(p)].analysis & {"fast_retransmission", "spurious_retransmission"}
    waits = [got.event(frame(p), "data_retransmit")["since_previous"] for p in retries]
    assert waits == pytest.approx([0.2, 0.4, 0.8, 1.6], abs=1e-6)
    assert got.frames("dup_ack") == [frame(p) for p in dups]
    assert [got.ts[frame(p)].dup_num for p in dups] == [1, 2]
    (conn,) = got.doc["connections"]
    if ending == "served":
        assert conn["state"] == "closed"
    else:
        rst = got.event(frame(reset), "rst")
        assert (rst["answers"], rst["answers_frame"]["frame"]) == ("retransmit", frame(retries[-1]))
        assert rst["after"] == pytest.approx(0.0001, abs=1e-6)
        assert conn["state"] == "reset"


def test_lost_synack(tmp_path):
    """The SYN-ACK never reached the client: its SYN comes again, and the server answers it."""
    conv = Conversation()
    conv.syn(0.0)
    conv.synack(0.0001)
    conv.syn(1.0)
    conv.synack(1.0001)
    conv.ack("client", 1.0002)
    conv.send("client", 1.01, 10)
    got = assert_agree(capture(tmp_path, conv.packets))
    assert got.frames("syn_retransmit") == [3]
    assert got.frames("synack_retransmit") == [4]
    assert got.event(4, "synack_retransmit")["after_handshake_ack"] is False
    assert got.frames("handshake_ack") == [5]
    assert got.ts[4].rto_frame == 2


def test_data_retransmits(tmp_path):
    conv = Conversation()
    conv.handshake(0.0, rtt=0.01)  # tshark's out-of-order window: the first RTT, 20 ms
    first = len(conv.sides["client"].sent)
    segs = [conv.send("client", 0.03 + i * 0.001, 100) for i in range(4)]
    # The server's ACK of the first segment, then the third again 2 ms after the highest: out of
    # order. Without a packet from the server between, it would be the same transmission seen
    # twice (nothing re-sends that soon), a copy to pcapq.
    conv.segment("server", 0.034, "A", ack=conv.sides["client"].isn + 101, advance=False)
    quick = conv.resend("client", 0.035, index=first + 2)
    conv.segment("server", 0.05, "A")
    spurious = conv.resend("client", 0.3, index=first + 1)  # already acknowledged
    conv.send("client", 0.31, 100)
    rto = [conv.resend("client", t) for t in (0.61, 1.21)]
    conv.segment("server", 1.22, "A")
    conv.close(1.3)
    frame = lambda p: frame_of(conv.packets, p)  # noqa: E731
    got = assert_agree(capture(tmp_path, conv.packets), out_of_order={frame(quick)})

    assert got.frames("data_retransmit") == [frame(quick), frame(spurious), *map(frame, rto)]
    assert got.ts[frame(quick)].analysis >= {"out_of_order"}
    assert "retransmission" not in got.ts[frame(quick)].analysis
    assert got.event(frame(quick), "data_retransmit")["original"]["frame"] == frame(segs[2])
    assert got.ts[frame(spurious)].analysis >= {"spurious_retransmission", "retransmission"}
    assert [got.event(frame(p), "data_retransmit")["attempt"] for p in rto] == [2, 3]
    for p in rto:
        assert got.ts[frame(p)].analysis >= {"retransmission", "rto"}


def test_retransmit_of_data_the_capture_missed(tmp_path):
    """The capture dropped bytes 101-400 that the server acknowledged; 101-200 come again.
    Above nextseq, but already acknowledged: tshark's spurious retransmission."""
    conv = Conversation()
    conv.handshake()
    conv.send("client", 0.01, 100)
    conv.segment("server", 0.02, "A", ack=conv.sides["client"].next_seq + 300)
    again = conv.send("client", 0.3, 100)
    new = conv.segment("client", 0.31, "PA", b"z" * 100, seq=conv.sides["client"].isn + 401)
    frame = lambda p: frame_of(conv.packets, p)  # noqa: E731
    got = assert_agree(capture(tmp_path, conv.packets))
    assert got.frames("data_retransmit") == [frame(again)]
    assert got.ts[frame(again)].analysis >= {"spurious_retransmission", "retransmission"}
    assert frame(new) not in got.flagged("retransmission")
    assert got.doc["connections"][0]["sides"]["client"]["unseen_segments"] == 1


def test_fin_retransmits(tmp_path):
    conv = Conversation()
    conv.handshake()
    conv.send("client", 0.01, 100)
    conv.segment("server", 0.02, "A")
    fin = conv.fin("client", 0.1)
    again = [conv.resend("client", t) for t in (0.4, 1.0)]
    conv.fin("server", 1.01)
    conv.ack("client", 1.02)
    frame = lambda p: frame_of(conv.packets, p)  # noqa: E731
    got = assert_agree(capture(tmp_path, conv.packets))
    assert got.frames("fin_retransmit") == [frame(p) for p in again]
    for p in again:
        assert got.event(frame(p), "fin_retransmit")["original"]["frame"] == got.ts[frame(p)].rto_frame == frame(fin)


def test_duplicate_acks_and_fast_retransmit(tmp_path):
    conv = Conversation()
    conv.handshake()
    first = len(conv.sides["client"].sent)
    segs = [conv.send("client", 0.01 + i * 0.001, 100) for i in range(6)]
    base = conv.sides["client"].isn + 1
    new = conv.segment("server", 0.02, "A", ack=base + 100)
    dups = [conv.segment("server", t, "A", ack=base + 100) for t in (0.021, 0.022, 0.023)]
    fast = conv.resend("client", 0.0235, index=first + 1)
    conv.segment("server", 0.03, "A", ack=base + 500)
    moved = conv.segment("server", 0.031, "A", ack=base + 600)
    dups2 = [conv.segment("server", t, "A", ack=base + 600) for t in (0.04, 0.041)]
    frame = lambda p: frame_of(conv.packets, p)  # noqa: E731
    got = assert_agree(capture(tmp_path, conv.packets))
    assert got.frames("dup_ack") == [frame(p) for p in dups + dups2]
    assert [got.event(frame(p), "dup_ack")["dup_count"] for p in dups + dups2] == [1, 2, 3, 1, 2]
    assert {got.event(frame(p), "dup_ack")["dup_of"]["frame"] for p in dups} == {frame(new)}
    assert {got.event(frame(p), "dup_ack")["dup_of"]["frame"] for p in dups2} == {frame(moved)}
    assert got.ts[frame(fast)].analysis >= {"fast_retransmission", "retransmission"}
    e = got.event(frame(fast), "data_retransmit")
    assert (e["attempt"], e["original"]["frame"]) == (2, frame(segs[1]))


def test_keep_alives_are_not_retransmits_and_their_acks_not_duplicates(tmp_path):
    conv = Conversation()
    conv.handshake()
    conv.send("client", 0.01, 100)
    conv.segment("server", 0.02, "A")
    dup = conv.segment("server", 0.03, "A")
    probes = [keep_alive(conv, "client", 10.0), keep_alive(conv, "client", 20.0, one_byte=True)]
    answers = [conv.segment("server", 10.0001, "A"), conv.segment("server", 20.0001, "A")]
    client_ack = conv.segment("client", 20.4, "A")  # no keep-alive: the next server ACK is a duplicate
    later = conv.segment("server", 20.5, "A")
    frame = lambda p: frame_of(conv.packets, p)  # noqa: E731
    got = assert_agree(capture(tmp_path, conv.packets))
    for p in probes:
        assert "keep_alive" in got.ts[frame(p)].analysis
        assert frame(p) not in got.events
    for p in answers:
        assert "keep_alive_ack" in got.ts[frame(p)].analysis
        assert frame(p) not in got.events
    # The count goes on across the keep-alive ACKs, as in tshark.
    assert got.frames("dup_ack") == [frame(dup), frame(client_ack), frame(later)]
    assert got.event(frame(later), "dup_ack")["dup_count"] == 2


def test_zero_window(tmp_path):
    packets: list = []
    # Linux probes a zero window with keep-alive style segments (seq = snd_una - 1, no data).
    a = Conversation(client=("10.0.0.1", 40000), packets=packets)
    a.handshake()
    for i in range(3):
        a.send("client", 0.01 + i * 0.001, 1000)
    stall1 = a.segment("server", 0.02, "A", window=0)
    for t in (0.22, 0.62):
        keep_alive(a, "client", t)
        a.segment("server", t + 0.0001, "A", window=0)
    a.segment("server", 1.0, "A")  # window update
    a.send("client", 1.01, 1000)
    stall2 = a.segment("server", 1.02, "A", window=0)
    a.segment("server", 1.03, "A", window=0)
    # Other stacks send one byte at the next sequence number; the receiver drops it.
    b = Conversation(client=("10.0.0.1", 40001), packets=packets)
    b.handshake(0.5)
    b.send("client", 0.51, 1000)
    stall3 = b.segment("server", 0.52, "A", window=0)
    probes = []
    for t in (0.72, 1.12):
        probes.append(b.segment("client", t, "A", b"x", advance=False))
        b.segment("server", t + 0.0001, "A", window=0)
    b.segment("server", 1.5, "A")
    opened = b.send("client", 1.51, 1000)
    path = capture(tmp_path, packets)
    frame = lambda p: frame_of(packets, p)  # noqa: E731
    got = assert_agree(path)

    assert got.frames("zero_window") == sorted(frame(p) for p in (stall1, stall2, stall3))
    # The documented difference: tshark flags every zero-window segment.
    assert len(got.flagged("zero_window")) == 8
    assert set(got.frames("zero_window")) < set(got.flagged("zero_window"))
    for p in probes:
        assert "zero_window_probe" in got.ts[frame(p)].analysis
    assert not got.frames("data_retransmit")
    assert frame(opened) not in got.flagged("retransmission")


def test_port_reuse_with_new_isn(tmp_path):
    first = Conversation(client_isn=7000)
    first.handshake()
    first.send("client", 0.01, 50)
    first.close(0.1)
    second = Conversation(client_isn=9_000_000, server_isn=123, packets=first.packets)
    syn = second.syn(2.0)
    second.synack(2.0001)
    second.ack("client", 2.0002)
    second.send("client", 2.01, 60)
    second.rst("server", 2.1)
    got = assert_agree(capture(tmp_path, first.packets))
    frame = frame_of(first.packets, syn)
    assert got.flagged("reused_ports") == [frame]
    old, new = got.doc["connections"]
    assert (new["follows"], new["first_frame"], old["state"], new["state"]) == (0, frame, "closed", "reset")
    assert (got.ts[frame].stream, got.ts[frame].seq) == (1, 0)


def test_wraparound(tmp_path):
    packets: list = []
    # Both sides' data crosses sequence number 0.
    a = Conversation(client=("10.0.0.1", 40000), client_isn=2**32 - 150, server_isn=2**32 - 3, packets=packets)
    a.handshake()
    a.send("client", 0.01, 100)
    spanning = a.send("client", 0.011, 100)
    a.send("client", 0.012, 100)
    acked = a.sides["client"].isn + 101
    a.segment("server", 0.02, "PA", b"y" * 100, ack=acked)
    dups = [a.segment("server", t, "A", ack=acked) for t in (0.021, 0.022)]
    retry = a.resend("client", 0.3, index=-2)
    a.segment("server", 0.31, "A")
    a.close(1.0)
    # The client's data ends exactly at 0, and is re-sent.
    b = Conversation(client=("10.0.0.1", 40001), client_isn=2**32 - 101, packets=packets)
    b.handshake(0.5)
    b.send("client", 0.51, 100)
    assert b.sides["client"].next_seq == 0
    missed = [b.resend("client", t) for t in (0.81, 1.41)]
    frame = lambda p: frame_of(packets, p)  # noqa: E731
    path = capture(tmp_path, packets)
    got = assert_agree(path, missed_by_tshark={frame(p) for p in missed})

    assert got.frames("data_retransmit") == sorted([frame(retry), *map(frame, missed)])
    e = got.event(frame(retry), "data_retransmit")
    assert (e["seq"], e["original"]["frame"]) == (101, frame(spanning))
    assert got.frames("dup_ack") == [frame(p) for p in dups]
    # The documented difference: tshark flags nothing on them.
    for p in missed:
        assert not got.ts[frame(p)].analysis & {"retransmission", "out_of_order"}
        assert got.event(frame(p), "data_retransmit")["seq"] == 1
    conn_a = got.doc["connections"][0]
    assert conn_a["sides"]["client"]["unseen_segments"] == 0
    assert conn_a["state"] == "closed"


def test_partial_captures(tmp_path):
    packets: list = []
    # Mid-connection, and the server's earlier data was not captured: tshark takes the
    # server's base from the client's ACK number.
    a = Conversation(client=("10.0.0.1", 40000), packets=packets)
    a.send("client", 0.0, 100)
    a.sides["server"].next_seq += 500
    a.send("server", 0.01, 100)
    a.segment("client", 0.02, "A")
    a.resend("server", 0.3)
    # The capture began after the SYN: the SYN-ACK comes first, then the client's SYN again.
    b = Conversation(client=("10.0.0.1", 40001), packets=packets)
    b.synack(0.1)
    b.syn(1.1)
    synack2 = b.synack(1.1001)
    b.ack("client", 1.1002)
    b.send("client", 1.11, 10)
    # An ACK-only start: the server speaks first.
    c = Conversation(client=("10.0.0.1", 40002), packets=packets)
    c.segment("server", 0.2, "A")
    c.send("client", 0.21, 100)
    c.send("client", 0.211, 100)
    base = c.sides["client"].isn
    for t in (0.22, 0.221, 0.222):
        c.segment("server", t, "A", ack=base + 100)
    c.resend("client", 0.223)
    frame = lambda p: frame_of(packets, p)  # noqa: E731
    got = assert_agree(capture(tmp_path, packets))

    conns = got.doc["connections"]
    assert len(conns) == 3 and all(c["partial"] for c in conns)
    assert got.frames("synack_retransmit") == [frame(synack2)]
    assert [c["client"] for c in conns] == ["10.0.0.1:40000", "10.0.0.1:40001", "10.0.0.1:40002"]
    assert len(got.frames("data_retransmit")) == 2
    assert got.frames("dup_ack") and got.frames("handshake_ack")
