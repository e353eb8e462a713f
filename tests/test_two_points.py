"""Two capture points on real kernel traffic: client, router and server namespaces (pcapq.lab
NetnsRouted), tcpdump on the client's veth (the proxy's point) and on the server's veth (the
server's point), and something in the router between them that loses, drops or translates
packets. The truth comes from the router's nftables counters and the server's kernel counters
(nstat), never from pcapq. Needs root, `ip`, `tcpdump`, `nft` and `nstat`; skipped otherwise.

A UDP datagram to a closed port at the start and the end of each run marks both captures
running (the other point was capturing when a packet vanished: docs/two-points.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_pcapq
from pcapq.lab.errors import LabUnavailable
from pcapq.lab.namespaces import NetnsRouted
from pcapq.lab.scenarios import PEERS, PORT, accept_queue_overflow, start_server

pytestmark = pytest.mark.kernel

TABLE = "pq31"
MARK = [sys.executable, "-c", "import socket,sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'mark', (sys.argv[1], 9))"]


@pytest.fixture
def net():
    try:
        with NetnsRouted(tools=("ip", "tcpdump", "nft", "nstat")) as routed:
            yield routed
    except LabUnavailable as e:
        pytest.skip(str(e))


def router_rules(net: NetnsRouted, body: str, nat: str = "") -> None:
    """An nftables table in the router: `body` in its forward chain, `nat` in a postrouting
    chain; named counters `to_server` and `to_client` count what the forward rules dropped."""
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


class Points:
    """tcpdump at both points for the body of a `with`, and a mark at each end."""

    def __init__(self, net: NetnsRouted, tmp: Path) -> None:
        self.net = net
        self.proxy = tmp / "proxy.pcap"
        self.server = tmp / "server.pcap"

    def __enter__(self) -> Points:
        net = self.net
        self.caps = [net.capture(self.proxy, ns=net.client_ns, iface=net.client_if).start(),
                     net.capture(self.server, ns=net.server_ns, iface=net.server_if).start()]
        net.run(net.client_ns, [*MARK, net.server_ip])
        return self

    def __exit__(self, *exc: object) -> None:
        self.net.run(self.net.client_ns, [*MARK, self.net.server_ip], check=False)
        for cap in self.caps:
            cap.stop()
        assert all(cap.dropped() in (0, None) for cap in self.caps), [c.stderr for c in self.caps]


def load(net: NetnsRouted, count: int, port: int = PORT, timeout: float = 5, response: int = 1000) -> None:
    """`count` sequential request/response connections from the client."""
    net.run(net.client_ns, [*PEERS, "client", net.server_ip, str(port), "--count", str(count), "--request", "100",
                            "--timeout", str(timeout), "--deadline", "20"], timeout=40, check=False)


def analyze(*paths: Path) -> dict:
    proc = run_pcapq("analyze", "--format", "json", *map(str, paths))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return json.loads(proc.stdout)


def vanished(path: dict) -> list[dict]:
    return [v for c in path["connections"] for v in c["vanished"]]


def findings(doc: dict, point: str) -> set[str]:
    report = next(p["report"] for p in doc["capture_points"] if p["name"] == point)
    return {f["cause"] for f in report["findings"]}


def check_vanished_is_truth(path: dict, to_server: int, to_client: int) -> None:
    """Every vanished packet listed is one the router dropped, in its direction, seen at the
    point before the router and missing at the one after; none it dropped is missing."""
    listed = vanished(path)
    ways = {"client_to_server": ("proxy.pcap", "server.pcap"), "server_to_client": ("server.pcap", "proxy.pcap")}
    for v in listed:
        assert (v["seen_at"], v["missing_at"]) == ways[v["direction"]], v
    by_way = {w: sum(v["direction"] == w for v in listed) for w in ways}
    assert by_way == {"client_to_server": to_server, "server_to_client": to_client}, (by_way, listed[:5])
    assert path["vanished_packets"] == by_way


def test_two_points_path_loss_each_way_listed_and_blamed_on_the_path(net, tmp_path):
    router_rules(net, f"    iifname {net.router_client_if} meta l4proto tcp numgen random mod 100 < 8 counter name to_server drop\n"
                      f"    iifname {net.router_server_if} meta l4proto tcp numgen random mod 100 < 8 counter name to_client drop")
    server = start_server(net, "--count", "0", "--response", "3000", "--deadline", "25")
    try:
        with Points(net, tmp_path) as points:
            load(net, 25)
    finally:
        net.stop(server)
    truth = counters(net)
    assert truth["to_server"] + truth["to_client"] > 0, "the router dropped nothing: rerun"
    doc = analyze(points.proxy, points.server)
    (path,) = doc["paths"]
    assert path["client_side"] == "proxy.pcap"
    check_vanished_is_truth(path, truth["to_server"], truth["to_client"])
    assert abs(path["clock_offset"]) < 0.001
    # Whatever a point blames on the listener, it is not this path's loss.
    for point in ("proxy.pcap", "server.pcap"):
        assert not findings(doc, point) & {"accept_queue_overflow", "syn_queue_overflow", "listen_drops"}


def test_two_points_firewall_swallows_syns_between_the_points(net, tmp_path):
    router_rules(net, f"    tcp dport {PORT + 1} tcp flags syn counter name to_server drop")
    server = start_server(net, "--count", "0", "--deadline", "20")
    try:
        with Points(net, tmp_path) as points:
            load(net, 5)
            load(net, 3, port=PORT + 1, timeout=2)
    finally:
        net.stop(server)
    truth = counters(net)
    assert truth["to_server"] >= 3
    doc = analyze(points.proxy, points.server)
    (path,) = doc["paths"]
    check_vanished_is_truth(path, truth["to_server"], 0)
    assert {v["flags"] for v in vanished(path)} == {"S"}
    # The server's point never saw them: its connections are none of these.
    assert all(c["ids"]["server.pcap"] is None for c in path["connections"])
    assert not findings(doc, "proxy.pcap") & {"accept_queue_overflow", "syn_queue_overflow", "listen_drops"}


def test_two_points_nat_in_the_middle_hop(net, tmp_path):
    router_rules(
        net,
        f"    iifname {net.router_client_if} meta l4proto tcp numgen random mod 100 < 8 counter name to_server drop\n"
        f"    iifname {net.router_server_if} meta l4proto tcp numgen random mod 100 < 8 counter name to_client drop",
        nat=f"    oifname {net.router_server_if} ip protocol tcp snat ip to {net.router_server_ip}:20000-29999",
    )
    server = start_server(net, "--count", "0", "--response", "3000", "--deadline", "25")
    try:
        with Points(net, tmp_path) as points:
            load(net, 20)
    finally:
        net.stop(server)
    truth = counters(net)
    doc = analyze(points.proxy, points.server)
    (path,) = doc["paths"]
    assert path["translated"]
    check_vanished_is_truth(path, truth["to_server"], truth["to_client"])
    for c in path["connections"]:
        if c["client"]["server.pcap"] is not None:
            assert c["client"]["server.pcap"].startswith(net.router_server_ip + ":")
            assert c["client"]["proxy.pcap"].startswith(net.client_ip + ":")


def test_two_points_accept_queue_overflow_reached_the_server(net, tmp_path):
    server_pcap = tmp_path / "server.pcap"
    cap = net.capture(server_pcap, ns=net.server_ns, iface=net.server_if).start()
    try:
        run = accept_queue_overflow(net, tmp_path / "proxy.pcap", connections=8)
    finally:
        cap.stop()
    assert run.delta("TcpExtListenOverflows") > 0, run.nstat_report()
    doc = analyze(tmp_path / "proxy.pcap", server_pcap)
    (path,) = doc["paths"]
    # Nothing between the points loses: every SYN and ACK reached the server's point.
    assert path["vanished_packets"] == {"client_to_server": 0, "server_to_client": 0}
    assert "accept_queue_overflow" in findings(doc, "server.pcap")
    for point in ("proxy.pcap", "server.pcap"):
        assert "network_loss" not in findings(doc, point)


def test_two_points_clock_shift_recovered_within_a_millisecond(net, tmp_path):
    server = start_server(net, "--count", "0", "--deadline", "20")
    try:
        with Points(net, tmp_path) as points:
            load(net, 10)
    finally:
        net.stop(server)
    shifted = tmp_path / "server-late.pcap"
    subprocess.run(["editcap", "-t", "2.5", str(points.server), str(shifted)], check=True, capture_output=True)
    before = analyze(points.proxy, points.server)["paths"][0]["clock_offset"]
    after = analyze(points.proxy, shifted)["paths"][0]
    assert abs(after["clock_offset"] - 2.5) < 0.001, after["clock_offset"]
    assert abs(after["clock_offset"] - before - 2.5) < 0.0001
    assert after["offset_uncertainty"] < 0.001
