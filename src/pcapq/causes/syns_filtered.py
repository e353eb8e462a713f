"""SYNs dropped before the listener: a listener-drops finding that the server's own counters clear
(TcpExtListenDrops unchanged over the capture), so a firewall or conntrack on the way dropped them.
Found only with `--nstat` (`pcapq.evidence`): the capture alone cannot tell the two apart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Always, CaptureCause
from pcapq.finding import Finding

if TYPE_CHECKING:
    from pcapq.causes.context import CaptureContext


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(reason=(
    "made from a listener-drops finding (clients' SYNs dropped while others were answered) that "
    "the server's counters clear: the same connects delayed or failed, by something else"
))


def no_capture_rule(ctx: CaptureContext) -> list[Finding]:
    """Nothing in a capture alone shows where a SYN was dropped: this finding comes from the counters."""
    return []


def from_listen_drops(f: Finding, unchanged: list[str]) -> None:
    """Turns listener-drops finding `f` into this cause: the counters in `unchanged` say the
    listener dropped none of the SYNs (Linux v6.6 net/ipv4/tcp_input.c: tcp_listendrop() counts
    every SYN a listener drops, whatever the queue)."""
    n = f.connection_count
    f.cause = CAUSE.slug
    f.advice = CAUSE.advice
    f.disproved_by = list(CAUSE.disproved_by)
    f.confidence = 0.75
    f.confidence_reason = (
        f"{n:,} client{'s' if n != 1 else ''}' SYNs went unanswered and were sent again on the backoff while "
        f"{f.server} answered others, and TcpExtListenDrops did not move on the server: its listener dropped none "
        "of them, so a firewall or conntrack before it did"
    )
    f.confirmed_by += [s + ": the listener dropped no SYN" for s in unchanged]


CAUSE = CaptureCause(
    slug="syns_filtered",
    title="SYNs dropped before the listener",
    phrase="SYNs dropped before the listener",
    advice=(
        "A firewall or conntrack in front of the server's listener dropped SYNs: its listener counted none. "
        "Look at the rules' counters on the server and on the way (`nft list ruleset`, `iptables -vnL`) and at "
        "`conntrack -S` (drop, insert_failed: a full conntrack table, net.netfilter.nf_conntrack_max)."
    ),
    scope="evidence",
    precedence=41,
    rule=no_capture_rule,
    materiality=MATERIALITY,
    evidence=(
        "a `listen_drops` finding (connections whose SYN was re-sent unanswered while the "
        "listener answered others) and the server's TcpExtListenDrops unchanged over the capture (read with --nstat)"
    ),
    exclusions=("TcpExtListenDrops moved: the listener dropped them (`listen_drops`)",),
    disproved_by=(
        "the firewall's and conntrack's counters unchanged over the capture (`nft list ruleset`, `conntrack -S`)",
        "nstat taken on another host or network namespace than the server's",
    ),
    proxy_log=("timed_out",),
    confidence="0.75: the counters clear the listener; the capture does not show which filter",
    kernel="Linux v6.6 net/ipv4/tcp_input.c: tcp_listendrop(), counted for every SYN a listener drops",
)
