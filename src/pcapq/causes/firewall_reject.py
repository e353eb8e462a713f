"""A filter on the way, or on the server's host, answered with ICMP administratively prohibited."""

from __future__ import annotations

from pcapq.causes.cause import Connections, EpisodeCause
from pcapq.causes.context import EpisodeContext
from pcapq.causes.icmp_words import EXCLUSIONS, KERNEL, icmp_rule
from pcapq.finding import Finding


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two connects a filter rejects among many served are a stray destination the filter is there for; "
    "three are a rule that blocks the upstream; a fifth of the capture's connections or more is a failure rate no "
    "service lives with, however few they are"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    return icmp_rule(ctx, CAUSE, "icmp_prohibited", 'a packet filter there rejects them (a reject rule, or a prohibit route)', 0.9)


CAUSE = EpisodeCause(
    slug="firewall_reject",
    title='Firewall rejecting',
    phrase='a firewall rejecting the connections',
    advice=(
        "A filter answers the proxy's packets with ICMP administratively prohibited. On the address that sent the errors, list the rules (`nft list ruleset`, `iptables -S`, `ip route show type prohibit`) and allow the proxy's address to the upstream port, or fix the security group."
    ),
    scope="episode",
    precedence=5,
    rule=rule,
    materiality=MATERIALITY,
    evidence='an ICMP error of class prohibited (IPv4 type 3 code 9, 10, 13, 14, 15; ICMPv6 type 1 code 1, 5, 6) quoting a packet of the connection',
    exclusions=EXCLUSIONS,
    disproved_by=("a capture without those ICMP errors at the same times; the filter's counters (`nft list ruleset` shows counters on the reject rule)",),
    proxy_log=("no_route_to_host",),
    confidence="0.9 when the error ended the connect (no SYN-ACK, no SYN after it); 0.8 otherwise",
    kernel=KERNEL,
)
