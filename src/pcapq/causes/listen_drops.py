"""Several clients' SYNs went unanswered while the server answered others: its listener dropped
them, or something on the way did; the capture alone cannot say which."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Always, CounterSigns, EpisodeCause, ListenerSign, Narration, SynDropped
from pcapq.causes.context import EpisodeContext, checks_failed, checks_held, plural, series_frame
from pcapq.causes.syns_filtered import from_listen_drops
from pcapq.endpoint import parse
from pcapq.finding import Finding

if TYPE_CHECKING:
    from pcapq._core import Mark

# How many clients' SYNs must go unanswered together to blame the listener, not the path.
LISTEN_DROP_MIN = 3


# How `pcapq explain` tells a SYN the listener dropped, for this cause and accept_queue_overflow.
LISTENER_DROPPED_SYNS = Narration(
    nstat=("TcpExtListenOverflows", "TcpExtListenDrops"),
    syn_dropped=SynDropped(
        why=("No SYN-ACK came: the listener dropped the SYN because its accept queue was full "
             "(tcp_conn_request(): sk_acceptq_is_full(), counted in TcpExtListenOverflows). A listener "
             "whose application does not accept() fast enough refuses new handshakes silently."),
        queue="accept queue: full, so new SYNs are dropped.",
    ),
)


def cleared_by_counters(f: Finding, unchanged: list[str]) -> None:
    """TcpExtListenDrops flat: the listener dropped none of the SYNs, something before it did."""
    from_listen_drops(f, unchanged)


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(reason=(
    f"the rule already asks for {LISTEN_DROP_MIN} clients' SYNs dropped while others were answered: a listener "
    "(or a filter) dropping connects delays or fails every client it drops"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    not_a_listener: list[Mark] = ["silent_host", "scan_probe", "icmp_answered"]
    # No SYN-ACK before the re-send needs the server's direction; a capture cut after the re-sends
    # takes nothing from it.
    unanswered = ctx.select(all_of=["syn_unanswered"], none_of=not_a_listener + ["one_way"])
    # Two capture points aligned: only the SYNs that reached the server's point.
    unanswered, between = ctx.between_points(unanswered, "reached_server_point")
    unanswered, answered = ctx.between_points(unanswered, "synack_reached_client_point")
    between += answered
    if len(unanswered) < LISTEN_DROP_MIN:
        return None
    weighed = between + ctx.checks(ctx.select(all_of=["syn_unanswered"], none_of=not_a_listener), "unanswered")
    loopback = ctx.count(all_of=["syn_unanswered", "loopback"]) == len(unanswered)
    stats = ctx.capture.server(ctx.server)
    served = stats is not None and (stats["answered"] or stats["outcomes"]["completed"] or stats["outcomes"]["open"])
    # Not silent_host: the address sent packets, on another port or as a client of its own.
    others = f"{ctx.server} answered others" if served else f"{parse(ctx.server).ip} was up and sending other packets"
    reason = (
        f"{plural(len(unanswered), 'client')}' SYNs went unanswered and were sent again on the backoff while "
        f"{others}"
        + (": on one host (loopback) no path can lose them, so the listener or a local filter did"
           if loopback else
           ": the listener dropped them (a full SYN or accept queue), or a firewall or conntrack on the way did")
        + "; the capture alone cannot tell which (nstat TcpExtListenDrops, nft or iptables counters and "
        "`conntrack -S` can)"
        + checks_failed(weighed)
    )
    evidence = [e for c in ctx.examples(unanswered) for e in series_frame(c, "syn", "SYN sent again, unanswered")]
    ctx.claim(unanswered)
    return ctx.finding(CAUSE, unanswered, 0.6, reason, evidence, rests_on=[
        f"{plural(len(unanswered), 'SYN')} re-sent with no SYN-ACK nor RST before the re-send",
        *checks_held(weighed),
    ], checks=weighed)


CAUSE = EpisodeCause(
    slug="listen_drops",
    title="SYNs dropped by the listener",
    phrase="SYNs dropped by the listener",
    advice=(
        "The server, or something in front of it, dropped SYNs. On the server, `nstat -az TcpExtListenDrops "
        "TcpExtListenOverflows TcpExtTCPReqQFullDrop` and `ss -lnt` (Recv-Q against Send-Q) say whether the "
        "listener did and which queue; `nft list ruleset` counters and `conntrack -S` (drop, insert_failed) "
        "say whether a firewall or conntrack did."
    ),
    scope="episode",
    precedence=40,
    rule=rule,
    materiality=MATERIALITY,
    evidence=f"at least {LISTEN_DROP_MIN} connections whose SYN was re-sent with no SYN-ACK nor RST before the re-send (`syn_unanswered`)",
    exclusions=(
        "SYNs re-sent after the server's RST (a closed port, as Windows retries)",
        "a host that never sent a packet in the capture (down, or filtered)",
        "a scanner's probes",
        "SYNs in a window where the listener's accept queue was full (that finding takes them)",
        "connections an ICMP error answered (the ICMP findings take them)",
    ),
    disproved_by=(
        "TcpExtListenDrops unchanged over the capture: then not the listener, but a firewall or conntrack",
    ),
    proxy_log=("timed_out",),
    confidence="0.6: the capture cannot tell the listener from a firewall",
    kernel="Linux v6.6 net/ipv4/tcp_input.c: tcp_conn_request() (drops counted by tcp_listendrop())",
    counters=CounterSigns(rise=("TcpExtListenDrops",), cleared=cleared_by_counters,
                          cleared_says="the listener dropped no SYN, so a firewall or conntrack did: the finding becomes "
                                       "`syns_filtered`"),
    listener=ListenerSign(listening=True),
    narration=LISTENER_DROPPED_SYNS,
)
