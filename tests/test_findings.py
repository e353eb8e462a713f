"""Findings on the real captures in captures/ (made by captures/make_real.py in network
namespaces): each failure is blamed on what the kernel really did, and a healthy capture, a
closed port and plain packet loss never blame the listen queues."""

from __future__ import annotations

import pytest

import pcapq
from conftest import REPO
from pcapq.diagnose import diagnose

QUEUE_CAUSES = {"accept_queue_overflow", "syn_queue_overflow", "listen_drops"}


def findings(name: str, **kw) -> list:
    analysis = pcapq.analyze([str(REPO / "captures" / name)], **kw)
    return diagnose(analysis).findings


@pytest.mark.parametrize(
    "capture, cause, min_confidence",
    [
        ("accept_queue_overflow.pcap", "accept_queue_overflow", 0.9),
        ("abort_on_overflow.pcap", "accept_queue_overflow", 0.9),
        ("syn_queue_overflow.pcap", "syn_queue_overflow", 0.7),
        ("closed_port.pcap", "closed_port", 0.9),
        ("client_timeout_rst.pcap", "slow_server", 0.7),
        ("packet_loss.pcap", "network_loss", 0.5),
    ],
)
def test_real_capture_is_blamed_on_what_the_kernel_did(capture, cause, min_confidence):
    found = findings(capture)
    causes = {f.cause for f in found}
    assert cause in causes, [(f.cause, f.confidence_reason) for f in found]
    main = next(f for f in found if f.cause == cause)
    assert main.confidence >= min_confidence
    assert main.evidence and all(e["frame"] >= 1 for e in main.evidence)
    assert main.advice and main.confidence_reason


@pytest.mark.parametrize("capture", ["healthy.pcap", "closed_port.pcap", "packet_loss.pcap", "client_timeout_rst.pcap"])
def test_listen_queues_are_not_blamed_without_cause(capture):
    assert not {f.cause for f in findings(capture)} & QUEUE_CAUSES


def test_healthy_capture_has_no_findings():
    assert findings("healthy.pcap") == []


def test_findings_the_same_with_and_without_every_record():
    kept = [f.to_json() for f in findings("accept_queue_overflow.pcap")]
    lean = [f.to_json() for f in findings("accept_queue_overflow.pcap", keep_connections=False, keep_events=False)]
    assert kept == lean


def test_accept_queue_estimate_matches_the_backlog_of_the_run():
    # captures/README.md: listen() backlog 1, so the accept queue held 2.
    (f,) = [f for f in findings("accept_queue_overflow.pcap") if f.cause == "accept_queue_overflow"]
    assert f.details["waiting_at_first_drop"] == 2
    assert f.details["estimated_backlog"] == 1


def test_capture_point_server_side_proves_the_drop():
    d = diagnose(pcapq.analyze([str(REPO / "captures" / "accept_queue_overflow.pcap")]))
    assert d.capture_point.side == "server"
    (f,) = [f for f in d.findings if f.cause == "accept_queue_overflow"]
    assert "captured at the server" in f.confidence_reason


@pytest.mark.parametrize(
    "side, phrase",
    [("client", "captured at the client"), ("server", "captured at the server"), ("between", "captured between the hosts"), ("unknown", "from an unknown capture point")],
)
def test_capture_point_reads_as_words_in_a_sentence(side, phrase):
    from pcapq.finding.capture_point import CapturePoint

    assert CapturePoint(side, "why").phrase == phrase


def test_json_report_carries_findings_and_capture_point(tmp_path):
    import json
    import subprocess

    out = tmp_path / "r.json"
    proc = subprocess.run(
        ["pcapq", "analyze", "--format", "json", "-o", str(out), str(REPO / "captures" / "closed_port.pcap")],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr  # a finding: problems found
    doc = json.loads(out.read_text())
    assert doc["capture_point"]["side"] in ("client", "server", "between", "unknown")
    (f,) = doc["findings"]
    assert f["cause"] == "closed_port"
    assert f["connections"]["count"] == 5 == len(f["connections"]["ids"])
    assert doc["summary"]["outcomes"]["refused"] == 5


@pytest.mark.parametrize("first", ["client", "server"])
def test_port_exhaustion_counts_time_wait_only_where_the_proxy_closed_first(tmp_path, first):
    """26,000 complete connections from one address within 52 s: closed by the proxy first, their
    ports stay in TIME-WAIT 60 s and run out; closed by the server first, the TIME-WAIT is the
    server's and each port is free again at once (net/ipv4/inet_hashtables.c looks only for
    the proxy's own sockets)."""
    import struct

    from craft import Captured, Conversation, write_pcap

    one = Conversation(client=("10.0.0.9", 32768), server=("10.0.0.2", 9000))
    one.handshake(0.0)
    one.send("client", 0.0003, 100)
    one.send("server", 0.0004, 200)
    later = "server" if first == "client" else "client"
    one.fin(first, 0.0005)
    one.fin(later, 0.0006)
    one.ack(first, 0.0007)
    packets = []
    for i in range(26_000):
        for p in one.packets:
            ip = bytearray(p.ip)
            # The client's port: the source of its segments, the destination of the server's.
            struct.pack_into(">H", ip, 20 if p.side == "client" else 22, 32768 + i)
            packets.append(Captured(p.time + i * 0.002, bytes(ip), p.side, p.flags))
    path = write_pcap(tmp_path / f"closed_by_{first}.pcap", packets)

    exhausted = [f for f in findings_at(path) if f.cause == "port_exhaustion"]
    if first == "client":
        (f,) = exhausted
        assert f.server == "10.0.0.2:9000"
        assert f.details["client"] == "10.0.0.9" and 25_409 <= f.details["peak_ports"] <= 26_000
        assert f.proxy_log and "99: Cannot assign requested address" in f.proxy_log[0]
    else:
        assert exhausted == []


def test_a_syn_flood_from_one_address_holds_no_ports(tmp_path):
    """60,000 lone SYNs from one address and random ports in 20 s: a SYN flood. None of them
    became a connection, so none holds a port (no TIME-WAIT after SYN-SENT)."""
    from flood import syn_flood

    path = tmp_path / "flood.pcap"
    syn_flood(path, 60_000, sources=1, seconds=20.0)
    causes = {f.cause for f in findings_at(path)}
    assert "syn_flood" in causes and "port_exhaustion" not in causes


def findings_at(path) -> list:
    return diagnose(pcapq.analyze([str(path)], keep_connections=False, keep_events=False)).findings


def test_many_findings_of_one_cause_fold_into_one():
    """Nine closed ports are one finding over nine endpoints; eight stay eight."""
    from pcapq.finding import Finding
    from pcapq.diagnose.findings import MAX_PER_CAUSE, fold_many

    def closed(i: int, n: int) -> Finding:
        return Finding("closed_port", f"10.0.0.{i}:80", 0.95, f"{n} SYNs answered with RST", float(i), float(i) + 1,
                       list(range(i * 10, i * 10 + n)), [{"file": 0, "frame": i, "what": "RST"}], "advice",
                       rests_on=["RSTs answering SYNs"])

    eight = [closed(i, 1) for i in range(MAX_PER_CAUSE)]
    assert fold_many(eight) == eight
    nine = [closed(i, 1 + (i == 4) * 4) for i in range(MAX_PER_CAUSE + 1)]
    (folded,) = fold_many(nine)
    assert folded.cause == "closed_port" and folded.server == "9 endpoints"
    assert folded.connection_count == 13 and folded.first == 0.0 and folded.last == 9.0
    assert folded.details["endpoints"][0] == ["10.0.0.4:80", 5]
    assert folded.confidence_reason.startswith("a closed port on 9 endpoints, the busiest 10.0.0.4:80 (5)")
    assert folded.evidence[0]["frame"] == 4


def every_finding() -> list:
    """The findings of every capture in captures/ that has any."""
    out = []
    for path in sorted((REPO / "captures").glob("*.pcap")):
        out += diagnose(pcapq.analyze([str(path)])).findings
    return out


def test_finding_panels_are_what_rich_measures_at_every_width():
    """A finding's panel, its rows laid out by LabelledRows and its border by FindingPanel, is
    what rich's Panel around a grid that measures every cell draws: in colour, in plain text
    and in ASCII, at widths from too narrow to wide; and at a terminal's usual widths the
    measuring is skipped."""
    import io

    from rich.console import Console
    from rich.panel import Panel

    from pcapq.report.findings import FindingPanel, render_finding

    found = every_finding()
    assert len(found) >= 10

    class AsciiFile(io.StringIO):
        # rich draws its boxes in ASCII for a file of this encoding.
        encoding = "ascii"

    consoles = [
        (io.StringIO, dict(force_terminal=True, color_system="truecolor")),
        (io.StringIO, dict(force_terminal=False, color_system=None)),
        (AsciiFile, dict(force_terminal=True, color_system="standard")),
    ]
    skipped = 0
    for width in (24, 30, 40, 50, 60, 72, 80, 100, 120, 160, 250):
        for f in found:
            given = render_finding(f, 1.0e9)
            assert isinstance(given, FindingPanel)
            measured = Panel(given.rows.grid(), title=given.title, title_align="left", expand=True)
            for file, kind in consoles:
                out = []
                for renderable in (measured, given):
                    console = Console(file=file(), width=width, emoji=False, **kind)
                    console.print(renderable)
                    out.append(console.file.getvalue())
                assert out[0] == out[1], (width, f.cause, kind)
            console = Console(file=io.StringIO(), width=width)
            skipped += given.rows.widths(console, console.options.update_width(width - 4)) != (None, None)
    assert skipped >= len(found) * 3
