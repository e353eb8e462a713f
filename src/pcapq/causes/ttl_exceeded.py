"""A router answered with ICMP time exceeded: a routing loop, or a TTL too low for the path."""

from __future__ import annotations

from pcapq.causes.cause import Connections, EpisodeCause
from pcapq.causes.context import EpisodeContext
from pcapq.causes.icmp_words import EXCLUSIONS, KERNEL, icmp_rule
from pcapq.finding import Finding


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two connections whose packets' TTL ran out among many delivered are a route flapping for a moment; "
    "three are a loop or a path longer than the TTL; a fifth of the capture's connections or more is a failure "
    "rate no service lives with, however few they are"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    return icmp_rule(ctx, CAUSE, "icmp_ttl_exceeded", "the packets' TTL (hop limit) ran out: a routing loop, or a path longer than the TTL", 0.85)


CAUSE = EpisodeCause(
    slug="ttl_exceeded",
    title='TTL exceeded on the way',
    phrase='packets whose TTL ran out on the way',
    advice=(
        'A router dropped the packets because their TTL (hop limit) ran out: look for a routing loop (`traceroute -T -p PORT UPSTREAM` from the proxy, `ip route get` on the router that answered) and for a low `net.ipv4.ip_default_ttl` / `net.ipv6.conf.all.hop_limit` on the proxy.'
    ),
    scope="episode",
    precedence=8,
    rule=rule,
    materiality=MATERIALITY,
    evidence='an ICMP time exceeded (IPv4 type 11, ICMPv6 type 3) quoting a packet of the connection',
    exclusions=EXCLUSIONS,
    disproved_by=('a traceroute at that time reaching the upstream in fewer hops than the TTL',),
    proxy_log=("no_route_to_host",),
    confidence="0.85 when the error ended the connect (no SYN-ACK, no SYN after it); 0.75 otherwise",
    kernel=KERNEL,
)
