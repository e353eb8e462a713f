"""Many sources sending one SYN each and never completing the handshake: a SYN flood. Read from
the core's aggregate of one-SYN connections, so millions of them cost one dict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Always, CaptureCause
from pcapq.causes.context import CaptureContext, frame
from pcapq.finding import Finding

if TYPE_CHECKING:
    from pcapq._core import _OneSyn

# Fewer one-SYN connections than this are stray packets, not an attack.
FLOOD_MIN = 1000
MAX_EVIDENCE = 6


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(felt=False, reason=(
    f"the rule already asks for {FLOOD_MIN:,} one-SYN connections to one endpoint: an attack, whatever the rest"
))


def _sources(s: _OneSyn) -> str:
    return f"{'at least ' if s['sources_at_least'] else ''}{s['sources']:,} source address{'es' if s['sources'] != 1 else ''}"


def rule(ctx: CaptureContext) -> list[Finding]:
    s = ctx.one_syn
    # Refused SYNs are a closed port's, and a few sources probing many ports are a scan's.
    first, last = s["first_time"], s["last_time"]
    if s["connections"] - s["answered_rst"] < FLOOD_MIN or first is None or last is None:
        return []
    evidence = [frame(f["file"], f["frame"], "a SYN with nothing after it from its source") for f in s["frames"]]
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
    findings = []
    for target, n in s["top_targets"]:
        if n < FLOOD_MIN:
            continue
        reason = f"{n:,} connections to {target} were one SYN and nothing more, from {_sources(s)} in all{tail}"
        findings.append(Finding(
            CAUSE.slug, target, 0.85, reason, first, last, [], evidence[:MAX_EVIDENCE],
            CAUSE.advice, count=n, details=details,
            rests_on=[f"{n:,} one-SYN connections: no client kernel leaves a SYN unanswered and unrepeated"],
            disproved_by=list(CAUSE.disproved_by),
            explains=[(target, ("one_syn",), ("refused", "rejected"))],
        ))
    return findings


CAUSE = CaptureCause(
    slug="syn_flood",
    title="SYN flood",
    phrase="a SYN flood",
    advice=(
        "Many sources sent one SYN each and never completed the handshake: a SYN flood, or "
        "clients whose SYNs were spoofed. Keep net.ipv4.tcp_syncookies=1 (the default) so real "
        "clients still connect, filter the sources upstream, and look at `nstat -az "
        "TcpExtSyncookiesSent TcpExtListenDrops` on the server."
    ),
    scope="capture",
    precedence=2,
    rule=rule,
    materiality=MATERIALITY,
    evidence=f"at least {FLOOD_MIN:,} one-SYN connections to one endpoint that the server did not refuse",
    exclusions=("refused SYNs (a proxy retrying a closed port makes one-SYN connections too)",),
    disproved_by=("the sources completing handshakes elsewhere in the capture",),
    confidence="0.85",
    kernel="Linux v6.6 net/ipv4/tcp_timer.c: tcp_retransmit_timer() (a real client re-sends its SYN)",
)
