"""A server address that sent no packet at all in the capture while clients' SYNs to it were
re-sent: a host that is down or unreachable, or a firewall that drops without a word."""

from __future__ import annotations

from pcapq.causes.cause import Connections, EpisodeCause
from pcapq.causes.context import EpisodeContext, checks_held, plural, series_frame
from pcapq.finding import Finding
from pcapq.endpoint import parse


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two connects to a silent address among many served are a stale or gone peer; three are an upstream "
    "that is down; a fifth of the capture's connections or more is a failure rate no service lives with, however "
    "few they are"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    # A real client's kernel sends its SYN again; a scanner's or a spoofer's does not.
    unanswered = ctx.select(all_of=["silent_host", "syn_retransmitted"], none_of=["scan_probe", "icmp_answered"])
    if not unanswered:
        return None
    address = parse(ctx.server).ip
    reason = (
        f"{address} sent no packet at all in the capture while {plural(len(unanswered), 'connection')}' SYNs to "
        f"{ctx.server} were sent again on the backoff: the host is down or unreachable, or a firewall drops the "
        "SYNs without a word (or the capture sees only one direction)"
    )
    evidence = [e for c in ctx.examples(unanswered) for e in series_frame(c, "syn", "SYN sent again, nothing came back")]
    involved = ctx.select(all_of=["silent_host"], none_of=["scan_probe", "icmp_answered"])
    ctx.claim(involved)
    weighed = ctx.checks(involved, "unanswered")
    return ctx.finding(CAUSE, involved, 0.6, reason, evidence, rests_on=[
        f"no packet from {address} in the whole capture",
        f"{plural(len(unanswered), 'SYN')} sent again",
        *checks_held(weighed),
    ], checks=weighed)


CAUSE = EpisodeCause(
    slug="silent_host",
    title="No answer from the host",
    phrase="a host that never answered",
    advice=(
        "Nothing came back from the server's address at all. Check that the host is up and routed "
        "(`ping`, `ip route get ADDRESS` from the proxy), and look for a firewall that drops without "
        "answering (`nft list ruleset`, security groups). If the capture was taken where only one direction "
        "passes, capture on the proxy's interface instead."
    ),
    scope="episode",
    precedence=45,
    rule=rule,
    materiality=MATERIALITY,
    evidence="the server's address sent no packet in the whole capture, and a client re-sent its SYN",
    exclusions=("one-shot SYNs never re-sent (scanners, spoofed sources)", "connections an ICMP error answered (the ICMP findings take them)"),
    disproved_by=("a capture taken on both directions showing the host's answers",),
    proxy_log=("timed_out",),
    confidence="0.6: a down host, a silent firewall and a one-way capture look alike",
    kernel="Linux v6.6 net/ipv4/tcp_timer.c: tcp_retransmit_timer() re-sends the SYN on the backoff",
)
