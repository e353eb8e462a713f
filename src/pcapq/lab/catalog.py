"""The scenarios `pcapq lab` can reproduce, with the settings of the captures in captures/."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pcapq.lab import scenarios
from pcapq.lab.namespaces import NetnsPair
from pcapq.lab.scenarios import Run


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    """One line for `pcapq lab --list`."""
    lesson: str
    """What the capture will show, said before the run."""
    run: Callable[[NetnsPair, Path], Run]
    tools: tuple[str, ...] = ("ip", "tcpdump", "tc", "nstat")
    client_error: str | None = None
    """The client error the scenario is meant to produce; any other is a failed run."""
    python_modules: tuple[str, ...] = field(default=())
    """Python modules the scenario needs in this interpreter (scapy for raw SYNs)."""


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "healthy",
            "20 request/response exchanges, nothing goes wrong: the baseline",
            "Every connection is the same ten packets: SYN, SYN-ACK, ACK, request, ACK, response, "
            "ACK, and a FIN each way. Nothing is re-sent and no counter of trouble moves.",
            lambda net, pcap: scenarios.healthy(net, pcap, connections=20, request=100, response=1000),
        ),
        Scenario(
            "syn_queue_overflow",
            "half-open requests fill the SYN queue (syncookies off); clients' SYNs are dropped",
            "Six spoofed SYNs fill the server's SYN queue and are never completed. With "
            "tcp_syncookies=0 the kernel drops the real clients' SYNs; they send them again after "
            "1 s, 1 s, 1 s until the half-open requests expire, then connect.",
            lambda net, pcap: scenarios.syn_queue_overflow(
                net, pcap, backlog=3, half_open=6, connections=3, synack_retries=1, client_delay=0.5
            ),
            python_modules=("scapy",),
        ),
        Scenario(
            "accept_queue_overflow",
            "a server that does not accept(): handshake ACKs dropped, SYN-ACKs and requests re-sent",
            "The server calls listen(1) and waits 5 s before its first accept(). The accept queue "
            "fills; the kernel drops the clients' handshake ACKs and requests, re-sends its SYN-ACK, "
            "the clients re-send their requests, and the connections recover once accept() starts.",
            lambda net, pcap: scenarios.accept_queue_overflow(
                net, pcap, connections=8, backlog=1, accept_delay=5.0, request=24, response=1000
            ),
        ),
        Scenario(
            "abort_on_overflow",
            "the same with net.ipv4.tcp_abort_on_overflow=1: the listener answers with RST",
            "With tcp_abort_on_overflow=1 a handshake ACK that finds the accept queue full is "
            "answered with an RST: those clients see ECONNRESET at once instead of waiting.",
            lambda net, pcap: scenarios.abort_on_overflow(
                net, pcap, connections=9, backlog=3, accept_delay=2.0, request=24, response=1000
            ),
            client_error="ConnectionResetError",
        ),
        Scenario(
            "client_timeout_rst",
            "the server takes 1.5 s, the client gives up after 1 s and resets",
            "The server acknowledges each request but answers only after 1.5 s; the client's read "
            "times out after 1 s and it closes with SO_LINGER 0, which sends an RST.",
            lambda net, pcap: scenarios.client_timeout_rst(
                net, pcap, connections=3, timeout=1.0, reply_delay=1.5, pause=0.6
            ),
            client_error="TimeoutError",
        ),
        Scenario(
            "closed_port",
            "connects to a port nobody listens on: SYN, RST",
            "Nothing listens on the port: the kernel answers each SYN with an RST and connect() "
            "fails with ECONNREFUSED.",
            lambda net, pcap: scenarios.closed_port(net, pcap, connections=5),
            client_error="ConnectionRefusedError",
        ),
        Scenario(
            "packet_loss",
            "4 % of the server's packets lost on the path: retransmissions, not a queue problem",
            "nftables drops 4 % of the server's packets after the capture point. Lost data is "
            "repaired by fast retransmit, lost SYN-ACKs by the timers; the listen queues never fill.",
            lambda net, pcap: scenarios.packet_loss(
                net, pcap, connections=20, loss_percent=4, response=16000, snaplen=96
            ),
            tools=("ip", "tcpdump", "tc", "nstat", "nft"),
        ),
        Scenario(
            "nginx_php_fpm",
            "nginx in front of php-fpm with listen.backlog 2 under ab load: 502/504",
            "php-fpm serves 4 requests a second with a listen backlog of 2 while ab sends 20 at a "
            "time through nginx. The upstream's listen queues overflow; nginx logs upstream "
            "timeouts (504) next to the capture.",
            lambda net, pcap: scenarios.nginx_php_fpm(net, pcap, logs=pcap.with_suffix("")),
            tools=("ip", "tcpdump", "tc", "nstat", "ss", "nginx", "ab"),
        ),
        Scenario(
            "time_wait_reuse",
            "a client reuses its source port while the server still holds TIME-WAIT",
            "Two connections from the same source port. The server closed the first, so it keeps "
            "the 4-tuple in TIME-WAIT; the second SYN's sequence number is below what TIME-WAIT "
            "expects, so the server answers with an ACK, the client resets it, and its SYN sent "
            "again a few milliseconds later opens the connection.",
            lambda net, pcap: scenarios.time_wait_reuse(net, pcap, connections=2),
        ),
    )
}
