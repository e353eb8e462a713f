"""A source probing many ports of an address: one finding per scanning source, however many ports."""

from __future__ import annotations

from pcapq.causes.cause import Cause
from pcapq.causes.context import CaptureContext, frame, plural
from pcapq.diagnose.finding import Finding

MAX_EVIDENCE = 6


def rule(ctx: CaptureContext) -> list[Finding]:
    by_source: dict[str, list[dict]] = {}
    for scan in ctx.problems.scans():  # one entry per (source, address): a handful
        by_source.setdefault(scan["source"], []).append(scan)
    findings = []
    for source, scans in by_source.items():
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
            cause="port_scan", server=f"{server} (from {source})", confidence=0.85, confidence_reason=reason,
            first=min(s["first_time"] for s in scans), last=max(s["last_time"] for s in scans), connections=[],
            evidence=evidence[:MAX_EVIDENCE], advice=CAUSE.advice, count=probes,
            details={"source": source, "targets": [[s["target"], s["ports"], s["probes"]] for s in scans],
                     "address": scans[0]["target"]},
            rests_on=[f"{ports:,} distinct ports probed from one source, no payload either way"],
            disproved_by=list(CAUSE.disproved_by),
            explains=[(None, ("scan_probe",), ())],
        ))
    return findings


CAUSE = Cause(
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
    evidence="one source address probing at least 16 ports of one address with connections that carried no data (SYN scans and connect scans alike)",
    exclusions=("a proxy talks to one or a few ports of each upstream address",),
    disproved_by=("a service that really listens on that many ports of the address",),
    confidence="0.85",
    kernel="RFC 9293 §3.10.7.1 (closed ports answer RST)",
)
