"""Kernel runs seen at two capture points (docs/two-points.md): client, router and server
namespaces (NetnsRouted), tcpdump on the client's veth (the proxy's point, `proxy.pcap`) and on
the server's veth (the server's point, `server.pcap`), and something in the router between them
that loses, drops or translates packets. Each run's truth is the router's nftables counters
and the server namespace's kernel counters, never pcapq.

A UDP datagram to a closed port at the start and the end of each run marks both captures
running: a packet can only be missed by a point that was capturing.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from pcapq.lab.errors import LabError
from pcapq.lab.namespaces import Capture, NetnsDelayed, NetnsPair, NetnsRouted
from pcapq.lab.scenarios import PEERS, PORT, accept_queue_overflow, start_server

TABLE = "pq2p"
MARK = [sys.executable, "-c", "import socket,sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'mark', (sys.argv[1], 9))"]
# What the router's forward chain drops at random, each way, to make a lossy path (this kernel
# may lack netem: nftables' numgen stands in).
LOSS_PERCENT = 8


class Truth(TypedDict):
    """A run's truth (`truth.json` of captures/two_points): what the router dropped each way,
    the server namespace's counters that moved, and how the run was set up."""

    dropped_to_server: int
    dropped_to_client: int
    nstat: dict[str, int]
    setup: list[str]


@dataclass
class TwoPointRun:
    proxy: Path
    server: Path
    # The router's counters: packets it dropped on the way to the server and back.
    to_server: int = 0
    to_client: int = 0
    # Server namespace counters that moved (nstat), by name.
    nstat: dict[str, int] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)

    def truth(self) -> Truth:
        return {"dropped_to_server": self.to_server, "dropped_to_client": self.to_client, "nstat": self.nstat, "setup": self.setup}


def router_rules(net: NetnsRouted, body: str, nat: str = "") -> None:
    """An nftables table in the router: `body` in its forward chain, `nat` in a postrouting
    chain; the named counters `to_server` and `to_client` count what the forward rules drop."""
    rules = (
        f"table inet {TABLE} {{\n"
        "  counter to_server { }\n  counter to_client { }\n"
        "  chain forward {\n    type filter hook forward priority 0; policy accept;\n"
        f"{body}\n  }}\n"
        + (f"  chain post {{\n    type nat hook postrouting priority 100; policy accept;\n{nat}\n  }}\n" if nat else "")
        + "}\n"
    )
    net.run(net.router_ns, ["nft", "-f", "-"], input=rules)


def counters(net: NetnsRouted) -> dict[str, int]:
    doc = json.loads(net.run(net.router_ns, ["nft", "-j", "list", "counters", "table", "inet", TABLE]).stdout)
    return {item["counter"]["name"]: int(item["counter"]["packets"]) for item in doc["nftables"] if "counter" in item}


def lossy(net: NetnsRouted) -> str:
    """Forward rules that drop LOSS_PERCENT % of TCP each way, counted."""
    return (f"    iifname {net.router_client_if} meta l4proto tcp numgen random mod 100 < {LOSS_PERCENT} counter name to_server drop\n"
            f"    iifname {net.router_server_if} meta l4proto tcp numgen random mod 100 < {LOSS_PERCENT} counter name to_client drop")


class Points:
    """tcpdump at both points for the body of a `with`, and a mark at each end."""

    def __init__(self, net: NetnsPair, out: Path) -> None:
        self.net = net
        self.proxy = out / "proxy.pcap"
        self.server = out / "server.pcap"
        self.caps: list[Capture] = []

    def __enter__(self) -> Points:
        net = self.net
        self.caps = [net.capture(self.proxy, ns=net.client_ns, iface=net.client_if).start(),
                     net.capture(self.server, ns=net.server_ns, iface=net.server_if).start()]
        net.run(net.client_ns, [*MARK, net.server_ip])
        return self

    def __exit__(self, *exc: object) -> None:
        # Marks a little apart: the last packets of the run are well inside both captures.
        for _ in range(3):
            time.sleep(0.1)
            self.net.run(self.net.client_ns, [*MARK, self.net.server_ip], check=False)
        for cap in self.caps:
            cap.stop()
        dropped = [cap.dropped() for cap in self.caps]
        if any(d not in (0, None) for d in dropped):
            raise LabError(f"tcpdump dropped packets ({dropped}): the captures are not the truth")


def load(net: NetnsPair, count: int, port: int = PORT, timeout: float = 5, request: int = 100) -> None:
    """`count` sequential connections from the client, each a `request`-byte request and its
    response (failures allowed)."""
    net.run(net.client_ns, [*PEERS, "client", net.server_ip, str(port), "--count", str(count), "--request", str(request),
                            "--timeout", str(timeout), "--deadline", "20"], timeout=40, check=False)


def output_drop(net: NetnsPair, ns: str, table: str, rule: str) -> None:
    """An nftables table in `ns` whose output chain holds `rule`."""
    net.run(ns, ["nft", "-f", "-"], input=(f"table inet {table} {{\n  chain output {{\n    type filter hook output priority 0; "
                                           f"policy accept;\n    {rule}\n  }}\n}}\n"))


def moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The TcpExt counters that moved between two nstat readings, by how much."""
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0) and k.startswith("TcpExt")}


def _finish(net: NetnsRouted, run: TwoPointRun, before: dict[str, int]) -> TwoPointRun:
    c = counters(net)
    run.to_server, run.to_client = c.get("to_server", 0), c.get("to_client", 0)
    run.nstat = moved(before, net.nstat(net.server_ns))
    return run


def path_loss(net: NetnsRouted, out: Path, connections: int = 25, nat: bool = False) -> TwoPointRun:
    """Request/response connections across a router that drops LOSS_PERCENT % of TCP each way;
    with `nat`, it also rewrites the client's address and port (SNAT) toward the server."""
    translate = f"    oifname {net.router_server_if} ip protocol tcp snat ip to {net.router_server_ip}:20000-29999" if nat else ""
    router_rules(net, lossy(net), nat=translate)
    before = net.nstat(net.server_ns)
    server = start_server(net, "--count", "0", "--response", "3000", "--deadline", "25")
    try:
        with Points(net, out) as points:
            load(net, connections)
    finally:
        net.stop(server)
    setup = [f"router forward: drop {LOSS_PERCENT} % of TCP each way (nft numgen random), counted",
             f"client: {connections} sequential connections, 100-byte request, 3000-byte response"]
    if nat:
        setup.append(f"router postrouting: snat to {net.router_server_ip}:20000-29999 toward the server")
    return _finish(net, TwoPointRun(points.proxy, points.server, setup=setup), before)


def firewall(net: NetnsRouted, out: Path, healthy: int = 5, blocked: int = 3) -> TwoPointRun:
    """A firewall in the router swallows every SYN to the port after the server's; connections
    to the server's port pass."""
    router_rules(net, f"    tcp dport {PORT + 1} tcp flags syn counter name to_server drop")
    before = net.nstat(net.server_ns)
    server = start_server(net, "--count", "0", "--deadline", "20")
    try:
        with Points(net, out) as points:
            load(net, healthy)
            load(net, blocked, port=PORT + 1, timeout=2)
    finally:
        net.stop(server)
    setup = [f"router forward: `tcp dport {PORT + 1} tcp flags syn drop`, counted",
             f"client: {healthy} connections to port {PORT}, then {blocked} to port {PORT + 1} (connect timeout 2 s)"]
    return _finish(net, TwoPointRun(points.proxy, points.server, setup=setup), before)


def accept_overflow(net: NetnsRouted, out: Path, connections: int = 8) -> TwoPointRun:
    """The lab's accept_queue_overflow (a listener that does not accept() while a burst
    connects) seen at both points: nothing between them loses."""
    router_rules(net, "")
    server_pcap = out / "server.pcap"
    cap = net.capture(server_pcap, ns=net.server_ns, iface=net.server_if).start()
    try:
        run = accept_queue_overflow(net, out / "proxy.pcap", connections=connections)
    finally:
        cap.stop()
    result = TwoPointRun(out / "proxy.pcap", server_pcap, setup=run.setup)
    result.nstat = {k: run.delta(k) for k in run.nstat_after if run.delta(k) and k.startswith("TcpExt")}
    c = counters(net)
    result.to_server, result.to_client = c.get("to_server", 0), c.get("to_client", 0)
    return result


def mtu_black_hole(net: NetnsRouted, out: Path, healthy: int = 8, request: int = 20000) -> TwoPointRun:
    """A path MTU black hole between the points: the router's link towards the server takes
    1200 bytes, the veths 1500, so the client sends full-size segments with DF set (Linux sets it
    on every TCP segment: ip_queue_xmit(), IP_PMTUDISC_WANT) and the router cannot forward them
    (ip_forward() counts IpFragFails and answers ICMP fragmentation needed, which its output
    chain drops). `healthy` connections with 100-byte requests pass first; then one
    `request`-byte request reaches the proxy's point and never the server's. The client's veth
    sends one segment per frame (no TSO super-packets), so each IpFragFails is one packet. The
    client's output is closed to the server before the captures stop, so no re-send is counted
    that they did not see."""
    from pcapq.lab.icmp_scenarios import ROUTER_MTU

    net.run(net.router_ns, ["ip", "link", "set", "dev", net.router_server_if, "mtu", str(ROUTER_MTU)])
    net.run(net.client_ns, ["ip", "link", "set", "dev", net.client_if, "gso_max_segs", "1"])
    rule = "icmp type destination-unreachable icmp code frag-needed counter drop"
    output_drop(net, net.router_ns, f"{TABLE}_icmp", rule)
    router_rules(net, "")
    before, router_before = net.nstat(net.server_ns), net.nstat(net.router_ns)
    server = start_server(net, "--count", str(healthy + 1), "--response", "1000", "--deadline", "20")
    try:
        with Points(net, out) as points:
            load(net, healthy)
            load(net, 1, request=request)
            # The client's kernel re-sends the orphaned request on its timer: stop it here.
            output_drop(net, net.client_ns, f"{TABLE}_stop", f"ip daddr {net.server_ip} meta l4proto tcp drop")
            time.sleep(0.3)
            frag_fails = net.nstat(net.router_ns).get("IpFragFails", 0) - router_before.get("IpFragFails", 0)
    finally:
        net.stop(server)
    setup = [f"router: its link towards the server MTU {ROUTER_MTU}, the veths 1500; its output chain `{rule}`",
             f"client: {healthy} connections with a 100-byte request, then one {request:,}-byte request (timeout 5 s), "
             "one segment per frame; then its output to the server dropped, before the captures stop",
             f"router: IpFragFails +{frag_fails} (segments too big to forward with DF set)"]
    run = _finish(net, TwoPointRun(points.proxy, points.server, setup=setup), before)
    run.to_server = frag_fails
    return run


def reordering(net: NetnsDelayed, out: Path, connections: int = 10, hold_every: int = 5, hold_for: float = 0.03) -> TwoPointRun:
    """A path that reorders and loses nothing (NetnsDelayed's user-space delay line, 5 ms each
    way): each `hold_every`th new data segment from the server comes `hold_for` s late, and the
    segments behind it overtake it. The client's duplicate ACKs may make the server re-send a
    segment the path only held (RACK: tcp_rack_detect_loss()): a re-send at the proxy's point
    with nothing lost between the points. The truth is the delay line's own count: nothing
    dropped."""
    net.start_path(delay_cs=0.005, delay_sc=0.005, hold_every=hold_every, hold_for=hold_for, direction="sc")
    before = net.nstat(net.server_ns)
    server = start_server(net, "--count", "0", "--response", "20000", "--deadline", "25")
    try:
        with Points(net, out) as points:
            load(net, connections)
    finally:
        net.stop(server)
        path = net.stop_path()
    after = net.nstat(net.server_ns)
    held, dropped = path.get("held", []), path.get("dropped", [])
    setup = [f"path: {net.path_settings}",
             f"client: {connections} sequential connections, 100-byte request, 20,000-byte response",
             f"delay line: {len(held)} segments held, {len(dropped)} dropped"]
    run = TwoPointRun(points.proxy, points.server, setup=setup)
    run.to_server = sum(1 for d in dropped if d[0] == "cs")
    run.to_client = sum(1 for d in dropped if d[0] == "sc")
    run.nstat = moved(before, after)
    return run


RUNS = {"path_loss": path_loss, "nat": lambda net, out: path_loss(net, out, connections=20, nat=True),
        "firewall": firewall, "accept_overflow": accept_overflow,
        "pmtu_black_hole": mtu_black_hole}
