"""A connection seen at two capture points (docs/two-points.md), drawn on four lines: the
client, the point nearer the clients (the proxy's), the point nearer the server, the server.
Each packet of its timeline crosses the lines it passed and stops where it vanished:

    │──▶│──▶│──▶│   client to server, seen at both points
    │──▶│──✕│   │   client to server, vanished between the points
    │◀──│◀──│◀──│   server to client, seen at both points
    │   │✕──│◀──│   server to client, seen at the server's point only
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pcapq.report.timeline import ConnectionTimeline, Row

if TYPE_CHECKING:
    from pcapq._core import _Path

CROSSED = {"client": "│──▶│──▶│──▶│", "server": "│◀──│◀──│◀──│"}
VANISHED = {"client": "│──▶│──✕│   │", "server": "│   │✕──│◀──│"}


def legend(entry: _Path, point: str) -> str:
    other = next(p for p in entry["points"] if p != point)
    return f"path: client │ {point} │ {other} │ server; ✕ where a packet vanished between the two capture points"


def add_path(t: ConnectionTimeline, entry: _Path, point: str) -> None:
    """Draws `t` (a connection of capture point `point`, the one nearer the clients) on four
    lines from the `paths` entry `entry`: each row's crossing in `t.path`, and a row for each
    packet that vanished and is not one of its rows (a packet only the other point saw)."""
    conn = next((c for c in entry["connections"] if c["ids"].get(point) == t.id), None)
    vanished = conn["vanished"] if conn is not None else []
    here = {(v["file"], v["frame"]): v for v in vanished if v["seen_at"] == point}
    shift = entry["clock_offset"] if point == entry["points"][0] else -entry["clock_offset"]
    rows = list(t.rows)
    drawn = {(r.file, r.frame) for r in rows}
    for v in vanished:
        if v["seen_at"] == point and (v["file"], v["frame"]) in drawn:
            continue
        at_here = v["seen_at"] == point
        time = v["time"] if at_here else v["time"] - shift
        where = "" if at_here else f" (frame {v['frame']} at {v['seen_at']})"
        rows.append(Row(
            file=v["file"] if at_here else -1, frame=v["frame"] if at_here else 0, time=time, offset=time - t.first_time,
            side="client" if v["direction"] == "client_to_server" else "server", flags=v["flags"], seq=v["seq"], ack=None,
            length=v["len"], kind="vanished", note=f"seen at {v['seen_at']}{where}, never reached {v['missing_at']}",
        ))
    rows.sort(key=lambda r: r.offset)
    t.rows = rows
    t.path = [
        VANISHED[r.side] if r.kind == "vanished" or (r.file, r.frame) in here else CROSSED[r.side]
        for r in rows
    ]
    t.path_legend = legend(entry, point)
    t.path_points = [point, next(p for p in entry["points"] if p != point)]
    # Rows only the other point saw carry no frame of this capture.
    t.rows = [replace(r, file=0) if r.file == -1 else r for r in rows]
