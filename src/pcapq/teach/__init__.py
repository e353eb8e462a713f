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

if TYPE_CHECKING:
    from pcapq._core import _Connection
    from pcapq.evidence.logs import ProxyLogNote

__all__ = ["NoSuchConnection", "Story", "explain"]


def explain(analysis: Analysis, conn: str | None = None, proxy_logs: dict[int, ProxyLogNote] | None = None) -> Story:
    """The story of the connection `conn` (PORT or IP:PORT) or of the most instructive one.
    `proxy_logs` (connection id -> the proxy's line tied to it, `pcapq.evidence.Ties.by_id`):
    the story ends with the line the proxy wrote about this connection.

    Raises:
        NoSuchConnection: nothing matches `conn`, or the capture has no connection.
        ValueError: `conn` is not PORT or IP:PORT.
    """
    diagnosis = diagnose(analysis)
    choice = choose(analysis, diagnosis, conn)
    record: _Connection = json.loads(analysis.connection_json(choice.index))
    proxy_log = (proxy_logs or {}).get(record["id"])
    story = tell(record, diagnosis, choice.reason, choice.others, choice.matched, proxy_log)
    story.labels = analysis.connection_labels(choice.index)
    return story
