"""A path MTU black hole: full-size segments never get through while smaller ones do, because a
link on the way has a smaller MTU and its "fragmentation needed" / "packet too big" answer is
dropped (or never sent) before it reaches the sender."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from pcapq.causes.cause import Always, EpisodeCause
from pcapq.causes.context import EpisodeContext, plural, series_frame
from pcapq.finding import Finding
from pcapq.endpoint import parse

if TYPE_CHECKING:
    from pcapq._core import Selection, _BlackHole, _Side

# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(reason=(
    "a path that cannot carry full-size packets stalls every connection that sends one: one stuck connection "
    "proves the path"
))


def rule(ctx: EpisodeContext) -> Finding | None:
    hit = ctx.select(all_of=["mtu_black_hole"], none_of=["scan_probe"])
    if not hit:
        return None
    examples = ctx.examples(hit)
    holes = sorted((h for h in (c["black_hole"] for c in examples) if h is not None), key=lambda h: h["len"])
    smallest = holes[0]["len"] if holes else 0
    mtus = Counter(h["mtu"] for h in holes if h["mtu"])
    with_icmp = sum(1 for h in holes if h["frag_needed"])
    sides = Counter(h["from"] for h in holes)
    v6 = parse(ctx.server).v6
    packet = holes[0]["ip_len"] if holes else 0
    # Seen from the receiver's side: the full-size segments never reached the capture point.
    vanished = [h for h in holes if h["vanished"] is not None]
    if vanished and len(vanished) == len(holes):
        return _vanished(ctx, hit, vanished, sides)
    reason = (
        f"{plural(len(hit), 'connection')} re-sent full-size segments ({smallest:,} bytes of payload, IP packets of "
        f"{packet:,} bytes) again and again, never acknowledged, while their smaller packets got through: "
        "a link on the way has a smaller MTU"
    )
    if mtus:
        mtu, _ = mtus.most_common(1)[0]
        reason += (f"; a router announced an MTU of {mtu:,} ({'packet too big' if v6 else 'fragmentation needed'}) "
                   "and the sender still did not send smaller: the error did not reach its kernel, or was ignored")
    elif not with_icmp:
        reason += "; no ICMP 'fragmentation needed' / 'packet too big' came back (dropped on the way, or never sent)"
    evidence = [e for c in examples for e in series_frame(c, "data", "full-size segment sent again, never acknowledged")]
    ctx.claim(hit)
    from_server = sides.get("server", 0) >= sides.get("client", 0)
    return ctx.finding(CAUSE, hit, 0.8 if with_icmp or len(hit) > 1 else 0.7, reason, evidence,
        rests_on=[f"segments of {smallest:,} bytes and more never acknowledged after {plural(2, 're-send')} or more",
                  "the peer acknowledged everything before them" + (
                      f"; {plural(with_icmp, 'ICMP too-big error')}" if with_icmp else "")],
        details={"size_threshold": smallest, "ip_packet_size": packet, "mtu": dict(mtus), "icmp_seen": with_icmp,
                 "from": dict(sides), "dont_fragment": True},
        proxy_log=["read_timeout"] if from_server else ["send_timeout"],
    )


def _vanished(ctx: EpisodeContext, hit: Selection, holes: list[_BlackHole], sides: Counter[_Side]) -> Finding:
    """The black hole from the receiver's side: bytes that never arrived before a later, smaller
    segment of the same sender did (its FIN, its RST as it gave up, a small tail)."""
    full = holes[0]["len"]
    lost = min(h["vanished"] or 0 for h in holes)
    through = max(h["largest_through"] or 0 for h in holes)
    reason = (
        f"{plural(len(hit), 'connection')} lost {lost:,} bytes or more on the way: a later packet of the sender's "
        "(its RST or FIN as it gave up, or a small segment) arrived with a sequence number past them, and they never "
        f"came, nor were acknowledged, for a second or more. The handshake allowed segments of {full:,} bytes; "
        + (f"none of the sender's larger than {through:,} got through" if through else
           "nothing of the sender's with a payload got through")
        + ": a link on the way has a smaller MTU and its 'fragmentation needed' / 'packet too big' never reached the "
        "sender"
    )
    examples = ctx.examples(hit)
    evidence = [e for c in examples for e in series_frame(c, "data", "full-size segment sent again, never acknowledged")]
    ctx.claim(hit)
    from_server = sides.get("server", 0) >= sides.get("client", 0)
    return ctx.finding(CAUSE, hit, 0.8 if len(hit) > 1 else 0.7, reason, evidence,
        rests_on=[f"{lost:,} bytes or more never arrived while a later packet of the same sender did",
                  f"full-size segments of {full:,} bytes of payload by the handshake's MSS; the largest payload that "
                  f"arrived: {through:,} bytes"],
        details={"size_threshold": full, "ip_packet_size": holes[0]["ip_len"], "mtu": {}, "icmp_seen": 0,
                 "from": dict(sides), "dont_fragment": True, "vanished": lost, "largest_through": through},
        proxy_log=["read_timeout"] if from_server else ["send_timeout"],
    )


CAUSE = EpisodeCause(
    slug="mtu_black_hole",
    title="Path MTU black hole",
    phrase="a path MTU black hole",
    advice=(
        "Find the link with the smaller MTU (`tracepath UPSTREAM` from the proxy, `ip link` on routers and tunnels) and "
        "let ICMP 'fragmentation needed' (type 3 code 4) and ICMPv6 'packet too big' (type 2) through every firewall on "
        "the way. Meanwhile clamp the MSS on the router (`nft add rule inet filter forward tcp flags syn tcp option "
        "maxseg size set rt mtu`), lower the route's MTU on the sender (`ip route change ... mtu 1400`), or turn on "
        "net.ipv4.tcp_mtu_probing=1 (RFC 4821 probing finds the size without ICMP)."
    ),
    scope="episode",
    precedence=9,
    rule=rule,
    materiality=MATERIALITY,
    evidence=(
        "a data segment of at least 1,200 bytes sent three times or more and never acknowledged, while the peer had "
        "acknowledged everything before it (smaller segments got through), or while an ICMP fragmentation-needed / "
        "packet-too-big error quoted it and it was not sent smaller; at the receiver, a segment (data, FIN, RST) past "
        "at least 1,200 bytes that never arrived nor were acknowledged for a second or more, after a handshake whose MSS "
        "allowed 1,200 bytes or more, with nothing of the sender's that large getting through"
    ),
    exclusions=(
        "an ICMP too-big error followed by smaller re-sends that got through: path MTU discovery working (RFC 1191, "
        "RFC 8201), not a failure",
        "segments that were finally acknowledged (loss, not a black hole)",
        "the first segment of a direction with nothing acknowledged before it and no ICMP error (nothing shows smaller "
        "packets got through)",
    ),
    disproved_by=("`ping -M do -s SIZE UPSTREAM` from the sender getting through at the stuck size",),
    confidence="0.8 with an ICMP too-big error or several connections; 0.7 with one connection and no error",
    kernel=(
        "RFC 1191 §4, RFC 8201 §4 (path MTU discovery); Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_mtu_reduced(); "
        "RFC 4821 (net.ipv4.tcp_mtu_probing)"
    ),
)
