"""The client stopped waiting before its kernel would have: a connect or read timeout in the
application, with no request the server had taken."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Connections, EpisodeCause
from pcapq.causes.context import UNSEEN, EpisodeContext, checks_failed, checks_held, frame, plural, reset_frame
from pcapq.finding import Evidence, Finding

if TYPE_CHECKING:
    from pcapq._core import Mark, _LeanConnection

NOT_A_CLIENT: list[Mark] = ["scan_probe", "synack_ignored", "rst_unprovoked", "stray_ack_reset", "request_acked", "icmp_answered"]


def gave_up_evidence(c: _LeanConnection) -> list[Evidence]:
    """The client's RST; without one, if it never connected, its last SYN."""
    if c["reset"]:
        return reset_frame(c, "the client's RST")
    if c["completed"]:
        return []
    syn = next((s for s in c["series"] if s.kind == "syn"), None)
    if syn:
        return [frame(syn.last.file, syn.last.frame, f"the client's last SYN, none after it (connection {c['id']})")]
    return [frame(c["first_file"], c["first_frame"], f"the client's only SYN, none after it (connection {c['id']})")]


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two clients giving up among many served are those clients' own short timeouts; three are a pattern; a "
    "fifth of the capture's connections or more is a failure rate no service lives with, however few they are"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    # Whether the client gave up needs what the server sent, which the capture may miss (UNSEEN).
    impatient = ctx.select(any_of=["abandoned", "reset_by_client"], none_of=[*NOT_A_CLIENT, *UNSEEN])
    if not impatient:
        return None
    weighed = ctx.checks(ctx.select(any_of=["abandoned", "reset_by_client"], none_of=NOT_A_CLIENT), "nothing_followed")
    reason = f"{plural(len(impatient), 'client')} stopped before their kernel would have (a connect or read timeout)"
    reason += checks_failed(weighed)
    evidence = [e for c in ctx.examples(impatient) for e in gave_up_evidence(c)]
    ctx.claim(impatient)
    return ctx.finding(CAUSE, impatient, 0.7, reason, evidence, rests_on=[
        f"{plural(len(impatient), 'connection')} ended by the client (FIN or RST, or its SYNs stopped) with retries left",
        *checks_held(weighed),
    ], checks=weighed)


CAUSE = EpisodeCause(
    slug="client_gave_up",
    title="Clients gave up",
    phrase="clients giving up",
    advice=(
        "The client stopped waiting before its kernel would have: its connect or read timeout "
        "(nginx proxy_connect_timeout, proxy_read_timeout) is shorter than the server needed."
    ),
    scope="episode",
    precedence=70,
    rule=rule,
    materiality=MATERIALITY,
    evidence="the client closed, reset or stopped re-sending its SYN while its kernel still had retries left",
    exclusions=(
        "a source that ignored the server's SYN-ACK (spoofed or scanning)",
        "an RST before anything of the server was seen (backscatter, or a one-way capture)",
        "a request the server had acknowledged (that is a slow server, or an answered exchange)",
        "a scanner's probes",
        "a client RST answering an ACK that came instead of a SYN-ACK (a 4-tuple still in TIME-WAIT)",
        "connections an ICMP error answered (the ICMP findings take them)",
        "a capture that misses the server's direction, or cut the flow where the client's next packet would follow "
        "(checks both_directions_seen, flow_not_trimmed)",
    ),
    disproved_by=("the proxy's error log without connect or read timeouts at those times",),
    proxy_log=("client_gone",),
    confidence="0.7",
    kernel="Linux v6.6 net/ipv4/tcp_timer.c: tcp_write_timeout() (when the kernel itself would have given up)",
)
