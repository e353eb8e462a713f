"""A connection seen at two capture points (docs/two-points.md), drawn on four lines: the
client, the point nearer the clients (the proxy's), the point nearer the server, the server.
Each packet of its timeline crosses the lines it passed and stops where it vanished:

    │──▶│──▶│──▶│   client to server, seen at both points
    │──▶│──✕│   │   client to server, vanished between the points
    │◀──│◀──│◀──│   server to client, seen at both points
    │   │✕──│◀──│   server to client, seen at the server's point only
    │──▶?──▶│──▶│   passed a point that did not see it (a capture drop there, or another route)
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pcapq.report.timeline import ConnectionTimeline, Row

if TYPE_CHECKING:
    from pcapq._core import _Path

CROSSED = {"client": "│──▶│──▶│──▶│", "server": "│◀──│◀──│◀──│"}
VANISHED = {"client": "│──▶│──✕│   │", "server": "│   │✕──│◀──│"}
# Seen only at the point it passes second (`"vanished": "before_first_point"`).
UNSEEN = {"client": "│──▶?──▶│──▶│", "server": "│◀──│◀──?◀──│"}


def legend(entry: _Path, point: str) -> str:
    other = next(p for p in entry["points"] if p != point)
    return (f"path: client │ {point} │ {other} │ server; ✕ where a packet vanished between the two capture points, "
            "? a point that did not see a packet that passed it")


def add_path(t: ConnectionTimeline, entry: _Path, point: str) -> None:
    """Draws `t` (a connection of capture point `point`, the one nearer the clients) on four
    lines from the `paths` entry `entry`: each row's crossing in `t.path`, and a row for each
    packet that vanished and is not one of its rows (a packet only the other point saw)."""
    conn = next((c for c in entry["connections"] if c["ids"].get(point) == t.id), None)
    vanished = conn["vanished"] if conn is not None else []
    shift = entry["clock_offset"] if point == entry["points"][0] else -entry["clock_offset"]
    # The lanes of each packet that vanished, by where this point has it (None: not at all).
    lanes: dict[tuple[int, int], str] = {}
    added: list[tuple[Row, str]] = []
    drawn = {(r.file, r.frame) for r in t.rows}
    for v in vanished:
        kind = VANISHED if v["vanished"] == "between_points" else UNSEEN
        glyphs = kind["client" if v["direction"] == "client_to_server" else "server"]
        if v["seen_at"] == point:
            lanes[(v["file"], v["frame"])] = glyphs
            if (v["file"], v["frame"]) in drawn:
                continue
        at_here = v["seen_at"] == point
        time = v["time"] if at_here else v["time"] - shift
        where = "" if at_here else f" (frame {v['frame']} at {v['seen_at']})"
        note = (f"seen at {v['seen_at']}{where}, never reached {v['missing_at']}" if v["vanished"] == "between_points"
                else f"seen at {v['seen_at']}{where}, not at {v['missing_at']}, which it passed first")
        added.append((Row(
            file=v["file"] if at_here else 0, frame=v["frame"] if at_here else 0, time=time, offset=time - t.first_time,
            side="client" if v["direction"] == "client_to_server" else "server", flags=v["flags"], seq=v["seq"], ack=None,
            length=v["len"], kind="vanished", note=note,
        ), glyphs))
    rows = [(r, lanes.get((r.file, r.frame), CROSSED[r.side])) for r in t.rows] + added
    rows.sort(key=lambda pair: pair[0].offset)
    t.rows = [r for r, _ in rows]
    t.path = [glyphs for _, glyphs in rows]
    t.path_legend = legend(entry, point)
    t.path_points = [point, next(p for p in entry["points"] if p != point)]
