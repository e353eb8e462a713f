"""SYN floods and port scans, from the core's aggregate of connections that were one client SYN
and nothing more (`Analysis.one_syn`): millions of them cost one dict here, not one each.

A real client's kernel sends an unanswered SYN again (net.ipv4.tcp_syn_retries) and answers a
SYN-ACK; a spoofed or scanning source does neither. Many such connections from many sources to
a few endpoints are a SYN flood; from a few sources to many endpoints, a port scan.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcapq._core import Analysis
from pcapq.diagnose.advice import ADVICE
from pcapq.diagnose.findings import Finding

# Fewer one-SYN connections than this are stray packets, not an attack.
FLOOD_MIN = 1000
# A scan probes at least this many endpoints; its sources are few.
SCAN_MIN_TARGETS = 100
SCAN_MAX_SOURCES = 16
MAX_EVIDENCE = 6


@dataclass
class Flood:
    """What the flood or scan findings explain: the servers whose one-SYN connections they cover."""

    findings: list[Finding]
    servers: set[str]

    @property
    def is_scan(self) -> bool:
        return any(f.cause == "port_scan" for f in self.findings)

    def explains(self, server: dict) -> bool:
        return server["server"] in self.servers or self._scanned_address(server["server"])

    def explains_all_of(self, server: dict) -> bool:
        """Every connection to `server` is the flood's or the scan's: none needs reading. A
        refused one is a closed port's unless a scan explains it."""
        return self.explains(server) and server["connections"] == server["one_syn"] and (
            self.is_scan or server["outcomes"]["refused"] == 0
        )

    def explains_connection(self, c: dict) -> bool:
        """A connection to a server `explains` covers: a one-SYN connection, and for a flood not
        one the server refused (a proxy retrying a closed port makes those, one SYN each)."""
        return is_one_syn(c) and (self.is_scan or c["reset"] is None)

    def _scanned_address(self, endpoint: str) -> bool:
        return any(f.cause == "port_scan" and _address(endpoint) == f.details["address"] for f in self.findings)


def _address(endpoint: str) -> str:
    """'10.0.0.2:9000' -> '10.0.0.2', '[fd00::2]:9000' -> 'fd00::2'."""
    host = endpoint.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") else host


def _sources(s: dict) -> str:
    return f"{'at least ' if s['sources_at_least'] else ''}{s['sources']:,} source address{'es' if s['sources'] != 1 else ''}"


def find_floods(analysis: Analysis) -> Flood:
    s = analysis.one_syn()
    if s["connections"] < FLOOD_MIN:
        return Flood([], set())
    evidence = [{"file": f["file"], "frame": f["frame"], "what": "a SYN with nothing after it from its source"} for f in s["frames"]]
    answered = []
    if s["answered_synack"]:
        answered.append(f"{s['answered_synack']:,} got a SYN-ACK that was never answered")
    if s["answered_rst"]:
        answered.append(f"{s['answered_rst']:,} got an RST")
    tail = f" ({'; '.join(answered)})" if answered else ""
    details = {
        "one_syn_connections": s["connections"],
        "sources": s["sources"],
        "sources_at_least": s["sources_at_least"],
        "targets": s["targets"],
        "targets_at_least": s["targets_at_least"],
        "top_sources": [list(t) for t in s["top_sources"]],
        "top_targets": [list(t) for t in s["top_targets"]],
    }
    first, last = s["first_time"], s["last_time"]
    if s["targets"] >= SCAN_MIN_TARGETS and s["sources"] <= SCAN_MAX_SOURCES and not s["sources_at_least"]:
        address = _address(s["top_targets"][0][0])
        reason = (
            f"{s['connections']:,} connections were one SYN and nothing more, from {_sources(s)} to "
            f"{'at least ' if s['targets_at_least'] else ''}{s['targets']:,} endpoints{tail}"
        )
        finding = Finding("port_scan", f"{address} ({s['targets']:,} ports)", 0.85, reason, first, last, [],
                          evidence[:MAX_EVIDENCE], ADVICE["port_scan"], count=s["connections"],
                          details=details | {"address": address})
        return Flood([finding], set())
    findings, servers = [], set()
    if s["connections"] - s["answered_rst"] < FLOOD_MIN:
        # Refused SYNs from few sources to few ports are a closed port, not a flood.
        return Flood([], set())
    for target, n in s["top_targets"]:
        if n < FLOOD_MIN:
            continue
        reason = f"{n:,} connections to {target} were one SYN and nothing more, from {_sources(s)} in all{tail}"
        findings.append(Finding("syn_flood", target, 0.85, reason, first, last, [], evidence[:MAX_EVIDENCE],
                                ADVICE["syn_flood"], count=n, details=details))
        servers.add(target)
    return Flood(findings, servers)


def is_one_syn(c: dict) -> bool:
    """A lean connection that was one client SYN and nothing more (as the core counts them)."""
    reset = c["reset"]
    return (c["syn_attempts"] == 1 and c["ack_time"] is None and c["outcome"] != "partial"
            and c["request_acked"] is None and (reset is None or reset["from"] == "server"))
