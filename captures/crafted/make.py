#!/usr/bin/env python3
"""Writes the crafted captures in this directory, byte for byte the same on every run:

    python3 captures/crafted/make.py                 # all of them, here
    python3 captures/crafted/make.py --out DIR NAME  # some of them, elsewhere

Each scenario is a few TCP conversations built packet by packet with scapy (tests/craft.py):
fixed timestamps (from 2023-11-14 22:13:20 UTC), ISNs, ports and IP ids (scapy's default, 1),
written as classic pcap with Ethernet framing. Proxy (client) 10.0.0.1, upstream (server)
10.0.0.2:9000. Timings follow Linux's timers: SYN retries 1 s apart (tcp_syn_linear_timeouts),
SYN-ACK retries 1 s then doubling, data retransmissions from a 200 ms RTO, doubling.
tests/test_catalog.py regenerates them and compares the bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Callable, Iterable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests"))

from craft import START, Captured, Conversation, write_pcap  # noqa: E402
from scapy.layers.inet import IP, TCP  # noqa: E402

CLIENT = "10.0.0.1"
SERVER = ("10.0.0.2", 9000)
REQUEST = 100
RESPONSE = 1000
# A request socket's SYN-ACK timer (TCP_TIMEOUT_INIT 1 s, doubling: reqsk_timer_handler()).
SYNACK_RETRIES = (1.0, 3.0, 7.0)
# A data segment's retransmission timer: TCP_RTO_MIN 200 ms, doubling (tcp_retransmit_timer()).
RTO = (0.2, 0.6, 1.4, 3.0)


def conversation(packets: list[Captured], port: int, isn: int, server_isn: int) -> Conversation:
    return Conversation(client=(CLIENT, port), server=SERVER, client_isn=isn, server_isn=server_isn, packets=packets)


def exchange(c: Conversation, t: float) -> float:
    """Request, its ACK, the response, its ACK, the server's FIN first, then the client's; the
    time of the last packet."""
    c.send("client", t, REQUEST)
    c.ack("server", t + 0.0001)
    return answer_and_close(c, t + 0.0005)


def answer_and_close(c: Conversation, t: float) -> float:
    """The response at `t`, its ACK, the server's FIN first, then the client's; the time of the
    last packet."""
    c.send("server", t, RESPONSE)
    c.ack("client", t + 0.0001)
    c.fin("server", t + 0.0002)
    c.fin("client", t + 0.0003)
    c.ack("server", t + 0.0004)
    return t + 0.0004


def healthy(packets: list[Captured]) -> None:
    """Three sequential exchanges, 10 packets each, nothing re-sent."""
    for i in range(3):
        c = conversation(packets, 40000 + i, 1000 + 100_000 * i, 5000 + 100_000 * i)
        t = 0.010 * i
        c.handshake(t)
        exchange(c, t + 0.0003)


def syn_queue_overflow(packets: list[Captured]) -> None:
    """tcp_syncookies=0, backlog 3: four SYNs from 10.0.0.66 (a host that never answers) fill
    the SYN queue (its SYN-ACKs are re-sent after 1 s, then the requests expire with
    tcp_synack_retries=1, 3 s after their SYN). The proxy's SYNs at 0.5, 1.5, 2.5 s are dropped
    (tcp_conn_request(): inet_csk_reqsk_queue_is_full()); the one at 3.5 s is answered."""
    for i in range(4):
        c = Conversation(client=("10.0.0.66", 41000 + i), server=SERVER, client_isn=7000 + i, server_isn=9000 + i,
                         packets=packets)
        c.syn(0.001 * i)
        c.synack(0.001 * i + 0.00002)
        c.synack(1.0 + 0.001 * i)
    c = conversation(packets, 40000, 1000, 5000)
    for t in (0.5, 1.5, 2.5, 3.5):
        c.syn(t)
    c.synack(3.50002)
    c.ack("client", 3.5001)
    exchange(c, 3.5003)


def accept_queue_filled(packets: list[Captured]) -> tuple:
    """backlog 1, no accept() yet: 40000 and 40001 are established and their requests wait in
    the accept queue (which holds 2); 40002 got its SYN-ACK before 40001's ACK filled the queue.
    Returns the three conversations; 40002's ACK is next."""
    a = conversation(packets, 40000, 1000, 5000)
    a.handshake(0.0)
    a.send("client", 0.0003, REQUEST)
    a.ack("server", 0.0004)
    b = conversation(packets, 40001, 2000, 6000)
    c = conversation(packets, 40002, 3000, 7000)
    b.syn(0.0100)
    c.syn(0.0101)
    b.synack(0.01011)
    c.synack(0.01012)
    b.ack("client", 0.0102)
    b.send("client", 0.0103, REQUEST)
    b.ack("server", 0.0104)
    return a, b, c


def accept_queue_overflow(packets: list[Captured]) -> None:
    """backlog 1 (the accept queue holds 2), first accept() at 3 s. 40000 and 40001 fill the
    queue; 40002's SYN was answered before 40001's ACK, so its ACK finds the queue full and is
    dropped (tcp_check_req() -> inet_csk_complete_hashdance() fails), and so is its request: the
    server re-sends its SYN-ACK (1 s, 3 s), the client answers each with a duplicate ACK and
    re-sends its request on its RTO (0.2 s, doubling). 40003's SYNs meet a full queue and are
    dropped (tcp_conn_request(): sk_acceptq_is_full()) until 3.5 s."""
    a, b, c = accept_queue_filled(packets)
    c.ack("client", 0.0105)  # dropped: the accept queue is full
    c.send("client", 0.0106, REQUEST)  # dropped
    for r in RTO[:3]:
        c.resend("client", 0.0106 + r)
    c.synack(0.01012 + SYNACK_RETRIES[0])
    c.ack("client", 0.01012 + SYNACK_RETRIES[0] + 0.0001)
    d = conversation(packets, 40003, 4000, 8000)
    for t in (0.5, 1.5, 2.5):
        d.syn(t)
    # accept() at 3.0 s: the server answers 40000 and 40001 and the queue has room again.
    answer_and_close(a, 3.0)
    answer_and_close(b, 3.001)
    # 40002's SYN-ACK again at 3.01 s; the client's ACK now creates the connection.
    c.synack(0.01012 + SYNACK_RETRIES[1])
    c.ack("client", 3.0103)
    c.resend("client", 0.0106 + RTO[3], index=2)  # the request (sent: SYN, ACK, request, ...)
    c.ack("server", 3.0107)
    answer_and_close(c, 3.02)
    d.syn(3.5)
    d.synack(3.50002)
    d.ack("client", 3.5001)
    exchange(d, 3.5003)


def abort_on_overflow(packets: list[Captured]) -> None:
    """accept_queue_overflow with net.ipv4.tcp_abort_on_overflow=1: 40002's ACK finds the accept
    queue full and the listener answers it with an RST (tcp_check_req(): embryonic reset),
    then its request with a second one. The client's read fails with ECONNRESET at once."""
    a, b, c = accept_queue_filled(packets)
    c.ack("client", 0.0105)
    c.rst("server", 0.01052, with_ack=False)
    c.send("client", 0.0106, REQUEST)
    c.rst("server", 0.01062, with_ack=False)
    t = 2.0
    for conv in (a, b):
        answer_and_close(conv, t)
        t += 0.001


def client_timeout_rst(packets: list[Captured]) -> None:
    """The server acknowledges each request (delayed ACK, 40 ms) but would answer only after
    1.5 s; the client's read times out after 1 s and it closes with SO_LINGER 0: an RST."""
    for i in range(2):
        c = conversation(packets, 40000 + i, 1000 + 100_000 * i, 5000 + 100_000 * i)
        t = 1.2 * i
        c.handshake(t)
        c.send("client", t + 0.0003, REQUEST)
        c.ack("server", t + 0.0403)
        c.rst("client", t + 1.0003)


def closed_port(packets: list[Captured]) -> None:
    """Nothing listens on 9000: each SYN is answered with RST+ACK (tcp_v4_send_reset()), and
    connect() fails with ECONNREFUSED."""
    for i in range(3):
        c = conversation(packets, 40000 + i, 1000 + 100_000 * i, 5000)
        t = 0.001 * i
        c.syn(t)
        c.segment("server", t + 0.00002, "RA", seq=0, ack=1000 + 100_000 * i + 1, advance=False)


def packet_loss(packets: list[Captured]) -> None:
    """No queue problem: the response's second segment is lost after the capture point. The
    client acknowledges what it has and repeats that ACK for each later segment (duplicate
    ACKs); after three the server re-sends it (fast retransmit, tcp_fastretrans_alert()). In a
    second connection the last segment is lost and only the retransmission timer (200 ms)
    repairs it."""
    mss = 1448
    c = conversation(packets, 40000, 1000, 5000)
    c.handshake(0.0)
    c.send("client", 0.0003, REQUEST)
    c.ack("server", 0.0004)
    for k in range(5):
        c.send("server", 0.001 + 0.0001 * k, mss, flags="A")
    # The client's ACKs as each segment arrives: segment 1, then (2 lost) the same ACK again for
    # 3, 4 and 5, with SACK blocks saying what did arrive.
    hole = 5001 + mss
    c.segment("client", 0.00105, "A", ack=hole, advance=False)
    for k in range(3):
        sack = [("SAck", (hole + mss, hole + mss * (2 + k)))]
        c.segment("client", 0.00125 + 0.0001 * k, "A", ack=hole, options=sack, advance=False)
    c.resend("server", 0.0017, index=-4)
    c.ack("client", 0.0018)
    c.fin("server", 0.0019)
    c.fin("client", 0.0020)
    c.ack("server", 0.0021)
    d = conversation(packets, 40001, 2000, 6000)
    d.handshake(0.1)
    d.send("client", 0.1003, REQUEST)
    d.ack("server", 0.1004)
    d.send("server", 0.101, mss, flags="A")
    d.send("server", 0.1011, 500)
    d.segment("client", 0.1012, "A", ack=6001 + mss, advance=False)  # the 500-byte tail was lost
    d.resend("server", 0.1011 + 0.2)
    d.ack("client", 0.3012)
    d.fin("server", 0.3013)
    d.fin("client", 0.3014)
    d.ack("server", 0.3015)


def nginx_php_fpm(packets: list[Captured]) -> None:
    """nginx (10.0.0.1) in front of php-fpm (10.0.0.2:9000, listen.backlog 1, both workers
    busy). 40000 and 40001 wait in the accept queue. 40002's handshake ACK and request are
    dropped (accept queue full); nginx re-sends the request until fastcgi_read_timeout (3 s)
    and closes: 504, "upstream timed out (110: Connection timed out) while reading response
    header from upstream". 40003's SYNs are dropped until fastcgi_connect_timeout (2 s): 504,
    "upstream timed out (110: Connection timed out) while connecting to upstream"."""
    for i in range(2):
        c = conversation(packets, 40000 + i, 1000 + 1000 * i, 5000 + 1000 * i)
        c.handshake(0.001 * i)
        c.send("client", 0.001 * i + 0.0003, REQUEST)
        c.ack("server", 0.001 * i + 0.0004)
    c = conversation(packets, 40002, 3000, 7000)
    c.syn(0.0021)
    c.synack(0.00212)
    c.ack("client", 0.0022)
    c.send("client", 0.0023, REQUEST)
    for r in RTO[:3]:
        c.resend("client", 0.0023 + r)
    c.synack(0.00212 + SYNACK_RETRIES[0])
    c.ack("client", 0.00212 + SYNACK_RETRIES[0] + 0.0001)
    c.fin("client", 3.0023)
    d = conversation(packets, 40003, 4000, 8000)
    for t in (0.5, 1.5):
        d.syn(t)


def time_wait_reuse(packets: list[Captured]) -> None:
    """Two connections from port 40000. The server closed the first, so it holds the 4-tuple
    in TIME-WAIT, expecting the client's sequence number 1102. The second SYN's ISN, 600, is
    below it and carries no timestamp: tcp_timewait_state_process() does not take it as a new
    connection and answers with an ACK of 1102. The client, in SYN-SENT, resets that ACK
    (RST, seq 1102), which ends the TIME-WAIT socket (net.ipv4.tcp_rfc1337=0), and sends its SYN
    again 8 ms later (tcp_rcv_synsent_state_process(): TCP_TIMEOUT_MIN); that one is answered."""
    first = conversation(packets, 40000, 1000, 5000)
    first.handshake(0.0)
    exchange(first, 0.0003)
    second = conversation(packets, 40000, 600, 90_000)
    second.syn(0.050)
    first.segment("server", 0.05002, "A", advance=False)
    second.segment("client", 0.05003, "R", seq=1102, ack=0, advance=False)
    second.syn(0.058)
    second.synack(0.05802)
    second.ack("client", 0.0581)
    exchange(second, 0.0583)


def legacy_initial_rto(packets: list[Captured]) -> None:
    """A client on a kernel before Linux 3.1 (initial RTO 3 s, RFC 2988): its SYNs are dropped
    by a full SYN queue and sent again after 3 s, then 6 s (9 s after the first), where Linux
    3.1+ waits 1 s (RFC 6298 §2.1); the third is answered."""
    c = conversation(packets, 40000, 1000, 5000)
    for t in (0.0, 3.0, 9.0):
        c.syn(t)
    c.synack(9.00002)
    c.ack("client", 9.0001)
    exchange(c, 9.0003)


# -- Captures for issue 12 (diagnosis v2): traffic that is not a listen-queue problem, or only
# partly one, and that pcapq must not mistake for one.


def with_ip(packet: Captured, **fields: int) -> Captured:
    """The packet with IPv4 header fields changed (id, ttl); the header checksum recomputed."""
    ip = IP(packet.ip)
    for name, value in fields.items():
        setattr(ip, name, value)
    del ip.chksum
    return dataclasses.replace(packet, ip=bytes(ip))


def numbered(built: Iterable[Captured], first_id: dict[str, int]) -> list[Captured]:
    """Gives each side's packets consecutive IPv4 ids, in the order they were built (Linux
    counts per socket once the connection is established)."""
    next_id = dict(first_id)
    out = []
    for p in built:
        out.append(with_ip(p, id=next_id[p.side]))
        next_id[p.side] += 1
    return out


def vlan_trunk_copies(packets: list[Captured]) -> None:
    """A capture on a trunk near the proxy (or a SPAN session mirroring several VLANs): one
    healthy exchange, 20 ms round trip, seen three times: untagged, on 802.1Q VLAN 42 and on
    QinQ 10 (outer, 802.1ad) / 20 (inner), each copy 50 ms after the previous one. Same
    addresses, ports, ISNs and bytes: three copies of one connection, not three connections,
    and nothing re-sent. The copies overlap in time: copy 2's SYN-ACK comes after copy 1's
    handshake ACK."""
    flow: list[Captured] = []
    c = conversation(flow, 40000, 1000, 5000)
    c.syn(0.0)
    c.synack(0.020)
    c.ack("client", 0.0201)
    c.send("client", 0.0202, REQUEST)
    c.ack("server", 0.040)
    c.send("server", 0.060, RESPONSE)
    c.ack("client", 0.0601)
    c.fin("client", 0.0602)
    c.fin("server", 0.0803)
    c.ack("client", 0.0804)
    for k, tags in enumerate(((), (42,), (10, 20))):
        packets += [dataclasses.replace(p, time=p.time + 0.050 * k, vlan=tags) for p in flow]


def _duplicated(built: list[Captured]) -> list[Captured]:
    """Every frame twice, the copy 20 µs later, byte for byte (a mirror port that sees both
    directions of a bridge, a capture on a VM host's bridge and its tap)."""
    return [q for p in built for q in (p, dataclasses.replace(p, time=p.time + 0.00002))]


def duplicate_frames(packets: list[Captured]) -> None:
    """Three healthy exchanges (10 packets each, distinct IPv4 ids per side), every frame
    captured twice 20 µs apart: same IPv4 id, same bytes. No segment was sent twice by TCP."""
    built: list[Captured] = []
    for i in range(3):
        c = conversation(built, 40000 + i, 1000 + 100_000 * i, 5000 + 100_000 * i)
        t = 0.010 * i
        c.handshake(t)
        exchange(c, t + 0.0003)
    packets += _duplicated(numbered(built, {"client": 100, "server": 700}))


def duplicate_frames_retransmission(packets: list[Captured]) -> None:
    """duplicate_frames with one real retransmission among the copies: in the second
    connection the request is lost after the capture point, the server never acknowledges it,
    and the client sends it again on its RTO (200 ms) with a new IPv4 id; that one is
    acknowledged and answered. Every frame, the retransmission too, is captured twice."""
    built: list[Captured] = []
    a = conversation(built, 40000, 1000, 5000)
    a.handshake(0.0)
    exchange(a, 0.0003)
    b = conversation(built, 40001, 2000, 6000)
    b.handshake(0.010)
    b.send("client", 0.0103, REQUEST)
    b.resend("client", 0.2103)
    b.ack("server", 0.2104)
    answer_and_close(b, 0.2108)
    packets += _duplicated(numbered(built, {"client": 100, "server": 700}))


# A Windows client's SYN: TTL 128, MSS, NOP, window scale 8, NOP, NOP, SACK permitted.
WINDOWS_SYN = [("MSS", 1460), ("NOP", None), ("WScale", 8), ("NOP", None), ("NOP", None), ("SAckOK", b"")]


def windows_syn_after_rst(packets: list[Captured]) -> None:
    """A Windows client connecting again and again to a port nothing listens on (a reverse
    shell calling home to 10.0.0.2:4445). Windows answers an RST to its SYN by sending the SYN
    again, same ISN, 0.5 s later, twice (TcpMaxConnectRetransmissions): SYN, RST, SYN, RST,
    SYN, RST, then connect() fails. 40 connections 1.6 s apart from 20 source ports: the second
    round reuses each port with a new ISN (the previous connection ended by the RST, no
    TIME-WAIT). Every SYN was answered: nothing was dropped, lost or reused in TIME-WAIT."""
    built: list[Captured] = []
    server = ("10.0.0.2", 4445)
    for i in range(40):
        port = 49700 + i % 20
        isn = 3_000_000 + 7_919 * i
        c = Conversation(client=(CLIENT, port), server=server, client_isn=isn, server_isn=0, packets=built)
        t = 1.6 * i
        for k in range(3):
            c.syn(t + 0.5 * k, options=WINDOWS_SYN)
            c.segment("server", t + 0.5 * k + 0.0003, "RA", seq=0, ack=isn + 1, window=0, advance=False)
    packets += [with_ip(p, ttl=128) if p.side == "client" else p for p in built]


# Linux's SYN retransmissions from the first SYN (tcp_syn_retries 6, tcp_syn_linear_timeouts 4):
# 1 s apart five times, then doubling; the 11th SYN is the last.
SYN_LINEAR = (0, 1, 2, 3, 4, 5, 7, 11, 19, 35, 67)


def dead_host(packets: list[Captured]) -> None:
    """Three proxies (10.0.0.1, .4, .5) each try three connections to 10.0.0.3:9000, a host that
    is down, unreachable or behind a firewall that drops: not one packet from 10.0.0.3 in the
    capture, to anyone. Each SYN is sent 11 times on Linux's schedule (SYN_LINEAR) and connect()
    times out. Meanwhile 10.0.0.2:9000 answers exchanges at once (the capture point sees
    answers: it is not blind)."""
    for k, client in enumerate((CLIENT, "10.0.0.4", "10.0.0.5")):
        for j in range(3):
            c = Conversation(client=(client, 41000 + j), server=("10.0.0.3", 9000), client_isn=10_000 * (3 * k + j),
                             server_isn=0, packets=packets)
            t0 = 0.3 * j + 0.1 * k
            for offset in SYN_LINEAR:
                c.syn(t0 + offset)
    for i, t in enumerate((0.5, 30.0, 60.0)):
        c = conversation(packets, 40000 + i, 1000 + 100_000 * i, 5000 + 100_000 * i)
        c.handshake(t)
        exchange(c, t + 0.0003)


def answered_then_closed(packets: list[Captured]) -> None:
    """Three connections whose server answered everything, ended by the client:
    - 40000 -> :30000, an FTP passive-mode data connection (STOR): the client uploads 20
      segments, the server acknowledges them and sends nothing (it has nothing to say), the
      client closes with FIN, the server with FIN;
    - 40001 -> :80, HTTP keep-alive: two requests answered, then the idle connection is reset
      by the client 65 s later (a browser closing an idle keep-alive connection with RST);
    - 40002 -> :9000: request, response, and the client resets at once after reading (closing
      with SO_LINGER 0, or with unread data)."""
    mss = 1448
    ftp = Conversation(client=(CLIENT, 40000), server=("10.0.0.2", 30000), client_isn=1000, server_isn=5000,
                       packets=packets)
    ftp.handshake(0.0)
    t = 0.0003
    for k in range(20):
        ftp.send("client", t, mss, flags="A" if k < 19 else "PA")
        if k % 2:
            ftp.ack("server", t + 0.0001)
        t += 0.0002
    ftp.fin("client", t)
    ftp.ack("server", t + 0.0001)
    ftp.fin("server", t + 0.0002)
    ftp.ack("client", t + 0.0003)
    web = Conversation(client=(CLIENT, 40001), server=("10.0.0.2", 80), client_isn=2000, server_isn=6000,
                       packets=packets)
    web.handshake(0.1)
    for t in (0.1003, 2.1):
        web.send("client", t, REQUEST)
        web.ack("server", t + 0.0001)
        web.send("server", t + 0.005, RESPONSE)
        web.ack("client", t + 0.0051)
    web.rst("client", 67.1)
    app = conversation(packets, 40002, 3000, 7000)
    app.handshake(0.2)
    app.send("client", 0.2003, REQUEST)
    app.ack("server", 0.2004)
    app.send("server", 0.2008, RESPONSE)
    app.rst("client", 0.2010)


def capture_mid_overflow(packets: list[Captured]) -> None:
    """tcpdump started in the middle of an accept-queue overflow (backlog 1, the application
    stalled until 2.0 s). Before the capture: 40000 and 40001 were established and queued with
    their requests; 40002 and 40003 got SYN-ACKs, but their handshake ACKs and requests (sent
    at -0.9 s and -0.85 s) were dropped: the queue was full. In the capture: their requests
    re-sent on the RTO backoff, unacknowledged, and their SYN-ACKs re-sent by the server's
    timer (1 s, then 3 s after the SYN), each answered by the client's ACK; 40004's SYNs
    dropped (a full accept queue drops SYNs too). At 2.0 s accept() runs: 40000 and 40001 are
    answered, the next SYN-ACK re-send's ACK creates 40002's and 40003's sockets, and the
    requests re-sent after that are answered; 40004's third SYN is answered."""
    for i in range(2):
        queued = conversation(packets, 40000 + i, 1000 + 1000 * i, 5000 + 1000 * i)
        queued.sides["client"].next_seq += 1 + REQUEST  # SYN and request, before the capture
        queued.sides["server"].next_seq += 1
        answer_and_close(queued, 2.0 + 0.001 * i)
    for i, start in enumerate((-0.9, -0.85)):
        c = conversation(packets, 40002 + i, 3000 + 1000 * i, 7000 + 1000 * i)
        c.sides["client"].next_seq += 1
        c.sides["server"].next_seq += 1
        synack_seq, client_seq = c.sides["server"].isn, c.sides["client"].isn + 1
        # The request's first send (0.3 ms after the SYN) and its re-sends 0.2 and 0.6 s later
        # came before the capture.
        c.sides["client"].sent.append((client_seq, "PA", b"x" * REQUEST))
        c.sides["client"].next_seq += REQUEST
        c.segment("server", start + SYNACK_RETRIES[0], "SA", seq=synack_seq, ack=client_seq, advance=False,
                  options=[("MSS", 1460), ("SAckOK", b""), ("WScale", 7)])
        c.segment("client", start + SYNACK_RETRIES[0] + 0.0001, "A", seq=client_seq + REQUEST, ack=synack_seq + 1,
                  advance=False)
        c.resend("client", start + 0.0003 + RTO[2])
        c.segment("server", start + SYNACK_RETRIES[1], "SA", seq=synack_seq, ack=client_seq, advance=False,
                  options=[("MSS", 1460), ("SAckOK", b""), ("WScale", 7)])
        c.segment("client", start + SYNACK_RETRIES[1] + 0.0001, "A", seq=client_seq + REQUEST, ack=synack_seq + 1,
                  advance=False)
        c.resend("client", start + 0.0003 + RTO[3])
        c.ack("server", start + 0.0003 + RTO[3] + 0.0001)
        answer_and_close(c, start + 0.0003 + RTO[3] + 0.005)
    late = conversation(packets, 40004, 9000, 13000)
    for t in (0.3, 1.3, 2.3):
        late.syn(t)
    late.synack(2.30002)
    late.ack("client", 2.3001)
    exchange(late, 2.3003)


# --- Issue 18: ICMP errors answering the connections' packets ---

ROUTER = "10.0.0.254"


def icmp_error(original: Captured, sender: str, icmp_type: int, code: int, t: float, quote: int | None = None,
               mtu: int = 0) -> Captured:
    """An ICMP (or ICMPv6) error from `sender` answering `original`, quoting its first `quote`
    bytes (default: the IP header and 8 bytes of TCP, RFC 792's minimum; ICMPv6 quotes it all,
    RFC 4443 §2.4)."""
    from scapy.layers.inet import ICMP
    from scapy.layers.inet6 import IPv6, ICMPv6DestUnreach, ICMPv6PacketTooBig, ICMPv6TimeExceeded
    from scapy.packet import Raw

    if original.ip[0] >> 4 == 6:
        inner = IPv6(original.ip)
        layer = {1: ICMPv6DestUnreach(code=code), 2: ICMPv6PacketTooBig(mtu=mtu),
                 3: ICMPv6TimeExceeded(code=code)}[icmp_type]
        quoted = original.ip if quote is None else original.ip[:quote]
        pkt = IPv6(src=sender, dst=inner.src) / layer / Raw(quoted)
    else:
        inner = IP(original.ip)
        quoted = original.ip[:inner.ihl * 4 + 8] if quote is None else original.ip[:quote]
        pkt = IP(src=sender, dst=inner.src) / ICMP(type=icmp_type, code=code, nexthopmtu=mtu) / Raw(quoted)
    return Captured(START + t, bytes(pkt), "icmp", "", original.vlan)


def windows_syn_after_icmp(packets: list[Captured]) -> None:
    """A Windows proxy (TTL 128) connecting to 10.0.0.2:9000 through a router (10.0.0.254) that has
    no route to it: the router answers every SYN with ICMP host unreachable. Windows does not give
    up on the first error as Linux does: it sends the SYN again, same ISN, 0.5 s later, twice, each
    answered the same way. Three connections 2 s apart. No SYN was dropped by a listener."""
    built: list[Captured] = []
    for i in range(3):
        isn = 4_000_000 + 7_919 * i
        c = conversation(built, 49800 + i, isn, 0)
        t = 2.0 * i
        for k in range(3):
            syn = with_ip(c.syn(t + 0.5 * k, options=WINDOWS_SYN), ttl=128)
            built[-1] = syn
            built.append(icmp_error(syn, ROUTER, 3, 1, syn.time - START + 0.0004))
    packets += built


def icmp_quotes(packets: list[Captured]) -> None:
    """A firewall (10.0.0.254) rejecting the proxy's SYNs with ICMP administratively prohibited
    (type 3 code 13), quoting RFC 792's minimum: the IP header and 8 bytes of TCP (ports and
    sequence number). Three connections, each ended by the error (Linux: connect() fails with
    EHOSTUNREACH at once). Around them, errors that must not count: one quoting 4 bytes of TCP
    (truncated: Linux reads none, and its client sent nothing more), one quoting a UDP datagram, one quoting a 4-tuple with no connection in the
    capture, and one quoting a sequence number outside a healthy connection's window."""
    from scapy.layers.inet import UDP

    for i in range(3):
        c = conversation(packets, 40100 + i, 10_000 + 1_000 * i, 0)
        syn = c.syn(0.1 * i)
        packets.append(icmp_error(syn, ROUTER, 3, 13, 0.1 * i + 0.0003))
    # Truncated: 20 + 4 bytes quoted.
    c = conversation(packets, 40200, 20_000, 0)
    syn = c.syn(0.5)
    packets.append(icmp_error(syn, ROUTER, 3, 13, 0.5003, quote=24))
    # A UDP datagram's error (a DNS query to a closed port).
    dns = Captured(START + 0.6, bytes(IP(src=CLIENT, dst="10.0.0.53") / UDP(sport=53000, dport=53) / (b"\0" * 20)))
    packets.append(icmp_error(dns, "10.0.0.53", 3, 3, 0.6003))
    # A TCP 4-tuple the capture never saw.
    ghost = Captured(START + 0.7, bytes(IP(src=CLIENT, dst="10.0.0.2") / TCP(sport=40999, dport=9000, seq=1, flags="S")))
    packets.append(icmp_error(ghost, ROUTER, 3, 1, 0.7003))
    # A healthy exchange, and an error quoting a sequence number far outside its window.
    c = conversation(packets, 40300, 30_000, 31_000)
    c.handshake(0.8)
    stale = Captured(START + 0.8, bytes(IP(src=CLIENT, dst="10.0.0.2") / TCP(sport=40300, dport=9000, seq=99_999, flags="A")))
    packets.append(icmp_error(stale, ROUTER, 3, 1, 0.8002))
    exchange(c, 0.8003)


def icmpv6_no_route(packets: list[Captured]) -> None:
    """IPv6: the proxy (2001:db8::1) connects to 2001:db8:1::2 port 9000; a router (2001:db8::fe)
    has no route and answers each SYN with ICMPv6 destination unreachable, code 0 (no route to
    destination), quoting the whole SYN. Linux: connect() fails at once with ENETUNREACH. Three
    connections."""
    for i in range(3):
        c = Conversation(client=("2001:db8::1", 40400 + i), server=("2001:db8:1::2", 9000), client_isn=50_000 + i,
                         server_isn=0, packets=packets)
        syn = c.syn(0.05 * i)
        packets.append(icmp_error(syn, "2001:db8::fe", 1, 0, 0.05 * i + 0.0004))


def icmp_in_vlan(packets: list[Captured]) -> None:
    """On a trunk, VLAN 42: the proxy's SYNs to 10.0.0.2:9000 answered by a firewall on the VLAN
    (10.0.0.254) with ICMP host administratively prohibited (type 3 code 10), the error tagged
    like the SYN. Two connections."""
    built: list[Captured] = []
    for i in range(2):
        c = conversation(built, 40500 + i, 60_000 + i, 0)
        syn = c.syn(0.05 * i)
        built.append(icmp_error(syn, ROUTER, 3, 10, 0.05 * i + 0.0003))
    packets += [dataclasses.replace(p, vlan=(42,)) for p in built]


def _large_response(c: Conversation, t: float) -> Captured:
    """The request, its ACK, a 300-byte header segment (acknowledged), then a full-size body segment."""
    c.send("client", t, REQUEST)
    c.ack("server", t + 0.0001)
    c.send("server", t + 0.0005, 300)
    c.ack("client", t + 0.0006)
    return c.send("server", t + 0.0007, 1448)


def pmtu_discovery(packets: list[Captured]) -> None:
    """Path MTU discovery working (RFC 1191): captured at the server, whose 1,448-byte body segment
    a router (10.0.0.254) cannot forward: it answers ICMP fragmentation needed, next-hop MTU 1400.
    The server sends the same bytes again at once in two smaller segments (1,348 + 100), the proxy
    acknowledges them, and the exchange ends normally. Not a failure."""
    c = conversation(packets, 40600, 70_000, 71_000)
    c.handshake(0.0)
    big = _large_response(c, 0.001)
    t = big.time - START
    packets.append(icmp_error(big, ROUTER, 3, 4, t + 0.0002, mtu=1400))
    seq = c.sides["server"].next_seq - 1448
    c.segment("server", t + 0.0003, "A", payload=b"b" * 1348, seq=seq, advance=False)
    c.segment("server", t + 0.0003, "PA", payload=b"b" * 100, seq=seq + 1348, advance=False)
    c.ack("client", t + 0.0004)
    c.fin("server", t + 0.0005)
    c.fin("client", t + 0.0006)
    c.ack("server", t + 0.0007)


def mtu_black_hole_icmp_ignored(packets: list[Captured]) -> None:
    """A path MTU black hole with the error in the capture: captured at the server, its 1,448-byte
    body segment cannot pass a 1,400-byte link; the router answers ICMP fragmentation needed (MTU
    1400) to every send, but a firewall on the server's host drops the errors after tcpdump saw
    them, so the server re-sends the full-size segment on its RTO (0.2, 0.4, 0.8 s) and the proxy
    closes after its 2 s read timeout. The header segment before it got through."""
    c = conversation(packets, 40700, 80_000, 81_000)
    c.handshake(0.0)
    big = _large_response(c, 0.001)
    t = big.time - START
    packets.append(icmp_error(big, ROUTER, 3, 4, t + 0.0002, mtu=1400))
    for rto in (0.2, 0.4, 0.8):
        t += rto
        again = c.resend("server", t)
        packets.append(icmp_error(again, ROUTER, 3, 4, t + 0.0005, mtu=1400))
    # The proxy never received the body: its FIN acknowledges the header only.
    c.segment("client", 2.001, "FA", ack=IP(big.ip)[TCP].seq)
    c.ack("server", 2.0012)


def minor_observations(packets: list[Captured]) -> None:
    """Eight healthy exchanges with 10.0.0.2:9000, 10 ms apart; in the fifth the response's
    500-byte tail is lost once and re-sent on the RTO (200 ms); and one stray connect to port 9001,
    where nothing listens, refused. Two findings, each too small to matter beside the rest
    (docs/diagnosis.md, "Materiality"): both minor observations, exit code 0."""
    mss = 1448
    for i in range(8):
        c = conversation(packets, 40000 + i, 1000 + 100_000 * i, 5000 + 100_000 * i)
        t = 0.010 * i
        c.handshake(t)
        if i != 4:
            exchange(c, t + 0.0003)
            continue
        c.send("client", t + 0.0003, REQUEST)
        c.ack("server", t + 0.0004)
        c.send("server", t + 0.001, mss, flags="A")
        c.send("server", t + 0.0011, 500)
        c.segment("client", t + 0.0012, "A", ack=5001 + 100_000 * i + mss, advance=False)  # the tail was lost
        c.resend("server", t + 0.0011 + 0.2)
        c.ack("client", t + 0.2012)
        c.fin("server", t + 0.2013)
        c.fin("client", t + 0.2014)
        c.ack("server", t + 0.2015)
    stray = Conversation(client=(CLIENT, 40100), server=(SERVER[0], 9001), client_isn=900_000, server_isn=0,
                         packets=packets)
    stray.syn(0.085)
    stray.segment("server", 0.08502, "RA", seq=0, ack=900_001, advance=False)


def _slow_exchanges(built: list[Captured], resend: bool) -> None:
    """Three exchanges with a 20 ms round trip, 100 ms apart; with `resend`, the second
    connection's request is lost beyond the capture point and sent again on the RTO (200 ms)."""
    for i in range(3):
        c = conversation(built, 40000 + i, 1000 + 100_000 * i, 5000 + 100_000 * i)
        t = 0.100 * i
        c.handshake(t, rtt=0.010)
        c.send("client", t + 0.021, REQUEST)
        if resend and i == 1:
            c.resend("client", t + 0.221)
            t += 0.200
        c.ack("server", t + 0.031)
        c.send("server", t + 0.032, RESPONSE)
        c.ack("client", t + 0.042)
        c.fin("client", t + 0.043)
        c.fin("server", t + 0.053)
        c.ack("client", t + 0.063)


def _routed_twice(built: list[Captured]) -> list[Captured]:
    """Each datagram as `tcpdump -i any` on a router shows it: on the way in (TTL 64), then on
    the way out (TTL 63), the client's 2 ms later, the server's 40 ms later: the copies fall
    among the peer's packets (SYN, SYN-ACK, SYN copy, ACK, SYN-ACK copy ...)."""
    numbered_ids = numbered(built, {"client": 100, "server": 700})
    return [q for p in numbered_ids
            for q in (p, dataclasses.replace(with_ip(p, ttl=63), time=p.time + (0.002 if p.side == "client" else 0.040)))]


def router_any_copies(packets: list[Captured]) -> None:
    """A capture with `-i any` on a router between proxy and server: three healthy exchanges
    (20 ms round trip), every datagram seen twice, same IPv4 id and bytes, TTL one lower on the
    way out, 2 ms (the client's) or 40 ms (the server's) later. No segment was sent twice by TCP."""
    built: list[Captured] = []
    _slow_exchanges(built, resend=False)
    packets += _routed_twice(built)


def router_any_resend(packets: list[Captured]) -> None:
    """router_any_copies with one real re-send: the second connection's request sent again on
    the RTO (200 ms), the same bytes under a new IPv4 id; every datagram still seen twice."""
    built: list[Captured] = []
    _slow_exchanges(built, resend=True)
    packets += _routed_twice(built)


def offload_seen_twice(packets: list[Captured]) -> None:
    """Captured where segmentation offload splits what the stack sent (a tap before and after a
    tunnel's endpoint): the server's 1,460-byte answer segment, then 10 and 20 us later the same
    bytes as 1,440 + 20, each datagram with its own IPv4 id. One transmission seen twice, no
    re-send; the client acknowledges it once."""
    built: list[Captured] = []
    for i in range(3):
        c = conversation(built, 40000 + i, 1000 + 100_000 * i, 5000 + 100_000 * i)
        t = 0.100 * i
        c.handshake(t, rtt=0.010)
        c.send("client", t + 0.021, REQUEST)
        c.send("server", t + 0.031, 1460)
        if i == 1:
            seq = c.sides["server"].next_seq - 1460
            c.segment("server", t + 0.03101, "PA", b"x" * 1440, seq=seq, advance=False)
            c.segment("server", t + 0.03102, "PA", b"x" * 20, seq=seq + 1440, advance=False)
        c.ack("client", t + 0.041)
        c.fin("client", t + 0.042)
        c.fin("server", t + 0.052)
        c.ack("client", t + 0.062)
    packets += numbered(built, {"client": 100, "server": 700})


def offload_resend(packets: list[Captured]) -> None:
    """offload_seen_twice's twin: the 1,460 bytes go again 200 ms later (the RTO), under a new
    IPv4 id, the client's ACK not having come: a re-send."""
    built: list[Captured] = []
    for i in range(3):
        c = conversation(built, 40000 + i, 1000 + 100_000 * i, 5000 + 100_000 * i)
        t = 0.100 * i
        c.handshake(t, rtt=0.010)
        c.send("client", t + 0.021, REQUEST)
        c.send("server", t + 0.031, 1460)
        if i == 1:
            seq = c.sides["server"].next_seq - 1460
            c.segment("server", t + 0.231, "PA", b"x" * 1460, seq=seq, advance=False)
            t += 0.200
        c.ack("client", t + 0.041)
        c.fin("client", t + 0.042)
        c.fin("server", t + 0.052)
        c.ack("client", t + 0.062)
    packets += numbered(built, {"client": 100, "server": 700})


def host_talking_syns_dropped(packets: list[Captured]) -> None:
    """Captured on 10.0.0.3: three proxies' SYNs to its port 9000 go unanswered and are sent
    again on Linux's schedule (SYN_LINEAR) while 10.0.0.3 itself is up and talking, as a client
    of its database (10.0.0.9:5432, an exchange every 10 s): a filter or a listener drops the
    SYNs; the host is not down (dead_host's twin)."""
    for k, client in enumerate((CLIENT, "10.0.0.4", "10.0.0.5")):
        c = Conversation(client=(client, 41000), server=("10.0.0.3", 9000), client_isn=10_000 * k, server_isn=0,
                         packets=packets)
        for offset in SYN_LINEAR:
            c.syn(0.1 * k + offset)
    for i in range(4):
        d = Conversation(client=("10.0.0.3", 50000 + i), server=("10.0.0.9", 5432), client_isn=500_000 + 1000 * i,
                         server_isn=600_000 + 1000 * i, packets=packets)
        t = 0.5 + 10.0 * i
        d.handshake(t)
        exchange(d, t + 0.0003)


def _request_and_fin_unacked(c: Conversation) -> float:
    """Captured at the proxy, 10 ms round trip: the handshake ACK, the request and the FIN
    stamped 50 us before the SYN-ACK they answer (a capture that timestamps the sender's
    packets ahead of the ones received at the same moment); the request and the FIN go
    unacknowledged and are re-sent as one segment on the RTO (200 ms, doubling: Linux v6.6
    net/ipv4/tcp_output.c: tcp_retrans_try_collapse()). The time of the first SYN-ACK."""
    c.syn(0.0)
    synack = 0.0100
    c.synack(synack)
    c.ack("client", synack - 0.00005)
    c.send("client", synack - 0.00004, REQUEST)
    c.fin("client", synack - 0.00003)
    request_seq = c.sides["client"].next_seq - REQUEST - 1
    for r in RTO[:2]:
        c.segment("client", synack - 0.00004 + r, "FPA", b"x" * REQUEST, seq=request_seq, advance=False)
    return synack


def overflow_in_ten_packets(packets: list[Captured]) -> None:
    """One connection's accept-queue overflow at a Linux server, captured at the proxy: the
    handshake ACK, request and FIN (stamped just before the SYN-ACK) are dropped by a listener
    whose accept queue is full (tcp_check_req(): listen_overflow); the request and FIN, re-sent
    at 0.2 and 0.6 s, are dropped too; the request socket's timer re-sends the SYN-ACK 1.2 s
    after the first (1 s, reqsk_timer_handler(), plus the path and the timer's slack), the proxy
    answers it with an ACK, and re-sends the request once more at 1.4 s: still nothing back."""
    built: list[Captured] = []
    c = conversation(built, 40000, 1000, 5000)
    synack = _request_and_fin_unacked(c)
    c.synack(synack + 1.2)
    c.ack("client", synack + 1.2001)
    request_seq = c.sides["client"].next_seq - REQUEST - 1
    c.segment("client", synack - 0.00004 + RTO[2], "FPA", b"x" * REQUEST, seq=request_seq, advance=False)
    packets += numbered(built, {"client": 100, "server": 700})


def loss_in_ten_packets(packets: list[Captured]) -> None:
    """overflow_in_ten_packets' twin: the same request and FIN lost twice on the path and re-sent,
    then acknowledged 10 ms after the re-send at 0.6 s and answered; the server's SYN-ACK is never
    sent again (its ACK had arrived: no request socket waited). Loss, not a full queue."""
    built: list[Captured] = []
    c = conversation(built, 40000, 1000, 5000)
    synack = _request_and_fin_unacked(c)
    t = synack - 0.00004 + RTO[1] + 0.010
    c.ack("server", t)
    c.send("server", t + 0.0001, RESPONSE)
    c.fin("server", t + 0.0002)
    c.ack("client", t + 0.0003)
    packets += numbered(built, {"client": 100, "server": 700})


SCENARIOS: dict[str, Callable[[list[Captured]], None]] = {
    f.__name__: f
    for f in (healthy, syn_queue_overflow, accept_queue_overflow, abort_on_overflow, client_timeout_rst,
              closed_port, packet_loss, nginx_php_fpm, time_wait_reuse, legacy_initial_rto,
              vlan_trunk_copies, duplicate_frames, duplicate_frames_retransmission, windows_syn_after_rst,
              dead_host, answered_then_closed, capture_mid_overflow, windows_syn_after_icmp, icmp_quotes,
              icmpv6_no_route, icmp_in_vlan, pmtu_discovery, mtu_black_hole_icmp_ignored, minor_observations,
              router_any_copies, router_any_resend, offload_seen_twice, offload_resend, host_talking_syns_dropped,
              overflow_in_ten_packets, loss_in_ten_packets)
}


def make(name: str, out_dir: Path) -> Path:
    packets: list[Captured] = []
    SCENARIOS[name](packets)
    # Stable: packets at the same time keep the order they were built in.
    return write_pcap(out_dir / f"{name}.pcap", sorted(packets, key=lambda p: p.time))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write to (default: this one)")
    args = parser.parse_args()
    unknown = set(args.names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario {', '.join(sorted(unknown))}")
    for name in args.names or SCENARIOS:
        path = make(name, args.out)
        print(f"{path}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
