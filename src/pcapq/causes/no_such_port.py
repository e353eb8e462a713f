"""ICMP port unreachable answered TCP: iptables' default REJECT, or nft `reject` without a type."""

from __future__ import annotations

from pcapq.causes.cause import Connections, EpisodeCause
from pcapq.causes.context import EpisodeContext
from pcapq.causes.icmp_words import EXCLUSIONS, KERNEL, icmp_rule
from pcapq.finding import Finding


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Connections(at_least=3, share=0.2, reason=(
    "one or two connects answered port unreachable among many served are a stray client; three are a reject rule "
    "or a port nobody listens on; a fifth of the capture's connections or more is a failure rate no service lives "
    "with, however few they are"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    return icmp_rule(ctx, CAUSE, "icmp_port_unreachable", 'nothing listens there, and the host (or a reject rule with port-unreachable) said so with ICMP instead of an RST', 0.85)


CAUSE = EpisodeCause(
    slug="no_such_port",
    title='Port unreachable (ICMP)',
    phrase='a port answered unreachable by ICMP',
    advice=(
        "The host answered with ICMP port unreachable, which a TCP stack does not send for a closed port (it sends an RST): a firewall rule `reject with icmp port-unreachable` (iptables' default REJECT) is answering. List the rules on the sender (`nft list ruleset`, `iptables -S`), and check that the upstream listens (`ss -lnt`)."
    ),
    scope="episode",
    precedence=7,
    rule=rule,
    materiality=MATERIALITY,
    evidence='an ICMP port or protocol unreachable (IPv4 type 3 code 2 or 3, ICMPv6 type 1 code 4) quoting a packet of the connection',
    exclusions=EXCLUSIONS,
    disproved_by=('a listener on the port at that time and no reject rule on the sender',),
    proxy_log=("refused",),
    confidence="0.85 when the error ended the connect (no SYN-ACK, no SYN after it); 0.75 otherwise",
    kernel=KERNEL,
)
