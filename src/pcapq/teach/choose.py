"""Which connection `pcapq explain` walks through.

With --conn, the connection whose client endpoint matches (a port, or an address and port; the
server endpoint is tried too). Otherwise the most instructive one, by this rule (docs/explain.md):

1. a connection named by a finding, the finding with the highest confidence first (ties: the
   earliest); among its first 200 connections (in capture order), the one with the most symptoms, then one whose handshake
   completed (a real client rather than a spoofed SYN), then the most
   retransmission series, then one that ended in a reset, then the earliest;
2. with no finding, the problem connection ranked the same way;
3. with no problem at all, the first connection that completed (what healthy looks like).

Only problem connections (lean) and then the one chosen are brought into Python, never one
object per healthy connection; --conn reads the records one at a time. Without --conn the
analysis may keep only the connections with a problem (keep_connections=False): records are
then found by id, not by position.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from pcapq._core import Analysis
from pcapq.diagnose import Diagnosis
from pcapq.endpoint import on_port, parse

if TYPE_CHECKING:
    from pcapq._core import _Connection, _LeanConnection


@dataclass
class Choice:
    index: int
    """The record's position in the analysis (`Analysis.connection_json(index)`)."""
    reason: str
    others: list[int]
    """Other connections --conn matched (the same 4-tuple reused, a server port), up to MAX_OTHERS."""
    matched: int = 1
    """How many connections --conn matched in all."""


# How many other matching connections are named.
MAX_OTHERS = 20


class NoSuchConnection(LookupError):
    pass


# How many of a finding's connections are compared (its first ones, in capture order): a flood
# may name millions.
CANDIDATES = 200


# Symptoms, handshake completed, series, reset, earliest and lowest id first: the larger the richer.
_Richness = tuple[int, bool, int, bool, float, int]


def _richness(c: _LeanConnection) -> _Richness:
    """For a lean record (Analysis.connections(lean=True))."""
    return (len(c["symptoms"]), c["completed"], len(c["series"]), c["reset"] is not None, -c["first_time"], -c["id"])


def _record_richness(c: _Connection) -> _Richness:
    """The same for a full record (Analysis.connection_json())."""
    completed = c["handshake"]["completed"]
    return (len(c["symptoms"]), completed, len(c["series"]), c["reset"] is not None, -c["first_time"], -c["id"])


def choose(analysis: Analysis, diagnosis: Diagnosis, conn: str | None) -> Choice:
    if conn is not None:
        return _by_endpoint(analysis, conn)
    position = _positions(analysis)
    # The material findings first (`minor` None), then the minor observations.
    findings = sorted(diagnosis.every_finding(), key=lambda f: (f.minor is not None, -f.confidence, f.first))
    for finding in findings:
        kept = [p for p in map(position, sorted(finding.connections)) if p is not None][:CANDIDATES]
        named: list[tuple[_Connection, int]] = [(json.loads(analysis.connection_json(i)), i) for i in kept]
        if named:
            index = max(named, key=lambda pair: _record_richness(pair[0]))[1]
            which = "finding" if finding.minor is None else "minor observation (no finding matters)"
            return Choice(index, f"the richest connection of the most certain {which} ({_cause(finding.cause)})", [])
    problems = analysis.connections(problems_only=True, lean=True)
    if problems:
        best = max(problems, key=_richness)
        return Choice(position(best["id"]) or 0, "the problem connection with the most symptoms (no finding names one)", [])
    # No problem anywhere: every connection completed or is still open; usually the first one
    # completed, so this reads one or two records.
    for i in range(len(analysis)):
        if _OUTCOME.search(analysis.connection_json(i)).group(1) == "completed":  # type: ignore[union-attr]
            return Choice(i, "nothing went wrong in this capture: the first connection that completed", [])
    if len(analysis):
        return Choice(0, "no connection completed: the first one", [])
    raise NoSuchConnection("the capture holds no TCP connection to explain")


def _positions(analysis: Analysis) -> Callable[[int], Optional[int]]:
    """Connection id -> position of its record (None: not kept). The same number when every
    record is kept; else looked up among the records kept (those with a problem)."""
    if len(analysis) == analysis.summary()["connections"]:
        return lambda id_: id_
    return {c["id"]: i for i, c in enumerate(analysis.connections(lean=True))}.get


# Fields of a connection's JSON record (docs/json.md), read without parsing its events.
_OUTCOME = re.compile(r'"outcome":"([a-z_]+)"')
_ENDPOINTS = re.compile(r'^\{"id":(\d+),"client":"([^"]+)","server":"([^"]+)"')


def _cause(cause: str) -> str:
    return cause.replace("_", " ")


def _by_endpoint(analysis: Analysis, conn: str) -> Choice:
    """PORT or IP:PORT ([v6]:PORT) of the client, else of the server."""
    want_port, want = _parse(conn)
    client_side: list[int] = []  # the first matches, in capture order
    server_side: list[int] = []
    counts = {True: 0, False: 0}
    # One record at a time, its endpoints read from the start of its JSON: a capture of many
    # connections never has them all in Python at once.
    for i in range(len(analysis)):
        found = _ENDPOINTS.match(analysis.connection_json(i))
        if found is None:
            continue
        for is_client, endpoint in ((True, found.group(2)), (False, found.group(3))):
            if endpoint == want if want is not None else on_port(endpoint, want_port):
                counts[is_client] += 1
                kept = client_side if is_client else server_side
                if len(kept) <= MAX_OTHERS:
                    kept.append(i)
    ids, matched = (client_side, counts[True]) if client_side else (server_side, counts[False])
    if not ids:
        raise NoSuchConnection(f"no connection from or to {conn} in the capture")
    which = "client" if client_side else "server"
    reason = f"--conn {conn} (the {which} endpoint)"
    return Choice(ids[0], reason, ids[1:], matched)


def _parse(conn: str) -> tuple[int, str | None]:
    """(port, the endpoint as the core writes it, or None for a port alone)."""
    try:
        if ":" not in conn:
            port = int(conn) if conn.isascii() and conn.isdigit() else -1
            if not 0 <= port <= 65535:
                raise ValueError(conn)
            return port, None
        endpoint = parse(conn)
    except ValueError:
        raise ValueError(f"--conn takes PORT or IP:PORT, not {conn!r}") from None
    return endpoint.port, str(endpoint)
