"""Problem connections beyond the records kept whole are kept in short form (src/detect/digest.rs):
the findings count every one of them, however few records are kept (docs/diagnosis.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

import pcapq
from pcapq.diagnose import diagnose

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
# Shipped kernel captures with findings of several causes, and one with none.
NAMES = ["accept_queue_overflow", "syn_queue_overflow", "nginx_php_fpm_max_requests", "nginx_php_fpm_killed",
         "syn_scan", "route_blackhole", "packet_loss", "reuseport_stuck_listener", "healthy"]


def _folded(paths: list[str], **kw) -> pcapq.Analysis:
    return pcapq.analyze(paths, keep_connections=False, keep_events=False, **kw)


def _findings(analysis: pcapq.Analysis) -> list[tuple]:
    """What a finding says of the connections it covers: cause, listener, how many, when, how sure."""
    return sorted((f.cause, f.server, f.connection_count, f.first, f.last, f.confidence) for f in diagnose(analysis).findings)


@pytest.mark.parametrize("name", NAMES)
def test_findings_count_every_problem_connection_however_few_records_are_kept(name):
    path = str(CAPTURES / f"{name}.pcap")
    every = _findings(_folded([path]))
    problems = len(_folded([path]).connections())
    assert (problems > 0) == (name != "healthy")
    for kept in (0, 1, 7):
        analysis = _folded([path], max_kept_problems=kept)
        # The cap, and a quarter more for the first of a listener's later episodes.
        assert min(kept, problems) <= len(analysis.connections()) <= kept + kept // 4
        assert _findings(analysis) == every, f"{kept} records kept"


@pytest.mark.parametrize("name", ["client_timeout_rst", "nginx_php_fpm", "nginx_php_fpm_max_requests", "nginx_php_fpm_slow"])
def test_proxy_timeouts_count_every_give_up_however_few_records_are_kept(name):
    # The give-ups are counted in the census as connections finish, not read from the records.
    path = str(CAPTURES / f"{name}.pcap")
    every = pcapq.analyze([path]).proxy_timeouts()
    assert every and all(t["gave_up"] >= 2 for t in every.values())
    for kept in (0, 1):
        assert _folded([path], max_kept_problems=kept).proxy_timeouts() == every, f"{kept} records kept"


def test_examples_come_from_the_records_kept_and_the_warning_says_so():
    path = str(CAPTURES / "accept_queue_overflow.pcap")
    analysis = _folded([path], max_kept_problems=2)
    kept_ids = {c["id"] for c in analysis.connections()}
    [finding] = diagnose(analysis).findings
    assert finding.connection_count > 2
    # Every connection is listed; the examples' ids are among the records kept.
    assert len(finding.connections) == finding.connection_count
    example_ids = {int(e["what"].rsplit("connection ", 1)[1].rstrip(")")) for e in finding.evidence if "connection " in e["what"]}
    assert example_ids and example_ids <= kept_ids
    [warning] = [w for w in analysis.warnings() if "records kept" in w]
    assert warning.startswith(f"{finding.connection_count - 2} more connections with a problem than the 2 records kept")


def test_parts_merged_beyond_the_records_kept_equal_one_run(tmp_path):
    scapy = pytest.importorskip("scapy.all")
    packets = scapy.rdpcap(str(CAPTURES / "nginx_php_fpm_max_requests.pcap"))
    n = len(packets)
    cuts = [0, n // 3, 2 * n // 3, n]
    paths = []
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        paths.append(str(tmp_path / f"part{i}.pcap"))
        scapy.wrpcap(paths[-1], packets[a:b])
    one_run = _findings(_folded(paths))
    assert one_run
    for kept in (0, 3):
        parts = pcapq._core.analyze_parts(paths, jobs=2, keep_connections=False, keep_events=False, max_kept_problems=kept)
        merged = parts[0]
        for later in parts[1:]:
            merged = merged.merge(later)
        assert _findings(merged) == one_run, f"{kept} records kept"
        assert merged.proxy_timeouts() == _folded(paths).proxy_timeouts() != {}


def test_the_short_form_travels_with_a_serialised_analysis():
    # What a Dask task sends back (`Analysis.to_bytes`) keeps the seeds.
    analysis = _folded([str(CAPTURES / "accept_queue_overflow.pcap")], max_kept_problems=1)
    copy = pcapq._core.Analysis.from_bytes(analysis.to_bytes())
    assert _findings(copy) == _findings(analysis) == _findings(_folded([str(CAPTURES / "accept_queue_overflow.pcap")]))


def test_an_episode_after_the_cap_still_has_examples(tmp_path):
    from craft import START, Conversation, write_pcap

    packets: list = []
    port = 40000
    # Two bursts of a dropped final ACK (the SYN-ACK again after the client's ACK) 100 s apart.
    for burst_at in (0.0, 100.0):
        for i in range(12):
            c = Conversation(client=("10.0.0.1", port), start=START + burst_at + i * 0.05, packets=packets)
            port += 1
            c.syn(0.0)
            c.synack(0.0001)
            c.ack("client", 0.0002)
            c.send("client", 0.001, 100)
            c.synack(1.0)
            c.resend("client", 1.2)
            c.send("server", 1.3, 500)
            c.close(1.4)
    packets.sort(key=lambda p: p.time)
    path = str(write_pcap(tmp_path / "two_episodes.pcap", packets))
    every = diagnose(_folded([path])).findings
    assert [(f.cause, f.connection_count) for f in every] == [("accept_queue_overflow", 12)] * 2
    # Eight records kept, the first burst's: the second burst's first ones are kept too (a
    # quarter of the cap, 2), for its examples.
    analysis = _folded([path], max_kept_problems=8)
    assert len(analysis.connections()) == 10
    findings = diagnose(analysis).findings
    assert [(f.cause, f.connection_count, f.first) for f in findings] == [(f.cause, f.connection_count, f.first) for f in every]
    assert len(findings[1].evidence) == 2
