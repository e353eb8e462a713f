"""A proxy address held nearly all of its ephemeral ports towards one server at once."""

from __future__ import annotations

from pcapq.causes.cause import Always, CaptureCause
from pcapq.causes.context import CaptureContext
from pcapq.causes.proxy_log import LINES
from pcapq.finding import Finding

# Share of the ephemeral port range held at once that counts as running out of ports.
PORT_EXHAUSTION_SHARE = 0.9
TIME_WAIT_S = 60


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(felt=False, reason=(
    f"the rule already asks for {PORT_EXHAUSTION_SHARE:.0%} of the ephemeral range held at once: the next "
    "connect()s fail with EADDRNOTAVAIL"
))


def rule(ctx: CaptureContext) -> list[Finding]:
    out = []
    for p in ctx.analysis.port_pressure():
        if p["peak"] < PORT_EXHAUSTION_SHARE * p["range"]:
            break  # highest first
        reason = (
            f"{p['client']} held {p['peak']:,} of its {p['range']:,} ephemeral ports towards {p['server']} at once "
            f"(in use, or in TIME-WAIT for {TIME_WAIT_S} s after closing first)"
        )
        if p["error"]:
            reason += f"; counted per second, so at most {p['error']:,} too high"
        out.append(Finding(
            cause=CAUSE.slug, server=p["server"], confidence=0.8, confidence_reason=reason,
            first=p["at"], last=p["at"], connections=[], evidence=[], advice=CAUSE.advice,
            proxy_log=[LINES["no_port"]],
            details={"client": p["client"], "peak_ports": p["peak"], "port_range": p["range"], "at": p["at"]},
            rests_on=[f"{p['peak']:,} source ports from {p['client']} to {p['server']} in use or in TIME-WAIT at once "
                      "(a connection the server closed first, an RST ended or that never connected frees its port at its last packet)"],
            disproved_by=list(CAUSE.disproved_by),
        ))
    return out


CAUSE = CaptureCause(
    slug="port_exhaustion",
    title="Source ports running out",
    phrase="source ports running out",
    advice=(
        "A proxy address used nearly every ephemeral port towards one upstream (in use or in "
        "TIME-WAIT). Use keepalive connections to the upstream (nginx `keepalive`), widen "
        "net.ipv4.ip_local_port_range, enable net.ipv4.tcp_tw_reuse, or add upstream addresses."
    ),
    scope="server",
    precedence=90,
    rule=rule,
    materiality=MATERIALITY,
    evidence=f"per client address and server endpoint, at least {PORT_EXHAUSTION_SHARE:.0%} of Linux's default ephemeral range (28,232 ports) held at once, TIME-WAIT included",
    exclusions=(
        "a widened net.ipv4.ip_local_port_range on the proxy (the rule assumes the default)",
        "connections the server closed first (the TIME-WAIT is the server's, and connect() looks only for a socket of "
        "its own host on the 4-tuple) or an RST ended (no TIME-WAIT): their ports count as free at their last packet",
        "connect()s that never connected (refused, unreachable, out of retries or given up; a SYN flood or scan from "
        "one address): no TIME-WAIT follows SYN-SENT, their ports count as free at their last packet",
    ),
    disproved_by=("`sysctl net.ipv4.ip_local_port_range` on the proxy wider than the default",),
    proxy_log=("no_port",),
    confidence="0.8",
    kernel="Linux v6.6 net/ipv4/inet_hashtables.c: __inet_hash_connect()",
)
