"""Annotated per-connection timelines, as plain data that the text, Markdown, HTML and JSON
renderers share (the aggregate timeline of a capture is in `pcapq.report.aggregate`).

A connection's timeline is one row per event the core recorded (docs/json.md, `events[]`):
frame, time since the connection's first packet, direction, flags, relative seq/ack/len, and
what the packet means in plain words, with the retransmission timings set against the kernel's
schedule (docs/diagnosis.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from pcapq._core import Analysis
from pcapq.causes.icmp_words import ROLES
# The aggregate timeline has a module of its own (the text report needs only it); its names
# are this module's too, as the renderers and tests use them.
from pcapq.report.aggregate import (  # noqa: F401
    BUCKET_WIDTHS,
    FAILED_OUTCOMES,
    MAX_SERVER_LINES,
    OUTCOMES,
    Aggregate,
    Bucket,
    Episode,
    aggregate,
    capture_aggregate,
    choose_width,
)

SCHEDULE_NAMES = {
    "syn_linear": "the linear SYN schedule",
    "syn_exponential": "the doubling SYN schedule",
    "syn_legacy": "the pre-3.1 SYN schedule",
    "synack": "the SYN-ACK schedule",
    "data_rto": "the RTO schedule",
}

# What an RST answered (the `answers` field of an `rst` event), in words.
ANSWERED = {
    "syn": "SYN",
    "synack": "SYN-ACK",
    "handshake_ack": "handshake ACK",
    "ack": "ACK",
    "data": "data",
    "retransmit": "re-sent segment",
    "fin": "FIN",
    "rst": "RST",
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
    proxy_log: Optional[dict[str, Any]] = None
    """With --log: the proxy's line tied to this connection (`pcapq.evidence.Ties.by_id`)."""

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
        return out


def _s(seconds: float) -> str:
    """Seconds for a sentence: 0.81 s, 63.1 s, 4.2 ms, 0.042 ms."""
    if seconds < 0.001:
        return f"{seconds * 1000:.3f} ms"
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    return f"{seconds:.1f} s"


def _ordinal_send(attempt: Optional[int]) -> str:
    return f"#{attempt}" if attempt is not None else "again"


class _Annotator:
    """Writes the note of each event of one connection, knowing the whole connection."""

    def __init__(self, conn: dict[str, Any]) -> None:
        self.conn = conn
        self.symptoms = set(conn["symptoms"])
        events = conn["events"]
        self.handshake_ack = next((e for e in events if e["kind"] == "handshake_ack"), None)
        self.first_synack = next((e for e in events if e["kind"] == "synack"), None)
        self.request = next((e for e in events if e["kind"] == "data_first" and e["from"] == "client"), None)
        self.spurious = next(
            (e for e in events if e["kind"] == "synack_retransmit" and e.get("after_handshake_ack")), None
        )
        self.answer = next((e for e in events if e["kind"] == "data_first" and e["from"] == "server"), None)
        # The request's last copy before the answer is the one the server finally took.
        self.request_taken = None
        if self.answer is not None:
            copies = [
                e
                for e in events
                if e["kind"] == "data_retransmit" and e["from"] == "client" and e["seq"] == 1
                and e["time"] <= self.answer["time"]
            ]
            self.request_taken = copies[-1] if copies else None
        # Duplicate ACKs each side received since it last sent data again (fast retransmit).
        self.dup_acks_seen = {"client": 0, "server": 0}
        # (file, frame) -> (expected interval, schedule, triggered) of every re-send in a series.
        self.expected: dict[tuple[int, int], tuple[Optional[float], str, bool]] = {}
        for series in conn["series"]:
            for send in series["sends"]:
                self.expected[(send["file"], send["frame"])] = (send["expected"], series["schedule"], send["triggered"])

    def _timing(self, e: dict[str, Any]) -> str:
        waited = e.get("since_previous")
        expected, schedule, _ = self.expected.get((e["file"], e["frame"]), (None, "", False))
        if waited is None:
            return ""
        text = f"waited {_s(waited)}"
        if expected is not None:
            text += f", {SCHEDULE_NAMES.get(schedule, schedule)} predicts {_s(expected)}"
        return text

    def note(self, e: dict[str, Any], previous: Optional[dict[str, Any]] = None) -> str:
        """What event `e` means; `previous` is the event before it."""
        kind, side = e["kind"], e["from"]
        attempt = e.get("attempt")
        if kind == "syn":
            return "SYN: the client opens the connection"
        if kind == "syn_retransmit":
            return f"SYN {_ordinal_send(attempt)}, same ISN: no SYN-ACK came; {self._timing(e)}"
        if kind == "synack":
            if "syncookie_suspected" in self.symptoms:
                # A cookie SYN-ACK leaves no request socket behind (net/ipv4/syncookies.c).
                return "SYN-ACK: the server's kernel answers, probably with a SYN cookie: it holds no half-open request"
            return "SYN-ACK: the server's kernel answers and holds a half-open request"
        if kind == "synack_retransmit":
            triggered = self.expected.get((e["file"], e["frame"]), (None, "", False))[2]
            if e.get("after_handshake_ack") and self.handshake_ack is not None:
                return (
                    f"SYN-ACK {_ordinal_send(attempt)}, spurious: the client already ACKed in frame "
                    f"{self.handshake_ack['frame']}, so the server dropped that ACK (accept queue full)"
                )
            if triggered:
                return f"SYN-ACK {_ordinal_send(attempt)}, sent at once in answer to the re-sent SYN"
            return f"SYN-ACK {_ordinal_send(attempt)}: no ACK from the client; {self._timing(e)}"
        if kind == "handshake_ack":
            text = "ACK completing the handshake: established for the client, its connect() returns"
            if self.spurious is not None:
                text += f"; the server did not take it (SYN-ACK again in frame {self.spurious['frame']})"
            return text
        if kind == "data_first":
            if side == "client":
                return f"request: the client's first data, {e['len']} bytes"
            after = f", {_s(e['time'] - self.request['time'])} after the request" if self.request else ""
            return f"answer: the server's first data, {e['len']} bytes{after}"
        if kind == "dup_ack":
            self.dup_acks_seen["server" if side == "client" else "client"] += 1
        if kind == "data_retransmit":
            what = "request re-sent" if side == "client" and e["seq"] == 1 else f"data re-sent by the {side}"
            dup_acks, self.dup_acks_seen[side] = self.dup_acks_seen[side], 0
            expected = self.expected.get((e["file"], e["frame"]), (None, "", False))[0]
            waited = e.get("since_previous")
            # RFC 5681 §3.2: three duplicate ACKs trigger a retransmission before the RTO.
            if dup_acks >= 3 and waited is not None and (expected is None or waited < expected / 2):
                return (
                    f"{what}, attempt {attempt}: a fast retransmit after {dup_acks} duplicate ACKs, "
                    f"{_s(waited)} after the previous send (no timeout)"
                )
            if self.expected.get((e["file"], e["frame"]), (None, "", False))[2]:
                # tcp_v4_mtu_reduced() -> tcp_simple_retransmit(): smaller, at once, no timer.
                text = f"{what}, attempt {attempt}: at once and smaller, after the too-big ICMP error (no timeout)"
            else:
                timing = self._timing(e)
                text = f"{what}, attempt {attempt}" + (f": {timing}" if timing else "")
            if e is self.request_taken and self.answer is not None:
                text += f"; this copy got through: the server answered it in frame {self.answer['frame']}"
            elif side == "client" and "request_unacked" in self.symptoms and e.get("after_handshake_ack"):
                if "syncookie_suspected" in self.symptoms:
                    text += "; never acknowledged: the server's kernel has no connection for it (a SYN cookie whose ACK it did not take)"
                else:
                    text += "; never acknowledged: sent into a half-open connection"
            return text
        if kind == "fin_retransmit":
            return f"FIN re-sent by the {side}, attempt {attempt}: {self._timing(e)}"
        if kind == "dup_ack":
            of = e.get("dup_of") or {}
            text = f"duplicate ACK #{e.get('dup_count', 1)} of frame {of.get('frame', '?')}"
            if previous is not None and previous["kind"] in ("synack_retransmit", "syn_retransmit") and previous["from"] != side:
                return f"{text}: the {side} answers the re-sent {'SYN-ACK' if side == 'client' else 'SYN'}"
            return f"{text}: the {side} is missing data, or got a segment twice"
        if kind == "zero_window":
            return f"zero window: the {side}'s receive buffer is full, the peer must wait"
        if kind == "fin":
            return self._fin_note(e)
        if kind == "rst":
            return self._rst_note(e)
        return kind.replace("_", " ")

    def _fin_note(self, e: dict[str, Any]) -> str:
        side = e["from"]
        answered = self.conn["request"]["answered"]
        if self.request is not None and (answered is None or answered > e["time"]):
            if side == "client":
                return "FIN from the client before any answer: it gave up waiting (a read timeout)"
            return "FIN from the server before any answer: the upstream closed without answering"
        return f"FIN: the {side} is done sending"

    def _rst_note(self, e: dict[str, Any]) -> str:
        side, answers = e["from"], e.get("answers", "nothing")
        peer = "server" if side == "client" else "client"
        answered = f"the {peer}'s {ANSWERED.get(answers, answers.replace('_', ' '))}"
        answered_frame = (e.get("answers_frame") or {}).get("frame")
        after = e.get("after")
        if side == "server" and answers == "syn":
            return "RST from the server answers the SYN: connection refused, nothing listens on the port"
        if side == "server" and "reset_after_expiry" in self.symptoms and self.first_synack is not None:
            since = e["time"] - self.first_synack["time"]
            return f"RST from the server {_s(since)} after the first SYN-ACK: the half-open request had expired"
        if side == "server" and "reset_after_ack" in self.symptoms:
            return (
                f"RST from the server answering {answered}: the accept queue was full and "
                "net.ipv4.tcp_abort_on_overflow is 1"
            )
        what = f"RST from the {side}"
        if answered_frame is not None and after is not None:
            what += f", {_s(after)} after {answered} in frame {answered_frame}"
        if side == "client" and self.conn["outcome"] != "reset_by_client":
            # The connection went on: this RST was the client's kernel refusing one segment
            # (a stale or unexpected one), not the application closing.
            what += f": the client's kernel refused a segment it did not expect; the connection went on ({self.conn['outcome'].replace('_', ' ')})"
        elif side == "client":
            what += ": the client gave up (a timeout in the application)"
        return what


def _slots(conn: dict[str, Any]) -> list[Slot]:
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


def icmp_note(a: dict[str, Any]) -> str:
    """An ICMP error answering one of the connection's packets, in plain words (docs/json.md
    `connections[].icmp`)."""
    answered = ROLES.get(a["answers_role"] or "", "packet")
    where = f" (frame {a['answers_frame']['frame']})" if a["answers_frame"] else ""
    note = f"ICMP {a['meaning']} from {a['sender']}, answering the {a['answers']}'s {answered}{where}"
    if a["mtu"]:
        note += f": next-hop MTU {a['mtu']:,}, the packet was {a['quoted_len']:,} bytes"
    if a["errno"] is not None and a["answers"] == "client" and a["answers_role"] == "syn":
        note += f"; a Linux connect() fails at once with {a['errno']} ({a['errno_text']})"
    return note


def icmp_row(conn: dict[str, Any], a: dict[str, Any]) -> Row:
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
        note=icmp_note(a),
    )


def annotate(conn: dict[str, Any]) -> ConnectionTimeline:
    """The timeline of one connection, from its JSON object (docs/json.md)."""
    notes = _Annotator(conn)
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
            note=notes.note(e, previous),
        )
        for previous, e in zip([None, *conn["events"]], conn["events"])
    ]
    rows = sorted(rows + [icmp_row(conn, a) for a in conn.get("icmp", ())], key=lambda r: (r.file, r.frame))
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

    return annotate(json.loads(analysis.connection_json(index)))


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

    def matches(self, c: dict[str, Any]) -> bool:
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


    def _conn_match(self, c: dict[str, Any]) -> Optional[str]:
        conn = self.conn or ""
        for prefix in ("#", "id:"):
            if conn.startswith(prefix):
                return "connection id" if str(c["id"]) == conn[len(prefix):] else None
        if conn.isdigit():
            if c["id"] == int(conn):
                return "connection id"
            return "client port" if c["client"].rsplit(":", 1)[1] == conn else None
        return "client endpoint" if c["client"] == conn else None


def has_problem(c: dict[str, Any]) -> bool:
    """A failed outcome, or any symptom (the core's `problems_only`)."""
    return c["outcome"] not in ("completed", "open") or bool(c["symptoms"])


def severity(c: dict[str, Any]) -> tuple:
    """Sort key, worst first: failed outcomes, then the most added latency, then the earliest."""
    return (c["outcome"] not in FAILED_OUTCOMES, not c["symptoms"], -c.get("added_latency", 0.0), c["first_time"], c["id"])


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
