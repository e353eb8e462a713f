"""What the ICMP causes share: which errors a connection got, who sent them, what a Linux
connect() made of them and what nginx then logged. Not a cause (the registry does not list it)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Literal, Sequence, cast

from pcapq._core import VOCABULARY
from pcapq.causes.cause import Cause
from pcapq.causes.context import EpisodeContext, frame, plural
from pcapq.finding import Finding
from pcapq.endpoint import parse

if TYPE_CHECKING:
    from pcapq._core import IcmpKind, _Icmp, _LeanConnection

# ICMP kind slugs by the fact the core marks them with (src/detect/facts.rs: icmp_fact()).
IcmpFact = Literal["icmp_prohibited", "icmp_no_route", "icmp_port_unreachable", "icmp_ttl_exceeded"]
# The keys are IcmpFact's (tests/test_vocabulary.py): the cast holds.
CLASSES: dict[IcmpFact, set[IcmpKind]] = {
    cast("IcmpFact", fact): set(kinds) for fact, kinds in VOCABULARY["icmp_facts"].items()
}

# errno -> key of pcapq.causes.proxy_log.LINES (nginx logs strerror() of what connect() returned).
ERRNO_LINES = {111: "refused", 113: "no_route_to_host", 101: "net_unreachable", 13: "permission_denied",
               112: "host_down", 92: "protocol_not_available", 95: "not_supported", 64: "not_on_network",
               71: "protocol_error"}

# The packet an error quotes, by its role (the core's packet_roles); the timeline's ICMP rows say it too.
ROLES = {"syn": "SYN", "synack": "SYN-ACK", "handshake_ack": "handshake ACK", "ack": "ACK", "data": "data",
         "retransmit": "re-sent segment", "fin": "FIN", "rst": "RST"}

# What every ICMP cause rests on in the kernel.
KERNEL = (
    "Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_err() and net/ipv6/tcp_ipv6.c: tcp_v6_err(): in SYN-SENT an "
    "unreachable or time-exceeded error ends connect() at once (errno from net/ipv4/icmp.c: icmp_err_convert[], "
    "net/ipv6/icmp.c: icmpv6_err_convert()); later in a connection it is soft: the kernel re-sends and reports it "
    "at the timeout"
)


def answers(c: _LeanConnection, fact: IcmpFact) -> list[_Icmp]:
    """The connection's ICMP answers of one class."""
    return [a for a in c.get("icmp") or () if a["kind"] in CLASSES[fact]]


def icmp_rule(ctx: EpisodeContext, cause: Cause, fact: IcmpFact, what: str, confidence: float) -> Finding | None:
    """One finding for the connections the errors of `fact` answered: who sent them, which kinds,
    how many connects they ended, and what the proxy logged."""
    hit = ctx.select(all_of=[fact], none_of=["scan_probe"])
    if not hit:
        return None
    ended = ctx.count(all_of=[fact, "unreachable"])
    examples = ctx.examples(hit)
    seen = [a for c in examples for a in answers(c, fact)]
    senders = Counter(a["sender"] for a in seen)
    kinds = Counter(a["kind"].replace("_", " ") for a in seen)
    server_ip = parse(ctx.server).ip
    who = ", ".join(
        f"{s} (the server's own host)" if s == server_ip else s for s, _ in senders.most_common(3)
    ) or "the path"
    reason = (
        f"ICMP {' / '.join(k for k, _ in kinds.most_common(3)) or 'errors'} from {who} answered "
        f"{plural(len(hit), 'connection')}' packets to {ctx.server}: {what}"
    )
    if ended:
        reason += f"; {plural(ended, 'connect')} ended by it at once (no SYN-ACK, no SYN after the error)"
    retried = ctx.count(all_of=[fact, "syn_retransmitted"])
    if retried:
        reason += (f"; {plural(retried, 'client')} sent the SYN again after an error (Windows does; Linux too when the "
                   "error came back while connect() still held the socket: it is then only recorded, and the next "
                   "SYN's error ends the connect)")
    evidence = []
    for c in examples:
        a = next(iter(answers(c, fact)), None)
        if a:
            role = ROLES.get(a["answers_role"] or "", "packet")
            evidence.append(frame(a["file"], a["frame"], f"ICMP {a['kind'].replace('_', ' ')} from {a['sender']} "
                                  f"answering the {a['answers']}'s {role} (connection {c['id']})"))
    errnos = Counter(a["errno"] for a in seen if a["answers"] == "client" and a["errno"] is not None)
    keys = [ERRNO_LINES[e] for e, _ in errnos.most_common() if e in ERRNO_LINES] or None
    rests_on = [f"{plural(len(seen), 'ICMP error')} quoting the connections' own packets (ports and sequence number)"]
    if ended:
        rests_on.append(f"{plural(ended, 'connection')} with no SYN-ACK and no SYN after the error")
    ctx.claim(hit)
    details = {"senders": dict(senders), "kinds": {k.replace(" ", "_"): n for k, n in kinds.items()},
               "connects_ended": ended}
    return ctx.finding(cause, hit, confidence if ended else confidence - 0.1, reason, evidence,
                       rests_on=rests_on, details=details, proxy_log=keys)


EXCLUSIONS: Sequence[str] = (
    "an error quoting a sequence number outside the connection's window (Linux ignores it too: "
    "TcpExtOutOfWindowIcmps)",
    "an error quoting fewer than 8 bytes of TCP (Linux reads none)",
    "a scanner's probes",
)
