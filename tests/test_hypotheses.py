"""Each competing explanation of a sign, on real kernel runs of twins that differ in one setting
(captures/kernel_runs/, made by captures/kernel_runs/make.py; each run's .nstat.txt holds what the
kernel counted). The method is in docs/diagnosis.md, "Hypotheses and their checks"."""

from __future__ import annotations

import json
import subprocess

import pytest
from scapy.all import rdpcap, wrpcap

from conftest import REPO

RUNS = REPO / "captures" / "kernel_runs"


def report(path) -> dict:
    proc = subprocess.run(["pcapq", "analyze", "--format", "json", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def causes(doc: dict) -> set[str]:
    return {f["cause"] for f in doc["findings"]} | {f["cause"] for f in doc.get("minor_observations", [])}


def finding(doc: dict, cause: str) -> dict:
    """The finding of `cause`, material or minor."""
    (f,) = [f for f in doc["findings"] + doc["minor_observations"] if f["cause"] == cause]
    return f


# -----------------------------------------------------------------------------------------------
# A SYN-ACK sent again after the client's ACK: a full accept queue, or one ACK lost on the way


def test_full_queue_holds_every_check() -> None:
    # ListenOverflows +39: the request stayed unacknowledged while the SYN-ACK was re-sent at 1, 3, 7 s.
    f = finding(report(RUNS / "accept_queue_overflow.pcap"), "accept_queue_overflow")
    assert f["confidence"] == 0.95
    checks = {c["check"]: (c["held"], c["failed"]) for c in f["checks"]}
    assert checks["request_held_back"][0] >= 1
    assert all(failed == 0 for _, failed in checks.values()), checks


@pytest.mark.parametrize("run", ["lost_ack", "lost_ack_on_path"])
def test_one_lost_ack_is_no_full_queue(run: str) -> None:
    # ListenOverflows 0: nft dropped one ACK; the request that followed was taken at once.
    doc = report(RUNS / f"{run}.pcap")
    assert "accept_queue_overflow" not in causes(doc)
    if run == "lost_ack":
        weighed = [c for c in doc["connections"] if c.get("checks")]
        assert weighed and all("request_held_back" in c["checks"]["failed"] for c in weighed), weighed


def weighed_connections(doc: dict) -> list[dict]:
    return [c for c in doc["connections"] if c.get("checks")]


def test_defer_accept_of_one_second_at_the_client_is_no_full_queue_and_its_twin_is() -> None:
    # TCP_DEFER_ACCEPT 1 s: TcpExtTCPDeferAcceptDrop +12, ListenOverflows 0; each SYN-ACK re-sent
    # once, 1 s after the first, each request (1.2 to 2.85 s after connect()) taken at once.
    doc = report(RUNS / "defer_accept_client.pcap")
    assert not doc["findings"] and "accept_queue_overflow" not in causes(doc), causes(doc)
    weighed = weighed_connections(doc)
    assert len(weighed) == 12
    assert all("not_defer_accept" in c["checks"]["failed"] and "defer_accept_suspected" in c["symptoms"]
               for c in weighed), weighed
    # Its twin: a listener that never accepts, its queue full before the capture (ListenOverflows
    # moved): the SYN-ACK re-sent at 1 and 3 s, each request held back.
    twin = report(RUNS / "accept_queue_full_client.pcap")
    f = finding(twin, "accept_queue_overflow")
    assert f in twin["findings"] and f["connections"]["count"] == 11, f["connections"]
    checks = {c["check"]: (c["held"], c["failed"]) for c in f["checks"]}
    assert checks["not_defer_accept"] == (11, 0) and checks["request_held_back"] == (11, 0), checks


# -----------------------------------------------------------------------------------------------
# A long path: re-sends that crossed the ACK, a SYN re-sent before a slow answer


def test_resends_on_a_path_slower_than_the_timers_are_no_loss_at_the_server() -> None:
    # Nothing dropped (the delay line's counters); RTT 1.4 s against 1 s timers.
    doc = report(RUNS / "crossed_synack.pcap")
    assert not causes(doc) & {"network_loss", "accept_queue_overflow"}, causes(doc)
    assert any("syn_retransmitted" in c["symptoms"] for c in doc["connections"])


def test_synack_resends_crossing_the_ack_at_the_client_are_no_full_queue() -> None:
    doc = report(RUNS / "crossed_synack_client.pcap")
    assert "accept_queue_overflow" not in causes(doc)
    # The first SYN-ACK came 0.38 s after the re-sent SYN, on a 1.4 s round trip (the request's):
    # it answered the first SYN, so nothing was lost.
    assert "network_loss" not in causes(doc), causes(doc)


def test_first_synack_lost_at_the_client_is_loss() -> None:
    # Its twin: the first SYN-ACK dropped by the server's nftables; the one that answers the
    # re-sent SYN comes a round trip (0.6 s) after it, as only an answer to it can.
    doc = report(RUNS / "lost_synack_client.pcap")
    assert "network_loss" in causes(doc), causes(doc)


# -----------------------------------------------------------------------------------------------
# RSTs for the handshake ACK: tcp_abort_on_overflow, or a listener that closed


def test_listener_restart_is_no_overflow_and_abort_on_overflow_is() -> None:
    restart = report(RUNS / "listener_restart.pcap")
    assert "accept_queue_overflow" not in causes(restart) and "closed_port" in causes(restart)
    assert finding(report(RUNS / "abort_on_overflow.pcap"), "accept_queue_overflow")["confidence"] == 0.9


# -----------------------------------------------------------------------------------------------
# The proxy's read timeout crossing the answer


def test_read_timeout_crossing_the_answer_is_a_slow_server_with_its_timeout() -> None:
    doc = report(RUNS / "proxy_read_timeout.pcap")
    f = finding(doc, "slow_server")
    assert f["connections"]["count"] == 3 and "crossed the client's close" in f["confidence_reason"]
    assert {c["outcome"] for c in doc["connections"]} == {"abandoned"}
    assert doc["proxy_timeouts"]["read"]["seconds"] == pytest.approx(1.0, abs=0.1)
    assert not causes(report(RUNS / "proxy_read_timeout_in_time.pcap"))


# -----------------------------------------------------------------------------------------------
# Re-sends that are no loss: path MTU discovery at the receiver, reordering


def test_pmtu_discovery_seen_at_the_server_is_no_loss() -> None:
    doc = report(RUNS / "pmtu_server_side.pcap")
    assert "network_loss" not in causes(doc)


def test_reordering_is_no_loss_and_its_twin_with_drops_is() -> None:
    assert "network_loss" not in causes(report(RUNS / "reordering.pcap"))
    # The drops are named; each was repaired by a SACK fast retransmit a round trip later and every
    # connection completed: no one felt them, a minor observation.
    loss = report(RUNS / "reordering_loss.pcap")
    assert [f["cause"] for f in loss["minor_observations"]] == ["network_loss"] and not loss["findings"]


def test_reordering_a_quarter_of_the_segments_is_named_by_its_dsack_share_and_its_twin_is_loss() -> None:
    # A quarter of the server's new data segments held 30 ms: most re-sends D-SACKed or acknowledged
    # sooner than a round trip after them; the connections whose re-sends nothing reported are
    # reordering too, not loss.
    doc = report(RUNS / "reordering_quarter.pcap")
    assert "network_loss" not in causes(doc)
    (line,) = [f for f in doc["findings"] + doc["minor_observations"] if f["cause"] == "reordering"]
    resent, spurious = line["details"]["resent_segments"], line["details"]["spurious_resends"]
    assert 2 * spurious > resent >= spurious >= 3 and f"{spurious} of {resent}" in line["confidence_reason"]
    # The same segments dropped: no D-SACK, each re-send a repair.
    loss = report(RUNS / "reordering_quarter_loss.pcap")
    assert "network_loss" in causes(loss) and "reordering" not in causes(loss)


def test_black_hole_seen_from_the_server_is_named_and_its_twin_is_not() -> None:
    # The clients' full-size segments never reach the server; their RSTs, past those bytes, do.
    doc = report(RUNS / "mtu_black_hole_server_side.pcap")
    f = finding(doc, "mtu_black_hole")
    assert f["connections"]["count"] == 3 and f["details"]["vanished"] >= 1200 and f["details"]["largest_through"] == 0
    assert not causes(doc) & {"client_gave_up", "server_closed", "network_loss"}, causes(doc)
    # Path MTU discovery working: the same bytes arrive, cut smaller.
    assert not causes(report(RUNS / "pmtu_server_side.pcap"))


# -----------------------------------------------------------------------------------------------
# One stuck listener of a SO_REUSEPORT group


@pytest.mark.parametrize("run", ["reuseport_stuck_listener", "reuseport_backlog1", "reuseport_backlog3_client"])
def test_stuck_reuseport_listener_is_one_full_accept_queue(run: str) -> None:
    doc = report(RUNS / f"{run}.pcap")
    assert "accept_queue_overflow" in {f["cause"] for f in doc["findings"]}
    assert not causes(doc) & {"slow_server", "listen_drops"}, causes(doc)


# -----------------------------------------------------------------------------------------------
# What the capture cannot see: one direction only


def test_one_way_capture_claims_nothing_that_needs_the_servers_packets(tmp_path) -> None:
    # The clients' packets of a real accept-queue overflow behind nginx, the server's left out.
    packets = [p for p in rdpcap(str(REPO / "captures" / "nginx_php_fpm.pcap")) if p.haslayer("IP") and p["IP"].src == "10.231.1.1"]
    one_way = tmp_path / "one_way.pcap"
    wrpcap(str(one_way), packets)
    doc = report(one_way)
    assert not causes(doc) & {"client_gave_up", "listen_drops", "syn_queue_overflow", "slow_server", "silent_host"}, causes(doc)


def test_request_lost_to_a_black_hole_is_no_cookie_stall() -> None:
    # The router dropped its ICMP: the full-size request never got through, smaller packets did.
    doc = report(RUNS / "mtu_black_hole_router.pcap")
    assert "mtu_black_hole" in {f["cause"] for f in doc["findings"]}
    (c,) = doc["connections"]
    assert "mtu_black_hole" in c["symptoms"] and "syncookie_suspected" not in c["symptoms"]


def test_loss_finding_lists_the_checks_of_its_resends() -> None:
    f = finding(report(RUNS / "reordering_loss.pcap"), "network_loss")
    checks = {c["check"]: (c["held"], c["failed"]) for c in f["checks"]}
    assert checks["resend_not_dsacked"] == (4, 0) and checks["resent_whole"] == (4, 0)
    assert not {"request_held_back", "same_sender"} & set(checks)


# -----------------------------------------------------------------------------------------------
# What the capture cannot see: a capture kept to the first packets of each flow (crafted: a tool
# cuts it, no kernel does)


def trimmed_capture(path, cut: bool) -> None:
    """Three HTTP exchanges and two clients re-sending SYNs to a listener that drops them, every
    flow kept to its first six frames when `cut`; with `cut` off the exchanges close instead. The
    capture goes on for 100 s (a last short exchange): a Linux client would have sent its seventh
    SYN at 63 s."""
    from scapy.all import IP, TCP, Ether, Raw

    server, frames = "10.0.0.2", []

    def at(t: float, src: str, dst: str, sport: int, dport: int, flags: str, seq: int, ack: int = 0, data: bytes = b""):
        p = Ether() / IP(src=src, dst=dst, ttl=64) / TCP(sport=sport, dport=dport, flags=flags, seq=seq, ack=ack, window=64240)
        p = p / Raw(data) if data else p
        p.time = t
        frames.append(p)

    for i in range(3):
        client, port, t0 = f"10.0.0.{10 + i}", 40000 + i, 0.1 * i
        at(t0, client, server, port, 80, "S", 1000)
        at(t0 + 0.001, server, client, 80, port, "SA", 5000, 1001)
        at(t0 + 0.002, client, server, port, 80, "A", 1001, 5001)
        at(t0 + 0.003, client, server, port, 80, "PA", 1001, 5001, b"GET / HTTP/1.1\r\n\r\n")
        at(t0 + 0.010, server, client, 80, port, "PA", 5001, 1019, b"HTTP/1.1 200 OK\r\n\r\n")
        at(t0 + 0.011, client, server, port, 80, "A", 1019, 5020)
        if not cut:
            at(t0 + 0.020, client, server, port, 80, "FA", 1019, 5020)
            at(t0 + 0.021, server, client, 80, port, "FA", 5020, 1020)
            at(t0 + 0.022, client, server, port, 80, "A", 1020, 5021)
    for i in range(2):
        client, port, t0 = f"10.0.1.{10 + i}", 41000 + i, 1.0 + 0.1 * i
        for t in (0, 1, 3, 7, 15, 31):
            at(t0 + t, client, server, port, 80, "S", 7000)
    at(100.0, "10.0.2.1", server, 42000, 80, "S", 9000)
    at(100.001, server, "10.0.2.1", 80, 42000, "SA", 3000, 9001)
    at(100.002, "10.0.2.1", server, 42000, 80, "FA", 9001, 3001)
    at(100.003, server, "10.0.2.1", 80, 42000, "FA", 3001, 9002)
    wrpcap(str(path), sorted(frames, key=lambda p: p.time))


def test_flows_cut_by_the_capture_are_no_clients_giving_up(tmp_path) -> None:
    whole, cut = tmp_path / "whole.pcap", tmp_path / "cut.pcap"
    trimmed_capture(whole, cut=False)
    trimmed_capture(cut, cut=True)
    # Whole, two clients stopped re-sending their SYNs with retries left.
    doc = report(whole)
    assert "client_gave_up" in causes(doc) and not doc["warnings"], (causes(doc), doc["warnings"])
    # Cut, their six SYNs are where the capture stopped every flow: nothing is claimed of what
    # followed; the SYNs re-sent stay re-sent.
    doc = report(cut)
    assert any("first 6 frames of each flow" in w for w in doc["warnings"]), doc["warnings"]
    assert "client_gave_up" not in causes(doc), causes(doc)


# -----------------------------------------------------------------------------------------------
# A listener not taking connections: SYNs dropped while connections it took wait unanswered


def test_syns_dropped_while_taken_requests_wait_are_a_full_accept_queue() -> None:
    # HAProxy in front of listen(1), accept() after 6 s: two connections queued, their requests
    # acknowledged by the kernel; eight SYNs dropped meanwhile (ListenOverflows +16). No ACK was
    # dropped: every SYN that came while the queue was full was dropped first.
    doc = report(REPO / "captures" / "haproxy_overflow.pcap")
    f = finding(doc, "accept_queue_overflow")
    assert f["connections"]["count"] == 10 and f["confidence"] == 0.7
    assert not {"listen_drops", "slow_server"} & causes(doc), causes(doc)
