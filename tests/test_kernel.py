"""pcapq on traffic from the Linux kernel itself: two network namespaces joined by a veth pair
(pcapq.lab, wrapped by netns.py), a small request/response server and client (pcapq.lab.peers), tcpdump on the server's
side. Needs root, `ip`, `tc`, `nstat` (iproute2) and `tcpdump` (and `nft` for the loss test);
skipped otherwise. Select or deselect with `-m kernel` / `-m "not kernel"`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import analyze_json
from lab_runs import KERNEL_SCENARIOS
from pcapq.lab.scenarios import PEERS, PORT, Run, healthy, keepalive_race, parse_clients, start_server
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


QUEUE_CAUSES = {"accept_queue_overflow", "syn_queue_overflow", "listen_drops"}


def causes(doc: dict) -> set[str]:
    return {f["cause"] for f in doc["findings"]}


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


def test_healthy_connections(kernel_run):
    run = kernel_run("healthy")
    doc = analyze_json(run.pcap)
    # The finding names what the kernel did (src/pcapq/diagnose).
    assert doc["findings"] == [], doc["findings"]
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
        client = net.run(net.client_ns, [*PEERS, "client", net.server_ip, str(PORT),
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
    assert pcapq.returncode in (0, 1), err.decode()
    doc = json.loads(out)
    assert pcapq.returncode == (1 if doc["findings"] else 0), doc["findings"]  # 1: problems found
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


def server_segments(pcap: Path) -> dict[int, tuple[int, int]]:
    """Frame -> (client port, sequence number) of each server segment with payload."""
    from scapy.layers.inet import IP, TCP
    from scapy.utils import PcapReader

    segments = {}
    with PcapReader(str(pcap)) as packets:
        for frame, pkt in enumerate(packets, start=1):
            tcp = pkt[TCP]
            # The payload may be cut by the snaplen: its length from the IP header.
            if tcp.sport == PORT and pkt[IP].len - 4 * pkt[IP].ihl - 4 * tcp.dataofs > 0:
                segments[frame] = (tcp.dport, tcp.seq)
    return segments


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


def test_accept_queue_overflow(kernel_run):
    p = KERNEL_SCENARIOS["accept_queue_overflow"]
    connections, backlog, request, response = p["connections"], p["backlog"], p["request"], p["response"]
    run = kernel_run("accept_queue_overflow")
    doc = analyze_json(run.pcap)
    # The finding names what the kernel did (src/pcapq/diagnose).
    assert "accept_queue_overflow" in causes(doc), doc["findings"]
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


def events_of(c: dict, kind: str, side: str | None = None) -> list[dict]:
    return [e for e in c["events"] if e["kind"] == kind and side in (None, e["from"])]


def frame_of(c: dict, kind: str) -> int:
    return next(e["frame"] for e in c["events"] if e["kind"] == kind)


def within_timer(since: float, expected: float) -> bool:
    """A kernel timer of `expected` s: the timer wheel fires it up to ~1/8 late."""
    return 0.8 * expected <= since <= 1.25 * expected + 0.1


def test_abort_on_overflow(kernel_run):
    p = KERNEL_SCENARIOS["abort_on_overflow"]
    backlog, response = p["backlog"], p["response"]
    run = kernel_run("abort_on_overflow")
    doc = analyze_json(run.pcap)
    # The finding names what the kernel did (src/pcapq/diagnose).
    assert "accept_queue_overflow" in causes(doc), doc["findings"]
    report = overflow_report(run, doc)
    assert run.tcpdump_dropped == 0, run.tcpdump
    conns = by_client(doc)
    assert sorted(conns) == sorted(c["port"] for c in run.clients), report

    # The accept queue holds backlog + 1: `backlog` connections went first, one of the burst
    # filled it, and the other `backlog` request sockets got an RST for their handshake ACK.
    reset_ports = {c["port"] for c in run.clients if c["error"]}
    assert all("ConnectionResetError" in c["error"] for c in run.clients if c["error"]), report
    assert len(reset_ports) == backlog, report
    assert run.delta("TcpExtEmbryonicRsts") == backlog, report
    assert run.delta("TcpExtListenOverflows") >= backlog, report
    for c in run.clients:
        if c["port"] not in reset_ports:
            assert (c["error"], c["received"]) == (None, response), report

    server_rsts = 0
    for port, c in conns.items():
        rsts = events_of(c, "rst", "server")
        server_rsts += len(rsts)
        if port not in reset_ports:
            assert not rsts and c["state"] == "closed", (c["client"], report)
            continue
        assert c["state"] == "reset" and c["handshake"]["completed"], (c["client"], report)
        first = rsts[0]
        assert first["answers"] == "handshake_ack", (first, report)
        assert first["answers_frame"]["frame"] == frame_of(c, "handshake_ack"), (first, report)
        assert first["after"] < 0.01, (first, report)
        # The request that follows meets no socket at all: an RST too (a failed cookie check).
        assert all(e["answers"] == "data" and e["after"] < 0.01 for e in rsts[1:]), (rsts, report)
        assert c["sides"]["server"]["payload_bytes"] == 0, (c["client"], report)
    assert server_rsts == run.delta("TcpOutRsts"), report


def test_syn_queue_overflow(kernel_run):
    p = KERNEL_SCENARIOS["syn_queue_overflow"]
    backlog, connections, response = p["backlog"], p["connections"], p["response"]
    run = kernel_run("syn_queue_overflow")
    doc = analyze_json(run.pcap)
    # The finding names what the kernel did (src/pcapq/diagnose).
    assert "syn_queue_overflow" in causes(doc), doc["findings"]
    report = overflow_report(run, doc)
    assert run.tcpdump_dropped == 0, run.tcpdump
    assert [(c["error"], c["received"]) for c in run.clients] == [(None, response)] * connections, report

    dark = [c for c in doc["connections"] if c["client"].startswith(run.extra["dark"] + ":")]
    clients = by_client({"connections": [c for c in doc["connections"] if c not in dark]})
    assert sorted(int(c["client"].rsplit(":", 1)[1]) for c in dark) == [s["port"] for s in run.extra["half_open"]]
    assert sorted(clients) == sorted(c["port"] for c in run.clients), report

    # The SYN queue takes backlog + 1 requests; the other half-open SYNs get no answer.
    answered = [c for c in dark if c["handshake"]["synack_attempts"] > 0]
    assert len(answered) == backlog + 1, report
    for c in dark:
        assert c["handshake"]["syn_attempts"] == 1 and not c["handshake"]["completed"], (c["client"], report)
        if c not in answered:
            assert c["state"] == "syn_sent" and kinds(c) == [("syn", "client")], (c["client"], report)
            continue
        # tcp_synack_retries=1: one SYN-ACK retransmission after 1 s, then the request expires.
        rtx = events_of(c, "synack_retransmit")
        assert c["state"] == "syn_received" and len(rtx) == 1, (c["client"], report)
        assert not rtx[0]["after_handshake_ack"] and within_timer(rtx[0]["since_previous"], 1.0), (rtx, report)

    linear = run.sysctls.get("client:net.ipv4.tcp_syn_linear_timeouts")
    linear_n = int(linear) if linear and linear.isdigit() else None
    for c in clients.values():
        where = (c["client"], report)
        rtx = events_of(c, "syn_retransmit")
        # Dropped while the half-open requests held the queue (~3 s), then answered.
        assert len(rtx) >= 2 and c["handshake"]["completed"] and c["state"] == "closed", where
        for e in rtx:
            assert not e["after_handshake_ack"], where
            assert within_timer(e["since_previous"], syn_rto(e["attempt"] - 1, linear_n)), (e, report)
        synack = events_of(c, "synack")[0]
        assert c["handshake"]["synack_attempts"] == 1 and synack["frame"] > rtx[-1]["frame"], where
        assert synack["time"] - rtx[-1]["time"] < 0.01, where
        assert c["sides"]["server"]["payload_bytes"] == response, where

    # Every SYN the listener did not answer was a drop for a full request queue.
    unanswered = sum(c["handshake"]["syn_attempts"] - (c["handshake"]["synack_attempts"] > 0)
                     for c in doc["connections"])
    assert run.delta("TcpExtTCPReqQFullDrop") == unanswered, report
    assert run.delta("TcpExtListenDrops") == unanswered, report
    assert run.delta("TcpExtTCPSynRetrans") == len(answered), report
    assert run.delta("TcpExtListenOverflows") == 0, report


def test_closed_port(kernel_run):
    connections = KERNEL_SCENARIOS["closed_port"]["connections"]
    run = kernel_run("closed_port")
    doc = analyze_json(run.pcap)
    # The finding names what the kernel did (src/pcapq/diagnose).
    assert causes(doc) == {"closed_port"}, doc["findings"]
    assert run.tcpdump_dropped == 0, run.tcpdump
    assert all("ConnectionRefusedError" in c["error"] for c in run.clients), run.clients
    conns = by_client(doc)
    assert sorted(conns) == sorted(c["port"] for c in run.clients)
    s = doc["summary"]
    assert (s["connections"], s["reset"], s["handshakes_completed"], s["with_syn_retransmits"]) == (connections, connections, 0, 0), s
    for c in conns.values():
        assert c["state"] == "reset" and kinds(c) == [("syn", "client"), ("rst", "server")], c
        rst = c["events"][1]
        assert (rst["flags"], rst["answers"], rst["answers_frame"]["frame"]) == ("R.", "syn", frame_of(c, "syn")), rst
        assert rst["ack"] == 1 and rst["after"] < 0.01, rst
    assert run.delta("TcpOutRsts") == connections, run.nstat_report()
    assert run.delta("TcpPassiveOpens") == 0, run.nstat_report()


def test_client_timeout_rst(kernel_run):
    p = KERNEL_SCENARIOS["client_timeout_rst"]
    connections, timeout, request = p["connections"], p["timeout"], p["request"]
    run = kernel_run("client_timeout_rst")
    doc = analyze_json(run.pcap)
    # The finding names what the kernel did (src/pcapq/diagnose).
    assert "slow_server" in causes(doc) and not causes(doc) & QUEUE_CAUSES, doc["findings"]
    assert run.tcpdump_dropped == 0, run.tcpdump
    assert all("TimeoutError" in c["error"] and (c["sent"], c["received"]) == (request, 0) for c in run.clients), run.clients
    conns = by_client(doc)
    assert sorted(conns) == sorted(c["port"] for c in run.clients)
    for c in conns.values():
        assert c["state"] == "reset", c
        assert kinds(c) == [("syn", "client"), ("synack", "server"), ("handshake_ack", "client"),
                            ("data_first", "client"), ("rst", "client")], c
        rst = c["events"][-1]
        # The server ACKed the request at once, then stayed silent: the RST answers that ACK,
        # a read timeout later.
        assert rst["flags"] == "R." and rst["answers"] == "ack", rst
        assert timeout <= rst["after"] < timeout + 0.2, rst
        assert timeout <= rst["time"] - c["events"][3]["time"] < timeout + 0.2, c
        # The server's answer came after the RST: its write failed, nothing was sent.
        assert c["sides"]["server"]["payload_bytes"] == 0 and not c["sides"]["server"]["rst"], c
    assert run.delta("TcpEstabResets") == connections, run.nstat_report()
    assert run.delta("TcpOutRsts") == 0, run.nstat_report()


def test_keepalive_race(net, tmp_path):
    connections = 3
    run = keepalive_race(net, tmp_path / "race.pcap", connections=connections, keep_alive=0.5, idle=1.0)
    doc = analyze_json(run.pcap)
    # The server closed each idle connection, then its kernel answered the next request with RST.
    assert causes(doc) == {"server_closed"}, doc["findings"]
    [finding] = doc["findings"]
    assert finding["details"] == {"closed": 0, "reset": 0, "request_after_close": connections, "answered_before": 0}, finding
    assert run.tcpdump_dropped == 0, run.tcpdump
    assert all(c["error"] for c in run.clients), run.clients
    for c in by_client(doc).values():
        assert c["outcome"] == "reset_by_server", c
        fin = next(e for e in c["events"] if e["kind"] == "fin")
        rst = next(e for e in c["events"] if e["kind"] == "rst")
        assert (fin["from"], rst["from"], rst["answers"]) == ("server", "server", "data"), c
        assert fin["time"] < rst["time"], c
    assert run.delta("TcpOutRsts") == connections, run.nstat_report()


def test_packet_loss(kernel_run):
    p = KERNEL_SCENARIOS["packet_loss"]
    connections, response = p["connections"], p["response"]
    run = kernel_run("packet_loss")
    doc = analyze_json(run.pcap)
    # The finding names what the kernel did (src/pcapq/diagnose). The drops are random: a panel
    # when users felt them (connections made to wait on a timer: network_loss's materiality),
    # else a minor line that says why (fast re-sends cost a round trip nobody notices).
    found = causes(doc) | {f["cause"] for f in doc["minor_observations"]}
    assert "network_loss" in found and not found & QUEUE_CAUSES, (doc["findings"], doc["minor_observations"])
    if "network_loss" not in causes(doc):
        (minor,) = [f for f in doc["minor_observations"] if f["cause"] == "network_loss"]
        assert minor["minor"], minor
    report = f"{run.extra}\n{run.nstat_report()}"
    assert run.tcpdump_dropped == 0, run.tcpdump
    assert [(c["error"], c["received"]) for c in run.clients] == [(None, response)] * connections, run.clients
    assert run.extra["dropped"] > 0, report
    s = doc["summary"]
    assert (s["connections"], s["handshakes_completed"], s["partial"], s["reset"]) == (connections, connections, 0, 0), s
    assert s["with_data_retransmits"] > 0 and s["snaplen_cut_segments"] > 0, s

    events = [e for c in doc["connections"] for e in c["events"]]
    # Loss, not a full queue: the listener took every handshake ACK.
    assert not any(e["kind"] == "synack_retransmit" and e["after_handshake_ack"] for e in events), report
    assert run.delta("TcpExtListenOverflows") == 0 and run.delta("TcpExtListenDrops") == 0, report
    data_rtx = [e for e in events if e["kind"] == "data_retransmit" and e["from"] == "server"]
    assert data_rtx, report
    assert all(e["after_handshake_ack"] for e in data_rtx), report
    # tcpdump saw each packet before the client namespace dropped it: every retransmission has
    # its original in the capture. (pcapq names it only within its last few segments in flight.)
    segments = server_segments(run.pcap)
    for e in data_rtx:
        port, seq = segments[e["frame"]]
        sent_before = [f for f, key in segments.items() if key == (port, seq) and f < e["frame"]]
        assert sent_before, (e, report)
        if "original" in e:
            assert e["original"]["frame"] == sent_before[0], (e, report)
    # Each retransmission the server's kernel counted is in the capture, and nothing else.
    server_rtx = [e for e in events if e["from"] == "server" and e["kind"].endswith("_retransmit")]
    assert len(server_rtx) == run.delta("TcpRetransSegs"), report
    assert sum(e["kind"] == "synack_retransmit" for e in server_rtx) == run.delta("TcpExtTCPSynRetrans"), report
    for c in doc["connections"]:
        resent = sum(e["len"] for e in c["events"] if e["kind"] == "data_retransmit" and e["from"] == "server")
        assert c["sides"]["server"]["payload_bytes"] == response + resent, c["client"]


# A listener with TCP_DEFER_ACCEPT that never accepts, and a client that connects, sends nothing
# and closes after `idle` s.
DEFER_SERVER = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT, int(sys.argv[3]))
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("listening", flush=True)
time.sleep(float(sys.argv[4]))
"""
IDLE_CLIENT = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
time.sleep(float(sys.argv[3]))
c.close()
"""


def test_defer_accept_idle_client_is_not_a_dropped_final_ack(net, tmp_path):
    # TCP_DEFER_ACCEPT 2 is 2 SYN-ACK retransmissions (net/ipv4/tcp.c: secs_to_retrans()): the
    # bare ACK is dropped and the SYN-ACK re-sent once, at the second timer (1 + 2 s).
    idle = 4.5
    server = net.popen(net.server_ns, [sys.executable, "-c", DEFER_SERVER, net.server_ip, str(PORT), "2", str(idle + 3)],
                       stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        with net.capture(tmp_path / "defer.pcap", bpf=["tcp"]):
            net.run(net.client_ns, [sys.executable, "-c", IDLE_CLIENT, net.server_ip, str(PORT), str(idle)], timeout=15)
    finally:
        net.stop(server)
    doc = analyze_json(tmp_path / "defer.pcap")
    (c,) = doc["connections"]
    assert c["handshake"]["synack_attempts"] == 2, c
    assert "defer_accept_suspected" in c["symptoms"] and "final_ack_dropped" not in c["symptoms"], c
    (synack,) = [s for s in c["series"] if s["kind"] == "synack"]
    assert 2.9 < synack["sends"][1]["interval"] < 3.3, synack
    assert not causes(doc) & QUEUE_CAUSES, doc["findings"]
