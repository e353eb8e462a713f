"""Materiality (docs/diagnosis.md, "Materiality"): a finding earns a panel only at or above its
cause's threshold (`Cause.materiality`); below, it is one line of "Minor observations", an entry of
the JSON `minor_observations`, and does not make `pcapq analyze` exit 1.

The thresholds are judged here on findings and capture counters made up for each case (a
stand-in for `CaptureContext` with the two things a judge reads); the reports and the exit code
on captures/crafted/minor_observations.pcap, whose two findings are both minor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from conftest import REPO, run_pcapq
from craft import Captured, Conversation, write_pcap

from pcapq.causes.cause import Always, Connections, Resends
from pcapq.causes.registry import CAUSES
from pcapq.diagnose import Finding
from pcapq.diagnose.findings import fold_many, judge_materiality

MINOR = REPO / "captures" / "crafted" / "minor_observations.pcap"
LOSS = REPO / "captures" / "packet_loss.pcap"


@dataclass
class Felt:
    """What users felt of a finding's connections (`Analysis.felt`): by default each failed."""

    failed: int | None = None
    delayed: int = 0
    resends: int = 0
    waited: float = 0.0

    def of(self, ids: list[int]) -> dict:
        failed = len(ids) if self.failed is None else self.failed
        return {"connections": len(ids), "failed": failed, "delayed": self.delayed, "resends": self.resends,
                "waited": self.waited, "longest": self.waited, "threshold": 0.2}


@dataclass
class Summary:
    connections: int
    felt_by: Felt

    def summary(self) -> dict:
        return {"connections": self.connections}

    def felt(self, ids: list[int]) -> dict:
        return self.felt_by.of(ids)


@dataclass
class Capture:
    """What a threshold reads of a capture: `analysis.summary()["connections"]`, what users felt of
    a finding's connections (`analysis.felt`) and a server's counters (`Analysis.servers()`:
    packets and data re-sends, both ways)."""

    connections: int
    servers: dict[str, dict] = field(default_factory=dict)
    felt: Felt = field(default_factory=Felt)

    @property
    def analysis(self) -> Summary:
        return Summary(self.connections, self.felt)

    def server(self, endpoint: str) -> dict | None:
        return self.servers.get(endpoint)


def finding(cause: str, connections: int, server: str = "10.0.0.2:9000", details: dict | None = None) -> Finding:
    return Finding(cause, server, 0.6, "why", 0.0, 1.0, list(range(connections)), [], "advice", details=details or {})


def counters(packets: int, resent: int) -> dict:
    return {"packets": packets, "data_retransmits": resent}


# ---------------------------------------------------------------------------------------------
# The registry


def test_every_cause_declares_its_materiality_in_words() -> None:
    for slug, cause in CAUSES.items():
        m = cause.materiality
        assert isinstance(m, (Always, Connections, Resends)), slug
        assert m.words() and len(m.reason) > 40, slug
    # The numbers behind the words, where a cause has them.
    closed = CAUSES["closed_port"].materiality
    assert isinstance(closed, Connections) and closed.words() == "at least 3 connections failed or waited, or at least 20% of the capture's own"
    loss = CAUSES["network_loss"].materiality
    assert isinstance(loss, Resends) and "at least 3 and at least 1% of its packets" in loss.words()


def test_findings_made_after_the_judging_are_always_material() -> None:
    """pcapq.evidence adds the unix-socket findings after `diagnose` judged the others."""
    for cause in CAUSES.values():
        if cause.scope == "evidence":
            assert isinstance(cause.materiality, Always), cause.slug


def test_one_proven_queue_drop_is_material() -> None:
    capture = Capture(connections=10_000)
    for slug in ("accept_queue_overflow", "syn_queue_overflow", "listen_drops", "mtu_black_hole"):
        assert CAUSES[slug].materiality.judge(finding(slug, 1), capture, capture.connections) is None, slug


# ---------------------------------------------------------------------------------------------
# The kinds of threshold, each where it holds and where it does not

CONNECTIONS = Connections(at_least=3, share=0.2, reason="three make a pattern")


@pytest.mark.parametrize("n, total, material", [
    (3, 1000, True),  # at least 3 connections
    (2, 1000, False),  # fewer, and a small share
    (1, 5, True),  # a fifth of the capture
    (1, 6, False),  # a sixth
    (1, 1, True),  # the capture's only connection
    (1, 0, True),  # a capture that is all a scan's or a flood's
])
def test_connections_threshold(n: int, total: int, material: bool) -> None:
    why = CONNECTIONS.judge(finding("closed_port", n), Capture(total), total)
    assert (why is None) == material, why
    if not material:
        assert why == f"{n} of {total:,} connection{'s' if total != 1 else ''} failed: fewer than 3 and under 20%"


RESENDS = Resends(share=0.2, rate=0.01, at_least=3, reason="1% of a path's packets is loss that matters")


@pytest.mark.parametrize("n, total, packets, resent, material", [
    (1, 100, 300, 3, True),  # 3 re-sends, 1% of the server's packets
    (1, 100, 301, 3, False),  # 3 re-sends, under 1%
    (1, 100, 10, 2, False),  # 20% of a short exchange, but only 2 re-sends
    (1, 5, 10_000, 1, True),  # a fifth of the capture's connections, whatever the rate
    (2, 11, 10_000, 50, False),  # 50 re-sends of 10,000 packets: 0.5%
    (1, 100, 50, 0, False),  # only SYNs re-sent
])
def test_resends_threshold(n: int, total: int, packets: int, resent: int, material: bool) -> None:
    capture = Capture(total, {"10.0.0.2:9000": counters(packets, resent)})
    why = RESENDS.judge(finding("network_loss", n), capture, total)
    assert (why is None) == material, why
    if not material:
        assert why.startswith(f"{n} of {total:,} connections failed, ")
        assert why.endswith("only SYNs re-sent" if resent == 0 else ")")


def test_resends_of_a_folded_finding_count_every_endpoint_it_lists() -> None:
    """Three servers of one re-send each in 100 packets: none would pass alone, the fold does."""
    servers = {f"10.0.0.{i}:80": counters(100, 1) for i in (2, 3, 4)}
    folded = finding("network_loss", 3, server="3 endpoints", details={"endpoints": [[s, 1] for s in servers]})
    assert RESENDS.judge(folded, Capture(1000, servers), 1000) is None
    one = finding("network_loss", 1, server="10.0.0.2:80")
    assert RESENDS.judge(one, Capture(1000, servers), 1000) == "1 of 1,000 connections failed, 1 data re-send (fewer than 3)"


def test_a_scans_or_floods_connections_are_not_the_traffic_a_failure_hides_among() -> None:
    """Two clients giving up among 2,003 connections are minor; when 2,000 of those are a SYN
    flood's, they are two of the capture's three real connections."""
    gave_up = finding("client_gave_up", 2)
    material, minor = judge_materiality([gave_up], Capture(connections=2003))
    assert minor == [gave_up] and gave_up.minor == "2 of 2,003 connections failed: fewer than 3 and under 20%"
    flood = Finding("syn_flood", "10.0.0.2:9000", 0.85, "why", 0.0, 1.0, [], [], "advice", count=2000)
    material, minor = judge_materiality([flood, gave_up], Capture(connections=2003))
    assert material == [flood, gave_up] and not minor


def test_a_folded_finding_is_judged_as_one() -> None:
    """Nine give-ups of one connection each, on nine servers: each alone is minor; folded (more
    than 8 of one cause) they are one finding of nine connections, and material."""
    alone = [finding("client_gave_up", 1, server=f"10.0.0.{i}:80") for i in range(9)]
    capture = Capture(connections=500)
    material, minor = judge_materiality(alone[:8], capture)
    assert not material and len(minor) == 8
    folded = fold_many(alone)
    assert len(folded) == 1 and folded[0].connection_count == 9
    material, minor = judge_materiality(folded, capture)
    assert material == folded and not minor and folded[0].minor is None


# ---------------------------------------------------------------------------------------------
# Through the command line: a capture whose two findings are both minor


def test_minor_findings_are_minor_observations_not_findings() -> None:
    proc = run_pcapq("analyze", "--format", "json", str(MINOR))
    doc = json.loads(proc.stdout)
    assert doc["findings"] == []
    observed = {(f["cause"], f["server"]): f for f in doc["minor_observations"]}
    assert set(observed) == {("network_loss", "10.0.0.2:9000"), ("closed_port", "10.0.0.2:9001")}
    assert observed["network_loss", "10.0.0.2:9000"]["minor"] == "1 of 9 connections waited 200 ms or more, 1 data re-send (fewer than 3)"
    assert observed["closed_port", "10.0.0.2:9001"]["minor"] == "1 of 9 connections failed: fewer than 3 and under 20%"
    # The same finding objects as `findings`: every field of a finding, and `minor`.
    for f in doc["minor_observations"]:
        assert f["connections"]["count"] == 1 and f["evidence"] and f["advice"] and f["confidence_reason"]
    # Only minor observations: nothing found that matters, exit 0.
    assert proc.returncode == 0, proc.stderr


def test_material_findings_have_no_minor_field_and_exit_1() -> None:
    proc = run_pcapq("analyze", "--format", "json", str(LOSS))
    doc = json.loads(proc.stdout)
    assert [f["cause"] for f in doc["findings"]] == ["network_loss"] and doc["minor_observations"] == []
    assert "minor" not in doc["findings"][0]
    assert proc.returncode == 1


def test_text_report_lists_minor_observations_in_one_table() -> None:
    proc = run_pcapq("analyze", "--no-color", str(MINOR))
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert out.startswith("No failure that matters: 2 minor observations below.")
    table = out[out.index("Minor observations"):out.index("Capture point")]
    for word in ("cause", "where", "connections", "why minor", "Packet loss on the path", "10.0.0.2:9000",
                 "Closed port", "10.0.0.2:9001", "1 of 9 connections"):
        assert word in table, table
    # No panel: a panel's border starts with its title.
    assert "╭─" not in out


def test_markdown_and_html_reports_list_minor_observations() -> None:
    md = run_pcapq("analyze", "--format", "markdown", str(MINOR)).stdout.decode()
    assert "## Minor observations" in md and "### " not in md.split("## Minor observations")[0]
    assert "| Closed port | 10.0.0.2:9001 | 1 | 1 of 9 connections failed: fewer than 3 and under 20% |" in md
    html = run_pcapq("analyze", "--format", "html", str(MINOR)).stdout.decode()
    assert '<h3 id="minor">Minor observations</h3>' in html
    assert '<section class="finding' not in html
    assert "<td>Packet loss on the path</td><td>10.0.0.2:9000</td><td class=num>1</td>" in html


def test_evidence_cross_checks_judge_minor_observations_too() -> None:
    """--nstat confirms or contradicts every finding, the minor ones as well."""
    proc = run_pcapq("analyze", "--format", "json", "--nstat", str(REPO / "captures" / "packet_loss.nstat.txt"), str(MINOR))
    doc = json.loads(proc.stdout)
    loss = next(f for f in doc["minor_observations"] if f["cause"] == "network_loss")
    assert any(line.startswith("nstat: TcpRetransSegs") for line in loss["confirmed_by"]), loss
    assert all("contradicted_by" in f for f in doc["minor_observations"])
    assert proc.returncode == 0


# ---------------------------------------------------------------------------------------------
# What users felt: failures and material waits, not shares


def test_nothing_felt_is_minor_whatever_the_share() -> None:
    """The capture's only connection re-sent a segment and completed at once: no one felt it."""
    quick = Felt(failed=0, resends=1, waited=0.003)
    why = CONNECTIONS.judge(finding("closed_port", 1), Capture(1, felt=quick), 1)
    assert why == "1 connection, none failed or waited 200 ms: 1 re-send, 3 ms added"
    capture = Capture(1, {"10.0.0.2:9000": counters(10, 5)}, felt=quick)
    assert RESENDS.judge(finding("network_loss", 1), capture, 1) == why
    assert Always(reason="a proven drop").judge(finding("accept_queue_overflow", 1), capture, 1) == why
    # A scan's or a flood's evidence is no user's connection: material all the same.
    assert Always(felt=False, reason="an attack").judge(finding("port_scan", 1), capture, 1) is None


def test_connections_that_waited_a_timer_are_felt() -> None:
    slow = Felt(failed=0, delayed=3, resends=3, waited=0.6)
    assert CONNECTIONS.judge(finding("closed_port", 3), Capture(1000, felt=slow), 1000) is None
    one = Felt(failed=0, delayed=1, resends=1, waited=0.2)
    why = CONNECTIONS.judge(finding("closed_port", 1), Capture(1000, felt=one), 1000)
    assert why == "1 of 1,000 connections waited 200 ms or more: fewer than 3 and under 20%"


def _judged(tmp_path, name: str, conversations) -> dict:
    packets: list[Captured] = []
    conversations(packets)
    path = write_pcap(tmp_path / f"{name}.pcap", sorted(packets, key=lambda p: p.time))
    proc = run_pcapq("analyze", "--format", "json", str(path))
    return json.loads(proc.stdout)


def test_one_connection_with_one_fast_retransmit_is_minor(tmp_path) -> None:
    """The capture's one connection lost a segment of its answer and re-sent it on three
    duplicate ACKs, a millisecond later (tcp_fastretrans_alert()): 100% of the capture, felt by
    no one."""
    def one(packets: list[Captured]) -> None:
        c = Conversation(packets=packets, new_ip_ids=True)
        c.handshake(0.0)
        c.send("client", 0.0003, 100)
        c.ack("server", 0.0004)
        for k in range(5):
            c.send("server", 0.001 + 0.0001 * k, 1448, flags="A")
        hole = 5001 + 1448
        c.segment("client", 0.00105, "A", ack=hole, advance=False)
        for k in range(3):
            sack = [("SAck", (hole + 1448, hole + 1448 * (2 + k)))]
            c.segment("client", 0.00125 + 0.0001 * k, "A", ack=hole, options=sack, advance=False)
        c.resend("server", 0.0017, index=-4)
        c.ack("client", 0.0018)
        c.close(0.002)

    doc = _judged(tmp_path, "fast_retransmit", one)
    assert doc["findings"] == []
    [loss] = doc["minor_observations"]
    assert loss["cause"] == "network_loss"
    assert loss["minor"].startswith("1 connection, none failed or waited 200 ms: 1 re-send, ")


def test_many_connections_timing_out_are_material(tmp_path) -> None:
    """Ten healthy fetches, and four connects whose SYNs went unanswered on the backoff (1, 3, 7
    s) and were given up: failures, material."""
    def many(packets: list[Captured]) -> None:
        for i in range(10):
            c = Conversation(client=("10.0.0.1", 40000 + i), server=("10.0.0.2", 9000), client_isn=1000 + 1000 * i,
                             packets=packets, new_ip_ids=True)
            c.handshake(0.01 * i)
            c.send("client", 0.01 * i + 0.0003, 100)
            c.send("server", 0.01 * i + 0.0005, 1000)
            c.close(0.01 * i + 0.001)
        for i in range(4):
            c = Conversation(client=("10.0.0.1", 41000 + i), server=("10.0.0.3", 9000), client_isn=50_000 + 1000 * i,
                             packets=packets, new_ip_ids=True)
            for t in (0.0, 1.0, 3.0, 7.0):
                c.syn(0.2 * i + t)
        Conversation(client=("10.0.0.1", 42000), packets=packets, new_ip_ids=True).handshake(20.0)

    doc = _judged(tmp_path, "timeouts", many)
    causes = {f["cause"] for f in doc["findings"]}
    assert "silent_host" in causes, (doc["findings"], doc["minor_observations"])
