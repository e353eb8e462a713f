"""`pcapq explain`: a narrated walk through one connection for someone learning how TCP's listen
queues fail (choose.py picks it, narrate.py tells it, glossary.py defines the terms, render.py
writes it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import json

from pcapq._core import Analysis
from pcapq.diagnose import diagnose
from pcapq.teach.choose import NoSuchConnection, choose
from pcapq.teach.narrate import Story, tell
from pcapq.two_points import TwoPointFacts

if TYPE_CHECKING:
    from pcapq._core import _Connection, _Path
    from pcapq.evidence.logs import ProxyLogNote

__all__ = ["NoSuchConnection", "Story", "explain"]


def explain(analysis: Analysis, conn: str | None = None, proxy_logs: dict[int, ProxyLogNote] | None = None,
            path: _Path | None = None, two_points: TwoPointFacts | None = None) -> Story:
    """The story of the connection `conn` (PORT or IP:PORT) or of the most instructive one.
    `proxy_logs` (connection id -> the proxy's line tied to it, `pcapq.evidence.Ties.by_id`):
    the story ends with the line the proxy wrote about this connection. `path` (a JSON `paths`
    entry) and `two_points` (what it says of the capture point `analysis` is of): the connection
    was seen at two capture points, and the story tells where its packets vanished between them.

    Raises:
        NoSuchConnection: nothing matches `conn`, or the capture has no connection.
        ValueError: `conn` is not PORT or IP:PORT.
    """
    diagnosis = diagnose(analysis, two_points=two_points)
    choice = choose(analysis, diagnosis, conn)
    record: _Connection = json.loads(analysis.connection_json(choice.index))
    proxy_log = (proxy_logs or {}).get(record["id"])
    story = tell(record, diagnosis, choice.reason, choice.others, choice.matched, proxy_log)
    story.labels = analysis.connection_labels(choice.index)
    if path is not None and two_points is not None:
        from pcapq.teach.between import place_vanished

        point = next(p for p in path["points"] if p != two_points.other)
        place_vanished(story, path, point)
    return story
