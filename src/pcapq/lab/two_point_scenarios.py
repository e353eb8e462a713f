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
from pcapq.lab.namespaces import Capture, NetnsRouted
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

    def __init__(self, net: NetnsRouted, out: Path) -> None:
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


def load(net: NetnsRouted, count: int, port: int = PORT, timeout: float = 5) -> None:
    """`count` sequential request/response connections from the client (failures allowed)."""
    net.run(net.client_ns, [*PEERS, "client", net.server_ip, str(port), "--count", str(count), "--request", "100",
                            "--timeout", str(timeout), "--deadline", "20"], timeout=40, check=False)


def _finish(net: NetnsRouted, run: TwoPointRun, before: dict[str, int]) -> TwoPointRun:
    c = counters(net)
    run.to_server, run.to_client = c.get("to_server", 0), c.get("to_client", 0)
    after = net.nstat(net.server_ns)
    run.nstat = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0) and k.startswith("TcpExt")}
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


RUNS = {"path_loss": path_loss, "nat": lambda net, out: path_loss(net, out, connections=20, nat=True),
        "firewall": firewall, "accept_overflow": accept_overflow}
