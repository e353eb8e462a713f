"""A path that reorders: data segments re-sent because the ones behind them arrived first, while
the originals were only late. Most of the listener's re-sends that can be checked were shown
spurious (D-SACK, or an acknowledgement before the re-send could have arrived), so the ones the
receiver did not report were probably spurious too: not loss."""

from __future__ import annotations

from pcapq.causes.cause import Always, EpisodeCause
from pcapq.causes.context import EpisodeContext, plural, series_frame
from pcapq.finding import Finding

# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(reason=(
    "a spurious re-send costs no one a wait: the original arrived, and Linux undoes the window it cut when the D-SACK "
    "comes (tcp_try_undo_dsack()); reordering matters only when connections failed or waited on it"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    hit = ctx.select(all_of=["reordering"])
    if not hit:
        return None
    stats = ctx.capture.server(ctx.server)
    resent = stats["resent_segments"] if stats else 0
    spurious = stats["spurious_resends"] if stats else 0
    share = f"{spurious:,} of {resent:,}" if resent else "most"
    reason = (
        f"{share} data segments re-sent at {ctx.server} were shown spurious: the receiver reported them received "
        "twice (D-SACK) or acknowledged them before the re-send could have arrived; "
        f"{plural(len(hit), 'connection')} re-sent segments once each with no such report, as a reordering path makes "
        "them (the segment held back, the ones behind it first), not loss"
    )
    evidence = [e for c in ctx.examples(hit) for e in series_frame(c, "data", "data sent again, the original probably late")]
    ctx.claim(hit)
    return ctx.finding(CAUSE, hit, 0.6, reason, evidence, rests_on=[
        f"{share} re-sent data segments shown spurious (D-SACK, RFC 2883 §4; or an ACK sooner than the round trip "
        "after the re-send)",
        "each segment of these connections re-sent once, none again by the timer",
    ], details={"resent_segments": resent, "spurious_resends": spurious})


CAUSE = EpisodeCause(
    slug="reordering",
    title="Reordering on the path",
    phrase="a path that reorders packets",
    advice=(
        "The path delivers packets out of order: the sender took late segments for lost and sent them again. "
        "Nothing was lost. Look for per-packet load balancing (ECMP without flow hashing, bonded links in "
        "round-robin mode) or a middlebox that queues some packets longer; Linux adapts its reordering window after "
        "a D-SACK (net.ipv4.tcp_recovery, RACK)."
    ),
    scope="episode",
    precedence=49,
    rule=rule,
    materiality=MATERIALITY,
    evidence=(
        "data segments each re-sent once and never again, at a listener where most re-sent segments (at least 3) were "
        "reported received twice (D-SACK) or acknowledged sooner than half the handshake's round trip after the re-send"
    ),
    exclusions=(
        "a segment re-sent twice or more (the timer's backoff: loss)",
        "a request the server never acknowledged",
        "a listener where fewer than half the re-sent segments were shown spurious (loss, and network_loss takes them)",
    ),
    disproved_by=("the interfaces' drop counters on the path (`ip -s link`) rising with the re-sends",),
    confidence="0.6: the re-sends no receiver reported are judged by the ones it did",
    kernel=(
        "RFC 2883 §4, RFC 3708 §3; Linux v6.6 net/ipv4/tcp_input.c: tcp_check_dsack() (TcpExtTCPDSACKRecv), "
        "net/ipv4/tcp_recovery.c: tcp_rack_advance()"
    ),
)
