"""Verdicts (docs/diagnosis.md): every outcome, every symptom and the retransmission schedules,
on crafted captures with exact times.

Unless a test says otherwise: client 10.0.0.1:40000, server 10.0.0.2:9000, SYN and SYN-ACK with
MSS 1460, SACK and window scale (no timestamps), the handshake at 0 / 0.1 ms / 0.2 ms, so the
handshake round trip is 0.2 ms and Linux's first data RTO is 200.2 ms (RTT + 200 ms). Every
capture is also checked for its summary: the outcome and symptom counts agree with the
connections, and with what the summary-only path (no records kept) counts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import pytest

import pcapq
from conftest import analyze_json
from craft import Captured, Conversation, write_pcap

OUTCOMES = ["completed", "open", "refused", "timed_out", "abandoned", "reset_by_server", "reset_by_client", "partial",
            "unreachable", "closed_by_server"]
SYMPTOMS = [
    "syn_retransmitted",
    "synack_retransmitted",
    "final_ack_dropped",
    "request_unacked",
    "data_retransmitted",
    "syncookie_suspected",
    "reset_after_ack",
    "reset_after_expiry",
    "rejected",
    "tfo_fallback",
    "defer_accept_suspected",
    "syn_after_rst",
    "spurious_retransmission",
    "mtu_black_hole",
]

PORT = 40000
RTO = 0.2002  # 0.2 ms round trip + 200 ms
TS = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1000, 0)), ("WScale", 7)]
TS_REPLY = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (2000, 1000)), ("WScale", 7)]
NO_SACK = [("MSS", 1460), ("WScale", 7)]


def mss_only(mss: int) -> list:
    """A SYN-ACK as a cookie listener answers a SYN without timestamps: no window scale, no SACK."""
    return [("MSS", mss)]


# ---------------------------------------------------------------------------------------------
# Building and reading captures


def conversation(port: int = PORT) -> Conversation:
    return Conversation(client=("10.0.0.1", port))


def later_traffic(t: float, port: int) -> Conversation:
    """Another connection (connect, close) at `t`: the capture goes on until then."""
    other = Conversation(client=("10.0.0.3", port))
    other.handshake(t)
    other.close(t + 0.001)
    return other


def request(conv: Conversation, t: float, size: int = 100) -> int:
    """The client sends `size` bytes at `t`; returns the index to re-send them by."""
    conv.send("client", t, size)
    return len(conv.sides["client"].sent) - 1


def response(conv: Conversation, t: float, size: int = 300) -> int:
    conv.send("server", t, size)
    return len(conv.sides["server"].sent) - 1


def resend(conv: Conversation, side: str, index: int, *times: float) -> None:
    for t in times:
        conv.resend(side, t, index)


def dup_ack(conv: Conversation, t: float) -> Captured:
    """The client answers a re-sent SYN-ACK with its ACK again."""
    return conv.segment("client", t, "A", advance=False)


def schedule(start: float, *intervals: float) -> list[float]:
    """Send times: `start`, then each interval after the one before."""
    times = [start]
    for i in intervals:
        times.append(round(times[-1] + i, 6))
    return times


def analyse(tmp_path: Path, *convs: Conversation, name: str = "verdicts") -> dict:
    packets = sorted((p for c in convs for p in c.packets), key=lambda p: p.time)
    path = write_pcap(tmp_path / f"{name}.pcap", packets)
    doc = analyze_json(path)
    check_summary(doc, path)
    return doc


def check_summary(doc: dict, path: Path) -> None:
    conns = doc["connections"]
    for c in conns:
        assert c["outcome"] in OUTCOMES
        assert c["symptoms"] == [s for s in SYMPTOMS if s in c["symptoms"]], "once each, in the documented order"
    outcomes = Counter(c["outcome"] for c in conns)
    symptoms = Counter(s for c in conns for s in c["symptoms"])
    summary = doc["summary"]
    assert summary["outcomes"] == {o: outcomes[o] for o in OUTCOMES}
    assert summary["symptoms"] == {s: symptoms[s] for s in SYMPTOMS}
    text = pcapq.analyze([str(path)], keep_connections=False, keep_events=False).summary()
    assert text["outcomes"] == summary["outcomes"]
    assert text["symptoms"] == summary["symptoms"]


def connection(doc: dict, port: int = PORT) -> dict:
    [c] = [c for c in doc["connections"] if c["client"] == f"10.0.0.1:{port}"]
    return c


def series(c: dict, kind: str, side: str | None = None) -> dict:
    found = [s for s in c["series"] if s["kind"] == kind and (side is None or s["from"] == side)]
    assert len(found) == 1, c["series"]
    return found[0]


def column(s: dict, field: str) -> list:
    return [send[field] for send in s["sends"]]


def assert_seconds(got: list, want: list) -> None:
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert (g is None and w is None) or (g is not None and w is not None and abs(g - w) < 1e-9), (got, want)


def assert_timed(s: dict, intervals: list[float], expected: list[float | None]) -> None:
    """Intervals and expected intervals of every send after the first; deviation is their difference."""
    assert_seconds(column(s, "interval"), [None, *intervals])
    assert_seconds(column(s, "expected"), [None, *expected])
    deviations = [None if e is None else i - e for i, e in zip(intervals, expected)]
    assert_seconds(column(s, "deviation"), [None, *deviations])


def verdict(c: dict) -> tuple[str, list[str]]:
    return c["outcome"], c["symptoms"]


# ---------------------------------------------------------------------------------------------
# Scenarios: each builds its conversations on a client port; the connection on that port gets
# the verdict named.

Scenario = Callable[[int], list[Conversation]]
SCENARIOS: dict[str, tuple[Scenario, str, list[str]]] = {}


def scenario(outcome: str, *symptoms: str):
    def register(build: Scenario) -> Scenario:
        SCENARIOS[build.__name__] = (build, outcome, list(symptoms))
        return build

    return register


@scenario("completed")
def answered_and_closed(port: int) -> list[Conversation]:
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    c.ack("server", 0.0012)
    response(c, 0.005)
    c.ack("client", 0.0052)
    c.close(0.010)
    return [c]


@scenario("completed")
def health_check(port: int) -> list[Conversation]:
    """Connect, then close without a byte of data."""
    c = conversation(port)
    c.handshake()
    c.close(0.001)
    return [c]


@scenario("completed")
def data_both_ways_still_open(port: int) -> list[Conversation]:
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    response(c, 0.002)
    c.ack("client", 0.0022)
    return [c]


@scenario("open")
def established_quiet(port: int) -> list[Conversation]:
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    c.ack("server", 0.0012)
    return [c]


@scenario("abandoned")
def closed_before_the_answer(port: int) -> list[Conversation]:
    """The server took the request and never answered; the client's read timeout closed it."""
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    c.ack("server", 0.0012)
    c.close(5.0)
    return [c]


@scenario("closed_by_server")
def server_closed_before_the_answer(port: int) -> list[Conversation]:
    """The server took the request and closed first without answering (its worker died); the
    client's FIN answers the server's."""
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    c.ack("server", 0.0012)
    c.fin("server", 1.5)
    c.fin("client", 1.5001)
    c.ack("server", 1.5002)
    return [c]


@scenario("abandoned", "syn_retransmitted")
def syns_stop_with_retries_left(port: int) -> list[Conversation]:
    """Three SYNs, then none while the capture goes on 10 s (the 4th was due at 3 s)."""
    c = conversation(port)
    for t in (0, 1, 2):
        c.syn(t)
    return [c, later_traffic(12.0, port + 1000)]


@scenario("open", "syn_retransmitted")
def syns_at_capture_end(port: int) -> list[Conversation]:
    """Three SYNs; the capture ends 0.5 s after the last."""
    c = conversation(port)
    for t in (0, 1, 2):
        c.syn(t)
    return [c, later_traffic(2.499, port + 1000)]


@scenario("timed_out", "syn_retransmitted")
def syns_linear_all_eleven(port: int) -> list[Conversation]:
    c = conversation(port)
    for t in schedule(0, 1, 1, 1, 1, 1, 2, 4, 8, 16, 32):
        c.syn(t)
    return [c]


@scenario("timed_out", "syn_retransmitted")
def syns_exponential_all_seven(port: int) -> list[Conversation]:
    c = conversation(port)
    for t in schedule(0, 1, 2, 4, 8, 16, 32):
        c.syn(t)
    return [c]


@scenario("abandoned", "syn_retransmitted")
def syns_linear_seven_then_silence(port: int) -> list[Conversation]:
    """Seven SYNs on the linear schedule is not the kernel giving up (it sends 11): the
    application did (a 10 s connect timeout); the 8th SYN was due at 11 s."""
    c = conversation(port)
    for t in schedule(0, 1, 1, 1, 1, 1, 2):
        c.syn(t)
    return [c, later_traffic(17.0, port + 1000)]


@scenario("refused", "rejected")
def refused(port: int) -> list[Conversation]:
    c = conversation(port)
    c.syn(0)
    c.rst("server", 0.0001)
    return [c]


@scenario("refused", "syn_retransmitted", "rejected")
def refused_after_a_lost_syn(port: int) -> list[Conversation]:
    c = conversation(port)
    c.syn(0)
    c.syn(1.0)
    c.rst("server", 1.0001)
    return [c]


@scenario("refused", "rejected", "syn_after_rst")
def refused_and_tried_again(port: int) -> list[Conversation]:
    """Windows answers a refused connect by sending the same SYN twice more, 0.5 s apart."""
    c = conversation(port)
    for t in (0.0, 0.5, 1.0):
        c.syn(t)
        c.rst("server", t + 0.0001)
    return [c]


@scenario("completed", "tfo_fallback")
def tfo_data_rejected(port: int) -> list[Conversation]:
    """TCP Fast Open: the SYN carries the request, the SYN-ACK acknowledges only the SYN, the
    client sends the request again after its ACK (RFC 7413 §4.2)."""
    c = conversation(port)
    isn = c.sides["client"].isn
    c.segment("client", 0.0, "S", b"x" * 100, seq=isn, options=[("MSS", 1460), ("SAckOK", b""), ("WScale", 7)])
    c.synack(0.0001)
    c.segment("client", 0.0002, "A", seq=isn + 1)
    c.segment("client", 0.0003, "PA", b"x" * 100, seq=isn + 1)
    c.ack("server", 0.0004)
    response(c, 0.002)
    c.close(0.01)
    return [c]


@scenario("completed", "synack_retransmitted", "defer_accept_suspected")
def defer_accept_idle_preconnect(port: int) -> list[Conversation]:
    """TCP_DEFER_ACCEPT 2: the client's bare ACK is dropped and the SYN-ACK re-sent once, 3 s
    later (not at 1 s); the ACK to that is taken and the server closes the idle connection."""
    c = conversation(port)
    c.handshake()
    c.synack(3.0001)
    dup_ack(c, 3.0002)
    c.fin("server", 13.0)
    c.ack("client", 13.0001)
    c.fin("client", 13.0002)
    c.ack("server", 13.0003)
    return [c]


@scenario("completed", "spurious_retransmission")
def dsacked_resend(port: int) -> list[Conversation]:
    """A request re-sent at 0.2 s although it had arrived: the server's ACK carries a D-SACK block
    for it (RFC 2883 §4), so it is a spurious re-send, not a loss."""
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    c.ack("server", 0.0012)
    c.send("client", 0.002, 100)
    c.resend("client", 0.202)
    end = c.sides["client"].next_seq
    c.segment("server", 0.2022, "A", ack=end, options=[("NOP", None), ("NOP", None), ("SAck", (end - 100, end))])
    response(c, 0.21)
    c.close(0.3)
    return [c]


def icmp_answer(c: Conversation, original: Captured, t: float, icmp_type: int, code: int, mtu: int = 0) -> None:
    """An ICMP error from a router answering `original`, quoting its IP header and 8 bytes of TCP."""
    from scapy.layers.inet import ICMP, IP
    from scapy.packet import Raw

    inner = IP(original.ip)
    quoted = original.ip[: inner.ihl * 4 + 8]
    error = IP(src="10.0.0.254", dst=inner.src) / ICMP(type=icmp_type, code=code, nexthopmtu=mtu) / Raw(quoted)
    c.packets.append(Captured(c.start + t, bytes(error), "icmp"))


@scenario("unreachable")
def icmp_host_unreachable(port: int) -> list[Conversation]:
    """Issue 18: a router answers the SYN with ICMP host unreachable; Linux's connect() fails at once."""
    c = conversation(port)
    icmp_answer(c, c.syn(0), 0.0003, 3, 1)
    return [c]


@scenario("reset_by_client", "data_retransmitted", "mtu_black_hole")
def mtu_black_hole(port: int) -> list[Conversation]:
    """Issue 18: the server's full-size segment re-sent on its RTO, never acknowledged, after the
    handshake and the request got through; the client gives up with an RST."""
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    c.ack("server", 0.0012)
    c.send("server", 0.002, 1448)
    c.resend("server", 0.202)
    c.resend("server", 0.602)
    c.segment("client", 2.0, "R", ack=0)
    return [c]


@scenario("reset_by_client")
def reset_by_client(port: int) -> list[Conversation]:
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    response(c, 0.002)
    c.rst("client", 0.003)
    return [c]


@scenario("reset_by_server")
def keepalive_race(port: int) -> list[Conversation]:
    """A second request on a kept-alive connection meets an RST: no handshake-time symptom."""
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    response(c, 0.002)
    c.ack("client", 0.0022)
    request(c, 4.0)
    c.rst("server", 4.0001, with_ack=False)
    return [c]


@scenario("partial")
def capture_started_midway(port: int) -> list[Conversation]:
    c = conversation(port)
    request(c, 0.0)
    c.ack("server", 0.0002)
    response(c, 0.001)
    c.close(0.002)
    return [c]


@scenario("completed", "syn_retransmitted")
def lost_syn(port: int) -> list[Conversation]:
    c = conversation(port)
    c.syn(0)
    c.handshake(1.0)
    request(c, 1.001)
    response(c, 1.002)
    c.close(1.010)
    return [c]


@scenario("completed", "syn_retransmitted", "synack_retransmitted")
def lost_synack(port: int) -> list[Conversation]:
    """The SYN-ACK was lost on its way to the client: its SYN timer re-sent the SYN, and the
    server answered that at once (tcp_check_req()), before the client's ACK."""
    c = conversation(port)
    c.syn(0)
    c.synack(0.0001)
    c.syn(1.0)
    c.synack(1.0002)
    c.ack("client", 1.0004)
    request(c, 1.001)
    response(c, 1.002)
    c.close(1.010)
    return [c]


FINAL_ACK_DATA = schedule(0.001, RTO, RTO, 2 * RTO, 4 * RTO, 8 * RTO, 16 * RTO, 32 * RTO)


@scenario("completed", "synack_retransmitted", "final_ack_dropped", "request_unacked")
def dropped_final_ack(port: int) -> list[Conversation]:
    """Accept queue full: the server dropped the client's ACK and its request, re-sent the
    SYN-ACK on its timer (1, 2, 4 s after the first), and took the request at its 8th send."""
    c = conversation(port)
    c.handshake()
    req = request(c, FINAL_ACK_DATA[0])
    resend(c, "client", req, *FINAL_ACK_DATA[1:])
    for t in (1.0001, 3.0001, 7.0001):
        c.synack(t)
        dup_ack(c, t + 0.0001)
    c.ack("server", FINAL_ACK_DATA[-1] + 0.0001)
    response(c, FINAL_ACK_DATA[-1] + 0.001)
    c.close(13.0)
    return [c]


@scenario("completed", "request_unacked")
def request_resent_into_half_open(port: int) -> list[Conversation]:
    """The request was re-sent before the server had acknowledged any client data."""
    c = conversation(port)
    c.handshake()
    req = request(c, 0.001)
    resend(c, "client", req, 0.001 + RTO)
    c.ack("server", 0.2013)
    response(c, 0.2014)
    c.close(0.3)
    return [c]


@scenario("completed", "data_retransmitted")
def client_data_resent_after_an_ack(port: int) -> list[Conversation]:
    """The server had acknowledged the request's first segment: the second one's loss is an
    ordinary one."""
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    c.ack("server", 0.0012)
    second = request(c, 0.002)
    resend(c, "client", second, 0.002 + RTO)
    c.ack("server", 0.2023)
    response(c, 0.203)
    c.close(0.3)
    return [c]


@scenario("completed", "data_retransmitted")
def response_resent(port: int) -> list[Conversation]:
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    resp = response(c, 0.002)
    resend(c, "server", resp, 0.002 + RTO)
    c.ack("client", 0.2023)
    c.close(0.3)
    return [c]


COOKIE_DATA = schedule(0.001, RTO, RTO, 2 * RTO, 4 * RTO, 8 * RTO)


def cookie_stall(port: int, synack_options: list, syn_options: list | None = None) -> list[Conversation]:
    """Handshake done; the request re-sent for 3.2 s, never acknowledged; the client gives up."""
    c = conversation(port)
    c.syn(0.0, options=syn_options)
    c.synack(0.0001, options=synack_options)
    c.ack("client", 0.0002)
    req = request(c, COOKIE_DATA[0])
    resend(c, "client", req, *COOKIE_DATA[1:])
    c.fin("client", 5.0)
    return [c]


@scenario("abandoned", "request_unacked", "syncookie_suspected")
def cookie_synack(port: int) -> list[Conversation]:
    return cookie_stall(port, mss_only(1460))


@scenario("abandoned", "request_unacked", "syncookie_suspected")
def cookie_synack_mss_1400(port: int) -> list[Conversation]:
    """A cookie SYN-ACK carries the route's MSS (tcp_make_synack()), not a cookie-table value:
    1400 does not rule a cookie out."""
    return cookie_stall(port, mss_only(1400))


@scenario("abandoned", "request_unacked", "syncookie_suspected")
def cookie_synack_with_timestamps(port: int) -> list[Conversation]:
    """With timestamps a cookie keeps window scale and SACK (they ride in the TSval)."""
    return cookie_stall(port, TS_REPLY, TS)


@scenario("abandoned", "request_unacked")
def stall_behind_a_full_synack(port: int) -> list[Conversation]:
    """Window scale and SACK without timestamps: tcp_conn_request() clears those options for a
    cookie, so this SYN-ACK came from a request socket."""
    return cookie_stall(port, [("MSS", 1460), ("SAckOK", b""), ("WScale", 7)])


@scenario("reset_by_server", "reset_after_ack")
def reset_after_handshake_ack(port: int) -> list[Conversation]:
    """tcp_abort_on_overflow = 1: the ACK that would overflow the accept queue gets an RST."""
    c = conversation(port)
    c.handshake()
    c.rst("server", 0.0003, with_ack=False)
    return [c]


@scenario("reset_by_server", "reset_after_ack")
def reset_after_first_data(port: int) -> list[Conversation]:
    c = conversation(port)
    c.handshake()
    request(c, 0.001)
    c.rst("server", 0.0011, with_ack=False)
    return [c]


EXPIRY_DATA = schedule(0.001, RTO, RTO, *(RTO * 2**k for k in range(1, 9)))


@scenario("reset_by_server", "synack_retransmitted", "final_ack_dropped", "request_unacked", "reset_after_expiry")
def reset_after_expiry(port: int) -> list[Conversation]:
    """Accept queue full: five SYN-ACK re-sends (1 to 31 s), the request expires at 63 s, and
    the listener answers the client's next re-send (at 102.5 s) with an RST."""
    c = conversation(port)
    c.handshake()
    req = request(c, EXPIRY_DATA[0])
    resend(c, "client", req, *EXPIRY_DATA[1:])
    for t in (1.0001, 3.0001, 7.0001, 15.0001, 31.0001):
        c.synack(t)
        dup_ack(c, t + 0.0001)
    c.rst("server", EXPIRY_DATA[-1] + 0.0001, with_ack=False)
    return [c]


@pytest.mark.parametrize("name", SCENARIOS)
def test_verdict(tmp_path: Path, name: str) -> None:
    build, outcome, symptoms = SCENARIOS[name]
    doc = analyse(tmp_path, *build(PORT))
    assert verdict(connection(doc)) == (outcome, symptoms)


def test_every_outcome_and_symptom_has_a_scenario() -> None:
    assert {o for _, o, _ in SCENARIOS.values()} == set(OUTCOMES)
    assert {s for _, _, ss in SCENARIOS.values() for s in ss} == set(SYMPTOMS)


def test_all_scenarios_in_one_capture_summary_agrees(tmp_path: Path) -> None:
    convs = [conv for i, (build, _, _) in enumerate(SCENARIOS.values()) for conv in build(PORT + i)]
    doc = analyse(tmp_path, *convs)
    assert all(doc["summary"]["outcomes"][o] > 0 for o in OUTCOMES)
    assert all(doc["summary"]["symptoms"][s] > 0 for s in SYMPTOMS)
    # The scenarios that do not depend on where the capture ends keep their verdict.
    for i, (name, (_, outcome, symptoms)) in enumerate(SCENARIOS.items()):
        if name not in ("syns_at_capture_end", "established_quiet", "data_both_ways_still_open"):
            assert verdict(connection(doc, PORT + i)) == (outcome, symptoms), name


# ---------------------------------------------------------------------------------------------
# The hard pairs, in detail


def test_lost_synack_resend_is_triggered(tmp_path: Path) -> None:
    c = connection(analyse(tmp_path, *lost_synack(PORT)))
    synack = series(c, "synack")
    assert (synack["from"], synack["schedule"], synack["seq"]) == ("server", "synack", None)
    assert column(synack, "triggered") == [False, True]
    assert_timed(synack, [1.0001], [None])
    syn = series(c, "syn")
    assert_timed(syn, [1.0], [1.0])
    assert c["added_latency"] == pytest.approx(1.0, abs=1e-9)


def test_lost_synack_timer_resend_before_the_ack_is_no_dropped_ack(tmp_path: Path) -> None:
    """The SYN-ACK timer re-sent it (1 s, not answering a SYN) and the client's ACK came after:
    the client had not got the first one; the server did take its ACK."""
    c = conversation()
    c.syn(0)
    c.synack(0.0001)
    c.synack(1.0001)
    c.ack("client", 1.0003)
    request(c, 1.001)
    response(c, 1.002)
    c.close(1.01)
    conn = connection(analyse(tmp_path, c))
    assert verdict(conn) == ("completed", ["synack_retransmitted"])
    synack = series(conn, "synack")
    assert column(synack, "triggered") == [False, False]
    assert_timed(synack, [1.0], [1.0])


def test_dropped_final_ack_series(tmp_path: Path) -> None:
    c = connection(analyse(tmp_path, *dropped_final_ack(PORT)))
    synack = series(c, "synack")
    assert column(synack, "triggered") == [False] * 4
    assert_timed(synack, [1.0, 2.0, 4.0], [1.0, 2.0, 4.0])
    # Only the SYN-ACK was re-sent: the client's round-trip sample from it stands (no 3 s
    # fallback). Probe at one RTO, then the RTO doubling.
    data = series(c, "data", "client")
    assert (data["schedule"], data["seq"]) == ("data_rto", 1)
    want = [RTO, RTO, 2 * RTO, 4 * RTO, 8 * RTO, 16 * RTO, 32 * RTO]
    assert_timed(data, want, want)
    assert c["added_latency"] == pytest.approx(FINAL_ACK_DATA[-1] - FINAL_ACK_DATA[0], abs=1e-9)


def test_reset_after_expiry_series(tmp_path: Path) -> None:
    c = connection(analyse(tmp_path, *reset_after_expiry(PORT)))
    assert_timed(series(c, "synack"), [1.0, 2.0, 4.0, 8.0, 16.0], [1.0, 2.0, 4.0, 8.0, 16.0])
    want = [RTO, RTO, *(RTO * 2**k for k in range(1, 9))]
    assert_timed(series(c, "data"), want, want)
    assert EXPIRY_DATA[-1] > 63.0, "the re-send the RST answers came after the request expired"
    assert c["added_latency"] == pytest.approx(EXPIRY_DATA[-1] - EXPIRY_DATA[0], abs=1e-9)


def test_reset_answers(tmp_path: Path) -> None:
    rsts = {}
    for name in ("reset_after_handshake_ack", "reset_after_first_data", "reset_after_expiry", "keepalive_race"):
        build = SCENARIOS[name][0]
        conn = connection(analyse(tmp_path, *build(PORT), name=name))
        [rst] = [e for e in conn["events"] if e["kind"] == "rst"]
        rsts[name] = rst["answers"]
    assert rsts == {
        "reset_after_handshake_ack": "handshake_ack",
        "reset_after_first_data": "data",
        "reset_after_expiry": "retransmit",
        "keepalive_race": "data",
    }


# ---------------------------------------------------------------------------------------------
# SYN schedules


@pytest.mark.parametrize(
    ("intervals", "name", "expected"),
    [
        ([1, 1, 1], "syn_linear", [1, 1, 1]),
        ([1, 2, 4], "syn_exponential", [1, 2, 4]),
        ([3, 6], "syn_legacy", [3, 6]),
        ([3.02, 5.97], "syn_legacy", [3, 6]),
        ([1.03, 1.02, 1.02, 1.02, 1.02, 2.02, 4.19], "syn_linear", [1, 1, 1, 1, 1, 2, 4]),
        ([1.0], "syn_linear", [1]),
    ],
)
def test_syn_schedule(tmp_path: Path, intervals: list[float], name: str, expected: list[float]) -> None:
    c = conversation()
    times = schedule(0, *intervals)
    for t in times[:-1]:
        c.syn(t)
    c.handshake(times[-1])
    c.close(times[-1] + 0.01)
    conn = connection(analyse(tmp_path, c))
    assert verdict(conn) == ("completed", ["syn_retransmitted"])
    syn = series(conn, "syn")
    assert (syn["kind"], syn["from"], syn["schedule"]) == ("syn", "client", name)
    assert_timed(syn, intervals, expected)
    assert column(syn, "frame") == list(range(1, len(times) + 1))
    assert conn["added_latency"] == pytest.approx(times[-1], abs=1e-9)


def test_timed_out_series_and_latency(tmp_path: Path) -> None:
    conn = connection(analyse(tmp_path, *syns_linear_all_eleven(PORT)))
    syn = series(conn, "syn")
    want = [1, 1, 1, 1, 1, 2, 4, 8, 16, 32]
    assert syn["schedule"] == "syn_linear"
    assert_timed(syn, want, want)
    assert conn["added_latency"] == pytest.approx(67.0, abs=1e-9)
    conn = connection(analyse(tmp_path, *syns_exponential_all_seven(PORT), name="exp"))
    assert series(conn, "syn")["schedule"] == "syn_exponential"
    assert conn["added_latency"] == pytest.approx(63.0, abs=1e-9)


def test_seven_linear_syns_at_capture_end_are_open(tmp_path: Path) -> None:
    c = conversation()
    for t in schedule(0, 1, 1, 1, 1, 1, 2):
        c.syn(t)
    doc = analyse(tmp_path, c, later_traffic(7.5, PORT + 1000))
    assert verdict(connection(doc)) == ("open", ["syn_retransmitted"])


# ---------------------------------------------------------------------------------------------
# Data schedules: a probe, then the RTO doubling


def unanswered_request(rtt: float, syn: list | None = None, synack: list | None = None) -> tuple[Conversation, int]:
    c = conversation()
    c.syn(0.0, options=syn)
    c.synack(rtt / 2, options=synack)
    c.ack("client", rtt)
    return c, request(c, rtt + 0.001)


@pytest.mark.parametrize(
    ("rtt", "syn", "synack", "probe", "rto"),
    [
        # LAN: RTO = RTT + 200 ms; the probe (2 RTT + 200 ms) is capped at the RTO.
        (0.010, None, None, 0.210, 0.210),
        # Long round trip: rttvar = 2 RTT, RTO = 3 RTT; the probe comes before it.
        (0.300, None, None, 0.800, 0.900),
        # No SACK: no tail loss probe (tcp_schedule_loss_probe()), the RTO from the start.
        (0.010, NO_SACK, None, None, 0.210),
        (0.010, TS, TS_REPLY, 0.210, 0.210),
    ],
)
def test_data_schedule(tmp_path: Path, rtt: float, syn: list | None, synack: list | None, probe: float | None, rto: float) -> None:
    c, req = unanswered_request(rtt, syn, synack)
    intervals = ([probe] if probe is not None else []) + [rto * 2**k for k in range(4 - (probe is not None))]
    times = schedule(rtt + 0.001, *intervals)
    resend(c, "client", req, *times[1:])
    c.ack("server", times[-1] + 0.0001)
    response(c, times[-1] + 0.001)
    conn = connection(analyse(tmp_path, c))
    assert conn["outcome"] == "completed"
    assert "request_unacked" in conn["symptoms"]
    assert_timed(series(conn, "data", "client"), intervals, intervals)
    assert conn["added_latency"] == pytest.approx(times[-1] - times[0], abs=1e-9)


def test_data_schedule_falls_back_only_for_the_side_that_resent_its_handshake_packet(tmp_path: Path) -> None:
    """The client's SYN was re-sent, timestamps are off: no round-trip sample (Karn), RTO 3 s
    (tcp_init_metrics()), probe 1 s. The server's SYN-ACK went once: its RTO is 200.2 ms."""
    c = conversation()
    c.syn(0)
    c.handshake(1.0)
    req = request(c, 1.001)
    client_times = schedule(1.001, 1.0, 3.0, 6.0)
    resend(c, "client", req, *client_times[1:])
    c.ack("server", 11.0011)
    resp = response(c, 11.002)
    resend(c, "server", resp, 11.002 + RTO)
    c.ack("client", 11.2023)
    c.close(12.0)
    conn = connection(analyse(tmp_path, c))
    assert verdict(conn) == ("completed", ["syn_retransmitted", "request_unacked", "data_retransmitted"])
    assert_timed(series(conn, "data", "client"), [1.0, 3.0, 6.0], [1.0, 3.0, 6.0])
    server = series(conn, "data", "server")
    assert server["seq"] == 1
    assert_timed(server, [RTO], [RTO])
    # The first to the last SYN, plus the first send of the request to its last re-send.
    assert conn["added_latency"] == pytest.approx(1.0 + 10.0, abs=1e-9)


def test_data_schedule_with_timestamps_keeps_the_sample_after_a_resent_syn(tmp_path: Path) -> None:
    c = conversation()
    c.syn(0, options=TS)
    # A re-sent SYN carries a new TSval (the same one would be the first SYN copied).
    c.syn(1.0, options=[("MSS", 1460), ("SAckOK", b""), ("Timestamp", (2000, 0)), ("WScale", 7)])
    c.synack(1.0001, options=[("MSS", 1460), ("SAckOK", b""), ("Timestamp", (3000, 2000)), ("WScale", 7)])
    c.ack("client", 1.0002)
    req = request(c, 1.001)
    resend(c, "client", req, 1.001 + RTO)
    c.ack("server", 1.2013)
    conn = connection(analyse(tmp_path, c))
    assert_timed(series(conn, "data"), [RTO], [RTO])


def test_data_schedule_deviation(tmp_path: Path) -> None:
    c = conversation()
    c.handshake()
    req = request(c, 0.001)
    resend(c, "client", req, 0.2112, 0.4214)
    c.ack("server", 0.5)
    conn = connection(analyse(tmp_path, c))
    assert_timed(series(conn, "data"), [0.2102, 0.2102], [RTO, RTO])
    assert_seconds(column(series(conn, "data"), "deviation"), [None, 0.01, 0.01])


def test_no_retransmission_no_series_no_latency(tmp_path: Path) -> None:
    conn = connection(analyse(tmp_path, *answered_and_closed(PORT)))
    assert (conn["series"], conn["added_latency"]) == ([], 0.0)


# ---------------------------------------------------------------------------------------------
# The summary when records are dropped along the way


def test_summary_agrees_when_connections_are_retired_during_the_capture(tmp_path: Path) -> None:
    """Enough segments (over 8192) and capture time (5 minutes) that, on the summary path,
    finished connections are retired mid-capture (a sweep every 4096 segments) and unanswered
    SYNs forgotten (idle over 120 s)."""
    builds = [answered_and_closed, refused, reset_after_handshake_ack, request_resent_into_half_open, health_check, syns_stop_with_retries_left]
    convs = []
    for i in range(1500):
        build = builds[i % len(builds)]
        port = 20000 + i
        for conv in build(port) if build is not syns_stop_with_retries_left else build(port)[:1]:
            offset = 0.2 * i
            for p in conv.packets:
                p.time += offset
            convs.append(conv)
    convs.append(later_traffic(0.2 * 1500 + 10, 65000))
    doc = analyse(tmp_path, *convs)
    assert doc["summary"]["tcp_segments"] > 8192
    expected = Counter(SCENARIOS[b.__name__][1] for b in builds)
    assert doc["summary"]["outcomes"] == {o: 250 * expected[o] + (o == "completed") for o in OUTCOMES}


# ---------------------------------------------------------------------------------------------
# The rules above checked against the running kernel (network namespaces, as test_kernel.py).

# A server that accepts and never reads; a client that connects, sends, waits, closes.
PEER = """
import socket, sys, time
if sys.argv[1] == "server":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 9000))
    s.listen(16)
    print("ready", flush=True)
    kept = []
    while True:
        kept.append(s.accept()[0])
else:
    c = socket.create_connection((sys.argv[2], 9000), timeout=30)
    c.sendall(b"x" * 200)
    time.sleep(float(sys.argv[3]))
    c.close()
"""


def nft_drop(net, ns: str, table: str, match: str) -> None:
    rules = f"table inet {table} {{\n chain input {{\n  type filter hook input priority 0; policy accept;\n  {match} drop\n }}\n}}\n"
    net.run(ns, ["nft", "-f", "-"], input=rules)


def kernel_run(net, pcap: Path, hold: float, lift: tuple[str, float] | None = None) -> dict:
    """One connection from the client namespace; `lift` = (table, seconds): the server
    namespace's nftables table removed that long after the client starts."""
    server = net.popen(net.server_ns, [sys.executable, "-c", PEER, "server"], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    with net.capture(pcap, bpf=["tcp"]):
        client = net.popen(net.client_ns, [sys.executable, "-c", PEER, "client", net.server_ip, str(hold)])
        if lift is not None:
            time.sleep(lift[1])
            net.run(net.server_ns, ["nft", "delete", "table", "inet", lift[0]])
        client.wait(timeout=hold + 40)
        time.sleep(0.3)
    [conn] = analyze_json(pcap)["connections"]
    return conn


def within_timer_slack(s: dict, count: int) -> None:
    """The first `count` re-sends came when the schedule says, give or take jiffies and the
    timer wheel's granularity (up to 1/8 of a long timeout)."""
    for send in s["sends"][1 : count + 1]:
        assert send["expected"] is not None
        assert -0.002 <= send["deviation"] <= 0.01 + send["expected"] / 8, s["sends"]


@pytest.fixture
def knet():
    from netns import NetnsPair

    with NetnsPair(tools=("ip", "tcpdump", "nft")) as pair:
        yield pair


@pytest.mark.kernel
def test_kernel_cookie_synack(knet, tmp_path: Path) -> None:
    """tcp_syncookies=2 (every SYN-ACK a cookie), a client without timestamps, MTU 1440: the
    SYN-ACK carries MSS 1400 (the route's, not the cookie table's) and no window scale or SACK;
    the request then black-holed is a suspected cookie stall."""
    knet.sysctl(knet.server_ns, "net.ipv4.tcp_syncookies", 2)
    knet.sysctl(knet.client_ns, "net.ipv4.tcp_timestamps", 0)
    for ns, iface in ((knet.client_ns, knet.client_if), (knet.server_ns, knet.server_if)):
        knet.run(ns, ["ip", "link", "set", "dev", iface, "mtu", "1440"])
    nft_drop(knet, knet.server_ns, "data", f"ip saddr {knet.client_ip} tcp dport 9000 ip length > 120")
    conn = kernel_run(knet, tmp_path / "cookie.pcap", hold=2.5)
    assert conn["sides"]["server"]["options"] == {"mss": 1400, "window_scale": None, "sack_permitted": False, "timestamps": False}
    assert conn["symptoms"] == ["request_unacked", "syncookie_suspected"]


@pytest.mark.kernel
def test_kernel_dropped_final_ack_keeps_the_clients_rto(knet, tmp_path: Path) -> None:
    """The server drops the client's ACK and request for 3.5 s (no timestamps): its SYN-ACK
    timer re-sends at 1 and 2 s, and the client re-sends its request on its measured RTO
    (about 200 ms, not the 3 s fallback): probe, RTO, doubling."""
    knet.sysctl(knet.client_ns, "net.ipv4.tcp_timestamps", 0)
    nft_drop(knet, knet.server_ns, "acks", "tcp dport 9000 tcp flags & (syn|ack) == ack")
    conn = kernel_run(knet, tmp_path / "final_ack.pcap", hold=5.0, lift=("acks", 3.5))
    assert conn["symptoms"][:3] == ["synack_retransmitted", "final_ack_dropped", "request_unacked"]
    synack = series(conn, "synack")
    assert column(synack, "expected")[1:3] == [1.0, 2.0]
    within_timer_slack(synack, 2)
    data = series(conn, "data", "client")
    assert data["sends"][1]["expected"] < 0.21
    within_timer_slack(data, 4)


@pytest.mark.kernel
def test_kernel_resent_syn_without_timestamps_falls_back(knet, tmp_path: Path) -> None:
    """The first SYN dropped, no timestamps: no RTT sample; the request's probe comes after
    1 s, the RTO after 3 s more."""
    knet.sysctl(knet.client_ns, "net.ipv4.tcp_timestamps", 0)
    nft_drop(knet, knet.server_ns, "syns", "tcp dport 9000 tcp flags & (syn|ack) == syn")
    nft_drop(knet, knet.server_ns, "data", f"ip saddr {knet.client_ip} tcp dport 9000 ip length > 120")
    conn = kernel_run(knet, tmp_path / "fallback.pcap", hold=5.0, lift=("syns", 0.5))
    assert_seconds(column(series(conn, "data"), "expected")[:3], [None, 1.0, 3.0])
    within_timer_slack(series(conn, "data"), 2)
