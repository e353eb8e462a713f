"""A client reused a 4-tuple still in TIME-WAIT at the server, and its SYN met the old
connection's ACK."""

from __future__ import annotations

from pcapq.causes.cause import Connections, EpisodeCause
from pcapq.causes.context import EpisodeContext, frame, plural
from pcapq.finding import Finding

TIME_WAIT_S = 60


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two TIME-WAIT collisions cost a SYN re-send each; three show a port range too tight for the rate of "
    "connections; a fifth of the capture's connections or more is a failure rate no service lives with, however "
    "few they are"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    reused = ctx.select(all_of=["reused_in_time_wait"], any_of=["stray_ack_reset", "syn_unanswered"],
                        none_of=["refused", "rejected", "scan_probe"], claimed=True)
    if not reused:
        return None
    reason = (
        f"{plural(len(reused), 'failing connection')} reused the 4-tuple of an earlier connection within "
        f"TIME-WAIT's {TIME_WAIT_S} s and had to send the SYN again"
    )
    evidence = []
    for c in ctx.examples(reused):
        evidence.append(frame(c["first_file"], c["first_frame"], f"SYN on a reused 4-tuple (connection {c['id']})"))
        r = c["reset"]
        if r and r["from"] == "client" and r["answers"] == "ack" and r["answers_frame"]:
            f = r["answers_frame"]
            evidence.append(frame(f["file"], f["frame"], f"the old connection's ACK answering that SYN (connection {c['id']})"))
    ctx.claim(reused)
    return ctx.finding(CAUSE, reused, 0.5, reason, evidence, rests_on=[
        f"{plural(len(reused), 'SYN')} on a 4-tuple the server had closed first less than {TIME_WAIT_S} s before "
        "(its TIME-WAIT), answered late or by an ACK",
    ])


CAUSE = EpisodeCause(
    slug="port_reuse",
    title="4-tuple reused in TIME-WAIT",
    phrase="a 4-tuple reused while in TIME-WAIT",
    advice=(
        "A client reused a 4-tuple still in TIME-WAIT. Widen net.ipv4.ip_local_port_range, use "
        "keepalive connections to the upstream (nginx `keepalive`), or spread over more upstream addresses."
    ),
    scope="episode",
    precedence=80,
    rule=rule,
    materiality=MATERIALITY,
    evidence=(
        "a connection on the 4-tuple of one that the server closed first (no RST after) less than 60 s before, "
        "whose SYN met an ACK or went unanswered"
    ),
    exclusions=(
        "a SYN re-tried after the server's RST (a closed port: no TIME-WAIT follows an RST)",
        "a 4-tuple whose earlier connection the client closed first, or an RST ended: the server kept no TIME-WAIT",
    ),
    disproved_by=("net.ipv4.tcp_tw_reuse and timestamps on both sides, which let Linux take the SYN",),
    confidence="0.5",
    kernel="Linux v6.6 net/ipv4/tcp_minisocks.c: tcp_timewait_state_process()",
)
