"""Packets lost on the path between proxy and server, with loss evidence of their own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from pcapq.causes.cause import CounterSigns, EpisodeCause, Narration, Resends
from pcapq.causes.context import UNSEEN, EpisodeContext, checks_failed, checks_held, plural, series_frame
from pcapq.finding import Finding

if TYPE_CHECKING:
    from pcapq._core import Mark, Selection
    from pcapq.finding import Weighed

# What the path cannot have lost, or what another finding explains.
NOT_LOSS: list[Mark] = ["queue_sign", "in_queue_window", "refused", "rejected", "silent_host", "scan_probe", "loopback",
                        "stray_ack_reset", "icmp_answered", "mtu_black_hole", "pmtu_discovered", "reordering"]
GAVE_UP: list[Mark] = ["abandoned", "reset_by_client"]
# What a packet that vanished between two aligned capture points cannot overrule: the queue's
# marks it can (what made the queue look full may be this very loss: a request that vanished
# looks unacknowledged).
NEVER_LOSS: list[Mark] = [m for m in NOT_LOSS if m not in ("queue_sign", "in_queue_window")]

# When a finding earns a panel (docs/diagnosis.md, "Materiality"). No count of failed connections:
# those that gave up after their loss are left unclaimed for the give-up findings, which judge them
# by their count.
MATERIALITY = Resends(share=0.2, rate=0.01, at_least=3, reason=(
    "users feel a lost packet when it fails the connection or costs a timer (Linux's minimum RTO, 200 ms, or more: "
    "tcp_retransmit_timer()); a fast retransmit costs a round trip nobody notices, whatever its share of a short "
    "exchange. At 1% loss TCP carries at most about 12 segments per round trip (Mathis et al. 1997: rate ~ 1.22 MSS "
    "/ (RTT sqrt(loss)), 1.4 Mbit/s at 100 ms), where healthy paths lose well under that; loss that fails or delays "
    "a fifth of the capture's connections or more is no stray among many, however few they are"
))


def _resends(ctx: EpisodeContext, not_loss: Sequence[Mark]) -> Selection:
    # Data re-sent, or a SYN re-sent; a request re-sent into a connection whose handshake the capture
    # did not show proves nothing (a capture that starts inside an accept-queue overflow looks so).
    # A SYN re-sent only because a slow path outran its timer is no loss: both first packets
    # arrived (syn_resend_spurious).
    resent = ctx.union(ctx.select(all_of=["data_retransmitted"], none_of=not_loss),
                       ctx.select(all_of=["syn_retransmitted"], none_of=[*not_loss, "syn_resend_spurious"]))
    # A request left unacknowledged rests on what followed, in the server's direction (UNSEEN).
    return ctx.union(resent, ctx.select(all_of=["request_unacked"], none_of=[*not_loss, "partial", *UNSEEN]))


def _lost(ctx: EpisodeContext, not_loss: Sequence[Mark], never_loss: Sequence[Mark]) -> tuple[Selection, list[Weighed]]:
    """The re-sends loss explains, and the two-point check's entry: with two capture points
    aligned, only the connections that lost a packet between them, and all of those but the
    `never_loss` ones (pcapq.causes.between_points)."""
    lost = ctx.union(_resends(ctx, not_loss), ctx.vanished_among(_resends(ctx, never_loss)))
    return ctx.between_points(lost, "vanished_between_points")


def rule(ctx: EpisodeContext) -> Finding | None:
    lost, between = _lost(ctx, NOT_LOSS, NEVER_LOSS)
    if not lost:
        return None
    data = ctx.count(any_of=["data_retransmitted", "request_unacked"], none_of=NOT_LOSS)
    syns = ctx.count(all_of=["syn_retransmitted"], none_of=NOT_LOSS + ["data_retransmitted", "request_unacked", "syn_resend_spurious"])
    # A SYN sent again after the server's SYN-ACK: that SYN-ACK was lost on the way.
    lost_synacks = ctx.count(all_of=["syn_retransmitted"], none_of=NOT_LOSS + ["syn_unanswered", "syn_resend_spurious"])
    confidence = 0.6 if data or lost_synacks else 0.5
    reason = f"{plural(len(lost), 'connection')} re-sent data or handshake packets with no sign of a full listen queue"
    if not data and not lost_synacks:
        reason += " (unanswered SYNs only: one or two clients' SYNs cannot tell the path from a busy listener)"
    two_points = ctx.capture.two_points
    if two_points is not None and between and between[0]["held"]:
        # Seen leaving one capture point and never reaching the other: the path between lost them.
        confidence = 0.9
        reason = (f"{plural(len(lost), 'connection')} re-sent packets that vanished between this capture point and "
                  f"{two_points.other}: the path between the two lost them")
        swallowed = len(set(lost.ids) & two_points.swallowed)
        if swallowed:
            reason += (f"; every packet of {plural(swallowed, 'connection')} vanished and {two_points.other} never saw "
                       f"{'it' if swallowed == 1 else 'them'}: something between the points swallowed every try (a "
                       "firewall's drop rule, or conntrack), where random loss spares some")
    evidence = []
    for c in ctx.examples(lost):
        evidence += series_frame(c, "data", "data sent again") or series_frame(c, "syn", "SYN sent again")
    rests_on = []
    if data:
        rests_on.append(f"{plural(data, 'connection')} with data re-sent outside any queue-full window")
    if lost_synacks:
        rests_on.append(f"{plural(lost_synacks, 'SYN')} sent again after the server's SYN-ACK: the SYN-ACK was lost")
    if syns - lost_synacks:
        rests_on.append(f"{plural(syns - lost_synacks, 'SYN')} sent again with nothing back before the re-send")
    # Those that gave up stay for the give-up findings.
    ctx.claim(_lost(ctx, NOT_LOSS + GAVE_UP, NEVER_LOSS + GAVE_UP)[0])
    # Loss's predictions, over every re-send of the episode, also those explained otherwise.
    weighed = ctx.checks(ctx.select(any_of=["syn_retransmitted", "data_retransmitted", "request_unacked",
                                            "spurious_retransmission", "pmtu_discovered"], claimed=True), "resent")
    weighed = between + weighed
    rests_on += checks_held(weighed)
    reason += checks_failed(weighed)
    return ctx.finding(CAUSE, lost, confidence, reason, evidence, rests_on=rests_on, checks=weighed)



CAUSE = EpisodeCause(
    slug="network_loss",
    title="Packet loss on the path",
    phrase="packet loss on the path",
    advice=(
        "Packets were lost on the path, not in a listen queue. Look at interface errors and drops "
        "(`ip -s link`), conntrack (`conntrack -S`), and the links between proxy and server."
    ),
    scope="episode",
    precedence=50,
    rule=rule,
    materiality=MATERIALITY,
    evidence="data re-sent (either side), or a SYN re-sent, outside any window where the listener's queue was full",
    exclusions=(
        "re-sends inside a window where the same listener showed a full accept queue",
        "SYNs re-sent after an RST (a closed port)",
        "duplicate frames (span ports, `-i any`): not re-sends",
        "TCP Fast Open data re-sent after the server took only the SYN (RFC 7413 §4.2)",
        "a request re-sent in a connection whose handshake the capture missed",
        "loopback: there is no path",
        "a SYN re-sent after the client reset an ACK that came instead of a SYN-ACK (a 4-tuple in TIME-WAIT)",
        "a host that never sent a packet (down or filtered)",
        "packets an ICMP error answered, and full-size segments lost to a path MTU black hole (those findings take them)",
        "segments re-sent smaller after an ICMP fragmentation-needed / packet-too-big error: path MTU discovery working "
        "(RFC 1191), not loss",
        "segments re-sent once at a listener where most re-sends were shown spurious (D-SACK): reordering takes them",
    ),
    disproved_by=("interface and conntrack counters that did not move (`ip -s link`, `conntrack -S`)",),
    confidence="0.6 with data re-sent or a lost SYN-ACK; 0.5 with unanswered SYNs only",
    kernel="Linux v6.6 net/ipv4/tcp_timer.c: tcp_retransmit_timer(); RFC 6298 §5",
    counters=CounterSigns(rise=("TcpExtTCPTimeouts", "TcpRetransSegs", "TcpExtTCPSynRetrans")),
    narration=Narration(nstat=("TcpRetransSegs", "TcpExtTCPFastRetrans", "TcpExtTCPTimeouts")),
)
