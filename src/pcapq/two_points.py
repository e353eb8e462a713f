"""Two capture points, one story (docs/two-points.md): when `pcapq analyze` is given exactly two
capture points that saw the same connections (the proxy's side and the server's side), the core
aligns them packet for packet (`_core.align_points`, src/align), and this module turns what it
found into the JSON `paths` entry and the facts each point's causes read (`TwoPointFacts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Sequence, TypedDict

from pcapq import _core
from pcapq.points import PointAnalysis

if TYPE_CHECKING:
    from pcapq._core import _Path

# Fewer packets matched than this and the two points are taken to share nothing: two captures
# of unrelated hosts can agree on a packet or two by chance (an IP ID, sequence numbers and a
# length alike), not on ten.
MIN_MATCHED = 10


@dataclass(frozen=True)
class TwoPointFacts:
    """What aligning a capture point with another says of its connections, by their ids at
    this point."""

    other: str
    # "client" when this point is the nearer to the clients (the proxy's side), else "server".
    side: str
    # Connections the other point saw too.
    shared: frozenset[int] = field(default_factory=frozenset)
    # Connections with packets that vanished between the two points, either way.
    lost: frozenset[int] = field(default_factory=frozenset)
    # Connections a packet of whose client (a SYN, the handshake ACK, a request) vanished
    # between the two points: the path, not the server's kernel, kept it from the server.
    lost_to_server: frozenset[int] = field(default_factory=frozenset)
    # Connections the other point never saw although every packet of their client's was on
    # its way there: something between the points swallowed every try (a firewall; random
    # loss spares some).
    swallowed: frozenset[int] = field(default_factory=frozenset)
    # Connections whose server's SYN-ACK vanished between the points on its way to the client.
    synack_lost: frozenset[int] = field(default_factory=frozenset)
    # Connections a packet of whose server's vanished between the points on its way back.
    lost_to_client: frozenset[int] = field(default_factory=frozenset)
    # Connections with a packet only the farther point saw: it never passed the nearer one (a
    # capture drop there, or a route around it).
    missed_first: frozenset[int] = field(default_factory=frozenset)


@dataclass
class Aligned:
    """The alignment of two points: the JSON `paths` entry, and each point's facts by name."""

    entry: _Path
    facts: dict[str, TwoPointFacts]


def align(points: Sequence[PointAnalysis]) -> Aligned | None:
    """The alignment of two capture points, or None: not two points, standard input, two points
    that did not capture at the same time, or two that do not share connections. Raises
    _core.CaptureError."""
    if len(points) != 2 or any(f.path == "-" for p in points for f in p.point.files):
        return None
    a, b = points
    if not _overlap(a, b):
        # One taken well after the other ended: they cannot have seen the same packets,
        # however alike these look.
        return None
    entry, shared_a, shared_b = _core.align_points(
        a.point.paths, b.point.paths, (a.name, b.name), analyses=(a.analysis, b.analysis)
    )
    if entry["matched_packets"] < MIN_MATCHED:
        return None
    facts = {a.name: facts_of(entry, a.name, shared_a), b.name: facts_of(entry, b.name, shared_b)}
    return Aligned(entry, facts)


# Two points whose captures lie further apart than this are not aligned: not one moment seen
# twice, but two moments (two rings of one name pattern taken hours apart).
CLOCKS_APART_S = 300.0


def _span(p: PointAnalysis) -> tuple[float, float] | None:
    """The point's first and last packet times, if its files have any."""
    firsts = [f.first_time for f in p.point.files if f.first_time is not None]
    lasts = [f.last_time for f in p.point.files if f.last_time is not None]
    return (min(firsts), max(lasts)) if firsts and lasts else None


def _overlap(a: PointAnalysis, b: PointAnalysis) -> bool:
    """Whether the two points captured at the same time, by their own clocks give or take
    `CLOCKS_APART_S` (a host's clock may be off; a capture shifted on purpose is too)."""
    span_a, span_b = _span(a), _span(b)
    if span_a is None or span_b is None:
        return False
    return span_a[0] <= span_b[1] + CLOCKS_APART_S and span_b[0] <= span_a[1] + CLOCKS_APART_S


def facts_of(entry: _Path, name: str, shared: Sequence[int]) -> TwoPointFacts:
    """What the `paths` entry `entry` says of point `name`'s connections; `shared`: the ids of
    those the other point saw too. Only the packets lost between the points count; one that
    never passed the point it would have passed first (a capture drop there) proves nothing
    of the path."""
    lost: set[int] = set()
    to_server: set[int] = set()
    to_client: set[int] = set()
    swallowed: set[int] = set()
    synack_lost: set[int] = set()
    missed_first: set[int] = set()
    other = next(p for p in entry["points"] if p != name)
    for c in entry["connections"]:
        cid = c["ids"][name]
        if cid is not None and any(v["vanished"] == "before_first_point" for v in c["vanished"]):
            missed_first.add(cid)
        between = [v for v in c["vanished"] if v["vanished"] == "between_points"]
        if cid is None or not between:
            continue
        lost.add(cid)
        if any(v["direction"] == "server_to_client" for v in between):
            to_client.add(cid)
        if any(v["direction"] == "server_to_client" and v["flags"] == "S." for v in between):
            synack_lost.add(cid)
        if any(v["direction"] == "client_to_server" for v in between):
            to_server.add(cid)
            if c["client"][other] is None and all(v["direction"] == "client_to_server" for v in c["vanished"]):
                swallowed.add(cid)
    side = "client" if entry["client_side"] == name else "server"
    return TwoPointFacts(other, side, frozenset(shared) | frozenset(lost), frozenset(lost), frozenset(to_server), frozenset(swallowed),
                        frozenset(synack_lost), frozenset(to_client), frozenset(missed_first))


Verdict = Literal["lost_to_server", "lost_to_client", "lost_both_ways", "reached_server", "missed_first_point", "mixed"]


class BetweenPoints(TypedDict):
    """What two aligned points prove of a finding's connections (the JSON finding's
    `between_points`): how many cross both points, and of those, how many lost a packet
    on the path each way, how many had every packet reach the server's side, and how many had
    one only the farther point saw; `verdict` when one answer holds for all."""

    verdict: Verdict
    says: str
    connections: int
    lost_to_server: int
    lost_to_client: int
    reached_server: int
    missed_first_point: int


def between_points(facts: TwoPointFacts, ids: Sequence[int]) -> BetweenPoints | None:
    """The verdict two aligned points give on a finding's connections `ids` (their ids at this
    point): those the other point saw or should have seen (`TwoPointFacts.shared`); None when
    there are none."""
    shared = facts.shared & frozenset(ids)
    if not shared:
        return None
    to_server, to_client = shared & facts.lost_to_server, shared & facts.lost_to_client
    missed = (shared & facts.missed_first) - facts.lost
    reached = shared - facts.lost - missed
    n = len(shared)
    of = f"of its {n:,} connections that cross both points" if n > 1 else "its connection that crosses both points"
    verdict: Verdict
    if to_server | to_client == shared and not to_client:
        verdict, says = "lost_to_server", f"{of}: a packet of the client's vanished between the points: the path to the server lost it"
    elif to_server | to_client == shared and not to_server:
        verdict, says = "lost_to_client", f"{of}: a packet of the server's vanished between the points: the path back lost it"
    elif to_server | to_client == shared:
        verdict, says = "lost_both_ways", (f"{of}: each lost a packet between the points ({len(to_server):,} of them on the "
                                            f"way to the server, {len(to_client):,} on the way back): the path lost them")
    elif reached == shared:
        verdict, says = "reached_server", (f"{of}: every packet reached the server's side: what went unanswered, the server's "
                                            "kernel or application left so, not the path")
    elif missed == shared:
        verdict, says = "missed_first_point", (f"{of}: a packet only the farther point saw (a capture drop at the nearer "
                                                "one, or a route around it)")
    else:
        parts = [f"{len(x):,} {w}" for x, w in ((to_server, "lost a packet on the way to the server"),
                                                 (to_client, "lost one on the way back"),
                                                 (reached, "had every packet reach the server's side"),
                                                 (missed, "had one only the farther point saw")) if x]
        verdict, says = "mixed", f"{of}: " + ", ".join(parts)
    return BetweenPoints(verdict=verdict, says=says, connections=n, lost_to_server=len(to_server),
                         lost_to_client=len(to_client), reached_server=len(reached), missed_first_point=len(missed))


def story_point(paths: Sequence[str], keep_connections: bool) -> tuple[_core.Analysis, _Path, TwoPointFacts] | None:
    """For `pcapq explain` of files that are two capture points sharing connections: the
    analysis of the point nearer the clients (the story is told from there), the `paths` entry
    and that point's facts (its name: the other's `other`); None otherwise. Raises
    _core.CaptureError."""
    from pcapq.capture_points import FileTimes, group
    from pcapq.inputs import first_packet_time

    if "-" in paths:
        return None
    points = group([FileTimes(p, first_packet_time(p), None) for p in paths])
    if len(points) != 2:
        return None
    a, b = (_core.analyze(p.paths, keep_connections=keep_connections, keep_events=True) for p in points)
    entry, shared_a, shared_b = _core.align_points(points[0].paths, points[1].paths, (points[0].name, points[1].name), analyses=(a, b))
    if entry["matched_packets"] < MIN_MATCHED:
        return None
    if entry["client_side"] in (None, points[0].name):
        return a, entry, facts_of(entry, points[0].name, shared_a)
    return b, entry, facts_of(entry, points[1].name, shared_b)
