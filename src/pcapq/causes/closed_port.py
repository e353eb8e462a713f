"""Nothing listened: the server's kernel answered SYNs with RST."""

from __future__ import annotations

from pcapq.causes.cause import Connections, CounterSigns, EpisodeCause, ListenerSign, Narration
from pcapq.causes.context import EpisodeContext, plural, reset_frame
from pcapq.finding import Finding


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two refused connects among many served are a stray client or a restart's moment; three are a port "
    "nobody listens on; a fifth of the capture's connections or more is a failure rate no service lives with, "
    "however few they are"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    refused = ctx.select(any_of=["refused", "rejected"], none_of=["scan_probe", "icmp_answered"])
    if not refused:
        return None
    ctx.claim(refused)
    evidence = [e for c in ctx.examples(refused) for e in reset_frame(c, "RST answering the SYN")]
    again = ctx.count(all_of=["syn_retransmitted"], any_of=["refused", "rejected"], claimed=True)
    reason = f"{plural(len(refused), 'SYN')} answered with RST: nothing listened on {ctx.server}"
    if again:
        reason += f" ({plural(again, 'client')} sent the SYN again after the RST, as Windows does: still refused)"
    return ctx.finding(CAUSE, refused, 0.95, reason, evidence, rests_on=["RSTs answering SYNs"])


CAUSE = EpisodeCause(
    slug="closed_port",
    title="Closed port",
    phrase="a closed port",
    advice="Nothing listened on the port: check that the upstream runs and listens where the proxy points.",
    scope="episode",
    precedence=10,
    rule=rule,
    materiality=MATERIALITY,
    evidence="the server answered a SYN with an RST (outcome `refused`, symptom `rejected`)",
    exclusions=(
        "a scanner's probes (one finding for the scan instead)",
        "an RST followed by the completed handshake: forged or stale, the port was open",
        "connections an ICMP error answered (the ICMP findings take them)",
    ),
    disproved_by=("a listener on that port at that time (`ss -lnt` on the server)", "RSTs forged on the way (their TTL differs from the server's other packets)"),
    proxy_log=("refused",),
    confidence="0.95",
    kernel="RFC 9293 §3.10.7.1: a SYN to a CLOSED port is answered with RST",
    live_signs=("rejected",),
    counters=CounterSigns(rise=("TcpOutRsts", "TcpAttemptFails")),
    listener=ListenerSign(listening=False),
    narration=Narration(nstat=("TcpOutRsts", "TcpAttemptFails")),
)
