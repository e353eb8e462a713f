"""A router answered with ICMP host or network unreachable: no route, or the host is down on its link."""

from __future__ import annotations

from pcapq.causes.cause import Connections, EpisodeCause
from pcapq.causes.context import EpisodeContext
from pcapq.causes.icmp_words import EXCLUSIONS, KERNEL, icmp_rule
from pcapq.finding import Finding


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two connects a router cannot route among many served are a stray or stale address (an IPv6 address "
    "tried first); three are an upstream that cannot be reached; a fifth of the capture's connections or more is "
    "a failure rate no service lives with, however few they are"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    return icmp_rule(ctx, CAUSE, "icmp_no_route", "a router (or the host's last hop) has no route, or the host did not answer ARP or neighbour discovery", 0.9)


CAUSE = EpisodeCause(
    slug="no_route",
    title='No route to the host',
    phrase='no route to the host',
    advice=(
        "A router says the upstream cannot be reached. Where the errors came from, check `ip route get UPSTREAM` and `ip neigh` (a FAILED neighbour entry: the host is down on its link); check the upstream's address in the proxy's configuration."
    ),
    scope="episode",
    precedence=6,
    rule=rule,
    materiality=MATERIALITY,
    evidence='an ICMP error of class no route (IPv4 type 3 code 0, 1, 5, 6, 7, 8, 11, 12; ICMPv6 type 1 code 0, 2, 3) quoting a packet of the connection',
    exclusions=EXCLUSIONS,
    disproved_by=('`ip route get` on the router that sent the errors showing a route at that time; the host answering on its link (`ip neigh` REACHABLE)',),
    proxy_log=("no_route_to_host",),
    confidence="0.9 when the error ended the connect (no SYN-ACK, no SYN after it); 0.8 otherwise",
    kernel=KERNEL,
)
