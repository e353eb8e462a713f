"""The checks two aligned capture points add to a finding (pcapq.two_points): where each of
its connections' packets went between the proxy's side and the server's side. Not a cause: the
causes that blame the path or the listener call `weigh`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:
    from pcapq._core import Episode, Selection
    from pcapq.finding import PointCheck, Weighed
    from pcapq.two_points import TwoPointFacts


class CheckWords(TypedDict):
    """Which connections hold a check, and the words of its `checks` entry."""

    # A TwoPointFacts field: those with a lost packet (`lost`); those none of whose SYN-ACKs
    # vanished (not `synack_lost`); those whose client's packets all reached the server's point
    # (not `lost_to_server`).
    holds: Literal["lost", "synack_kept", "reached", "intact"]
    held: str
    failed: str


CITES = "docs/two-points.md: the packets of both capture points matched one for one"

# Per check: which connections hold it (a TwoPointFacts field), and the words of a finding's
# `checks` entry.
CHECKS: dict[PointCheck, CheckWords] = {
    # Loss: a re-send is the path's doing only if a packet vanished between the two points.
    "vanished_between_points": {
        "holds": "lost",
        "held": "a packet of theirs vanished between the two capture points: lost on the path",
        "failed": "every packet of theirs seen at one point was seen at the other: not lost between them",
    },
    # The listener: its drops need the client's packets (SYNs, handshake ACK, request) to have
    # reached the server's point.
    "reached_server_point": {
        "holds": "reached",
        "held": "every packet of the client's (SYNs, handshake ACK, request) reached the server's capture point: the server's kernel dropped what it did not answer",
        "failed": "a packet of the client's (a SYN, the handshake ACK or a request) vanished between the two capture points: the path lost it, not the listener",
    },
    # A SYN the client saw no answer to was the listener's drop only if no SYN-ACK vanished on
    # the way back; and a SYN-ACK re-sent after the client's ACK is the accept queue's sign only
    # if it is no answer to a SYN the client sent again because the first SYN-ACK was lost.
    "synack_reached_client_point": {
        "holds": "synack_kept",
        "held": "no SYN-ACK of the server's vanished between the two capture points",
        "failed": "the server's SYN-ACK vanished between the two capture points: the listener answered and the path "
                  "lost the answer (the client's SYN sent again then gets an answer that can cross its ACK)",
    },
    # A listener that stalled left its connections waiting with nothing lost: one whose packets
    # vanished between the points waited for the path.
    "nothing_lost_between_points": {
        "holds": "intact",
        "held": "none of their packets vanished between the two capture points",
        "failed": "a packet of theirs vanished between the two capture points: the path kept the exchange waiting, not "
                  "the listener",
    },
}


def weigh(facts: TwoPointFacts | None, episode: Episode, selection: Selection, check: PointCheck) -> tuple[Selection, list[Weighed]]:
    """`selection` (of `episode`) less the connections the two points show the check failed
    for, and the check's tally as a `checks` entry; `selection` as it is and no entry without
    two aligned points (`facts` None), or when the other point saw none of its connections."""
    if facts is None or not selection:
        return selection, []
    ids = set(selection.ids)
    shared = ids & facts.shared
    if not shared:
        return selection, []
    words = CHECKS[check]
    if words["holds"] == "lost":
        held = shared & facts.lost
    elif words["holds"] == "synack_kept":
        held = shared - facts.synack_lost
    elif words["holds"] == "intact":
        held = shared - facts.lost
    else:
        held = shared - facts.lost_to_server
    failed = shared - held
    # `competes`: a failed check is the path's (or the listener's) explanation instead.
    entry: Weighed = {"check": check, "held": len(held), "failed": len(failed), "competes": True,
                      "says_held": words["held"], "says_failed": words["failed"], "cites": CITES}
    kept = episode.among(selection, failed, keep=False) if failed else selection
    return kept, [entry]
