"""A source probing many ports of an address: one finding per scanning source, however many ports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Always, CaptureCause
from pcapq.causes.context import CaptureContext, frame, plural
from pcapq.finding import Finding
from pcapq.endpoint import parse

if TYPE_CHECKING:
    from pcapq._core import _Scan

MAX_EVIDENCE = 6
# A raw SYN scan too big to keep its probes: from the core's aggregate of one-SYN connections
# (also those still within their retries when the capture ended).
AGGREGATE_MIN = 1000
AGGREGATE_MIN_TARGETS = 100
AGGREGATE_MAX_SOURCES = 16


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(felt=False, reason=(
    "the rule already asks for a source probing 16 ports of an address (5 with raw SYNs), or "
    f"{AGGREGATE_MIN:,} one-SYN connections to {AGGREGATE_MIN_TARGETS} endpoints: someone mapping the host"
))


def rule(ctx: CaptureContext) -> list[Finding]:
    findings = _from_aggregate(ctx)
    covered = {f.details["source"] for f in findings}
    by_source: dict[str, list[_Scan]] = {}
    for scan in ctx.problems.scans():  # one entry per (source, address): a handful
        by_source.setdefault(scan["source"], []).append(scan)
    for source, scans in by_source.items():
        if source in covered:
            continue
        probes = sum(s["probes"] for s in scans)
        ports = sum(s["ports"] for s in scans)
        targets = ", ".join(f"{s['target']} ({s['ports']:,} ports)" for s in scans[:5]) + (" ..." if len(scans) > 5 else "")
        opened = sum(s["open"] for s in scans)
        refused = sum(s["refused"] for s in scans)
        reason = (
            f"{source} probed {ports:,} ports of {plural(len(scans), 'address', 'addresses')} ({targets}) with "
            f"{plural(probes, 'connection')} that carried no data: {refused:,} refused, {opened:,} answered by an open port"
        )
        evidence = [frame(f["file"], f["frame"], f"a probe from {source}") for s in scans for f in s["frames"]]
        server = scans[0]["target"] if len(scans) == 1 else f"{len(scans)} addresses"
        findings.append(Finding(
            cause=CAUSE.slug, server=f"{server} (from {source})", confidence=0.85, confidence_reason=reason,
            first=min(s["first_time"] for s in scans), last=max(s["last_time"] for s in scans), connections=[],
            evidence=evidence[:MAX_EVIDENCE], advice=CAUSE.advice, count=probes,
            details={"source": source, "targets": [[s["target"], s["ports"], s["probes"]] for s in scans],
                     "address": scans[0]["target"]},
            rests_on=[f"{ports:,} distinct ports probed from one source, no payload either way"],
            disproved_by=list(CAUSE.disproved_by),
            explains=[(None, ("scan_probe",), ())],
        ))
    return findings


def _from_aggregate(ctx: CaptureContext) -> list[Finding]:
    s = ctx.one_syn
    scan = (s["connections"] >= AGGREGATE_MIN and s["targets"] >= AGGREGATE_MIN_TARGETS
            and s["sources"] <= AGGREGATE_MAX_SOURCES and not s["sources_at_least"])
    first, last = s["first_time"], s["last_time"]
    if not scan or first is None or last is None:
        return []
    target = s["top_targets"][0][0]
    address = parse(target).ip
    source = s["top_sources"][0][0]
    sources = f"{s['sources']:,} source address{'es' if s['sources'] != 1 else ''}"
    reason = (
        f"{s['connections']:,} connections were one SYN and nothing more, from {sources} to "
        f"{'at least ' if s['targets_at_least'] else ''}{s['targets']:,} endpoints"
    )
    evidence = [frame(f["file"], f["frame"], "a SYN with nothing after it from its source") for f in s["frames"]]
    return [Finding(
        cause=CAUSE.slug, server=f"{address} (from {source})", confidence=0.85, confidence_reason=reason,
        first=first, last=last, connections=[], evidence=evidence[:MAX_EVIDENCE],
        advice=CAUSE.advice, count=s["connections"],
        details={"source": source, "targets": [[address, s["targets"], s["connections"]]], "address": address,
                 "one_syn_connections": s["connections"], "sources": s["sources"], "top_sources": [list(t) for t in s["top_sources"]]},
        rests_on=[f"{s['connections']:,} one-SYN connections to {s['targets']:,} endpoints from {sources}"],
        disproved_by=list(CAUSE.disproved_by),
        explains=[(address, ("one_syn",), ()), (None, ("scan_probe",), ())],
    )]


CAUSE = CaptureCause(
    slug="port_scan",
    title="Port scan",
    phrase="a port scan",
    advice=(
        "A source probed many ports: a port scan. Nothing to tune in the proxy or the upstream; make sure "
        "only the ports that should answer do (firewall), and find who scans."
    ),
    scope="capture",
    precedence=1,
    rule=rule,
    materiality=MATERIALITY,
    evidence=(
        "one source address probing at least 16 ports of one address with connections that carried no data (SYN "
        "scans and connect scans alike), or at least 5 when every probe was one raw SYN; or, from the aggregate, "
        f"at least {AGGREGATE_MIN:,} one-SYN connections to at least {AGGREGATE_MIN_TARGETS} endpoints from at most "
        f"{AGGREGATE_MAX_SOURCES} sources"
    ),
    exclusions=("a proxy talks to one or a few ports of each upstream address",),
    disproved_by=("a service that really listens on that many ports of the address",),
    confidence="0.85",
    kernel="RFC 9293 §3.10.7.1 (closed ports answer RST)",
)
