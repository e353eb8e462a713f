"""Issue 18: what a Linux client does with each ICMP error answering its SYN, checked against the
kernel in network namespaces, and what pcapq concludes from the capture.

IPv4: the `pcapq lab` ICMP scenarios (src/pcapq/lab/icmp_scenarios.py). IPv6: two namespaces of
our own joined by a veth pair, an nftables reject rule in the server's.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import analyze_json
from pcapq.lab import icmp_scenarios
from pcapq.lab.namespaces import NetnsRouted, unavailable_reason
from pcapq.lab.runner import run_scenario

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(unavailable_reason(("ip", "tcpdump", "nft")) is not None,
                       reason=str(unavailable_reason(("ip", "tcpdump", "nft")))),
]


@pytest.mark.parametrize(("scenario", "cause", "errno_text"), [
    ("icmp_admin_prohibited", "firewall_reject", "No route to host"),
    ("icmp_port_unreachable", "no_such_port", "Connection refused"),
    ("icmp_host_unreachable", "no_route", "No route to host"),
    ("icmp_ttl_exceeded", "ttl_exceeded", "No route to host"),
])
def test_icmp_error_ends_connect_at_once_and_names_its_cause(tmp_path: Path, scenario: str, cause: str,
                                                            errno_text: str) -> None:
    result = run_scenario(scenario, tmp_path / f"{scenario}.pcap")
    assert not result.problems, result.problems
    # connect() fails with the errno of the first error Linux takes. One that came back while connect()
    # still held the socket is only recorded (tcp_v4_err(): sk_err_soft when sock_owned_by_user()), and
    # the error of the SYN re-sent 1 s later ends it: at most one re-send, each SYN answered.
    assert result.run.clients and all(errno_text in (c["error"] or "") for c in result.run.clients)
    doc = analyze_json(tmp_path / f"{scenario}.pcap")
    assert doc["summary"]["symptoms"]["syn_retransmitted"] <= len(result.run.clients)
    syns = sum(c["handshake"]["syn_attempts"] for c in doc["connections"])
    assert doc["summary"]["icmp"]["tied"] == syns
    assert doc["summary"]["outcomes"]["unreachable"] == len(result.run.clients)
    assert {f["cause"] for f in doc["findings"]} == {cause}


def test_blackhole_route_is_silent_never_an_icmp_finding(tmp_path: Path) -> None:
    result = run_scenario("route_blackhole", tmp_path / "b.pcap")
    assert not result.problems, result.problems
    doc = analyze_json(tmp_path / "b.pcap")
    assert "icmp" not in doc["summary"]
    assert {f["cause"] for f in doc["findings"]} == {"silent_host"}


def test_mtu_black_hole_names_its_size(tmp_path: Path) -> None:
    result = run_scenario("mtu_black_hole", tmp_path / "m.pcap")
    assert not result.problems, result.problems
    doc = analyze_json(tmp_path / "m.pcap")
    (finding,) = [f for f in doc["findings"] if f["cause"] == "mtu_black_hole"]
    assert finding["details"]["size_threshold"] == 1448
    assert not [f for f in doc["findings"] if f["cause"] == "network_loss"]


# --- Path MTU through a router (three namespaces, tcpdump on the client's veth: the proxy's side) ---

ROUTER = "10.231.1.254"


def test_pmtu_discovery_through_a_router_is_a_note_never_a_failure(tmp_path: Path) -> None:
    result = run_scenario("pmtu_discovery", tmp_path / "p.pcap")
    assert not result.problems, result.problems
    assert result.run.clients and all(c["error"] is None for c in result.run.clients), result.run.clients
    doc = analyze_json(tmp_path / "p.pcap")
    assert doc["findings"] == []
    (conn,) = doc["connections"]
    assert conn["outcome"] == "completed"
    # The router answered the client's full-size segments (1,500-byte packets, DF set) with its MTU.
    assert {(a["sender"], a["kind"], a["mtu"], a["answers"], a["dont_fragment"]) for a in conn["icmp"]} == {
        (ROUTER, "frag_needed", 1200, "client", True)}
    # The client re-sent smaller at once (tcp_v4_mtu_reduced()): no timer, no half-open connection, no loss.
    resent = [e for e in conn["events"] if e["kind"] == "data_retransmit"]
    assert resent and all(e["len"] <= 1200 - 52 for e in resent)
    assert {"request_unacked", "mtu_black_hole", "syncookie_suspected"}.isdisjoint(conn["symptoms"])
    assert any(s.startswith("path MTU discovery worked on 1 connection") and "1,200" in s for s in doc["settings"])
    assert not any("fast retransmit" in s for s in doc["settings"])


@pytest.mark.parametrize(("scenario_or_drop", "icmp_in_capture"), [("mtu_black_hole_router", False), ("client", True)])
def test_router_mtu_black_hole_names_its_size_never_network_loss(tmp_path: Path, scenario_or_drop: str,
                                                                icmp_in_capture: bool) -> None:
    pcap = tmp_path / "b.pcap"
    if scenario_or_drop == "client":
        # The router's errors reach the client's veth (tcpdump sees them) and die in its input chain.
        with NetnsRouted(subnet=1, tools=("ip", "tcpdump", "nstat", "nft")) as net:
            run = icmp_scenarios.pmtu(net, pcap, drop_icmp="client")
        problems = [c["error"] for c in run.clients if "TimeoutError" not in (c["error"] or "")]
    else:
        result = run_scenario(scenario_or_drop, pcap)
        run, problems = result.run, result.problems
    assert not problems, problems
    assert run.extra["icmp_dropped"] >= 1 and run.extra["frag_fails"] >= run.extra["icmp_dropped"]
    doc = analyze_json(pcap)
    assert {f["cause"] for f in doc["findings"]} == {"mtu_black_hole"}
    (finding,) = doc["findings"]
    assert finding["details"]["size_threshold"] == 1448
    assert finding["details"]["mtu"] == ({"1200": 1} if icmp_in_capture else {})
    assert ("1,200" in finding["confidence_reason"]) == icmp_in_capture
    assert ("icmp" in doc["summary"]) == icmp_in_capture
    assert not any(s.startswith("path MTU discovery worked") for s in doc["settings"])


# --- IPv6: ICMPv6 errors and their errno ---

CLIENT6, SERVER6 = "fd18::1", "fd18::2"
CONNECT = r"""
import errno, socket, sys, time
s = socket.socket(socket.AF_INET6); s.settimeout(5)
t = time.monotonic()
try:
    s.connect((sys.argv[1], 9000)); print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno), round(time.monotonic() - t, 3))
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


@pytest.mark.parametrize(("reject", "errno_name", "cause"), [
    ("admin-prohibited", "EACCES", "firewall_reject"),
    ("port-unreachable", "ECONNREFUSED", "no_such_port"),
    ("no-route", "ENETUNREACH", "no_route"),
    ("addr-unreachable", "EHOSTUNREACH", "no_route"),
])
def test_icmpv6_error_errno_and_cause(tmp_path: Path, reject: str, errno_name: str, cause: str) -> None:
    tag = uuid.uuid4().hex[:6]
    client, server = f"pq18c-{tag}", f"pq18s-{tag}"
    pcap = tmp_path / "v6.pcap"
    created: list[str] = []
    dump = None
    try:
        for ns in (client, server):
            _ip("netns", "add", ns)
            created.append(ns)
        for ns in (client, server):
            # No duplicate address detection: a tentative link-local address delays the first SYN.
            for key in ("net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"):
                subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}=0"], check=True, timeout=20)
        _ip("-n", client, "link", "add", "pq6c", "type", "veth", "peer", "name", "pq6s", "netns", server)
        for ns, dev, addr in ((client, "pq6c", CLIENT6), (server, "pq6s", SERVER6)):
            _ip("-n", ns, "addr", "add", f"{addr}/64", "dev", dev, "nodad")
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        # Static neighbours and links up before the first SYN: no neighbour discovery to wait for.
        mac = {dev: subprocess.run(["ip", "-n", ns, "-br", "link", "show", dev], capture_output=True, text=True,
                                   timeout=20).stdout.split()[2] for ns, dev in ((client, "pq6c"), (server, "pq6s"))}
        _ip("-n", client, "neigh", "replace", SERVER6, "lladdr", mac["pq6s"], "dev", "pq6c", "nud", "permanent")
        _ip("-n", server, "neigh", "replace", CLIENT6, "lladdr", mac["pq6c"], "dev", "pq6s", "nud", "permanent")
        for _ in range(50):
            states = [subprocess.run(["ip", "-n", ns, "link", "show", dev], capture_output=True, text=True,
                                     timeout=20).stdout for ns, dev in ((client, "pq6c"), (server, "pq6s"))]
            if all("LOWER_UP" in st for st in states):
                break
            time.sleep(0.1)
        rules = ("table inet pq18 {\n chain input {\n  type filter hook input priority 0; policy accept;\n"
                 f"  tcp dport 9000 reject with icmpv6 type {reject}\n }}\n}}\n")
        subprocess.run(["ip", "netns", "exec", server, "nft", "-f", "-"], input=rules, text=True, check=True, timeout=20)
        dump = subprocess.Popen(["ip", "netns", "exec", server, "tcpdump", "-n", "-U", "-i", "pq6s", "-w", str(pcap),
                                 "tcp or icmp6"], stderr=subprocess.PIPE)
        for _ in range(50):
            if pcap.exists():
                break
            time.sleep(0.1)
        time.sleep(0.5)
        out = subprocess.run(["ip", "netns", "exec", client, sys.executable, "-c", CONNECT, SERVER6],
                             capture_output=True, text=True, timeout=20).stdout.split()
        time.sleep(0.3)
    finally:
        if dump is not None:
            dump.terminate()
            dump.wait(10)
        for ns in created:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
    # The errno, within the SYN's first re-send. In a fresh namespace the first SYN's error can come
    # back while connect() still holds the socket (the reject runs in the same softirq as the send):
    # tcp_v6_err() then only records it (sk_err_soft when sock_owned_by_user()), and the error of the
    # SYN re-sent 1 s later ends the connect. Each SYN captured got its error; none came after the last.
    assert out[0] == errno_name and float(out[1]) < 1.5, out
    doc = analyze_json(pcap)
    assert doc["summary"]["outcomes"]["unreachable"] == 1
    (conn,) = [c for c in doc["connections"] if c["server"] == f"[{SERVER6}]:9000"]
    assert doc["summary"]["icmp"]["tied"] == conn["handshake"]["syn_attempts"] == len(conn["icmp"])
    assert conn["icmp"][0]["errno_text"]
    assert {f["cause"] for f in doc["findings"]} == {cause}
