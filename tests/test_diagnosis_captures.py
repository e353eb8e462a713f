"""Issue 12 (diagnosis v2): the findings pcapq must and must not give on the catalog's captures.

The expectations are data (tests/data/diagnosis_expectations.json: must_find, must_not_blame,
max_confidence, must_say, connections, max_share, max_findings, why). An entry with
`fails_today` is a strict xfail: it says what the diagnosis gets wrong before the fix, and the
test fails as soon as the fix lands, so that the entry is flipped. Each capture named with a
`pattern` is checked to really hold that traffic (read with scapy and pcapq's events), so that
an expectation cannot pass on a capture that lost its point. The kernel tests re-run three fast
`pcapq lab` scenarios and check the live capture for the same pattern.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Dot1AD, Dot1Q
from scapy.utils import rdpcap

from conftest import REPO, analyze_json
from pcapq.cli import CAUSES
from pcapq.lab.namespaces import unavailable_reason

DATA = REPO / "tests" / "data" / "diagnosis_expectations.json"
ENTRIES: list[dict] = json.loads(DATA.read_text())["captures"]
KNOWN_CAUSES = {*CAUSES, "port_scan", "syn_flood"}
KEYS = {"capture", "must_find", "must_not_blame", "max_confidence", "must_say", "connections", "max_share",
        "max_findings", "why", "fails_today", "pattern"}


@functools.lru_cache(maxsize=None)
def report(capture: str) -> dict:
    return analyze_json(REPO / capture)


def judge(entry: dict, doc: dict) -> list[str]:
    """What the report gets wrong against the entry's expectations; empty when nothing."""
    findings = doc["findings"]
    found = Counter(f["cause"] for f in findings)
    problems = []
    for wanted in entry.get("must_find", []):
        if not any(cause in found for cause in wanted.split("|")):
            problems.append(f"no {wanted} finding (found {dict(found)})")
    for cause in entry.get("must_not_blame", []):
        if cause in found:
            problems.append(f"{found[cause]} {cause} finding(s)")
    for cause, limit in entry.get("max_confidence", {}).items():
        problems += [f"{cause} at confidence {f['confidence']}, over {limit}" for f in findings
                     if f["cause"] == cause and f["confidence"] > limit]
    for cause, words in entry.get("must_say", {}).items():
        for f in findings:
            text = f"{f['confidence_reason']} {f['advice']}".lower()
            missing = [w for w in words if w.lower() not in text]
            if f["cause"] == cause and missing:
                problems.append(f"{cause} does not say {missing}: {text!r}")
    for cause, count in entry.get("connections", {}).items():
        covered = sum(f["connections"]["count"] for f in findings if f["cause"] == cause)
        if covered != count:
            problems.append(f"{cause} covers {covered} connections, not {count}")
    for cause, share in entry.get("max_share", {}).items():
        covered = sum(f["connections"]["count"] for f in findings if f["cause"] == cause)
        if covered > share * doc["summary"]["connections"]:
            problems.append(f"{cause} covers {covered} of {doc['summary']['connections']} connections")
    if "max_findings" in entry and len(findings) > entry["max_findings"]:
        problems.append(f"{len(findings)} findings, at most {entry['max_findings']} wanted ({dict(found)})")
    return problems


def _param(entry: dict) -> pytest.param:
    marks = [pytest.mark.xfail(strict=True, reason=f"issue 12: {entry['fails_today']}")] if "fails_today" in entry else []
    return pytest.param(entry, id=entry["capture"].removeprefix("captures/"), marks=marks)


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES])
def test_findings_meet_the_expectations(entry: dict) -> None:
    problems = judge(entry, report(entry["capture"]))
    assert not problems, f"{entry['capture']}: {'; '.join(problems)} (why: {entry['why']})"


def test_the_expectations_are_well_formed() -> None:
    for entry in ENTRIES:
        assert set(entry) <= KEYS, (entry["capture"], set(entry) - KEYS)
        assert (REPO / entry["capture"]).is_file(), entry["capture"]
        assert entry["why"] and (entry.get("pattern") is None or entry["pattern"] in PATTERNS), entry["capture"]
        named = [c for w in entry.get("must_find", []) for c in w.split("|")]
        named += [*entry.get("must_not_blame", []), *entry.get("max_confidence", {}), *entry.get("must_say", {}),
                  *entry.get("connections", {}), *entry.get("max_share", {})]
        assert set(named) <= KNOWN_CAUSES, (entry["capture"], set(named) - KNOWN_CAUSES)


def test_the_judge_can_fail() -> None:
    """Each kind of expectation, broken on purpose against a known report."""
    doc = report("captures/syn_queue_overflow.pcap")
    assert judge({"must_find": ["closed_port|port_scan"]}, doc)
    assert judge({"must_not_blame": ["syn_queue_overflow"]}, doc)
    assert judge({"max_confidence": {"syn_queue_overflow": 0.5}}, doc)
    assert judge({"must_say": {"syn_queue_overflow": ["firewall"]}}, doc)
    assert judge({"connections": {"syn_queue_overflow": 1}}, doc)
    assert judge({"max_share": {"syn_queue_overflow": 0.1}}, doc)
    assert judge({"max_findings": 0}, doc)
    assert not judge({"must_find": ["closed_port|syn_queue_overflow"], "max_findings": 1,
                      "max_confidence": {"syn_queue_overflow": 0.8}}, doc)


# -- Patterns: the capture holds the traffic its entry describes.


def _tcp(pcap: Path) -> list:
    return [p for p in rdpcap(str(pcap)) if p.haslayer(TCP)]


def _payload_len(p) -> int:
    """From the IP header: the captures may be cut by a snaplen."""
    return p[IP].len - 4 * p[IP].ihl - 4 * p[TCP].dataofs


def _flags(p) -> str:
    return str(p[TCP].flags)


def _nstat_delta(nstat: str, counter: str) -> int:
    match = re.search(rf"^{counter}\s+\d+\s+\d+\s+(\d+)$", nstat, re.M)
    return int(match.group(1)) if match else 0


def _events(conn: dict, kind: str, side: str | None = None) -> list[dict]:
    return [e for e in conn["events"] if e["kind"] == kind and (side is None or e["from"] == side)]


def defer_accept(pcap: Path, doc: dict, nstat: str) -> None:
    """Idle preconnects: one SYN-ACK re-send each, late (the defer period), while no data of
    theirs was waiting; nothing else re-sent; the kernel counted deferred ACKs, no overflow."""
    deferred = []
    for conn in doc["connections"]:
        again = _events(conn, "synack_retransmit")
        if again:
            first_data = _events(conn, "data_first", "client")
            assert len(again) == 1, conn["id"]
            assert again[0]["time"] - _events(conn, "synack")[0]["time"] >= 2.5, conn["id"]
            assert not first_data or first_data[0]["time"] > again[0]["time"], conn["id"]
            deferred.append(conn["id"])
        assert not _events(conn, "data_retransmit"), conn["id"]
    assert len(deferred) >= 3, deferred
    assert _nstat_delta(nstat, "TcpExtTCPDeferAcceptDrop") > 0
    assert _nstat_delta(nstat, "TcpExtListenOverflows") == 0


def reuseport_stuck_listener(pcap: Path, doc: dict, nstat: str) -> None:
    """Handshake ACKs dropped at the stuck listener (SYN-ACK again after the ACK) while most
    connections were answered within 0.1 s of their SYN."""
    dropped = [c["id"] for c in doc["connections"]
               if any(e.get("after_handshake_ack") for e in _events(c, "synack_retransmit"))]
    at_once = [c["id"] for c in doc["connections"] if _events(c, "syn") and _events(c, "data_first", "server")
               and _events(c, "data_first", "server")[0]["time"] - _events(c, "syn")[0]["time"] < 0.1]
    assert dropped, "no SYN-ACK re-sent after a handshake ACK"
    assert len(at_once) >= 16, at_once
    assert _nstat_delta(nstat, "TcpExtListenOverflows") > 0


def firewall_drop(pcap: Path, doc: dict, nstat: str) -> None:
    """SYNs sent again because nftables dropped them: the listener never held a request (no
    SYN-ACK re-sent), its drop counters did not move, the nft counter did."""
    resent = [c["id"] for c in doc["connections"] if _events(c, "syn_retransmit")]
    assert len(resent) >= 3, resent
    assert not any(_events(c, "synack_retransmit") for c in doc["connections"])
    match = re.search(r"nft counters: (\d+) SYNs seen, (\d+) dropped", nstat)
    assert match and int(match.group(2)) > 0, "no nft counters beside the capture"
    assert _nstat_delta(nstat, "TcpExtListenDrops") == 0


def tfo_fallback(pcap: Path, doc: dict, nstat: str) -> None:
    """Each SYN carries data; the SYN-ACK acknowledges only the SYN; the client sends the data
    again from sequence ISN + 1."""
    packets = _tcp(pcap)
    syns = [p for p in packets if _flags(p) == "S"]
    assert len(syns) >= 3
    for syn in syns:
        port, isn, size = syn[TCP].sport, syn[TCP].seq, _payload_len(syn)
        assert size > 0, f"SYN from {port} without data"
        synack = next(p for p in packets if p[TCP].dport == port and _flags(p) == "SA")
        assert synack[TCP].ack == isn + 1, f"the SYN-ACK to {port} acknowledges the SYN's data"
        assert any(p[TCP].sport == port and p[TCP].seq == isn + 1 and _payload_len(p) == size for p in packets), port


def port_scan(pcap: Path, doc: dict, nstat: str) -> None:
    """One source; at least 900 ports each got a single SYN and nothing more from the client."""
    packets = _tcp(pcap)
    syns = [p for p in packets if _flags(p) == "S"]
    assert len({p[IP].src for p in syns}) == 1
    server = syns[0][IP].dst
    from_client = Counter(p[TCP].dport for p in packets if p[IP].dst == server)
    one_syn = [port for port, n in from_client.items() if n == 1]
    assert len(one_syn) >= 900, len(one_syn)
    assert len({p[TCP].dport for p in syns}) >= 900


def app_reset(pcap: Path, doc: dict, nstat: str) -> None:
    """In every connection the server acknowledged the request, sent data, then its RST, before
    the client acknowledged that data."""
    packets = _tcp(pcap)
    by_port = defaultdict(list)
    for p in packets:
        by_port[p[TCP].sport if p[TCP].dport == 9000 else p[TCP].dport].append(p)
    assert len(by_port) >= 3
    for port, conn in by_port.items():
        server = [p for p in conn if p[TCP].sport == 9000]
        rst = next(i for i, p in enumerate(conn) if p[TCP].sport == 9000 and "R" in _flags(p))
        request = next(p for p in conn if p[TCP].dport == 9000 and _payload_len(p) > 0)
        data = next(i for i, p in enumerate(conn) if p[TCP].sport == 9000 and _payload_len(p) > 0)
        assert any(p[TCP].ack >= request[TCP].seq + _payload_len(request) for p in server), port
        assert data < rst, port
        data_end = conn[data][TCP].seq + _payload_len(conn[data])
        assert not any(p[TCP].dport == 9000 and p[TCP].ack >= data_end for p in conn[data:rst]), port


def _tags(p) -> tuple[int, ...]:
    return tuple(layer.vlan for layer in p.iterpayloads() if isinstance(layer, (Dot1Q, Dot1AD)))


def vlan_trunk_copies(pcap: Path, doc: dict, nstat: str) -> None:
    """Three SYNs, identical but for their tags: untagged, 42, 10/20."""
    syns = [p for p in _tcp(pcap) if _flags(p) == "S"]
    assert sorted(_tags(p) for p in syns) == [(), (10, 20), (42,)]
    assert len({bytes(p[IP]) for p in syns}) == 1


def _pairs(pcap: Path) -> list[tuple]:
    """Frames in pairs: each the same bytes as the one before, 20 µs later."""
    frames = rdpcap(str(pcap))
    assert len(frames) % 2 == 0
    pairs = list(zip(frames[::2], frames[1::2]))
    for a, b in pairs:
        assert bytes(a) == bytes(b) and abs(float(b.time - a.time) - 20e-6) < 1e-6
    return [a for a, _ in pairs]


def duplicate_frames(pcap: Path, doc: dict, nstat: str) -> None:
    """Every frame twice, and no segment sent twice by TCP (distinct IPv4 ids per side)."""
    originals = _pairs(pcap)
    ids = Counter((p[IP].src, p[IP].id) for p in originals)
    assert max(ids.values()) == 1
    assert len({(p[TCP].sport, p[TCP].seq, _flags(p)) for p in originals if _payload_len(p)}) == \
        sum(1 for p in originals if _payload_len(p))


def duplicate_frames_retransmission(pcap: Path, doc: dict, nstat: str) -> None:
    """Every frame twice, and exactly one data segment sent twice by TCP (a new IPv4 id)."""
    originals = _pairs(pcap)
    sent = defaultdict(list)
    for p in originals:
        if _payload_len(p):
            sent[(p[TCP].sport, p[TCP].seq)].append(p)
    again = [v for v in sent.values() if len(v) > 1]
    assert len(again) == 1 and len(again[0]) == 2
    first, second = again[0]
    assert first[IP].id != second[IP].id and float(second.time - first.time) > 0.15


def windows_syn_after_rst(pcap: Path, doc: dict, nstat: str) -> None:
    """40 connections (source port, ISN), 3 SYNs each 0.5 s apart, each answered by RST within
    1 ms; 20 source ports, each used twice."""
    packets = _tcp(pcap)
    series = defaultdict(list)
    for i, p in enumerate(packets):
        if _flags(p) == "S":
            series[(p[TCP].sport, p[TCP].seq)].append(i)
    assert len(series) == 40 and len({port for port, _ in series}) == 20
    for key, idx in series.items():
        assert len(idx) == 3, key
        times = [float(packets[i].time) for i in idx]
        assert all(abs(b - a - 0.5) < 0.05 for a, b in zip(times, times[1:])), key
        for i in idx:
            answer = packets[i + 1]
            assert "R" in _flags(answer) and answer[TCP].dport == key[0] and answer[TCP].ack == key[1] + 1, key
            assert float(answer.time - packets[i].time) < 0.001


def dead_host(pcap: Path, doc: dict, nstat: str) -> None:
    """Not one packet from 10.0.0.3; at least 90 SYNs to it from three sources; another server
    answers in the same capture."""
    packets = _tcp(pcap)
    assert not [p for p in packets if p[IP].src == "10.0.0.3"]
    syns = [p for p in packets if p[IP].dst == "10.0.0.3" and _flags(p) == "S"]
    assert len(syns) >= 90 and len({p[IP].src for p in syns}) == 3
    assert any(p[IP].src == "10.0.0.2" for p in packets)


def answered_then_closed(pcap: Path, doc: dict, nstat: str) -> None:
    """In every connection the server acknowledged all the client's data before the client's
    FIN or RST; in at least two it sent data back."""
    packets = _tcp(pcap)
    conns = defaultdict(list)
    for p in packets:
        client_side = p[IP].src == "10.0.0.1"
        conns[p[TCP].sport if client_side else p[TCP].dport].append((client_side, p))
    answered = 0
    for port, conn in conns.items():
        end = max(p[TCP].seq + _payload_len(p) for c, p in conn if c and _payload_len(p))
        close = next(i for i, (c, p) in enumerate(conn) if c and ("F" in _flags(p) or "R" in _flags(p)))
        assert any(not c and p[TCP].ack >= end for c, p in conn[:close]), port
        answered += any(not c and _payload_len(p) for c, p in conn[:close])
    assert len(conns) == 3 and answered >= 2


def capture_mid_overflow(pcap: Path, doc: dict, nstat: str) -> None:
    """At least four connections began before the capture, two of them re-send a request the
    server had not acknowledged and get their SYN-ACK again after their ACK."""
    partial = [c for c in doc["connections"] if c["partial"]]
    assert len(partial) >= 4
    packets = _tcp(pcap)
    stuck = 0
    for conn in partial:
        port = int(conn["client"].rsplit(":", 1)[1])
        mine = [p for p in packets if port in (p[TCP].sport, p[TCP].dport)]
        requests = [i for i, p in enumerate(mine) if p[TCP].sport == port and _payload_len(p)]
        synacks = [i for i, p in enumerate(mine) if _flags(p) == "SA"]
        if len(requests) >= 2 and len(synacks) >= 2:
            end = mine[requests[0]][TCP].seq + _payload_len(mine[requests[0]])
            assert not any(p[TCP].dport == port and p[TCP].ack >= end for p in mine[:requests[1]]), port
            stuck += 1
    assert stuck >= 2


PATTERNS: dict[str, Callable[[Path, dict, str], None]] = {
    f.__name__: f
    for f in (defer_accept, reuseport_stuck_listener, firewall_drop, tfo_fallback, port_scan, app_reset,
              vlan_trunk_copies, duplicate_frames, duplicate_frames_retransmission, windows_syn_after_rst,
              dead_host, answered_then_closed, capture_mid_overflow)
}


def _nstat_beside(pcap: Path) -> str:
    path = pcap.with_name(pcap.stem + ".nstat.txt")
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize("entry", [pytest.param(e, id=e["capture"].removeprefix("captures/"))
                                   for e in ENTRIES if "pattern" in e])
def test_capture_holds_its_pattern(entry: dict) -> None:
    pcap = REPO / entry["capture"]
    PATTERNS[entry["pattern"]](pcap, report(entry["capture"]), _nstat_beside(pcap))


def test_a_pattern_check_can_fail() -> None:
    """The healthy capture holds none of the patterns."""
    pcap = REPO / "captures" / "healthy.pcap"
    doc, nstat = report("captures/healthy.pcap"), _nstat_beside(pcap)
    for name, check in PATTERNS.items():
        with pytest.raises((AssertionError, StopIteration, ValueError)):
            check(pcap, doc, nstat)


# -- Kernel: the fastest new scenarios, live, still make their pattern.

LIVE = {"app_reset": "app_reset", "tfo_fallback": "tfo_fallback", "syn_scan": "port_scan"}


@pytest.mark.kernel
@pytest.mark.parametrize("scenario", list(LIVE))
def test_live_scenario_makes_its_pattern(scenario: str, tmp_path: Path) -> None:
    from pcapq.lab.catalog import SCENARIOS
    from pcapq.lab.runner import run_scenario

    reason = unavailable_reason(SCENARIOS[scenario].tools)
    if reason:
        pytest.skip(reason)
    result = run_scenario(scenario, tmp_path / f"{scenario}.pcap")
    assert result.problems == []
    PATTERNS[LIVE[scenario]](result.run.pcap, analyze_json(result.run.pcap), _nstat_beside(result.run.pcap))
