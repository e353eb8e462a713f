"""Scenarios in which ICMP answers the client's SYNs: a reject rule on the server's host,
a route that says no on a router, a TTL that runs out, and a blackhole route that says nothing;
and path MTU: a link that drops big frames without a word, and a router with a smaller MTU
towards the server whose "fragmentation needed" reaches the client (path MTU discovery) or is
dropped (a black hole), in three namespaces (`pmtu`, NetnsRouted).

For the route scenarios the server namespace is also the router: the client reaches the upstream
address UPSTREAM (TEST-NET-2, RFC 5737 §3, owned by no one) through it, and tcpdump on the
server's veth sees the SYN and the router's answer.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

from pcapq.lab.errors import LabError
from pcapq.lab.namespaces import NetnsPair, NetnsRouted
from pcapq.lab.scenarios import PEERS, PORT, Run, _client, _nft_counters, _run, start_server

REJECT_TABLE = "pcapq_reject"
UPSTREAM_NET = "198.51.100.0/24"
UPSTREAM = "198.51.100.9"
CAPTURE_FILTER = ["tcp or icmp or icmp6"]


def _connects(net: NetnsPair, host: str, connections: int, timeout: float) -> str:
    """`connections` sequential connects from the client namespace to host:PORT; its stdout."""
    argv = [*PEERS, "client", host, str(PORT), "--count", str(connections), "--timeout", str(timeout),
            "--deadline", str(connections * (timeout + 1) + 5)]
    net.say(f"client: {connections} sequential connects to {host}:{PORT}, {timeout} s timeout each")
    return net.run(net.client_ns, argv, timeout=connections * (timeout + 2) + 10).stdout


def reject(net: NetnsPair, pcap: Path, with_icmp: str = "admin-prohibited", connections: int = 3) -> Run:
    """A listener behind an nftables rule on its own host that answers SYNs to the port with
    `reject with icmp type WITH_ICMP`: the SYN never reaches the listener."""
    rule = f"tcp dport {PORT} tcp flags & (syn | ack) == syn reject with icmp type {with_icmp}"
    rules = (f"table inet {REJECT_TABLE} {{\n  chain input {{\n    type filter hook input priority 0; policy accept;\n"
             f"    {rule}\n  }}\n}}\n")
    net.run(net.server_ns, ["nft", "-f", "-"], input=rules)
    net.say(f"nftables in the server namespace: {rule}")
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    server = start_server(net, "--count", str(connections), "--deadline", "10")
    try:
        with net.capture(pcap, bpf=CAPTURE_FILTER) as cap:
            out = _connects(net, net.server_ip, connections, timeout=2)
    finally:
        net.stop(server)
    setup = [f"server listen() backlog 128; its input chain: `{rule}`; client: {connections} sequential connects"]
    return _run(net, pcap, out, cap, before, started, setup)


def _route_through_server(net: NetnsPair) -> None:
    net.sysctl(net.server_ns, "net.ipv4.ip_forward", 1)
    # Linux answers at most one error per second per destination by default (icmp_ratelimit).
    net.sysctl(net.server_ns, "net.ipv4.icmp_ratelimit", 0)
    net.run(net.client_ns, ["ip", "route", "add", UPSTREAM_NET, "via", net.server_ip])
    net.say(f"client routes {UPSTREAM_NET} through the server namespace, which forwards")


def route(net: NetnsPair, pcap: Path, kind: str = "unreachable", connections: int = 3) -> Run:
    """The router (the server namespace) has `ip route add KIND UPSTREAM_NET`: `unreachable`
    answers ICMP host unreachable, `prohibit` ICMP administratively prohibited (code 13),
    `blackhole` drops without a word. The client connects to UPSTREAM."""
    _route_through_server(net)
    net.run(net.server_ns, ["ip", "route", "add", kind, UPSTREAM_NET])
    net.say(f"router: ip route add {kind} {UPSTREAM_NET}")
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    with net.capture(pcap, bpf=CAPTURE_FILTER) as cap:
        out = _connects(net, UPSTREAM, connections, timeout=3.5 if kind == "blackhole" else 2)
    setup = [f"client -> router (the server namespace) -> {UPSTREAM}; router: `ip route add {kind} {UPSTREAM_NET}`; "
             f"client: {connections} sequential connects"]
    return _run(net, pcap, out, cap, before, started, setup)


def ttl_exceeded(net: NetnsPair, pcap: Path, connections: int = 2) -> Run:
    """The client sends with TTL 1 (net.ipv4.ip_default_ttl=1 in its namespace) to UPSTREAM, one
    hop beyond the router: the router answers every SYN with ICMP time exceeded."""
    _route_through_server(net)
    net.run(net.server_ns, ["ip", "route", "add", UPSTREAM_NET, "via", net.client_ip])
    net.sysctl(net.client_ns, "net.ipv4.ip_default_ttl", 1)
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    with net.capture(pcap, bpf=CAPTURE_FILTER) as cap:
        out = _connects(net, UPSTREAM, connections, timeout=2)
    setup = [f"client (net.ipv4.ip_default_ttl=1) -> router (the server namespace) -> {UPSTREAM}; "
             f"client: {connections} sequential connects"]
    return _run(net, pcap, out, cap, before, started, setup)


def mtu_black_hole(net: NetnsPair, pcap: Path, mtu: int = 1000) -> Run:
    """The server's answers cross a link with a smaller MTU that says nothing: the client's end
    of the veth pair takes only `mtu` bytes (the veth drops larger frames without a word, as a
    tunnel whose fragmentation-needed errors a firewall drops would), while the client's route
    still advertises an MSS of 1460 (`advmss`), so the server sends full-size segments: a path
    MTU black hole. The request and the handshake (small) get through; the response does not."""
    net.run(net.client_ns, ["ip", "link", "set", "dev", net.client_if, "mtu", str(mtu)])
    subnet = net.server_ip.rsplit(".", 1)[0] + ".0/24"
    net.run(net.client_ns, ["ip", "route", "change", subnet, "dev", net.client_if, "advmss", "1460"])
    # One segment per frame (no TSO super-packets, which a veth lets through whatever their size).
    net.run(net.server_ns, ["ip", "link", "set", "dev", net.server_if, "gso_max_segs", "1"])
    net.say(f"client's veth MTU {mtu}, its route's advmss 1460; the server's veth stays 1500")
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    server = start_server(net, "--count", "1", "--response", "20000", "--deadline", "15")
    try:
        with net.capture(pcap, bpf=CAPTURE_FILTER, snaplen=128) as cap:
            out = _connects(net, net.server_ip, 1, timeout=6)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(1)
    finally:
        net.stop(server)
    setup = [f"client veth MTU {mtu}, server veth 1500; one request, a 20,000-byte response"]
    return _run(net, pcap, out, cap, before, started, setup)


PMTU_TABLE = "pcapq_pmtu"
ROUTER_MTU = 1200


def pmtu(net: NetnsPair, pcap: Path, drop_icmp: str | None = None, mtu: int = ROUTER_MTU, request: int = 20000,
         connections: int = 1, timeout: float = 5.0, reset: bool = False) -> Run:
    """A `request`-byte request through a router whose link towards the server takes only `mtu`
    bytes. The client's and the server's veths stay at 1500, so the handshake agrees on an MSS of
    1460 and the client sends full-size segments, with DF set (Linux sets it on every TCP segment:
    ip_queue_xmit(), IP_PMTUDISC_WANT). The router cannot forward them: ip_forward() counts
    IpFragFails and answers ICMP fragmentation needed with the next-hop MTU.

    drop_icmp None: the client's kernel takes the error (tcp_v4_err() -> tcp_v4_mtu_reduced()),
    lowers its MSS to fit and re-sends what was lost at once, smaller (tcp_simple_retransmit()):
    path MTU discovery, the request gets through. "router": nftables in the router's output chain
    drops the error, so the client re-sends full-size segments on its timer until it gives up: a
    path MTU black hole. "client": the same, dropped on the client's input, after tcpdump on its
    veth saw it (a packet socket gets it before netfilter's input hook): the capture holds errors
    its kernel never read.

    `connections` sequential clients, each waiting `timeout` s for its answer; `reset`: a client
    that times out closes with an RST (SO_LINGER 0, as HAProxy aborts a server connection): its
    sequence number is past every byte it sent, and, small, it gets through the router, so the
    server's side sees where the bytes that never came end. A plain close() would queue its FIN
    behind the unacknowledged data (Linux v6.6 net/ipv4/tcp.c: tcp_send_fin()).

    Each run has fresh namespaces, so no path MTU learnt before (the route's cached exception,
    `ip route get` shows it) carries over."""
    if not isinstance(net, NetnsRouted):
        raise LabError("the path MTU scenarios need a router: run them in NetnsRouted (the catalog's `network`)")
    net.run(net.router_ns, ["ip", "link", "set", "dev", net.router_server_if, "mtu", str(mtu)])
    # One segment per frame: no TSO super-packets in the capture (a veth sends them whole).
    net.run(net.client_ns, ["ip", "link", "set", "dev", net.client_if, "gso_max_segs", "1"])
    net.say(f"router's link towards the server: MTU {mtu}; the client's and server's veths: 1500")
    rule = "icmp type destination-unreachable icmp code frag-needed counter drop"
    firewall = {"router": (net.router_ns, "output"), "client": (net.client_ns, "input")}.get(drop_icmp or "")
    if firewall:
        ns, hook = firewall
        rules = (f"table inet {PMTU_TABLE} {{\n  chain {hook} {{\n    type filter hook {hook} priority 0; policy accept;\n"
                 f"    {rule}\n  }}\n}}\n")
        net.run(ns, ["nft", "-f", "-"], input=rules)
        net.say(f"nftables in the {drop_icmp}'s {hook} chain: `{rule}`")
    started = time.monotonic()
    before = net.nstat(net.server_ns)
    router_before = net.nstat(net.router_ns)
    server = start_server(net, "--count", str(connections), "--response", "1000",
                          "--deadline", str(connections * (timeout + 1) + 10))
    try:
        with net.capture(pcap, bpf=CAPTURE_FILTER, snaplen=128) as cap:
            out = _client(net, "--count", str(connections), "--request", str(request), "--timeout", str(timeout),
                          *(("--rst-on-timeout",) if reset else ()), "--deadline", str(connections * (timeout + 1) + 5))
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(1)
    finally:
        net.stop(server)
    # The client's kernel may still be re-sending (its socket outlives the client's timeout), so the
    # drops are read before the router's counter: each drop follows the IpFragFails it answers.
    dropped = _nft_counters(net, firewall[0], PMTU_TABLE)[0] if firewall else None
    frag_fails = net.nstat(net.router_ns).get("IpFragFails", 0) - router_before.get("IpFragFails", 0)
    setup = [f"client -> router -> server; the router's link towards the server has MTU {mtu}, the client's and "
             f"server's veths 1500; {connections} sequential connection{'s' if connections > 1 else ''}, each a "
             f"{request:,}-byte request, a 1,000-byte response, read timeout {timeout:g} s"
             + (" then an RST (SO_LINGER 0)" if reset else "") + f"; tcpdump on the {net.role(net.capture_ns)}'s veth",
             f"router: IpFragFails +{frag_fails} (segments too big to forward with DF set, each answered with ICMP "
             "fragmentation needed)" + (f"; the {drop_icmp}'s {firewall[1]} chain: `{rule}`" if firewall else "")]
    run = _run(net, pcap, out, cap, before, started, setup)
    run.extra.update(frag_fails=frag_fails)
    if dropped is not None:
        run.extra.update(icmp_dropped=dropped)
    return run
