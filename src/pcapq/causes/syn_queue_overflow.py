"""Half-open requests filled the listener's SYN queue while other clients' SYNs were dropped."""

from __future__ import annotations

from pcapq.causes.cause import Always, CounterSigns, EpisodeCause, ListenerSign, Narration, SynDropped
from pcapq.causes.context import UNSEEN, EpisodeContext, checks_failed, checks_held, plural, series_frame
from pcapq.finding import Finding

# Half-open requests that point to a full SYN queue: a small backlog (net.ipv4.tcp_max_syn_backlog,
# or the listen backlog) fills with a handful.
HALF_OPEN_MIN = 3


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(reason=(
    f"the rule already asks for {HALF_OPEN_MIN} half-open requests and a dropped SYN: a full SYN queue drops every "
    "connect that arrives while it is"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    if ctx.count(all_of=["queue_sign"], claimed=True):
        return None
    # A handshake never completed needs what followed (UNSEEN); a SYN unanswered before its re-send
    # only the server's direction.
    half_open = ctx.count(all_of=["half_open"], none_of=list(UNSEEN))
    unanswered = ctx.select(all_of=["syn_unanswered"], none_of=["silent_host", "one_way"])
    if half_open < HALF_OPEN_MIN or not unanswered:
        return None
    # SYNs that got nothing and were never sent again belong to the same flood.
    silent = ctx.select(all_of=["one_syn", "never_connected"], none_of=["silent_host", *UNSEEN])
    involved = ctx.union(ctx.union(ctx.select(all_of=["half_open"], none_of=["silent_host", *UNSEEN]), unanswered), silent)
    # Two capture points aligned: only the connections whose SYNs and ACKs reached the server's point.
    involved, between = ctx.between_points(involved, "reached_server_point")
    involved, answered = ctx.between_points(involved, "synack_reached_client_point")
    between += answered
    unanswered, _ = ctx.between_points(unanswered, "reached_server_point")
    unanswered, _ = ctx.between_points(unanswered, "synack_reached_client_point")
    if not unanswered:
        return None
    weighed = between + ctx.checks(ctx.union(ctx.select(all_of=["half_open"], none_of=["silent_host"]),
                                             ctx.select(all_of=["one_syn", "never_connected"], none_of=["silent_host"])), "nothing_followed")
    reason = (
        f"{plural(half_open, 'half-open request')} (SYN-ACK sent, handshake never completed) held the SYN "
        f"queue while {plural(len(unanswered), 'other client')}'s SYNs went unanswered and were sent again"
        + checks_failed(weighed)
    )
    evidence = [e for c in ctx.examples(unanswered) for e in series_frame(c, "syn", "SYN sent again, unanswered")]
    half = ctx.select(all_of=["half_open"], none_of=list(UNSEEN))
    evidence += [e for c in ctx.examples(half) for e in series_frame(c, "synack", "SYN-ACK sent again, never answered")]
    ctx.claim(involved)
    return ctx.finding(CAUSE, involved, 0.8, reason, evidence, rests_on=[
        f"{plural(half_open, 'request')} the server held half-open (its SYN-ACK, no ACK back)",
        f"{plural(len(unanswered), 'SYN')} unanswered in the same episode",
        *checks_held(weighed),
    ], checks=weighed)


CAUSE = EpisodeCause(
    slug="syn_queue_overflow",
    title="SYN queue overflow",
    phrase="a SYN queue overflow",
    advice=(
        "Half-open requests fill the SYN queue. Turn on net.ipv4.tcp_syncookies=1, raise "
        "net.ipv4.tcp_max_syn_backlog and the listen backlog, and find who sends SYNs that are "
        "never completed."
    ),
    scope="episode",
    precedence=30,
    rule=rule,
    materiality=MATERIALITY,
    evidence=f"at least {HALF_OPEN_MIN} half-open requests (the server's SYN-ACK, never answered) and at least one other client's SYN unanswered",
    exclusions=(
        "a sign of a full accept queue in the episode (that finding comes first)",
        "a host that never sent a packet",
        "a capture that misses the server's direction, or cut the flow where the handshake would complete (checks "
        "both_directions_seen, flow_not_trimmed)",
    ),
    disproved_by=("TcpExtTCPReqQFullDrop and TcpExtListenDrops unchanged (`nstat -az` on the server)",),
    proxy_log=("timed_out",),
    confidence="0.8",
    kernel="Linux v6.6 net/ipv4/tcp_input.c: tcp_conn_request(): inet_csk_reqsk_queue_is_full()",
    counters=CounterSigns(rise=("TcpExtTCPReqQFullDrop", "TcpExtTCPReqQFullDoCookies", "TcpExtSyncookiesSent"),
                          none_rose="the SYN queue never filled"),
    listener=ListenerSign(listening=True),
    narration=Narration(
        nstat=("TcpExtTCPReqQFullDrop", "TcpExtTCPReqQFullDoCookies", "TcpExtListenDrops"),
        syn_dropped=SynDropped(
            why=("No SYN-ACK came: the listener dropped the SYN because its SYN queue was full and "
                 "net.ipv4.tcp_syncookies is 0 (tcp_conn_request(): inet_csk_reqsk_queue_is_full(), counted in "
                 "TcpExtTCPReqQFullDrop). The client's SYN timer fired."),
            queue="SYN queue: full of half-open requests, so the SYN was dropped.",
        ),
    ),
)
