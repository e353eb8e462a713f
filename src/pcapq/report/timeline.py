"""Annotated per-connection timelines, as plain data that the text, Markdown, HTML and JSON
renderers share (the aggregate timeline of a capture is in `pcapq.report.aggregate`).

A connection's timeline is one row per event the core recorded (docs/json.md, `events[]`):
frame, time since the connection's first packet, direction, flags, relative seq/ack/len, and
what the packet means in plain words, with the retransmission timings set against the kernel's
schedule (docs/diagnosis.md): the core's labels (`Analysis.connection_labels`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Sequence, TypedDict

from pcapq._core import Analysis
from pcapq.endpoint import on_port
# The aggregate timeline has a module of its own (the text report needs only it); its names
# are this module's too, as the renderers and tests use them.
from pcapq.report.aggregate import (  # noqa: F401
    BUCKET_WIDTHS as BUCKET_WIDTHS,
    FAILED_OUTCOMES as FAILED_OUTCOMES,
    MAX_SERVER_LINES as MAX_SERVER_LINES,
    OUTCOMES as OUTCOMES,
    Aggregate as Aggregate,
    Bucket as Bucket,
    Episode as Episode,
    aggregate as aggregate,
    capture_aggregate as capture_aggregate,
    choose_width as choose_width,
)

if TYPE_CHECKING:
    from pcapq.evidence.logs import ProxyLogNote
    from pcapq._core import _Connection, _Icmp, _LeanConnection

# The schedules in words, for the ladders' dashed lines (the notes' words are the core's:
# src/output/labels.rs).
SCHEDULE_NAMES = {
    "syn_linear": "the linear SYN schedule",
    "syn_exponential": "the doubling SYN schedule",
    "syn_legacy": "the pre-3.1 SYN schedule",
    "synack": "the SYN-ACK schedule",
    "data_rto": "the RTO schedule",
}


@dataclass(frozen=True)
class Row:
    """One packet of a connection's timeline."""

    file: int
    frame: int
    time: float  # epoch seconds
    offset: float  # seconds since the connection's first packet
    side: str  # who sent it: "client" or "server"
    flags: str
    seq: Optional[int]
    ack: Optional[int]
    length: int
    kind: str  # the event kind (docs/json.md)
    note: str  # what it means, in plain words

    @property
    def arrow(self) -> str:
        return "→" if self.side == "client" else "←"


@dataclass(frozen=True)
class Slot:
    """When the kernel's retransmission schedule says a re-send is due (offset in seconds)."""

    offset: float
    series: str  # "syn", "synack" or "data"
    side: str
    attempt: int  # 2 = first retransmission
    schedule: str


@dataclass
class ConnectionTimeline:
    """One connection told packet by packet."""

    id: int
    client: str
    server: str
    outcome: str
    symptoms: list[str]
    first_time: float
    duration: float
    added_latency: float
    rows: list[Row]
    slots: list[Slot] = field(default_factory=list)
    events_dropped: int = 0
    proxy_log: Optional[ProxyLogNote] = None
    """With --log: the proxy's line tied to this connection (`pcapq.evidence.Ties.by_id`)."""
    path: Optional[list[str]] = None
    """Seen at two capture points: each row's crossing of the four lines (pcapq.report.four_lines)."""
    path_legend: Optional[str] = None
    path_points: Optional[list[str]] = None
    """The two capture points' names, the one nearer the clients first."""

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED_OUTCOMES

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for row in out["rows"]:
            row["arrow"] = "→" if row["side"] == "client" else "←"
        if out["proxy_log"] is None:
            # As in analyze's JSON: only a connection a line is tied to has the field.
            del out["proxy_log"]
        for key in ("path", "path_legend", "path_points"):
            # Only a connection seen at two capture points has them.
            if out[key] is None:
                del out[key]
        return out


def _slots(conn: _Connection) -> list[Slot]:
    """The kernel's schedule for each timed retransmission series: where the n-th send was due
    if every wait had been exactly what the schedule predicts, from the series' first send."""
    first = conn["first_time"]
    out: list[Slot] = []
    for series in conn["series"]:
        sends = series["sends"]
        if not sends:
            continue
        due = sends[0]["time"]
        for attempt, send in enumerate(sends[1:], start=2):
            if send["triggered"] or send["expected"] is None:
                due = send["time"]
                continue
            due += send["expected"]
            out.append(Slot(due - first, series["kind"], series["from"], attempt, series["schedule"]))
    return out


def icmp_row(conn: _Connection, a: _Icmp, note: str) -> Row:
    """An ICMP error as a timeline row: it travels towards the side whose packet it quotes."""
    return Row(
        file=a["file"],
        frame=a["frame"],
        time=a["time"],
        offset=a["offset"],
        side="server" if a["answers"] == "client" else "client",
        flags="ICMP",
        seq=a["seq"],
        ack=None,
        length=0,
        kind="icmp",
        note=note,
    )


def annotate(conn: _Connection, labels: list[tuple[int, int, str]]) -> ConnectionTimeline:
    """The timeline of one connection, from its JSON object (docs/json.md) and the core's words
    on its packets (`Analysis.connection_labels`: one per event, then one per ICMP error)."""
    events, icmp = conn["events"], conn.get("icmp", [])
    if len(labels) != len(events) + len(icmp):
        raise ValueError(f"connection {conn['id']}: {len(labels)} labels for {len(events) + len(icmp)} packets")
    notes = [text for _file, _frame, text in labels]
    rows = [
        Row(
            file=e["file"],
            frame=e["frame"],
            time=e["time"],
            offset=e["offset"],
            side=e["from"],
            flags=e["flags"],
            seq=e["seq"],
            ack=e["ack"],
            length=e["len"],
            kind=e["kind"],
            note=note,
        )
        for e, note in zip(events, notes)
    ]
    icmp_rows = [icmp_row(conn, a, note) for a, note in zip(icmp, notes[len(events):])]
    rows = sorted(rows + icmp_rows, key=lambda r: (r.file, r.frame))
    return ConnectionTimeline(
        id=conn["id"],
        client=conn["client"],
        server=conn["server"],
        outcome=conn["outcome"],
        symptoms=list(conn["symptoms"]),
        first_time=conn["first_time"],
        duration=conn["duration"],
        added_latency=conn["added_latency"],
        rows=rows,
        slots=_slots(conn),
        events_dropped=conn["events_dropped"],
    )


def connection_timeline(analysis: Analysis, index: int) -> ConnectionTimeline:
    import json  # ladders only; the terminal report does not load it

    return annotate(json.loads(analysis.connection_json(index)), analysis.connection_labels(index))


# ---- choosing connections ----


@dataclass
class Selection:
    """Which connections `pcapq timeline` shows. Empty fields do not filter."""

    # "N" (a connection id, as the reports' id column shows, or a client port), "#N" or "id:N"
    # (an id only), or "IP:PORT" (a client endpoint).
    conn: Optional[str] = None
    failed: bool = False
    outcomes: tuple[str, ...] = ()
    connection_ids: Optional[set[int]] = None  # from --cause: the findings' connections
    server: Optional[str] = None
    since: Optional[float] = None  # epoch seconds
    until: Optional[float] = None
    limit: int = 20
    # What --conn matched ("connection id", "client port", "client endpoint"), filled by matches().
    conn_matched_by: set[str] = field(default_factory=set)

    def wants_problems_only(self) -> bool:
        """Whether only connections with a problem can match."""
        problem_outcomes = bool(self.outcomes) and all(o not in ("completed", "open") for o in self.outcomes)
        return self.failed or self.connection_ids is not None or problem_outcomes

    def matches(self, c: _LeanConnection) -> bool:
        if self.server is not None and c["server"] != self.server:
            return False
        if self.conn is not None:
            how = self._conn_match(c)
            if how is None:
                return False
            self.conn_matched_by.add(how)
        if self.failed and not has_problem(c):
            return False
        if self.outcomes and c["outcome"] not in self.outcomes:
            return False
        if self.connection_ids is not None and c["id"] not in self.connection_ids:
            return False
        if self.since is not None and c["last_time"] < self.since:
            return False
        if self.until is not None and c["first_time"] > self.until:
            return False
        return True


    def _conn_match(self, c: _LeanConnection) -> Optional[str]:
        conn = self.conn or ""
        for prefix in ("#", "id:"):
            if conn.startswith(prefix):
                return "connection id" if str(c["id"]) == conn[len(prefix):] else None
        if conn.isdigit():
            if c["id"] == int(conn):
                return "connection id"
            return "client port" if on_port(c["client"], int(conn)) else None
        return "client endpoint" if c["client"] == conn else None


def has_problem(c: _LeanConnection) -> bool:
    """A failed outcome, or any symptom (the core's `problems_only`)."""
    return c["outcome"] not in ("completed", "open") or bool(c["symptoms"])


class Ranked(TypedDict):
    """What `severity` ranks a connection by."""

    outcome: str
    symptoms: Sequence[str]
    added_latency: float
    first_time: float
    id: int


def severity(c: Ranked) -> tuple[bool, bool, float, float, int]:
    """Sort key, worst first: failed outcomes, then the most added latency, then the earliest."""
    return (c["outcome"] not in FAILED_OUTCOMES, not c["symptoms"], -c["added_latency"], c["first_time"], c["id"])


def select(analysis: Analysis, selection: Selection) -> tuple[list[int], int]:
    """The connections to show, in capture order (at most `limit`), as indices for
    `connection_timeline`, and how many matched. The analysis may have kept every record (an
    index is then the id) or only those with a problem (an index is the place among them)."""
    if len(analysis) == analysis.summary()["connections"]:
        candidates = analysis.connections(problems_only=selection.wants_problems_only(), lean=True, server=selection.server)
        matched = [c["id"] for c in candidates if selection.matches(c)]
    else:
        kept = analysis.connections(lean=True)
        matched = [i for i, c in enumerate(kept) if selection.matches(c)]
    return matched[: selection.limit], len(matched)
