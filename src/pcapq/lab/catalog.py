"""The scenarios `pcapq lab` can reproduce, with the settings of the captures in captures/."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pcapq.lab import icmp_scenarios, load_scenarios, scenarios, twin_scenarios
from pcapq.lab.namespaces import NetnsDelayed, NetnsPair, NetnsRouted
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
    client_error: str | tuple[str, ...] | None = None
    """The client error the scenario is meant to produce (or several); any other is a failed run."""
    python_modules: tuple[str, ...] = field(default=())
    """Python modules the scenario needs in this interpreter (scapy for raw SYNs)."""
    network: type[NetnsPair] = NetnsPair
    """The namespaces it runs in: a client and a server, NetnsRouted's three (a router between) or
    NetnsDelayed's three (a path with latency, reordering or loss between)."""
    capture_at: str | None = None
    """Where tcpdump runs: "server" or "client" (their veths); None: the network's default."""
    shipped_in: str = ""
    """The folder of captures/ its shipped capture is in: "" (captures/) or "kernel_runs"."""


# ICMP answers to the client's SYNs, and a path MTU black hole (src/pcapq/lab/icmp_scenarios.py).
ICMP_SCENARIOS = (
    Scenario(
        "icmp_admin_prohibited",
        "a reject rule on the server's host answers SYNs with ICMP admin-prohibited",
        "nftables on the server's host rejects SYNs to the port with ICMP administratively prohibited. "
        "Each connect() fails at once with EHOSTUNREACH (113: No route to host); no SYN is sent again.",
        lambda net, pcap: icmp_scenarios.reject(net, pcap, with_icmp="admin-prohibited"),
        tools=("ip", "tcpdump", "nstat", "nft"),
        client_error="No route to host",
    ),
    Scenario(
        "icmp_port_unreachable",
        "a reject rule answers SYNs with ICMP port unreachable (iptables' default REJECT)",
        "nftables on the server's host rejects SYNs with ICMP port unreachable instead of the RST a "
        "closed port gives. connect() fails at once with ECONNREFUSED, as for an RST.",
        lambda net, pcap: icmp_scenarios.reject(net, pcap, with_icmp="port-unreachable"),
        tools=("ip", "tcpdump", "nstat", "nft"),
        client_error="Connection refused",
    ),
    Scenario(
        "icmp_host_unreachable",
        "a router with an unreachable route answers SYNs with ICMP host unreachable",
        "The client reaches 198.51.100.9 through a router whose route to it is `unreachable`: the "
        "router answers each SYN with ICMP host unreachable and connect() fails at once with "
        "EHOSTUNREACH (113: No route to host).",
        lambda net, pcap: icmp_scenarios.route(net, pcap, kind="unreachable"),
        tools=("ip", "tcpdump", "nstat"),
        client_error="No route to host",
    ),
    Scenario(
        "icmp_route_prohibit",
        "a router with a prohibit route answers SYNs with ICMP admin-prohibited",
        "The router's route to 198.51.100.0/24 is `prohibit`: it answers each SYN with ICMP "
        "communication administratively prohibited (code 13); connect() fails with EHOSTUNREACH.",
        lambda net, pcap: icmp_scenarios.route(net, pcap, kind="prohibit"),
        tools=("ip", "tcpdump", "nstat"),
        client_error="No route to host",
    ),
    Scenario(
        "route_blackhole",
        "a router with a blackhole route drops SYNs without a word",
        "The router's route to 198.51.100.0/24 is `blackhole`: SYNs vanish, nothing answers, the "
        "client sends them again on the backoff until its timeout. No ICMP: not an ICMP finding.",
        lambda net, pcap: icmp_scenarios.route(net, pcap, kind="blackhole", connections=2),
        tools=("ip", "tcpdump", "nstat"),
        client_error="TimeoutError",
    ),
    Scenario(
        "icmp_ttl_exceeded",
        "the client's TTL runs out at the router: ICMP time exceeded",
        "The client sends with TTL 1 to an address one hop past the router: the router answers each "
        "SYN with ICMP time exceeded, and connect() fails at once with EHOSTUNREACH.",
        lambda net, pcap: icmp_scenarios.ttl_exceeded(net, pcap),
        tools=("ip", "tcpdump", "nstat"),
        client_error="No route to host",
    ),
    Scenario(
        "mtu_black_hole",
        "full-size segments vanish on a smaller-MTU link that sends no ICMP",
        "The client advertises an MSS of 1460 but its link takes only 1000-byte frames and says nothing. "
        "The handshake and the request get through; the server's full-size response segments are sent "
        "again and again, never acknowledged, until the client gives up.",
        lambda net, pcap: icmp_scenarios.mtu_black_hole(net, pcap),
        tools=("ip", "tcpdump", "nstat"),
        client_error="TimeoutError",
    ),
    Scenario(
        "pmtu_discovery",
        "a router's 1200-byte link answers ICMP fragmentation needed; the client sends smaller: no failure",
        "Client, router and server in three namespaces; the router's link towards the server takes 1200-byte "
        "packets. The client's full-size request segments (DF set) are answered with ICMP fragmentation needed "
        "(MTU 1200); its kernel lowers the segment size at once (tcp_v4_mtu_reduced()) and re-sends smaller, and "
        "the request gets through. No failure: path MTU discovery at work. tcpdump runs on the client's veth.",
        lambda net, pcap: icmp_scenarios.pmtu(net, pcap),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsRouted,
    ),
    Scenario(
        "mtu_black_hole_router",
        "the same router with its ICMP fragmentation needed dropped: a path MTU black hole",
        "The same path as pmtu_discovery, with nftables in the router's output chain dropping its ICMP "
        "fragmentation needed. The client never learns the smaller MTU: its full-size segments are sent again on "
        "the retransmission timer, never acknowledged, until it gives up; the handshake got through.",
        lambda net, pcap: icmp_scenarios.pmtu(net, pcap, drop_icmp="router"),
        tools=("ip", "tcpdump", "nstat", "nft"),
        client_error="TimeoutError",
        network=NetnsRouted,
    ),
)


# Competing explanations and listener-level situations, each run beside a twin that changes one
# setting (src/pcapq/lab/twin_scenarios.py); their captures are in captures/kernel_runs/.
KERNEL_RUNS = "kernel_runs"
TWIN_SCENARIOS = (
    Scenario(
        "lost_ack",
        "one handshake ACK lost while the accept queue has room: a SYN-ACK re-send, the request taken at once",
        "nftables on the server's input drops the first bare ACK of one connection (after tcpdump saw it). The "
        "server re-sends its SYN-ACK after 1 s; the ACK answering it completes the handshake and the request, "
        "sent 1.5 s after connect(), is acknowledged at once. Twin: accept_queue_overflow.",
        lambda net, pcap: twin_scenarios.lost_ack(net, pcap, where="server"),
        tools=("ip", "tcpdump", "nstat", "nft"),
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "lost_ack_on_path",
        "the same ACK lost before the server's capture point: the capture never sees it",
        "nftables on the client's output drops the first bare ACK of one connection, so tcpdump on the server's "
        "veth never sees it: a loss on the path. The server re-sends its SYN-ACK after 1 s, the ACK answering it "
        "completes the handshake, the request 1.5 s after connect() is acknowledged at once.",
        lambda net, pcap: twin_scenarios.lost_ack(net, pcap, where="client"),
        tools=("ip", "tcpdump", "nstat", "nft"),
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "crossed_synack",
        "RTT 1.4 s, nothing lost: the server's SYN-ACK timer fires before the ACK can arrive",
        "A path with 700 ms of latency each way. The server's SYN-ACK timer (1 s) fires before the client's ACK "
        "arrives, so the re-sent SYN-ACK crosses the ACK; the client's SYN timer fires too. Nothing is dropped "
        "and the listener accepts at once. tcpdump on the server's veth.",
        lambda net, pcap: twin_scenarios.crossed_synack(net, pcap, one_way=0.7),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "crossed_synack_client",
        "the same RTT of 1.4 s captured on the client's side",
        "crossed_synack with tcpdump on the client's veth: its SYN sent again after 1 s, the SYN-ACK 1.4 s after "
        "the first SYN, then the server's re-sent SYN-ACK answered by a duplicate ACK.",
        lambda net, pcap: twin_scenarios.crossed_synack(net, pcap, one_way=0.7),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        capture_at="client",
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "lost_synack_client",
        "the first SYN-ACK lost on a 0.6 s round trip, captured on the client's side",
        "nftables on the server's output drops its first SYN-ACK; tcpdump on the client's veth. The client sends its "
        "SYN again after 1 s and the SYN-ACK that answers it comes a round trip later: the twin of "
        "crossed_synack_client, where the first SYN-ACK was only late.",
        lambda net, pcap: twin_scenarios.lost_synack(net, pcap, one_way=0.3),
        tools=("ip", "tcpdump", "nstat", "nft"),
        network=NetnsDelayed,
        capture_at="client",
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "crossed_synack_delay_step",
        "latency client->server rises from 0.2 s to 1 s after the SYN: only the server's SYN-ACK timer fires",
        "200 ms each way for the SYN and its SYN-ACK (no SYN re-send), then 1 s from the client to the server, "
        "as when a queue builds on the client's uplink: the server's SYN-ACK timer fires 1 s after its SYN-ACK, "
        "before the ACK (1.2 s) arrives; the re-sent SYN-ACK crosses it. Nothing is dropped.",
        lambda net, pcap: twin_scenarios.crossed_synack(net, pcap, one_way=0.2, step_cs=1.0, connections=1),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "crossed_synack_short_rtt",
        "twin of crossed_synack: RTT 0.8 s, under the SYN-ACK timer: nothing re-sent",
        "The same path with 400 ms each way: the ACK arrives before the server's SYN-ACK timer fires, nothing is "
        "sent twice.",
        lambda net, pcap: twin_scenarios.crossed_synack(net, pcap, one_way=0.4),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "listener_restart",
        "the upstream closes its listening socket with connections queued and listens again 1.5 s later",
        "The server accepts nothing for 1 s, closes its listening socket and listens again 1.5 s later, while "
        "clients connect every 80 ms over a path of 50 ms each way. The queued connections get RSTs, a handshake "
        "ACK arriving after the close gets an RST, SYNs are refused until the listener is back. Twin: "
        "abort_on_overflow.",
        lambda net, pcap: twin_scenarios.listener_restart(net, pcap),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        client_error=("ConnectionResetError", "ConnectionRefusedError", "ECONNREFUSED"),
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "proxy_read_timeout",
        "the proxy's 1 s read timeout crosses the answer: FIN, then RSTs for the answer",
        "The server answers 0.97 s after the request over a path of 50 ms each way; the client (the proxy) "
        "gives up after 1 s and closes with a FIN that acknowledges only its request. The answer reaches a "
        "closed socket and the client's kernel answers it with RSTs.",
        lambda net, pcap: twin_scenarios.proxy_read_timeout(net, pcap, reply_delay=0.97),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        client_error="timed out",
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "proxy_read_timeout_in_time",
        "twin of proxy_read_timeout: the answer 0.8 s after the request, before the timeout",
        "The same, with the answer sent 0.8 s after the request: it arrives before the client's 1 s timeout and "
        "every exchange closes normally.",
        lambda net, pcap: twin_scenarios.proxy_read_timeout(net, pcap, reply_delay=0.8),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "reordering",
        "every 12th new data segment held 30 ms on a 20 ms RTT path: spurious re-sends, D-SACKed",
        "The path delays each 12th new data segment of the server's by 30 ms more; the ones behind it arrive "
        "first, the server's SACK recovery re-sends it, and the client reports the second copy with a D-SACK. "
        "Nothing was lost. tcpdump on the server's veth.",
        lambda net, pcap: twin_scenarios.reordering(net, pcap),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "reordering_loss",
        "twin of reordering: the same segments dropped: each re-send repairs a loss",
        "The same path and load with each 12th new data segment of the server's dropped instead of held: the "
        "re-sends are needed, no D-SACK comes back.",
        lambda net, pcap: twin_scenarios.reordering(net, pcap, drop=True),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "reordering_quarter",
        "every 4th new data segment held 30 ms on a 20 ms RTT path, 30 connections: many spurious re-sends",
        "The path of reordering with a quarter of the server's new data segments held back 30 ms: most "
        "responses have a segment the server re-sends though nothing was lost; the client D-SACKs the second "
        "copy when it can. tcpdump on the server's veth.",
        lambda net, pcap: twin_scenarios.reordering(net, pcap, every=4, connections=30, response=20000),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "reordering_quarter_loss",
        "twin of reordering_quarter: the same quarter of the segments dropped",
        "The same path and load with every 4th new data segment of the server's dropped instead of held: "
        "every re-send repairs a loss and no D-SACK comes back.",
        lambda net, pcap: twin_scenarios.reordering(net, pcap, every=4, drop=True, connections=30, response=20000),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "pmtu_server_side",
        "pmtu_discovery seen from the server's veth: the full-size segments never arrive, smaller re-sends do",
        "The path of pmtu_discovery (a router whose link towards the server takes 1200-byte packets, its ICMP "
        "reaching the client) with tcpdump on the server's veth, 3 connections: the client's full-size segments "
        "never get there; the same bytes arrive in smaller segments and each request gets through.",
        lambda net, pcap: icmp_scenarios.pmtu(net, pcap, connections=3, timeout=2.5, reset=True),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsRouted,
        capture_at="server",
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "mtu_black_hole_server_side",
        "twin of pmtu_server_side: the router's ICMP dropped (a black hole), seen from the server's veth",
        "mtu_black_hole_router with tcpdump on the server's veth, 3 connections: the handshakes arrive, the "
        "requests' full-size segments never do, nor any smaller re-send; each client gives up after 2.5 s and "
        "resets, and its RST, past every byte that vanished, arrives.",
        lambda net, pcap: icmp_scenarios.pmtu(net, pcap, drop_icmp="router", connections=3, timeout=2.5, reset=True),
        tools=("ip", "tcpdump", "nstat", "nft"),
        client_error="TimeoutError",
        network=NetnsRouted,
        capture_at="server",
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "reuseport_backlog1",
        "reuseport_stuck_listener with the stuck listener's listen(1), one connection already waiting",
        "Four SO_REUSEPORT listeners, listener 0 listen(1) with one connection waiting and stuck for 4 s: its "
        "accept queue (2 places) fills after one more connection.",
        lambda net, pcap: scenarios.reuseport_stuck_listener(
            net, pcap, listeners=4, backlog=1, prefill=1, stuck_for=4.0, connections=32
        ),
        tools=("ip", "tcpdump", "tc", "nstat", "ss"),
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "reuseport_backlog3_client",
        "reuseport_stuck_listener (listen(3)) captured on the client's veth",
        "reuseport_stuck_listener with tcpdump on the client's veth, after its tbf shaping: the proxy's view of "
        "the same overflow.",
        lambda net, pcap: scenarios.reuseport_stuck_listener(
            net, pcap, listeners=4, backlog=3, prefill=2, stuck_for=4.0, connections=32
        ),
        tools=("ip", "tcpdump", "tc", "nstat", "ss"),
        capture_at="client",
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "defer_accept_client",
        "TCP_DEFER_ACCEPT 1 s (nginx's `deferred`) on a 100 ms round trip, captured at the client",
        "The listener has TCP_DEFER_ACCEPT 1 s and accepts at once; 12 clients connect at once and send their "
        "requests 1.2 to 2.85 s later. The listener drops each bare handshake ACK, re-sends its SYN-ACK once, 1 s "
        "after the first, and the client's ACK to it creates the connection: each request is acknowledged at once. "
        "Nothing overflows. tcpdump on the client's veth.",
        lambda net, pcap: twin_scenarios.defer_accept_client(net, pcap),
        tools=("ip", "tcpdump", "nstat"),
        network=NetnsDelayed,
        capture_at="client",
        shipped_in=KERNEL_RUNS,
    ),
    Scenario(
        "accept_queue_full_client",
        "twin of defer_accept_client: a listener that never accepts, its accept queue already full",
        "The same clients and path; the listener has listen(12), no TCP_DEFER_ACCEPT, never calls accept(), and "
        "12 connections wait in its accept queue before the capture. The first client's ACK fills it; the other "
        "clients' ACKs and requests are dropped, their SYN-ACKs re-sent at 1 and 3 s, and no client is answered.",
        lambda net, pcap: twin_scenarios.defer_accept_client(net, pcap, overflow=True),
        tools=("ip", "tcpdump", "nstat", "ss"),
        client_error="timed out",
        network=NetnsDelayed,
        capture_at="client",
        shipped_in=KERNEL_RUNS,
    ),
)


# One seeded offered load against a prefork server under listen settings that change from run to run
# (src/pcapq/lab/load_scenarios.py); captures/whatif_runs/make.py runs the grid of settings.
WHATIF_RUNS = "whatif_runs"
LOAD_SCENARIOS = (
    Scenario(
        "prefork_bursts_b16_w2",
        "a seeded load with bursts against 2 prefork workers on listen(16): more than they can serve",
        "350 connections in 8 s, 30 a second with three bursts of 40, each asking for 20, 80 or 300 ms of "
        "work, against 2 worker processes that accept() from one listen(16) socket. The accept queue fills: "
        "handshake ACKs and SYNs are dropped, SYN-ACKs and SYNs re-sent, and the clients that wait 5 s after "
        "connect() give up.",
        lambda net, pcap: load_scenarios.prefork_load(net, pcap, pattern="steady_bursts", backlog=16, workers=2),
        client_error=load_scenarios.CLIENT_ERRORS,
        shipped_in=WHATIF_RUNS,
    ),
    Scenario(
        "prefork_waves_b16_w4",
        "a seeded load in waves (10/s, then 90/s, every 2 s) against 4 prefork workers on listen(16)",
        "About 420 connections in 8 s whose rate alternates between 10 and 90 a second, each asking for 20, 80 "
        "or 300 ms of work, against 4 worker "
        "processes on one listen(16) socket: the fast waves outrun the workers and the accept queue "
        "overflows until the slow wave drains it.",
        lambda net, pcap: load_scenarios.prefork_load(net, pcap, pattern="waves", backlog=16, workers=4),
        client_error=load_scenarios.CLIENT_ERRORS,
        shipped_in=WHATIF_RUNS,
    ),
)


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
            "haproxy_overflow",
            "HAProxy (mode tcp, tcplog) in front of a listener whose accept queue overflows",
            "HAProxy in the client namespace passes 10 connections at once to a server with listen(1) that calls "
            "accept() only after 6 s. The accept queue overflows; HAProxy gives up at its timeout connect (sC) or "
            "timeout server (sD), and its log says so, next to the capture.",
            lambda net, pcap: scenarios.haproxy_overflow(net, pcap, logs=pcap.with_suffix("")),
            tools=("ip", "tcpdump", "nstat", "ss", "haproxy"),
            client_error=("timed out", "reset", "closed"),
        ),
        Scenario(
            "haproxy_http_overflow",
            "HAProxy (mode http, a log-format with %bi:%bp) in front of a listener whose accept queue overflows",
            "As haproxy_overflow, in HTTP mode, with a log-format that adds the backend source address and port "
            "(%bi:%bp) and the server's (%si:%sp) to httplog's fields: each line names the connection it was about, "
            "so it is tied to it exactly.",
            lambda net, pcap: scenarios.haproxy_overflow(net, pcap, logs=pcap.with_suffix(""), mode="http",
                                                         log_format=scenarios.HAPROXY_EXACT_LOG),
            tools=("ip", "tcpdump", "nstat", "ss", "haproxy"),
            client_error=("timed out", "reset", "closed"),
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
            "nginx_php_fpm_logs",
            "nginx in front of php-fpm under more load, access logs to the millisecond beside the error log",
            "As nginx_php_fpm with 160 requests, 40 at a time: many fail in each second. The access log is also "
            "written as JSON, key=value after $msec, and with $time_iso8601 to the millisecond; nginx connects "
            "from its client's port, so `source.access.log` ($connection $remote_port) says which connection "
            "each request, and each error line (*N), was about.",
            lambda net, pcap: scenarios.nginx_php_fpm_logs(net, pcap, logs=pcap.with_suffix("")),
            tools=("ip", "tcpdump", "tc", "nstat", "ss", "nginx", "ab"),
        ),
        Scenario(
            "haproxy_frontends",
            "HAProxy with two frontends, each its own log: httplog to an overflowing listener, %bi:%bp to a resetting one",
            "One haproxy.cfg, two frontends: web (option httplog, to stdout) passes 10 connections 10 ms apart to a "
            "listener whose accept queue overflows (sC, sH); api (a log-format with %bi:%bp, to stderr) passes 5 "
            "to a server that resets each request (SH). Each log is read in its own frontend's format; web's lines "
            "also go as RFC 5424 syslog with %bp in their structured data, which says their connections.",
            lambda net, pcap: scenarios.haproxy_frontends(net, pcap, logs=pcap.with_suffix("")),
            tools=("ip", "tcpdump", "nstat", "ss", "haproxy"),
            client_error=("timed out", "reset", "closed"),
        ),
        Scenario(
            "nginx_php_fpm_slow",
            "nginx in front of a php-fpm script slower than fastcgi_read_timeout: 504, no overflow",
            "php-fpm has workers and backlog enough for the load, but its script takes 3.5 s and nginx "
            "waits 2 s for the response header. Every connection is accepted; nginx logs \"upstream "
            "timed out (110) while reading response header\" (504) and closes its side.",
            lambda net, pcap: scenarios.nginx_php_fpm_slow(net, pcap, logs=pcap.with_suffix("")),
            tools=("ip", "tcpdump", "tc", "nstat", "ss", "nginx", "ab"),
        ),
        Scenario(
            "nginx_php_fpm_killed",
            "php-fpm kills workers past request_terminate_timeout: the upstream closes mid-request, 502",
            "php-fpm has request_terminate_timeout 1s and a script that takes 4 s; nginx would wait 10 s. "
            "php-fpm's master kills each worker after its request has run 1-2 s, the worker's kernel resets "
            "the connection before any answer (part of the request unread), and nginx logs \"recv() failed "
            "(104: Connection reset by peer) while reading response header from upstream\" (502).",
            lambda net, pcap: scenarios.nginx_php_fpm_killed(net, pcap, logs=pcap.with_suffix("")),
            tools=("ip", "tcpdump", "tc", "nstat", "ss", "nginx", "ab"),
        ),
        Scenario(
            "nginx_php_fpm_max_requests",
            "nginx keeps upstream connections alive, php-fpm workers exit after 3 requests: closes as requests arrive",
            "nginx keeps up to 8 idle connections to php-fpm (fastcgi_keep_conn on); each php-fpm worker exits "
            "after 3 requests (pm.max_requests 3) and closes its connection, often just as nginx sends the next "
            "request on it. nginx logs \"upstream prematurely closed connection while reading response header "
            "from upstream\" and sends the request again on another connection: ab sees only 200s.",
            lambda net, pcap: scenarios.nginx_php_fpm_max_requests(net, pcap, logs=pcap.with_suffix("")),
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
        Scenario(
            "defer_accept",
            "TCP_DEFER_ACCEPT and idle preconnects: one late SYN-ACK re-send, no queue problem",
            "The listener has TCP_DEFER_ACCEPT 2 s. Three clients connect and send nothing for 4.5 s: "
            "the listener drops their bare handshake ACKs, re-sends its SYN-ACK once at the end of the "
            "defer period and takes the connection on the ACK that answers it. Ordinary exchanges "
            "meanwhile are served at once: the accept queue never fills.",
            lambda net, pcap: scenarios.defer_accept(net, pcap, defer=2, preconnects=3, idle=4.5, connections=5),
        ),
        Scenario(
            "reuseport_stuck_listener",
            "four SO_REUSEPORT listeners, one stuck: only its share of the connections overflows",
            "Four listeners share the port with SO_REUSEPORT; one of them (listen(3), two connections "
            "already waiting) calls accept() only after 4 s. The kernel hashes each connection to a "
            "listener: the stuck one's accept queue fills, its handshake ACKs are dropped and its "
            "SYN-ACKs re-sent, while the other three answer their connections at once.",
            lambda net, pcap: scenarios.reuseport_stuck_listener(
                net, pcap, listeners=4, backlog=3, prefill=2, stuck_for=4.0, connections=32
            ),
            tools=("ip", "tcpdump", "tc", "nstat", "ss"),
        ),
        Scenario(
            "firewall_drop",
            "nftables drops every other SYN before a healthy listener: it looks like listen drops",
            "nftables in the server namespace drops one SYN to the port in two, after tcpdump saw "
            "it. The clients send those SYNs again after 1 s. The listener is idle and its counters "
            "do not move (TcpExtListenDrops 0); only the nft counter knows.",
            lambda net, pcap: scenarios.firewall_drop(net, pcap, connections=10, every=2),
            tools=("ip", "tcpdump", "tc", "nstat", "nft"),
        ),
        Scenario(
            "tfo_fallback",
            "TCP Fast Open refused by the server: the request in the SYN is sent again, nothing lost",
            "The client puts its request in the SYN (TCP Fast Open without a cookie); the server "
            "has TFO off, so its SYN-ACK acknowledges only the SYN and the client sends the request "
            "again right after the handshake. A re-send, but no packet was lost.",
            lambda net, pcap: scenarios.tfo_fallback(net, pcap, connections=5),
        ),
        Scenario(
            "syn_scan",
            "nmap -sS: 1,000 ports, two open, one SYN each",
            "nmap sends one SYN to each of 1,000 ports from a raw socket. Closed ports answer RST; "
            "the two open ports answer SYN-ACK and nmap (and the client's kernel) reset it. One "
            "scan, not 998 failed connections.",
            lambda net, pcap: scenarios.port_scan(net, pcap, technique="-sS"),
            tools=("ip", "tcpdump", "tc", "nstat", "nmap"),
        ),
        Scenario(
            "connect_scan",
            "nmap -sT: 1,000 ports, two open, through the kernel's connect()",
            "nmap calls connect() for each of 1,000 ports: closed ports answer RST (ECONNREFUSED), "
            "the two open ports complete the handshake and nmap resets them.",
            lambda net, pcap: scenarios.port_scan(net, pcap, technique="-sT"),
            tools=("ip", "tcpdump", "tc", "nstat", "nmap"),
        ),
        Scenario(
            "keepalive_race",
            "a request on a keep-alive connection the server has just closed: answered with RST",
            "The server closes a connection idle for 0.5 s; the client sends its second request on it 1 s "
            "after the first answer. The server's FIN came first, so the client reads end of file, and the "
            "server's kernel answers the request with an RST (nginx: \"upstream prematurely closed "
            "connection\", 502, or a retry on another connection).",
            lambda net, pcap: scenarios.keepalive_race(net, pcap),
            client_error="closed the connection before answering",
        ),
        Scenario(
            "app_reset",
            "the application answers, then resets (SO_LINGER 0): not the listen queue",
            "The server takes each connection, its kernel acknowledges the request, the application "
            "writes its answer and closes with SO_LINGER 0: an RST after its own data. "
            "tcp_abort_on_overflow resets come before any data; this one is the application's.",
            lambda net, pcap: scenarios.app_reset(net, pcap, connections=3),
            client_error="ConnectionResetError",
        ),
        *ICMP_SCENARIOS,
        *TWIN_SCENARIOS,
        *LOAD_SCENARIOS,
    )
}
