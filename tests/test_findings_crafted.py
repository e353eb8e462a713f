"""Findings (src/pcapq/diagnose/) on crafted captures with exact times: every cause, the pairs
that are easy to confuse, episodes, and where the capture was taken.

Every crafted connection has a round trip (RTT, 1 ms unless a test says otherwise) and each host
reacts after REACT (20 us). A test says when each side sends a packet; `Wire` places the
capture point (client, between or server) by adding the part of the one-way trip the packet
has travelled when it is seen there. Server 10.0.0.2:9000; clients 10.0.0.1 on their own ports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

import pcapq
from craft import Captured, Conversation, write_pcap
from pcapq.diagnose import Diagnosis, diagnose
from pcapq.causes.proxy_log import LINES as PROXY_LOG
from pcapq.diagnose import Finding

RTT = 0.001
REACT = 0.000_02
SERVER = ("10.0.0.2", 9000)
SERVER_NAME = "10.0.0.2:9000"
START = 1_700_000_000.0
# How far along the client -> server path each capture point is.
POINTS = {"client": 0.0, "between": 0.5, "server": 1.0}


# ---------------------------------------------------------------------------------------------
# Building captures


class Conn:
    """One connection on a Wire. Times are when the sender sends; the Wire decides when the
    capture point sees it."""

    def __init__(self, wire: Wire, port: int, client: str, server: tuple[str, int], isn: int) -> None:
        self.wire = wire
        self.conv = Conversation(client=(client, port), server=server, client_isn=isn, server_isn=isn + 500_000,
                                 start=START, packets=[])
        self.packets: list[Captured] = []

    @property
    def one_way(self) -> float:
        return self.wire.rtt / 2

    def arrives(self, t: float) -> float:
        """When a packet sent at `t` reaches the other side."""
        return t + self.one_way

    def _seen(self, side: str, p: Captured) -> Captured:
        at = self.wire.at
        p.time = p.time + self.one_way * (at if side == "client" else 1 - at)
        self.wire.packets.append(p)
        self.packets.append(p)
        return p

    def syn(self, t: float) -> Captured:
        return self._seen("client", self.conv.syn(t))

    def synack(self, t: float, options: list | None = None) -> Captured:
        return self._seen("server", self.conv.synack(t, options=options))

    def ack(self, t: float, side: str = "client") -> Captured:
        return self._seen(side, self.conv.ack(side, t))

    def dup_ack(self, t: float) -> Captured:
        """The client's ACK again, answering a re-sent SYN-ACK."""
        return self._seen("client", self.conv.segment("client", t, "A", advance=False))

    def send(self, side: str, t: float, size: int) -> Captured:
        return self._seen(side, self.conv.send(side, t, size))

    def resend(self, side: str, t: float, index: int) -> Captured:
        return self._seen(side, self.conv.resend(side, t, index))

    def last_index(self, side: str) -> int:
        return len(self.conv.sides[side].sent) - 1

    def fin(self, side: str, t: float) -> Captured:
        return self._seen(side, self.conv.fin(side, t))

    def rst(self, side: str, t: float, with_ack: bool = True) -> Captured:
        return self._seen(side, self.conv.rst(side, t, with_ack))

    def raw(self, side: str, t: float, flags: str, **kw) -> Captured:
        return self._seen(side, self.conv.segment(side, t, flags, **kw))

    # Whole exchanges

    def handshake(self, t: float) -> float:
        """SYN at `t`, SYN-ACK as it arrives, ACK as that arrives; returns when the ACK was sent."""
        self.syn(t)
        synack = self.arrives(t) + REACT
        self.synack(synack)
        ack = self.arrives(synack) + REACT
        self.ack(ack)
        return ack

    def request(self, t: float, size: int = 100) -> int:
        """The client sends its request at `t`; returns its index to re-send it by."""
        self.send("client", t, size)
        return self.last_index("client")

    def answer(self, t: float, size: int = 300) -> float:
        """The server acknowledges and answers the request at `t`; the client ACKs, the server
        closes and the client closes. Returns when the last packet was sent."""
        self.ack(t, side="server")
        self.send("server", t + REACT, size)
        got = self.arrives(t + REACT) + REACT
        self.ack(got)
        self.fin("server", t + 2 * REACT)
        fin = self.arrives(t + 2 * REACT) + REACT
        self.fin("client", fin)
        self.ack(self.arrives(fin) + REACT, side="server")
        return self.arrives(fin) + REACT

    def exchange(self, t: float) -> float:
        """A healthy connection from `t`: handshake, request, answer at once, close."""
        ack = self.handshake(t)
        self.request(ack + REACT)
        return self.answer(self.arrives(ack + REACT) + REACT)


class Wire:
    """Every connection of one capture, seen from one capture point."""

    def __init__(self, at: str | float = "client", rtt: float = RTT) -> None:
        """`at`: a name in POINTS, or how far along the path (0 to 1)."""
        self.at, self.rtt = POINTS[at] if isinstance(at, str) else at, rtt
        self.packets: list[Captured] = []

    def conn(self, port: int, client: str = "10.0.0.1", server: tuple[str, int] = SERVER, isn: int | None = None) -> Conn:
        return Conn(self, port, client, server, isn if isn is not None else 1000 + 7919 * port)

    def ordered(self) -> list[Captured]:
        return sorted(self.packets, key=lambda p: p.time)

    def frame(self, packet: Captured) -> int:
        """The packet's frame number (1-based) in the written capture."""
        return next(i for i, p in enumerate(self.ordered(), 1) if p is packet)

    def analyse(self, tmp_path: Path, name: str = "crafted") -> Result:
        path = write_pcap(tmp_path / f"{name}.pcap", self.ordered())
        analysis = pcapq.analyze([str(path)])
        result = Result(self, analysis, diagnose(analysis))
        # The findings must not depend on the records being kept.
        lean = diagnose(pcapq.analyze([str(path)], keep_connections=False, keep_events=False))
        assert [f.to_json() for f in lean.every_finding()] == [f.to_json() for f in result.diagnosis.every_finding()]
        assert lean.capture_point == result.diagnosis.capture_point
        return result


@dataclass
class Result:
    wire: Wire
    analysis: pcapq.Analysis
    diagnosis: Diagnosis

    @property
    def findings(self) -> list[Finding]:
        return self.diagnosis.findings

    @property
    def side(self) -> str:
        return self.diagnosis.capture_point.side

    def causes(self) -> list[str]:
        return [f.cause for f in self.findings]

    def one(self, cause: str, server: str = SERVER_NAME) -> Finding:
        found = [f for f in self.findings if f.cause == cause and f.server == server]
        assert len(found) == 1, self.describe()
        return found[0]

    def ids(self, *conns: Conn) -> list[int]:
        """The connection ids pcapq gave these crafted connections (by their first frame), sorted."""
        by_frame = {c["first_frame"]: c["id"] for c in self.analysis.connections()}
        return sorted(by_frame[self.wire.frame(c.packets[0])] for c in conns)

    def frames(self, f: Finding) -> list[int]:
        assert all(e["file"] == 0 for e in f.evidence)
        return [e["frame"] for e in f.evidence]

    def describe(self) -> str:
        return json.dumps([(f.cause, f.server, f.confidence, f.connections, f.confidence_reason) for f in self.findings], indent=1)


# What the proxy logged, per cause (accept_queue_overflow: as its connections ended).
PROXY_LOGS = {
    "closed_port": ["refused"],
    "syn_queue_overflow": ["timed_out"],
    "listen_drops": ["timed_out"],
    "network_loss": [],
    "slow_server": ["read_timeout", "client_gone"],
    "client_gave_up": ["client_gone"],
    "port_reuse": [],
}


def check(f: Finding, cause: str, confidence: float, connections: list[int], frames: list[int], result: Result,
          proxy_log: list[str] | None = None) -> None:
    """The finding's cause, server, confidence, connection ids and evidence frames (in order)."""
    assert (f.cause, f.server) == (cause, SERVER_NAME), result.describe()
    assert f.confidence == pytest.approx(confidence), f.confidence_reason
    assert f.connections == connections, result.describe()
    assert result.frames(f) == frames, f.evidence
    expected = [PROXY_LOG[k] for k in (proxy_log if proxy_log is not None else PROXY_LOGS[cause])]
    # Each line as nginx writes it, with the timeout it rests on around it (issue 14).
    assert len(f.proxy_log) == len(expected) and all(line in said for line, said in zip(expected, f.proxy_log)), f.proxy_log
    assert f.advice and f.confidence_reason


# ---------------------------------------------------------------------------------------------
# What happens to one connection

# The client's request re-sends with a 1 ms round trip: a probe at the RTO (RTT + 200 ms), then
# the RTO doubling (docs/diagnosis.md).
REQUEST_RESENDS = [0.201, 0.201, 0.402, 0.804, 1.608, 3.216]
# The SYN-ACK timer's re-sends after the first SYN-ACK (tcp_synack_retries, 1 s doubling).
SYNACK_RESENDS = [1.0, 3.0, 7.0, 15.0, 31.0]


def healthy(wire: Wire, port: int, t: float, client: str = "10.0.0.1", server: tuple[str, int] = SERVER) -> Conn:
    c = wire.conn(port, client=client, server=server)
    c.exchange(t)
    return c


def waiting(wire: Wire, port: int, t: float, answered: float) -> Conn:
    """Established and its request acknowledged (it sits in the accept queue, or is accepted),
    answered only at `answered`."""
    c = wire.conn(port)
    ack = c.handshake(t)
    c.request(ack + REACT)
    c.ack(c.arrives(ack + REACT) + REACT, side="server")
    c.send("server", answered, 300)
    c.ack(c.arrives(answered) + REACT)
    c.fin("server", answered + REACT)
    fin = c.arrives(answered + REACT) + REACT
    c.fin("client", fin)
    c.ack(c.arrives(fin) + REACT, side="server")
    return c


def dropped_ack(wire: Wire, port: int, t: float, accepted: float) -> tuple[Conn, Captured, list[Captured]]:
    """The accept queue is full when the client's ACK arrives: the server drops it and the
    request, re-sends its SYN-ACK on its timer (the client ACKs each again), and takes the
    first request re-send that arrives after `accepted`. Returns the connection, the ACK and
    the re-sent SYN-ACKs."""
    c = wire.conn(port)
    c.syn(t)
    synack = c.arrives(t) + REACT
    c.synack(synack)
    sent = c.arrives(synack) + REACT
    ack = c.ack(sent)
    req = c.request(sent + REACT)
    resent = []
    for after in SYNACK_RESENDS:
        if synack + after >= accepted:
            break
        resent.append(c.synack(synack + after))
        c.dup_ack(c.arrives(synack + after) + REACT)
    at = sent + REACT
    for interval in REQUEST_RESENDS:
        at += interval
        c.resend("client", at, req)
        if c.arrives(at) > accepted:
            c.answer(c.arrives(at) + REACT)
            break
    return c, ack, resent


def syns_dropped(wire: Wire, port: int, t: float, sends: int, answered: bool = True, client: str = "10.0.0.1") -> tuple[Conn, list[Captured]]:
    """`sends` SYNs 1 s apart that get nothing; then, if `answered`, one more that connects."""
    c = wire.conn(port, client=client)
    syns = [c.syn(t + k) for k in range(sends)]
    if answered:
        c.exchange(t + sends)
    return c, syns


def reset_on_overflow(wire: Wire, port: int, t: float) -> tuple[Conn, Captured]:
    """tcp_abort_on_overflow=1: the server answers the handshake ACK with an RST; the request,
    sent just after the ACK, crosses it and meets a second RST. Returns the first RST."""
    c = wire.conn(port)
    ack = c.handshake(t)
    rst = c.rst("server", c.arrives(ack) + REACT, with_ack=False)
    c.request(ack + 2 * REACT)
    c.rst("server", c.arrives(ack + 2 * REACT) + REACT, with_ack=False)
    return c, rst


def half_open(wire: Wire, port: int, t: float, client: str = "10.0.0.9") -> tuple[Conn, list[Captured]]:
    """A SYN from an address that never answers: SYN-ACK, then the timer's re-sends (two, as
    with tcp_synack_retries=2)."""
    c = wire.conn(port, client=client)
    c.syn(t)
    synack = c.arrives(t) + REACT
    return c, [c.synack(synack), c.synack(synack + 1.0), c.synack(synack + 3.0)]


def refused(wire: Wire, port: int, t: float, server: tuple[str, int] = SERVER) -> tuple[Conn, Captured]:
    c = wire.conn(port, server=server)
    c.syn(t)
    return c, c.rst("server", c.arrives(t) + REACT)


def lost_synack(wire: Wire, port: int, t: float) -> tuple[Conn, Captured]:
    """Seen at the server: its SYN-ACK is lost on the way, the client sends its SYN again
    after 1 s and the server answers that at once. Returns the second SYN."""
    c = wire.conn(port)
    c.syn(t)
    c.synack(c.arrives(t) + REACT)
    again = c.syn(t + 1.0)
    synack = c.arrives(t + 1.0) + REACT
    c.synack(synack)
    ack = c.arrives(synack) + REACT
    c.ack(ack)
    c.request(ack + REACT)
    c.answer(c.arrives(ack + REACT) + REACT)
    return c, again


def request_taken(wire: Wire, port: int, t: float) -> Conn:
    """The server acknowledges the request and does not answer."""
    c = wire.conn(port)
    ack = c.handshake(t)
    c.request(ack + REACT)
    c.ack(c.arrives(ack + REACT) + REACT, side="server")
    return c


def later(wire: Wire, t: float, port: int = 50000) -> Conn:
    """A healthy connection at `t`, so that the capture goes on until then."""
    return healthy(wire, port, t)


# ---------------------------------------------------------------------------------------------
# accept_queue_overflow


def accept_queue_run(wire: Wire, dropped: int, waiting_before: int = 3) -> dict:
    """A server whose application stops accepting: `waiting_before` connections sit established
    and unanswered, then `dropped` connections have their ACK dropped, and two other clients'
    SYNs are dropped (the listener drops SYNs while the accept queue is full). The application
    accepts again at 5 s."""
    healthy(wire, 40000, 0.0)  # answered before the queue filled: not waiting
    queued = [waiting(wire, 41000 + i, 0.01 * (i + 1), answered=5.0 + 0.01 * i) for i in range(waiting_before)]
    drops = [dropped_ack(wire, 42000 + i, 0.1 + 0.01 * i, accepted=5.0) for i in range(dropped)]
    others = [syns_dropped(wire, 43000 + i, 0.15 + 0.01 * i, sends=5)[0] for i in range(2)]
    return {"queued": queued, "drops": drops, "others": others}


def test_accept_queue_overflow_seen_at_the_server_proves_the_drop(tmp_path: Path) -> None:
    wire = Wire("server")
    run = accept_queue_run(wire, dropped=1)
    result = wire.analyse(tmp_path)
    assert result.side == "server"
    assert result.causes() == ["accept_queue_overflow"], result.describe()
    f = result.one("accept_queue_overflow")
    (conn, ack, resent), = run["drops"]
    # SYN -> SYN-ACK at once, SYN-ACK -> ACK a round trip: the ACK reached this host and the
    # SYN-ACK was sent again, so its kernel dropped the ACK.
    check(f, "accept_queue_overflow", 0.95, result.ids(conn, *run["others"]), [wire.frame(resent[0])], result, ["read_timeout"])
    assert f.confidence_reason.startswith("captured at the server")
    assert f.details["first_drop"] == pytest.approx(ack.time, abs=1e-6)
    assert f.first == pytest.approx(conn.packets[0].time, abs=1e-6)


def test_accept_queue_overflow_with_a_client_that_gave_up_connecting(tmp_path: Path) -> None:
    """While the queue is full the listener drops SYNs too: a client (nginx with a short
    fastcgi_connect_timeout) that gives up after two unanswered SYNs never connects, and the
    proxy logs a timeout while connecting besides the ones while reading."""
    wire = Wire("server")
    run = accept_queue_run(wire, dropped=1)
    gave_up, _ = syns_dropped(wire, 44000, 0.2, sends=2, answered=False)
    later(wire, 7.0)
    result = wire.analyse(tmp_path)
    f = result.one("accept_queue_overflow")
    (conn, _, resent), = run["drops"]
    assert f.connections == result.ids(conn, *run["others"], gave_up), result.describe()
    assert [PROXY_LOG["read_timeout"] in f.proxy_log[0], PROXY_LOG["timed_out"] in f.proxy_log[1]] == [True, True], f.proxy_log


@pytest.mark.parametrize("at", ["client", "between"])
@pytest.mark.parametrize("dropped, confidence", [(1, 0.6), (3, 0.8)])
def test_accept_queue_overflow_seen_elsewhere_is_less_sure(tmp_path: Path, at: str, dropped: int, confidence: float) -> None:
    """Away from the server a lost ACK looks the same as a dropped one; several at once point
    to the queue."""
    wire = Wire(at)
    run = accept_queue_run(wire, dropped=dropped)
    result = wire.analyse(tmp_path)
    assert result.side == at
    assert result.causes() == ["accept_queue_overflow"], result.describe()
    conns = [conn for conn, _, _ in run["drops"]]
    frames = [wire.frame(resent[0]) for _, _, resent in run["drops"]]
    check(result.one("accept_queue_overflow"), "accept_queue_overflow", confidence,
          result.ids(*conns, *run["others"]), frames, result, ["read_timeout"])


@pytest.mark.parametrize("at, answers", [("server", "handshake_ack"), ("client", "data")])
def test_abort_on_overflow_resets_are_an_accept_queue_overflow(tmp_path: Path, at: str, answers: str) -> None:
    """At the server the RST answers the ACK; at the client the request was sent before the RST
    arrived, so it answers the request: both are tcp_abort_on_overflow."""
    wire = Wire(at)
    healthy(wire, 40000, 0.0)
    queued = [waiting(wire, 41000 + i, 0.01 * (i + 1), answered=3.0) for i in range(2)]
    resets = [reset_on_overflow(wire, 42000 + i, 0.1 + 0.01 * i) for i in range(2)]
    result = wire.analyse(tmp_path)
    assert result.causes() == ["accept_queue_overflow"], result.describe()
    f = result.one("accept_queue_overflow")
    # The clients saw ECONNRESET at once: no read timeout.
    check(f, "accept_queue_overflow", 0.9, result.ids(*(c for c, _ in resets)), [wire.frame(r) for _, r in resets], result,
          ["reset_by_server"])
    assert [c["reset"]["answers"] for c in result.analysis.connections(problems_only=True)] == [answers] * 2
    assert "tcp_abort_on_overflow=1" in f.confidence_reason
    assert (f.details["waiting_at_first_drop"], f.details["estimated_backlog"]) == (len(queued), len(queued) - 1)


def test_syn_cookie_stall_is_an_accept_queue_overflow(tmp_path: Path) -> None:
    """A cookie SYN-ACK (MSS only, no timestamps), the handshake done, the request re-sent for
    seconds and never acknowledged, and no SYN-ACK timer behind it."""
    wire = Wire("server")
    healthy(wire, 40000, 0.0)
    c = wire.conn(42000)
    c.syn(0.1)
    synack = c.arrives(0.1) + REACT
    c.synack(synack, options=[("MSS", 1460)])
    ack = c.arrives(synack) + REACT
    c.ack(ack)
    req = c.request(ack + REACT)
    at, resends = ack + REACT, []
    for interval in REQUEST_RESENDS[:5]:
        at += interval
        resends.append(c.resend("client", at, req))
    c.fin("client", at + 1.0)
    result = wire.analyse(tmp_path)
    f = result.one("accept_queue_overflow")
    check(f, "accept_queue_overflow", 0.7, result.ids(c), [wire.frame(resends[0])], result, ["read_timeout"])
    assert "SYN cookies" in f.confidence_reason


@pytest.mark.parametrize("at", ["server", "client"])
@pytest.mark.parametrize("queued", [1, 2, 5])
def test_queue_estimate_counts_the_connections_waiting_at_the_first_drop(tmp_path: Path, at: str, queued: int) -> None:
    """Exactly `queued` connections were established and unanswered when the first ACK was
    dropped; one answered before does not count, nor does the second dropped connection."""
    wire = Wire(at)
    run = accept_queue_run(wire, dropped=2, waiting_before=queued)
    result = wire.analyse(tmp_path)
    f = result.one("accept_queue_overflow")
    (first, first_ack, _), (second, _, _) = run["drops"]
    assert f.details["first_drop"] == pytest.approx(first_ack.time, abs=1e-6)
    assert f.details["waiting_at_first_drop"] == queued
    assert f.details["estimated_backlog"] == queued - 1
    # The service rate, over the dropped connections' time: the queued connections, the two
    # other clients and both dropped ones were answered then; the healthy one before.
    packets = first.packets + second.packets
    rate = (queued + 2 + 2) / (max(p.time for p in packets) - min(p.time for p in packets))
    assert f.details["service_rate_per_s"] == round(rate, 2)
    assert f.details["suggested_backlog"] == max(round(rate * 60), 1)


# ---------------------------------------------------------------------------------------------
# syn_queue_overflow, listen_drops, network_loss


def test_syn_queue_overflow_half_open_requests_and_unanswered_syns(tmp_path: Path) -> None:
    """Four requests from an address that never answers hold the SYN queue; the SYNs after them
    (two more from that address, three clients' SYNs and their re-sends) are dropped until the
    requests expire."""
    wire = Wire("server")
    healthy(wire, 40000, 0.0)
    flood = [half_open(wire, 44000 + i, 0.1 + 0.001 * i) for i in range(4)]
    silent = [syns_dropped(wire, 44100 + i, 0.11 + 0.001 * i, sends=1, answered=False, client="10.0.0.9")[0] for i in range(2)]
    clients = [syns_dropped(wire, 41000 + i, 0.5 + 0.001 * i, sends=3) for i in range(3)]
    later(wire, 10.0)
    result = wire.analyse(tmp_path)
    assert result.causes() == ["syn_queue_overflow"], result.describe()
    f = result.one("syn_queue_overflow")
    # Evidence: each client's second SYN, then the half-open requests' first SYN-ACK re-sends,
    # at most six.
    frames = [wire.frame(syns[1]) for _, syns in clients] + [wire.frame(synacks[1]) for _, synacks in flood][:3]
    ids = result.ids(*(c for c, _ in flood), *silent, *(c for c, _ in clients))
    check(f, "syn_queue_overflow", 0.8, ids, frames, result)
    assert "4 half-open requests" in f.confidence_reason


def test_listen_drops_three_clients_without_half_open_requests(tmp_path: Path) -> None:
    wire = Wire("server")
    healthy(wire, 40000, 0.0)
    clients = [syns_dropped(wire, 41000 + i, 0.5 + 0.001 * i, sends=3) for i in range(3)]
    result = wire.analyse(tmp_path)
    assert result.causes() == ["listen_drops"], result.describe()
    check(result.one("listen_drops"), "listen_drops", 0.6, result.ids(*(c for c, _ in clients)),
          [wire.frame(syns[1]) for _, syns in clients], result)


def test_two_half_open_requests_are_not_a_full_syn_queue(tmp_path: Path) -> None:
    wire = Wire("server")
    healthy(wire, 40000, 0.0)
    for i in range(2):
        half_open(wire, 44000 + i, 0.1 + 0.001 * i)
    clients = [syns_dropped(wire, 41000 + i, 0.5 + 0.001 * i, sends=3)[0] for i in range(3)]
    later(wire, 10.0)
    result = wire.analyse(tmp_path)
    assert "syn_queue_overflow" not in result.causes(), result.describe()
    assert result.one("listen_drops").connections == result.ids(*clients)


@pytest.mark.parametrize("clients", [1, 2])
def test_network_loss_a_syn_sent_again(tmp_path: Path, clients: int) -> None:
    """Seen at the client: fewer than three clients' SYNs re-sent is the path, not the listener."""
    wire = Wire("client")
    healthy(wire, 40000, 0.0)
    lost = [syns_dropped(wire, 41000 + i, 0.5 + 0.001 * i, sends=1) for i in range(clients)]
    result = wire.analyse(tmp_path)
    assert result.causes() == ["network_loss"], result.describe()
    # The SYN sent again is each connection's second SYN, its handshake's first packet.
    again = [wire.frame(c.packets[1]) for c, _ in lost]
    # Unanswered SYNs only: the path and a busy listener look alike, so less sure.
    check(result.one("network_loss"), "network_loss", 0.5, result.ids(*(c for c, _ in lost)), again, result)


@pytest.mark.parametrize("clients", [1, 3])
def test_network_loss_a_lost_synack(tmp_path: Path, clients: int) -> None:
    """Seen at the server: SYN-ACK sent, the client's SYN again, a SYN-ACK at once. Even three
    at once are no queue: every SYN was answered."""
    wire = Wire("server")
    healthy(wire, 40000, 0.0)
    lost = [lost_synack(wire, 41000 + i, 0.5 + 0.001 * i) for i in range(clients)]
    result = wire.analyse(tmp_path)
    assert result.causes() == ["network_loss"], result.describe()
    synacks = [s for c in result.analysis.connections(problems_only=True) for s in c["series"] if s["kind"] == "synack"]
    assert [[send["triggered"] for send in s["sends"]] for s in synacks] == [[False, True]] * clients
    check(result.one("network_loss"), "network_loss", 0.6, result.ids(*(c for c, _ in lost)),
          [wire.frame(again) for _, again in lost], result)


def test_network_loss_a_response_sent_again(tmp_path: Path) -> None:
    wire = Wire("client")
    c = wire.conn(41000)
    ack = c.handshake(0.0)
    c.request(ack + REACT)
    got = c.arrives(ack + REACT) + REACT
    c.ack(got, side="server")
    c.send("server", got + REACT, 300)
    again = c.resend("server", got + REACT + 0.201, c.last_index("server"))
    c.ack(c.arrives(got + REACT + 0.201) + REACT)
    c.fin("client", 0.5)
    c.fin("server", c.arrives(0.5) + REACT)
    result = wire.analyse(tmp_path)
    assert result.causes() == ["network_loss"], result.describe()
    check(result.one("network_loss"), "network_loss", 0.6, result.ids(c), [wire.frame(again)], result)


# ---------------------------------------------------------------------------------------------
# closed_port, client_gave_up, slow_server, port_reuse


def test_closed_port(tmp_path: Path) -> None:
    wire = Wire("client")
    resets = [refused(wire, 41000 + i, 0.01 * i) for i in range(3)]
    result = wire.analyse(tmp_path)
    assert result.causes() == ["closed_port"], result.describe()
    f = result.one("closed_port")
    check(f, "closed_port", 0.95, result.ids(*(c for c, _ in resets)), [wire.frame(r) for _, r in resets], result)


def test_client_gave_up_on_its_syns(tmp_path: Path) -> None:
    """Three SYNs, then none while the capture goes on 10 s: the application's connect timeout.
    The re-sent SYNs of one client are also loss on the path."""
    wire = Wire("client")
    c, syns = syns_dropped(wire, 41000, 0.0, sends=3, answered=False)
    later(wire, 12.0)
    result = wire.analyse(tmp_path)
    assert result.causes() == ["client_gave_up", "network_loss"], result.describe()
    # The client's last SYN: it sent no more.
    check(result.one("client_gave_up"), "client_gave_up", 0.7, result.ids(c), [wire.frame(syns[-1])], result)
    check(result.one("network_loss"), "network_loss", 0.5, result.ids(c), [wire.frame(syns[1])], result)


def test_slow_server_took_the_request_client_gave_up_did_not_get_an_ack(tmp_path: Path) -> None:
    """The hard pair: the server acknowledged one request and the client reset it after 5 s
    (slow server); the other request was never acknowledged and the client closed (gave up)."""
    wire = Wire("client")
    slow = request_taken(wire, 41000, 0.0)
    rst = slow.rst("client", 5.0)
    impatient = wire.conn(41001)
    ack = impatient.handshake(0.1)
    impatient.request(ack + REACT)
    fin = impatient.fin("client", 5.1)
    result = wire.analyse(tmp_path)
    assert sorted(result.causes()) == ["client_gave_up", "slow_server"], result.describe()
    f = result.one("slow_server")
    check(f, "slow_server", 0.75, result.ids(slow), [wire.frame(rst)], result)
    gave_up = result.one("client_gave_up")
    assert (gave_up.confidence, gave_up.connections) == (0.7, result.ids(impatient))
    # No evidence: a connection's summary has no frame of the client's FIN.
    assert result.frames(gave_up) == [] and fin


def test_slow_server_closed_with_fin(tmp_path: Path) -> None:
    wire = Wire("server")
    slow = request_taken(wire, 41000, 0.0)
    slow.fin("client", 5.0)
    slow.ack(slow.arrives(5.0) + REACT, side="server")
    result = wire.analyse(tmp_path)
    assert result.causes() == ["slow_server"], result.describe()
    f = result.one("slow_server")
    assert (f.confidence, f.connections) == (0.75, result.ids(slow))
    assert f.evidence == []  # no frame of the client's FIN in a connection's summary


def time_wait_collision(wire: Wire, gap: float) -> dict:
    """The server closed first and holds the 4-tuple in TIME-WAIT; `gap` s after the close the
    client opens the same 4-tuple with a lower ISN. The TIME-WAIT socket answers the SYN with
    the old connection's ACK, the client's kernel resets that, and its SYN timer sends the SYN
    again 1 s later, which connects (RST killed the TIME-WAIT socket)."""
    old = wire.conn(41000, isn=900_000)
    end = old.exchange(0.0)
    new = wire.conn(41000, isn=100)
    t = end + gap
    syn = new.syn(t)
    stale = new.raw("server", new.arrives(t) + REACT, "A", seq=old.conv.sides["server"].next_seq,
                    ack=old.conv.sides["client"].next_seq, advance=False)
    new.raw("client", new.arrives(new.arrives(t) + REACT) + REACT, "R", seq=old.conv.sides["client"].next_seq,
            ack=0, advance=False)
    new.exchange(t + 1.0)
    return {"old": old, "new": new, "syn": syn, "stale": stale}


@pytest.mark.parametrize("at", ["client", "server"])
def test_port_reuse_met_time_wait(tmp_path: Path, at: str) -> None:
    """Only port_reuse: the re-sent SYN is no loss and the client's RST no give-up."""
    wire = Wire(at)
    run = time_wait_collision(wire, gap=2.0)
    result = wire.analyse(tmp_path)
    new = next(c for c in result.analysis.connections() if c["follows"] is not None)
    assert new["follows"] == result.ids(run["old"])[0]
    assert result.causes() == ["port_reuse"], result.describe()
    check(result.one("port_reuse"), "port_reuse", 0.5, result.ids(run["new"]),
          [wire.frame(run["syn"]), wire.frame(run["stale"])], result)


def test_port_reuse_after_time_wait_is_not_reported(tmp_path: Path) -> None:
    """The same 4-tuple 90 s after the close: TIME-WAIT (60 s) is over, whatever fails next is
    not the reuse."""
    wire = Wire("client")
    old = healthy(wire, 41000, 0.0)
    new = wire.conn(41000, isn=100)
    syns = [new.syn(90.0 + k) for k in range(2)]
    new.exchange(92.0)
    result = wire.analyse(tmp_path)
    assert result.ids(old) != result.ids(new) and syns
    assert "port_reuse" not in result.causes(), result.describe()


@pytest.mark.parametrize("ended_by", ["client_fin", "rst"])
def test_port_reuse_needs_the_server_to_have_closed_first(tmp_path: Path, ended_by: str) -> None:
    """The same 4-tuple 2 s after a close the client made first, or an RST: the server kept no
    TIME-WAIT, so a SYN unanswered there is not the reuse's doing."""
    wire = Wire("client")
    old = wire.conn(41000, isn=900_000)
    ack = old.handshake(0.0)
    old.request(ack + REACT)
    t = old.arrives(ack + REACT) + REACT
    old.ack(t, side="server")
    old.send("server", t + REACT, 300)
    got = old.arrives(t + REACT) + REACT
    if ended_by == "client_fin":
        old.fin("client", got)
        fin = old.arrives(got) + REACT
        old.fin("server", fin)
        end = old.arrives(fin) + REACT
        old.ack(end)
    else:
        old.rst("client", got)
        end = got
    new = wire.conn(41000, isn=100)
    new.syn(end + 2.0)
    new.syn(end + 3.0)
    new.exchange(end + 5.0)
    result = wire.analyse(tmp_path)
    follower = next(c for c in result.analysis.connections() if c["follows"] is not None)
    assert follower["follows"] == result.ids(old)[0]
    assert "port_reuse" not in result.causes(), result.describe()


# ---------------------------------------------------------------------------------------------
# Episodes


def test_the_same_server_failing_twice_a_minute_apart_is_two_findings(tmp_path: Path) -> None:
    wire = Wire("client")
    first = [refused(wire, 41000 + i, 0.01 * i) for i in range(2)]
    healthy(wire, 40000, 30.0)
    second = [refused(wire, 42000 + i, 60.0 + 0.01 * i) for i in range(2)]
    result = wire.analyse(tmp_path)
    assert result.causes() == ["closed_port", "closed_port"], result.describe()
    for f, resets in zip(result.findings, (first, second)):
        check(f, "closed_port", 0.95, result.ids(*(c for c, _ in resets)), [wire.frame(r) for _, r in resets], result)
        assert (f.first, f.last) == (pytest.approx(resets[0][0].packets[0].time), pytest.approx(resets[-1][1].time))


def test_failures_within_the_episode_gap_are_one_finding(tmp_path: Path) -> None:
    wire = Wire("client")
    resets = [refused(wire, 41000 + i, 20.0 * i) for i in range(3)]
    result = wire.analyse(tmp_path)
    check(result.one("closed_port"), "closed_port", 0.95, result.ids(*(c for c, _ in resets)),
          [wire.frame(r) for _, r in resets], result)


def test_two_servers_two_findings(tmp_path: Path) -> None:
    """A closed port on one server and listen drops on another, at the same time."""
    other = ("10.0.0.3", 8080)
    wire = Wire("client")
    resets = [refused(wire, 41000 + i, 0.01 * i, server=other) for i in range(2)]
    clients = [syns_dropped(wire, 42000 + i, 0.001 * i, sends=3) for i in range(3)]
    result = wire.analyse(tmp_path)
    assert sorted((f.cause, f.server) for f in result.findings) == [("closed_port", "10.0.0.3:8080"), ("listen_drops", SERVER_NAME)]
    closed = result.one("closed_port", server="10.0.0.3:8080")
    assert closed.connections == result.ids(*(c for c, _ in resets))
    assert result.frames(closed) == [wire.frame(r) for _, r in resets]
    check(result.one("listen_drops"), "listen_drops", 0.6, result.ids(*(c for c, _ in clients)),
          [wire.frame(syns[1]) for _, syns in clients], result)


# ---------------------------------------------------------------------------------------------
# Where the capture was taken


@pytest.mark.parametrize(
    "at, rtt, side",
    [
        ("client", RTT, "client"),
        ("server", RTT, "server"),
        ("between", RTT, "between"),
        # Both gaps under 0.5 ms: a host's own reaction, not a trip.
        ("client", 0.000_05, "unknown"),
        ("server", 0.000_05, "unknown"),
        # A quarter of the way: 0.77 ms and 0.27 ms; the second is under 0.5 ms but the first
        # is not four times it.
        (0.25, RTT, "between"),
    ],
)
def test_capture_point_from_handshake_timing(tmp_path: Path, at: str | float, rtt: float, side: str) -> None:
    wire = Wire(at, rtt=rtt)
    for i in range(5):
        healthy(wire, 41000 + i, 0.01 * i)
    result = wire.analyse(tmp_path)
    assert result.findings == []
    assert result.side == side, result.diagnosis.capture_point.reason


def test_capture_point_uses_only_clean_handshakes(tmp_path: Path) -> None:
    """Re-sent SYNs make SYN to SYN-ACK a second long: those handshakes are not timed."""
    wire = Wire("server")
    healthy(wire, 40000, 0.0)
    for i in range(3):
        syns_dropped(wire, 41000 + i, 0.5 + 0.001 * i, sends=3)
    assert wire.analyse(tmp_path).side == "server"


def test_capture_point_unknown_without_a_handshake(tmp_path: Path) -> None:
    wire = Wire("client")
    refused(wire, 41000, 0.0)
    cp = wire.analyse(tmp_path).diagnosis.capture_point
    assert (cp.side, cp.reason) == ("unknown", "no handshake without retransmission to time")
