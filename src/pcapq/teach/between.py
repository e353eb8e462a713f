"""The story of a connection seen at two capture points (docs/two-points.md): each of its
packets that vanished between the points, told where it vanished: at the step of the packet
when the story's point saw it, or as a step of its own when only the other point did."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.teach.narrate import Step, Story

if TYPE_CHECKING:
    from pcapq._core import _Path, _Vanished

KINDS = {"S": "SYN", "S.": "SYN-ACK", ".": "ACK", "R": "RST", "R.": "RST", "F.": "FIN", "FP.": "FIN"}


def _packet(v: _Vanished) -> str:
    kind = KINDS.get(v["flags"])
    if v["len"]:
        return f"{v['len']}-byte segment (seq {v['seq']})"
    return kind or f"[{v['flags']}] segment"


def _where(v: _Vanished) -> str:
    """Where the packet vanished, in a sentence."""
    if v["vanished"] == "before_first_point":
        return (f"{v['seen_at']} saw it (frame {v['frame']}) but {v['missing_at']}, which it passed first, did not: "
                f"a capture drop at {v['missing_at']}, or a route around it, not a loss on the path")
    if v["direction"] == "client_to_server":
        return (f"it was seen at {v['seen_at']} (frame {v['frame']}) and never reached {v['missing_at']}: lost between the two "
                "capture points on its way to the server (the path, or a firewall between them), not dropped by the "
                "server's kernel")
    return (f"the server sent it, {v['seen_at']} saw it (frame {v['frame']}), and it never reached {v['missing_at']}: lost "
            "between the two capture points on its way back to the client")


def place_vanished(story: Story, path: _Path, point: str) -> None:
    """Adds to `story` (told from capture point `point`) where each of its connection's packets
    vanished between the two points of `path` (a JSON `paths` entry)."""
    conn = story.connection
    entry = next((c for c in path["connections"] if c["ids"].get(point) == conn["id"]), None)
    other = next(p for p in path["points"] if p != point)
    if entry is None:
        story.intro.append(f"Seen at two capture points, {point} and {other}: none of its packets vanished between them.")
        return
    # Times at the other point, on this point's clock.
    shift = path["clock_offset"] if point == path["points"][0] else -path["clock_offset"]
    by_frame = {(s.file, f): s for s in story.steps for f in s.frames}
    added: list[Step] = []
    for v in entry["vanished"]:
        if v["seen_at"] == point:
            step = by_frame.get((v["file"], v["frame"]))
            if step is not None:
                step.why = f"{step.why} Between the two capture points: {_where(v)}."
                continue
            offset = v["time"] - conn["first_time"]
        else:
            offset = v["time"] - shift - conn["first_time"]
        actor = "client kernel" if v["direction"] == "client_to_server" else "server kernel"
        here = v["seen_at"] == point
        at = "" if here else f" (frame {v['frame']} at {v['seen_at']})"
        vanishes = "that vanishes between the two capture points" if v["vanished"] == "between_points" else (
            f"that {v['missing_at']} did not see")
        added.append(Step(frames=[v["frame"]] if here else [], file=v["file"] if here else 0, offset=offset, actor=actor,
                          what=f"sends a {_packet(v)}{at} {vanishes}.",
                          why=_where(v)[0].upper() + _where(v)[1:] + "."))
    story.steps = sorted(story.steps + added, key=lambda s: s.offset)
    lost = len(entry["vanished"])
    story.intro.append(
        f"Seen at two capture points, {point} and {other}: {lost} of its packets vanished between them "
        f"({entry['vanished_client_to_server']} on the way to the server, {entry['vanished_server_to_client']} on the way back)."
    )
