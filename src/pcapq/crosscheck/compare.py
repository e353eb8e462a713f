"""pcapq's labels against tshark's tcp.analysis flags, frame by frame.

For every frame that either tool labels, each check (retransmission, duplicate ACK, zero
window, port reuse, RST) gives one Row: agree, explained (a documented difference, with its
reason) or unexplained. docs/crosscheck.md lists the explanations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypedDict

from pcapq.crosscheck.tshark import FIN, RST, SYN, Frame

if TYPE_CHECKING:
    from pcapq._core import _Connection, _Event

AGREE: Final = "agree"
EXPLAINED: Final = "explained"
UNEXPLAINED: Final = "unexplained"
Verdict = Literal["agree", "explained", "unexplained"]
RETRANSMITS = ("syn_retransmit", "synack_retransmit", "data_retransmit", "fin_retransmit")

# (check, pcapq label, tshark flag) in report order. The pcapq label of a frame is refined
# (e.g. a SYN-ACK re-sent after the client's ACK: the final ACK was dropped).
LABELS = {
    "syn_retransmit": "SYN retransmit",
    "synack_retransmit": "SYN-ACK retransmit",
    "synack_after_ack": "SYN-ACK re-sent after the ACK (final ACK dropped)",
    "data_retransmit": "data retransmit",
    "request_resent": "request re-sent, never acknowledged",
    "fin_retransmit": "FIN retransmit",
    "dup_ack": "duplicate ACK",
    "zero_window": "zero window",
    "reused_ports": "new connection on a used 4-tuple",
    "rst": "RST",
}
TSHARK_FLAG = {
    "retransmit": "retransmission / out_of_order",
    "dup_ack": "duplicate_ack",
    "zero_window": "zero_window",
    "reused_ports": "reused_ports",
    "rst": "tcp.flags.reset",
}


@dataclass
class Row:
    frame: int
    check: str  # retransmit, dup_ack, zero_window, reused_ports, rst
    label: str  # key of LABELS: pcapq's label, or the label the frame's tshark flag stands for
    tshark: str  # what tshark said, "-" for nothing
    pcapq: str  # what pcapq said, "-" for nothing
    verdict: Verdict
    reason: str = ""


# One line of the table: a pcapq label, the tshark flag it is set against, and the frames of
# each verdict.
TableRow = TypedDict("TableRow", {
    "label": str, "pcapq": str, "tshark": str, "agree": int, "explained": int, "unexplained": int,
})


@dataclass
class Comparison:
    rows: list[Row] = field(default_factory=list)

    @property
    def disagreements(self) -> list[Row]:
        return [r for r in self.rows if r.verdict != AGREE]

    @property
    def unexplained(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == UNEXPLAINED]

    def table(self) -> list[TableRow]:
        """Per pcapq label: frames agreeing, explained, unexplained."""
        out: dict[str, TableRow] = {}
        for r in self.rows:
            t = out.setdefault(
                r.label,
                {"label": r.label, "pcapq": LABELS[r.label], "tshark": TSHARK_FLAG[r.check],
                 AGREE: 0, EXPLAINED: 0, UNEXPLAINED: 0},
            )  # fmt: skip
            t[r.verdict] += 1
        order = list(LABELS)
        return sorted(out.values(), key=lambda t: order.index(t["label"]))

    def to_json(self) -> dict[str, object]:
        return {
            "table": self.table(),
            "disagreements": [asdict(r) for r in self.disagreements],
            "unexplained": len(self.unexplained),
        }


def _ts_words(f: Frame | None, *flags: str) -> str:
    if f is None:
        return "-"
    got = [x for x in flags if x in f.analysis]
    return ", ".join(got) if got else "-"


class _Conn:
    """pcapq's view of one connection, indexed by frame."""

    def __init__(self, doc: _Connection) -> None:
        self.doc = doc
        self.events: dict[int, list[_Event]] = {}
        for e in doc["events"]:
            self.events.setdefault(e["frame"], []).append(e)


def compare(doc: dict[str, Any], frames: dict[int, Frame]) -> Comparison:
    """doc: pcapq's JSON document of the capture (`json.load`); frames: tshark's TCP frames."""
    conns = [_Conn(c) for c in doc["connections"]]
    conn_of: dict[int, _Conn] = {}
    events: dict[int, list[_Event]] = {}
    for c in conns:
        for n, es in c.events.items():
            conn_of.setdefault(n, c)
            events.setdefault(n, []).extend(es)
    dropped = any(c.doc.get("events_dropped") for c in conns)
    ctx = _Context(doc, frames, events, conn_of, dropped)
    out = Comparison()
    out.rows += ctx.retransmits()
    out.rows += ctx.dup_acks()
    out.rows += ctx.zero_windows()
    out.rows += ctx.reused_ports()
    out.rows += ctx.resets()
    out.rows.sort(key=lambda r: (r.frame, r.check))
    return out


@dataclass
class _Context:
    doc: dict[str, Any]
    ts: dict[int, Frame]
    events: dict[int, list[_Event]]
    conn_of: dict[int, _Conn]
    events_dropped: bool
    _streams: dict[int, _Conn] | None = None

    def kinds(self, n: int) -> set[str]:
        return {e["kind"] for e in self.events.get(n, ())}

    def event(self, n: int, kind: str) -> _Event:
        return next(e for e in self.events[n] if e["kind"] == kind)

    def _missing(self, n: int, what: str) -> str | None:
        """A reason pcapq could not have labelled frame n, or None."""
        if n not in self.ts:
            return None
        if self.events_dropped:
            return f"pcapq kept only part of the events of some connections (events_dropped), {what} may be among them"
        return None

    # -- retransmissions --------------------------------------------------------------------

    def _retransmit_label(self, n: int) -> tuple[str, str]:
        """(label key, pcapq's words) for a frame pcapq calls a retransmission."""
        kinds = self.kinds(n) & set(RETRANSMITS)
        kind = next(k for k in RETRANSMITS if k in kinds)
        e = self.event(n, kind)
        if kind == "synack_retransmit" and e.get("after_handshake_ack"):
            return "synack_after_ack", "SYN-ACK re-sent after the client's ACK, i.e. the ACK was dropped"
        symptoms = self.conn_of[n].doc.get("symptoms") or ()
        if kind == "data_retransmit" and e["from"] == "client" and "request_unacked" in symptoms:
            why = "the final ACK was dropped" if "final_ack_dropped" in symptoms else "none of it acknowledged"
            return "request_resent", f"request re-sent (attempt {e.get('attempt')}): {why}"
        words = LABELS[kind]
        if e.get("attempt"):
            words += f" (attempt {e['attempt']})"
        return kind, words

    def retransmits(self) -> Iterable[Row]:
        mine = {n for n, es in self.events.items() if any(e["kind"] in RETRANSMITS for e in es)}
        theirs = {n for n, f in self.ts.items() if f.analysis & {"retransmission", "out_of_order"}}
        flags = ("retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order", "rto")
        for n in sorted(mine | theirs):
            f = self.ts.get(n)
            said = _ts_words(f, *flags)
            if n in mine:
                label, words = self._retransmit_label(n)
                if f is not None and "retransmission" in f.analysis:
                    if label == "synack_after_ack" and "spurious_retransmission" not in f.analysis:
                        # Both flag it; pcapq says more, and tshark's "spurious" would have hinted at it.
                        yield Row(n, "retransmit", label, said, words, EXPLAINED,
                                  "tshark never labels a SYN-ACK spurious: it says retransmission where pcapq "
                                  "sees the client's ACK dropped")
                    else:
                        yield Row(n, "retransmit", label, said, words, AGREE)
                elif f is not None and "out_of_order" in f.analysis:
                    yield Row(n, "retransmit", label, said, words, EXPLAINED,
                              "tshark: out of order (within the first RTT, 3 ms if unknown, of the highest "
                              "segment); pcapq has no timing guess: a retransmission")
                else:
                    reason = self._retransmit_missed_by_tshark(n, label)
                    yield Row(n, "retransmit", label, said, words, EXPLAINED if reason else UNEXPLAINED,
                              reason or "unexplained")
            elif f is not None:
                reason = self._retransmit_missed_by_pcapq(n, f)
                label = "syn_retransmit" if f.flags & SYN and not f.flags & 0x10 else (
                    "synack_retransmit" if f.flags & SYN else "fin_retransmit" if f.flags & FIN else "data_retransmit")
                yield Row(n, "retransmit", label, said, self._pcapq_words(n), EXPLAINED if reason else UNEXPLAINED,
                          reason or "unexplained")

    def _stream_conn(self) -> dict[int, _Conn]:
        """tshark's stream index -> pcapq's connection, from the frames that have events."""
        if self._streams is None:
            self._streams = {}
            for n, c in self.conn_of.items():
                if n in self.ts:
                    self._streams.setdefault(self.ts[n].stream, c)
        return self._streams

    def _pcapq_words(self, n: int) -> str:
        kinds = sorted(self.kinds(n))
        return ", ".join(kinds) if kinds else "-"

    def _retransmit_missed_by_tshark(self, n: int, label: str) -> str | None:
        f = self.ts.get(n)
        if f is None:
            return "tshark does not decode this frame as TCP"
        if f.analysis & {"keep_alive", "zero_window_probe"}:
            return f"tshark calls it a {'keep-alive' if 'keep_alive' in f.analysis else 'zero window probe'} first"
        e = self.event(n, next(k for k in RETRANSMITS if k in self.kinds(n)))
        c = self.conn_of[n].doc
        isn, seq = c["isn"][e["from"]], e["seq"]
        if isn is not None and seq is not None and e["len"]:
            end = (isn + seq + e["len"]) % 2**32
            if end == 0:
                return ("this side's data ends exactly at sequence number 0, which tshark keeps as "
                        "'next sequence number not known yet', so it flags no retransmission")
        return None

    def _retransmit_missed_by_pcapq(self, n: int, f: Frame) -> str | None:
        kinds = self.kinds(n)
        conn = self.conn_of.get(n)
        if "data_first" in kinds and conn is not None and "tfo_fallback" in conn.doc.get("symptoms", ()):
            return ("TCP Fast Open fallback: the SYN-ACK acknowledged only the SYN, so the client sends the SYN's "
                    "data again as its first data after the handshake (RFC 7413 §4.2); pcapq does not count it as a re-send")
        if f.analysis & {"keep_alive", "zero_window_probe"}:
            return "a keep-alive or zero window probe: pcapq does not count those as retransmissions"
        if "syn" in kinds and f.flags & SYN and not f.flags & 0x10:
            return "pcapq saw a new ISN: a new connection on the same 4-tuple, not a SYN retransmit"
        if not (f.flags & (SYN | FIN)) and f.length == 0:
            return "no payload: pcapq labels only segments that carry data, SYN or FIN again"
        # A copy has no event of its own: its connection is that of tshark's stream.
        same = conn or self._stream_conn().get(f.stream)
        if not kinds and same is not None and same.doc.get("duplicates"):
            return ("pcapq counts it a copy (the connection's duplicates): the same IP ID and header as a frame "
                    "before it, or the same bytes again sooner than a timer or duplicate ACKs could re-send them")
        return self._missing(n, "this retransmission")

    # -- duplicate ACKs ---------------------------------------------------------------------

    def dup_acks(self) -> Iterable[Row]:
        mine = {n: self.event(n, "dup_ack") for n in self.events if "dup_ack" in self.kinds(n)}
        theirs = {n for n, f in self.ts.items() if "duplicate_ack" in f.analysis}
        for n in sorted(set(mine) | theirs):
            f = self.ts.get(n)
            said = "-" if f is None or n not in theirs else f"Dup ACK #{f.dup_num} of frame {f.dup_frame}"
            e = mine.get(n)
            words = "-" if e is None else f"dup ACK #{e['dup_count']} of frame {e['dup_of']['frame']}"
            if e is not None and f is not None and n in theirs:
                if (e["dup_count"], e["dup_of"]["frame"]) == (f.dup_num, f.dup_frame):
                    yield Row(n, "dup_ack", "dup_ack", said, words, AGREE)
                else:
                    yield Row(n, "dup_ack", "dup_ack", said, words, UNEXPLAINED,
                              "both call it a duplicate ACK but count differently")
                continue
            if e is None:
                assert f is not None
                reason = self._dup_missed_by_pcapq(n, f)
                yield Row(n, "dup_ack", "dup_ack", said, self._pcapq_words(n),
                          EXPLAINED if reason else UNEXPLAINED, reason or "unexplained")
            else:
                reason = None
                if f is not None and f.analysis & {"keep_alive_ack", "zero_window_probe_ack", "window_update"}:
                    reason = "tshark calls it a keep-alive or zero window probe ACK, not a duplicate"
                said = "-" if f is None else _ts_words(f, "keep_alive_ack", "zero_window_probe_ack", "window_update")
                yield Row(n, "dup_ack", "dup_ack", said, words, EXPLAINED if reason else UNEXPLAINED,
                          reason or "unexplained")

    def _dup_missed_by_pcapq(self, n: int, f: Frame) -> str | None:
        before = [m for m in self.ts if m < n and self.ts[m].stream == f.stream]
        if before:
            prev = self.ts[max(before)]
            if prev.source != f.source and prev.flags & SYN and prev.flags & 0x10:
                return "tshark: Dup ACK; pcapq: client's answer to a re-sent SYN-ACK"
        return self._missing(n, "this duplicate ACK")

    # -- zero windows ------------------------------------------------------------------------

    def zero_windows(self) -> Iterable[Row]:
        mine = {n for n in self.events if "zero_window" in self.kinds(n)}
        theirs = {n for n, f in self.ts.items() if "zero_window" in f.analysis}
        stalled: dict[tuple[int, str], bool] = {}
        ongoing: set[int] = set()  # tshark's zero-window frames that continue a stall
        for n in sorted(self.ts):
            f = self.ts[n]
            if f.flags & (SYN | FIN | RST):
                continue
            side = (f.stream, f.source)
            if f.window == 0 and stalled.get(side):
                ongoing.add(n)
            stalled[side] = f.window == 0
        for n in sorted(mine | theirs):
            said = "zero_window" if n in theirs else "-"
            words = "zero window (first of a stall)" if n in mine else self._pcapq_words(n)
            if n in mine and n in theirs:
                yield Row(n, "zero_window", "zero_window", said, words, AGREE)
            elif n in theirs and n in ongoing:
                yield Row(n, "zero_window", "zero_window", said, words, EXPLAINED,
                          "tshark flags every segment with window 0; pcapq flags the first of each stall "
                          "(until the same side advertises a non-zero window)")
            else:
                reason = self._missing(n, "this zero window") if n in theirs else None
                yield Row(n, "zero_window", "zero_window", said, words,
                          EXPLAINED if reason else UNEXPLAINED, reason or "unexplained")

    # -- port reuse --------------------------------------------------------------------------

    def reused_ports(self) -> Iterable[Row]:
        mine = {c["first_frame"] for c in self.doc["connections"] if c.get("follows") is not None}
        theirs = {n for n, f in self.ts.items() if "reused_ports" in f.analysis}
        for n in sorted(mine | theirs):
            said = "reused_ports" if n in theirs else "-"
            words = "a connection following another on the 4-tuple" if n in mine else self._pcapq_words(n)
            if n in mine and n in theirs:
                yield Row(n, "reused_ports", "reused_ports", said, words, AGREE)
            elif n in theirs and "syn_retransmit" in self.kinds(n):
                yield Row(n, "reused_ports", "reused_ports", said, words, EXPLAINED,
                          "same ISN as the earlier SYN: pcapq calls it a retransmission of it")
            elif n in theirs and "synack" in self.kinds(n) and n in self.conn_of \
                    and self.conn_of[n].doc.get("follows") is not None:
                yield Row(n, "reused_ports", "reused_ports", said, words, EXPLAINED,
                          "the SYN-ACK of a connection on a reused 4-tuple: pcapq marks its first SYN")
            else:
                yield Row(n, "reused_ports", "reused_ports", said, words, UNEXPLAINED, "unexplained")

    # -- resets ------------------------------------------------------------------------------

    def resets(self) -> Iterable[Row]:
        mine = {n: self.event(n, "rst") for n in self.events if "rst" in self.kinds(n)}
        theirs = {n for n, f in self.ts.items() if f.flags & RST}
        for n in sorted(set(mine) | theirs):
            said = "RST" if n in theirs else "-"
            e = mine.get(n)
            words = "-" if e is None else f"RST answering {e.get('answers')}"
            if e is not None and n in theirs:
                yield Row(n, "rst", "rst", said, words, AGREE)
            else:
                reason = self._missing(n, "this RST") if e is None else None
                yield Row(n, "rst", "rst", said, words, EXPLAINED if reason else UNEXPLAINED,
                          reason or "unexplained")
