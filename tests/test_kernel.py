"""pcapq on traffic from the Linux kernel itself: two network namespaces joined by a veth pair
(netns.py), a small request/response server and client (tcp_peers.py), tcpdump on the server's
side. Needs root, `ip`, `tc`, `nstat` (iproute2) and `tcpdump`; skipped otherwise. Select or
deselect with `-m kernel` / `-m "not kernel"`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import analyze_json
from kernel_scenarios import PEERS, PORT, Run, accept_queue_overflow, healthy, parse_clients, start_server
from netns import NetnsPair

pytestmark = pytest.mark.kernel

HEALTHY_EVENTS = [
    ("syn", "client"),
    ("synack", "server"),
    ("handshake_ack", "client"),
    ("data_first", "client"),
    ("data_first", "server"),
    ("fin", "server"),
    ("fin", "client"),
]


@pytest.fixture
def net():
    with NetnsPair(tools=("ip", "tcpdump", "tc", "nstat")) as pair:
        yield pair


def by_client(doc: dict) -> dict[int, dict]:
    return {int(c["client"].rsplit(":", 1)[1]): c for c in doc["connections"]}


def kinds(c: dict) -> list[tuple[str, str]]:
    return [(e["kind"], e["from"]) for e in c["events"]]


def check_healthy_connection(c: dict, server: str, request: int, response: int) -> None:
    where = f"connection {c['id']} ({c['client']})"
    assert c["server"] == server, where
    assert not c["partial"], where
    assert c["state"] == "closed", where
    hs = c["handshake"]
    assert (hs["completed"], hs["syn_attempts"], hs["synack_attempts"]) == (True, 1, 1), where
    assert c["sides"]["client"]["payload_bytes"] == request, where
    assert c["sides"]["server"]["payload_bytes"] == response, where
    assert c["sides"]["client"]["fin"] and c["sides"]["server"]["fin"], where
    assert kinds(c) == HEALTHY_EVENTS, where


def check_healthy_run(run: Run, doc: dict, connections: int, request: int, response: int) -> None:
    assert run.tcpdump_dropped == 0, run.tcpdump
    assert [c["error"] for c in run.clients] == [None] * connections, run.clients
    assert all(c["sent"] == request and c["received"] == response for c in run.clients), run.clients
    s = doc["summary"]
    assert (s["connections"], s["handshakes_completed"], s["partial"]) == (connections, connections, 0), s
    for key in ("with_syn_retransmits", "with_synack_retransmits", "with_data_retransmits", "with_dup_acks", "reset"):
        assert s[key] == 0, (key, s)
    conns = by_client(doc)
    assert sorted(conns) == sorted(c["port"] for c in run.clients)
    for c in conns.values():
        check_healthy_connection(c, run.server, request, response)


def test_healthy_connections(net, tmp_path):
    run = healthy(net, tmp_path / "healthy.pcap", connections=20, request=100, response=1000)
    doc = analyze_json(run.pcap)
    check_healthy_run(run, doc, 20, 100, 1000)
    assert doc["captures"][0]["link_types"] == {"ETHERNET": doc["summary"]["packets"]}
    assert run.delta("TcpExtListenOverflows") == 0, run.nstat_report()
    assert run.delta("TcpRetransSegs") == 0, run.nstat_report()


@pytest.mark.parametrize(
    "iface, linktype, expected",
    [("any", None, "LINUX_SLL2"), ("any", "LINUX_SLL", "LINUX_SLL"), ("pq-s", None, "ETHERNET")],
)
def test_cooked_capture_and_snaplen(net, tmp_path, iface, linktype, expected):
    """-s 96 keeps 24 (SLL2) to 30 (Ethernet) payload bytes per segment; byte counts must come
    from the IP header."""
    run = healthy(net, tmp_path / "cut.pcap", connections=5, request=300, response=5000,
                  iface=iface, linktype=linktype, snaplen=96)
    doc = analyze_json(run.pcap)
    assert list(doc["captures"][0]["link_types"]) == [expected]
    check_healthy_run(run, doc, 5, 300, 5000)
    assert doc["summary"]["snaplen_cut_segments"] > 0
    assert all(c["snaplen_cut"] > 0 for c in doc["connections"])


def test_stdin_from_live_tcpdump(net, tmp_path):
    """tcpdump -c N -w - | pcapq analyze -, while connections are being made."""
    count = 60
    copy = tmp_path / "copy.pcap"
    server = start_server(net, "--count", "0", "--deadline", "15")
    cap = net.capture("-", count=count, bpf=["tcp"], stdout=subprocess.PIPE).start()
    tee = pcapq = None
    try:
        tee = subprocess.Popen(["tee", str(copy)], stdin=cap.proc.stdout, stdout=subprocess.PIPE)
        cap.proc.stdout.close()
        pcapq = subprocess.Popen(["pcapq", "analyze", "--format", "json", "-"], stdin=tee.stdout,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        tee.stdout.close()
        # ~10 packets per connection: tcpdump stops after `count` well before the client does.
        client = net.run(net.client_ns, [sys.executable, PEERS, "client", net.server_ip, str(PORT),
                                         "--count", "30", "--deadline", "10"])
        try:
            assert cap.wait(10) == 0, cap.stderr
        except subprocess.TimeoutExpired:
            pytest.fail(f"tcpdump -c {count} still running\n{cap.stderr}\n{client.stdout}")
        out, err = pcapq.communicate(timeout=30)
        tee.wait(10)
    finally:
        for proc in (pcapq, tee):
            if proc is not None:
                NetnsPair.stop(proc)
        net.stop(server)
    assert cap.dropped() == 0, cap.stderr
    assert pcapq.returncode == 0, err.decode()
    doc = json.loads(out)
    clients = parse_clients(client.stdout)
    assert all(c["error"] is None for c in clients)

    f = doc["captures"][0]
    assert (f["path"], f["packets"], f["tcp_segments"], f["read_stop"]) == ("-", count, count, "end"), f
    # The same document as from the file tee wrote, but for the name.
    from_file = analyze_json(copy)
    from_file["captures"][0]["path"] = "-"
    assert doc == from_file

    conns = doc["connections"]
    assert len(conns) >= 3
    for c in conns[:-1]:
        check_healthy_connection(c, f"{net.server_ip}:{PORT}", 100, 1000)
    last = conns[-1]
    assert last["server"] == f"{net.server_ip}:{PORT}" and not last["partial"]
    assert last["sides"]["client"]["payload_bytes"] <= 100


def packet_facts(pcap: Path) -> dict[int, dict]:
    """Per client port, counted from the packets with scapy: SYNs, SYN-ACKs, client segments
    with payload, and for each repeated SYN-ACK whether the client had already ACKed one."""
    from scapy.layers.inet import TCP
    from scapy.utils import PcapReader

    facts: dict[int, dict] = defaultdict(
        lambda: {"syn": 0, "synack": 0, "client_data": 0, "server_isn": None, "client_acked": False, "synack_rtx": {}}
    )
    with PcapReader(str(pcap)) as packets:
        for frame, pkt in enumerate(packets, start=1):
            tcp = pkt[TCP]
            from_client = tcp.dport == PORT
            f = facts[tcp.sport if from_client else tcp.dport]
            syn, ack = bool(tcp.flags & 0x02), bool(tcp.flags & 0x10)
            if from_client:
                f["syn"] += syn and not ack
                f["client_data"] += len(tcp.payload) > 0
                if ack and f["server_isn"] is not None and tcp.ack == (f["server_isn"] + 1) % 2**32:
                    f["client_acked"] = True
            elif syn and ack:
                f["synack"] += 1
                if f["server_isn"] is None:
                    f["server_isn"] = tcp.seq
                else:
                    f["synack_rtx"][frame] = f["client_acked"]
    return dict(facts)


def overflow_report(run: Run, doc: dict) -> str:
    lines = [f"elapsed {run.elapsed:.1f} s; sysctls {run.sysctls}", "nstat (server namespace):", run.nstat_report()]
    for c in doc["connections"]:
        counts: dict[str, int] = defaultdict(int)
        for e in c["events"]:
            counts[e["kind"]] += 1
        timing = [(e["kind"], e["attempt"], e["since_previous"]) for e in c["events"] if "attempt" in e]
        lines.append(f"{c['client']}: {dict(counts)} {timing}")
    lines.append(f"clients: {run.clients}")
    return "\n".join(lines)


def syn_rto(retransmission: int, linear: int | None) -> float:
    """The client's SYN timeout before its n-th retransmission: 1 s (TCP_TIMEOUT_INIT) for the
    first `tcp_syn_linear_timeouts` + 1, then doubling (Linux >= 6.5); doubling from the start
    without that sysctl."""
    if linear is None:
        return 2.0 ** (retransmission - 1)
    return 1.0 if retransmission <= linear + 1 else 2.0 ** (retransmission - linear - 1)


def test_accept_queue_overflow(net, tmp_path):
    connections, backlog, request, response = 8, 1, 24, 1000
    run = accept_queue_overflow(net, tmp_path / "overflow.pcap", connections=connections, backlog=backlog,
                                accept_delay=5.0, request=request, response=response)
    doc = analyze_json(run.pcap)
    report = overflow_report(run, doc)
    assert run.tcpdump_dropped == 0, run.tcpdump

    # What the kernel did: the listener dropped handshake ACKs and requests, and counted it...
    assert run.delta("TcpExtListenOverflows") > 0, report
    # ...and every client got its answer once accept() started.
    assert [(c["error"], c["received"]) for c in run.clients] == [(None, response)] * connections, report

    conns = by_client(doc)
    assert sorted(conns) == sorted(c["port"] for c in run.clients), report
    assert doc["summary"]["handshakes_completed"] == connections, report
    events = [e for c in conns.values() for e in c["events"]]
    # The handshake ACK of a request that was still in the SYN queue when the accept queue
    # filled was dropped: the SYN-ACK timer fired after the client had ACKed.
    assert any(e["kind"] == "synack_retransmit" and e["after_handshake_ack"] for e in events), report
    # The clients' requests went unanswered until accept() began.
    assert any(e["kind"] == "data_retransmit" and e["from"] == "client" and e["after_handshake_ack"] for e in events), report
    # At most backlog + 1 connections fit the accept queue; every other one had to send something
    # again (SYN, request) or have its SYN-ACK sent again, however the kernel's timing went.
    retried = [c for c in conns.values() if any(e["kind"].endswith("_retransmit") for e in c["events"])]
    assert len(retried) >= connections - (backlog + 1), report

    # pcapq against the packets themselves.
    facts = packet_facts(run.pcap)
    for port, c in conns.items():
        f, where = facts[port], f"{c['client']}\n{report}"
        assert c["server"] == run.server and not c["partial"], where
        assert c["handshake"]["syn_attempts"] == f["syn"], where
        assert c["handshake"]["synack_attempts"] == f["synack"], where
        assert c["sides"]["client"]["data_retransmits"] == f["client_data"] - 1, where
        # payload_bytes counts every send, retransmissions included.
        assert c["sides"]["client"]["payload_bytes"] == f["client_data"] * request, where
        assert c["sides"]["server"]["payload_bytes"] == response, where
        synack_rtx = {e["frame"]: e["after_handshake_ack"] for e in c["events"] if e["kind"] == "synack_retransmit"}
        assert synack_rtx == f["synack_rtx"], where

    # Timers: the request socket's SYN-ACK timer (1 s, doubling), the client's SYN timer, and its
    # data RTO (TCP_RTO_MIN 200 ms; the first is measured from a send that waited in tbf).
    linear = run.sysctls.get("client:net.ipv4.tcp_syn_linear_timeouts")
    linear_n = int(linear) if linear and linear.isdigit() else None
    for e in events:
        if e["kind"] == "synack_retransmit":
            expected = 2.0 ** (e["attempt"] - 2)
        elif e["kind"] == "syn_retransmit":
            expected = syn_rto(e["attempt"] - 1, linear_n)
        elif e["kind"] == "data_retransmit":
            assert e["since_previous"] >= 0.1, (e, report)
            continue
        else:
            continue
        assert 0.8 * expected <= e["since_previous"] <= 1.25 * expected + 0.1, (e, report)
