"""Two capture points on real kernel traffic (pcapq.lab.two_point_scenarios): client, router
and server namespaces, tcpdump on the client's veth (the proxy's point) and on the server's
veth (the server's point), the router losing, dropping or translating in between. The truth
is the router's nftables counters and the server's kernel counters, never pcapq. Needs root,
`ip`, `tcpdump`, `nft`, `nstat` and `editcap`; skipped otherwise."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_pcapq
from pcapq.lab.errors import LabUnavailable
from pcapq.lab.namespaces import NetnsDelayed, NetnsRouted
from pcapq.lab.two_point_scenarios import TwoPointRun, accept_overflow, firewall, mtu_black_hole, path_loss, reordering

pytestmark = pytest.mark.kernel

LISTENER = {"accept_queue_overflow", "syn_queue_overflow", "listen_drops"}


@pytest.fixture
def net():
    try:
        with NetnsRouted(tools=("ip", "tcpdump", "nft", "nstat")) as routed:
            yield routed
    except LabUnavailable as e:
        pytest.skip(str(e))


def analyze(*paths: Path) -> dict:
    proc = run_pcapq("analyze", "--format", "json", *map(str, paths))
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return json.loads(proc.stdout)


def vanished(path: dict) -> list[dict]:
    return [v for c in path["connections"] for v in c["vanished"]]


def findings(doc: dict, point: str) -> set[str]:
    """The point's causes, material or minor."""
    report = next(p["report"] for p in doc["capture_points"] if p["name"] == point)
    return {f["cause"] for f in report["findings"] + report["minor_observations"]}


def check_vanished_is_truth(path: dict, run: TwoPointRun) -> None:
    """Every vanished packet listed is one the router dropped, in its direction, seen at the
    point before the router and missing at the one after; none it dropped is missing."""
    listed = vanished(path)
    ways = {"client_to_server": ("proxy.pcap", "server.pcap"), "server_to_client": ("server.pcap", "proxy.pcap")}
    for v in listed:
        assert (v["seen_at"], v["missing_at"]) == ways[v["direction"]], v
    by_way = {w: sum(v["direction"] == w for v in listed) for w in ways}
    assert by_way == {"client_to_server": run.to_server, "server_to_client": run.to_client}, (
        by_way, "seen at one point only, not expected at the other:", path["one_point_only"], listed[:5], run.proxy.parent)
    assert path["vanished_packets"] == by_way


def check_verdicts(doc: dict, run: TwoPointRun) -> None:
    """Each finding's `between_points` verdict blames what the truth dropped: a listener's
    finding is the server side's (every packet reached it), a loss is the path's, and no
    direction the router dropped nothing in is blamed."""
    for p in doc["capture_points"]:
        for f in p["report"]["findings"] + p["report"]["minor_observations"]:
            v = f.get("between_points")
            if v is None:
                continue
            if f["cause"] in LISTENER:
                assert v["verdict"] == "reached_server", (p["name"], f["cause"], v)
            if f["cause"] == "network_loss":
                assert v["verdict"] in ("lost_to_server", "lost_to_client", "lost_both_ways"), (p["name"], v)
            assert run.to_server or not v["lost_to_server"], (p["name"], f["cause"], v)
            assert run.to_client or not v["lost_to_client"], (p["name"], f["cause"], v)


def test_two_points_path_loss_each_way_listed_and_blamed_on_the_path(net, tmp_path):
    run = path_loss(net, tmp_path)
    assert run.to_server + run.to_client > 0, "the router dropped nothing: rerun"
    doc = analyze(run.proxy, run.server)
    (path,) = doc["paths"]
    assert path["client_side"] == "proxy.pcap"
    check_vanished_is_truth(path, run)
    assert abs(path["clock_offset"]) < 0.001
    for point in ("proxy.pcap", "server.pcap"):
        report = next(p["report"] for p in doc["capture_points"] if p["name"] == point)
        blamed = [(f["cause"], f["connections"], f["confidence_reason"], f.get("checks"))
                  for f in report["findings"] + report["minor_observations"] if f["cause"] in LISTENER]
        assert not blamed, (f"the path's loss blamed on the listener at {point} (captures kept in {tmp_path})", blamed)
    assert "network_loss" in findings(doc, "proxy.pcap") | findings(doc, "server.pcap")
    check_verdicts(doc, run)


def test_two_points_firewall_swallows_syns_between_the_points(net, tmp_path):
    run = firewall(net, tmp_path)
    assert run.to_server >= 3
    doc = analyze(run.proxy, run.server)
    (path,) = doc["paths"]
    check_vanished_is_truth(path, run)
    assert {v["flags"] for v in vanished(path)} == {"S"}
    # The server's point never saw them.
    assert all(c["ids"]["server.pcap"] is None for c in path["connections"])
    assert not findings(doc, "proxy.pcap") & LISTENER
    check_verdicts(doc, run)


def test_two_points_nat_in_the_middle_hop(net, tmp_path):
    run = path_loss(net, tmp_path, connections=20, nat=True)
    doc = analyze(run.proxy, run.server)
    (path,) = doc["paths"]
    assert path["translated"]
    check_vanished_is_truth(path, run)
    for c in path["connections"]:
        if c["client"]["server.pcap"] is not None:
            assert c["client"]["server.pcap"].startswith(net.router_server_ip + ":")
            assert c["client"]["proxy.pcap"].startswith(net.client_ip + ":")
    check_verdicts(doc, run)


def test_two_points_accept_queue_overflow_reached_the_server(net, tmp_path):
    run = accept_overflow(net, tmp_path)
    assert run.nstat.get("TcpExtListenOverflows", 0) > 0, run.nstat
    doc = analyze(run.proxy, run.server)
    (path,) = doc["paths"]
    # Nothing between the points loses: every SYN and ACK reached the server's point.
    assert path["vanished_packets"] == {"client_to_server": 0, "server_to_client": 0}
    assert "accept_queue_overflow" in findings(doc, "server.pcap")
    for point in ("proxy.pcap", "server.pcap"):
        assert "network_loss" not in findings(doc, point)
    check_verdicts(doc, run)


def test_two_points_mtu_black_hole_between_the_points(net, tmp_path):
    """The router cannot forward the client's full-size segments and its ICMP errors are
    dropped: each one it failed (IpFragFails) vanished between the points, and the proxy's
    point's black hole is the path's, not the server's."""
    run = mtu_black_hole(net, tmp_path)
    assert run.to_server > 0, run.setup
    doc = analyze(run.proxy, run.server)
    (path,) = doc["paths"]
    check_vanished_is_truth(path, run)
    assert "mtu_black_hole" in findings(doc, "proxy.pcap")
    assert not (findings(doc, "proxy.pcap") | findings(doc, "server.pcap")) & LISTENER
    check_verdicts(doc, run)
    hole = next(f for f in next(p["report"] for p in doc["capture_points"] if p["name"] == "proxy.pcap")["findings"]
                if f["cause"] == "mtu_black_hole")
    assert hole["between_points"]["verdict"] == "lost_to_server"


def test_two_points_reordering_is_no_loss(tmp_path):
    """A path that only reorders: the server's fast re-sends of segments the path held are
    seen at both points, nothing vanished between them, and no point blames loss or the
    listener."""
    try:
        with NetnsDelayed(tools=("ip", "tcpdump", "nstat")) as delayed:
            run = reordering(delayed, tmp_path)
    except LabUnavailable as e:
        pytest.skip(str(e))
    assert (run.to_server, run.to_client) == (0, 0)
    # The server did re-send what the path only held (fast re-sends on the client's SACKs).
    assert run.nstat.get("TcpExtTCPFastRetrans", 0) > 0, run.nstat
    assert "segments held, 0 dropped" in run.setup[-1] and not run.setup[-1].startswith("delay line: 0 ")
    doc = analyze(run.proxy, run.server)
    (path,) = doc["paths"]
    check_vanished_is_truth(path, run)
    for point in ("proxy.pcap", "server.pcap"):
        assert not findings(doc, point) & (LISTENER | {"network_loss"}), (point, findings(doc, point))


@pytest.mark.skipif(shutil.which("editcap") is None, reason="needs editcap (wireshark-common)")
def test_two_points_clock_shift_recovered_within_a_millisecond(net, tmp_path):
    run = firewall(net, tmp_path, healthy=10, blocked=0)
    shifted = tmp_path / "server-late.pcap"
    subprocess.run(["editcap", "-t", "2.5", str(run.server), str(shifted)], check=True, capture_output=True)
    before = analyze(run.proxy, run.server)["paths"][0]["clock_offset"]
    after = analyze(run.proxy, shifted)["paths"][0]
    assert abs(after["clock_offset"] - 2.5) < 0.001, after["clock_offset"]
    assert abs(after["clock_offset"] - before - 2.5) < 0.0001
    assert after["offset_uncertainty"] < 0.001


@pytest.mark.parametrize("lost_to_server, lost_to_client, missed, verdict", [
    ({1, 2}, set(), set(), "lost_to_server"),
    (set(), {1, 2}, set(), "lost_to_client"),
    ({1}, {2}, set(), "lost_both_ways"),
    (set(), set(), set(), "reached_server"),
    (set(), set(), {1, 2}, "missed_first_point"),
    ({1}, set(), set(), "mixed"),
])
def test_between_points_verdict_of_a_finding(lost_to_server, lost_to_client, missed, verdict):
    from pcapq.two_points import TwoPointFacts, between_points

    lost = frozenset(lost_to_server | lost_to_client)
    facts = TwoPointFacts("server.pcap", "client", shared=frozenset({1, 2, 3}), lost=lost, lost_to_server=frozenset(lost_to_server),
                          lost_to_client=frozenset(lost_to_client), missed_first=frozenset(missed))
    v = between_points(facts, [1, 2, 9])
    assert v is not None and v["verdict"] == verdict and v["connections"] == 2, v
    assert v["reached_server"] == 2 - len(lost | missed)
    assert between_points(facts, [9]) is None
