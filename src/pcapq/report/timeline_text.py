"""Terminal renderings (rich) of the worst-connections table, the aggregate timeline and the
per-connection timelines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from rich.console import Group
from rich.table import Table
from rich.text import Text

from pcapq.report.model import ConnectionRow
from pcapq.report.clock import utc_clock
from pcapq.report.proxy_line import timing_sentence, verdict, where

if TYPE_CHECKING:
    from pcapq.evidence.logs import ProxyLogNote
    from pcapq.report.aggregate import Aggregate
    from pcapq.report.timeline import ConnectionTimeline

OUTCOME_STYLES = {
    "completed": "green",
    "open": "",
    "refused": "magenta",
    "timed_out": "red",
    "abandoned": "yellow",
    "reset_by_server": "red",
    "reset_by_client": "yellow",
    "partial": "dim",
    "unreachable": "magenta",
    "closed_by_server": "red",
}


def worst_table(rows: list[ConnectionRow], total: int) -> Table:
    more = f" ({total:,} in all; `pcapq timeline --failed` shows them packet by packet)" if total > len(rows) else ""
    t = Table(title=f"Worst connections{more}", title_justify="left", show_edge=False, pad_edge=False)
    t.add_column("id", justify="right")
    t.add_column("client port", justify="right")
    t.add_column("server")
    t.add_column("outcome")
    t.add_column("symptoms")
    t.add_column("added latency", justify="right")
    t.add_column("first frame", justify="right")
    for r in rows:
        t.add_row(
            str(r.id), r.client_port, r.server, Text(r.outcome.replace("_", " "), style=OUTCOME_STYLES.get(r.outcome, "")),
            Text(", ".join(s.replace("_", " ") for s in r.symptoms) or "-", style="yellow"),
            f"{r.added_latency:.3f} s" if r.added_latency else "-",
            str(r.frame) + (f" (file {r.file})" if r.file else ""),
        )
    return t


# What each symptom of the worst-connections table means, in one line (docs/diagnosis.md has
# the rules).
SYMPTOM_MEANINGS = {
    "syn_retransmitted": "the client sent its SYN again: no SYN-ACK came in time",
    "synack_retransmitted": "the server sent its SYN-ACK again: no ACK came in time",
    "final_ack_dropped": "the server re-sent its SYN-ACK after the client's ACK: its kernel dropped that ACK (accept queue full)",
    "request_unacked": "the client re-sent its request while the server had acknowledged none: no connection on the server's side",
    "data_retransmitted": "data re-sent, either way",
    "syncookie_suspected": "the request went unacknowledged and the server never re-sent its SYN-ACK: it answered with a SYN cookie and kept nothing (a full queue)",
    "reset_after_ack": "the server reset the connection on the handshake ACK or request: net.ipv4.tcp_abort_on_overflow=1 and a full accept queue",
    "reset_after_expiry": "the server reset a late segment: the half-open request had expired",
    "rejected": "an RST answered the SYN",
}


def symptom_legend(rows: list[ConnectionRow]) -> Optional[Table]:
    """One line per symptom the rows show, in the core's order."""
    seen = {s for r in rows for s in r.symptoms}
    shown = [s for s in SYMPTOM_MEANINGS if s in seen]
    if not shown:
        return None
    t = Table(show_header=False, show_edge=False, pad_edge=False, box=None, padding=(0, 1))
    t.add_column("symptom", style="yellow", no_wrap=True)
    t.add_column("meaning", style="dim")
    for s in shown:
        t.add_row(s.replace("_", " "), SYMPTOM_MEANINGS[s])
    return t


def aggregate_table(agg: Aggregate) -> Group:
    from pcapq.report.aggregate import OUTCOMES

    if not agg.buckets:
        return Group(Text("No connections to show (none in the capture, or none in the time asked for).", style="dim"))
    outcomes = [o for o in OUTCOMES if any(b.new[o] for b in agg.buckets)]
    t = Table(title=f"Across the capture, buckets of {agg.width} s", title_justify="left", show_edge=False, pad_edge=False)
    t.add_column("start (UTC)")
    t.add_column("new", justify="right")
    for o in outcomes:
        t.add_column(o.replace("_", " "), justify="right", style=OUTCOME_STYLES.get(o, ""))
    t.add_column("retransmits", justify="right")
    t.add_column("waiting", justify="right")
    t.add_column("episode")
    for b in agg.buckets:
        end = b.start + agg.width
        episode = ", ".join(sorted({e.cause.replace("_", " ") for e in agg.episodes if e.first < end and e.last >= b.start}))
        t.add_row(
            utc_clock(b.start)[:8], str(b.connections), *[str(b.new[o]) for o in outcomes], str(b.retransmissions),
            str(b.waiting_peak), Text(episode, style="red"),
        )
    note = Text(
        "waiting: connections established for the client and not yet answered by the server (an estimate of "
        "the accept queue: the most at the end of any second of the bucket)"
        + (f"; summed over {agg.servers} servers, --server shows one" if agg.servers > 1 else ""),
        style="dim",
    )
    return Group(t, note)


def proxy_log_lines(note: ProxyLogNote) -> list[Text]:
    """The proxy's line tied to a connection, under its header: where it is, its status and
    kind, the line as written; then the proxy's times against the capture's, when it has them."""
    quoted = '"' + note["text"] + '"'
    lines = [Text.assemble(("proxy log  ", "bold"), f"{where(note)}  {verdict(note)}  ", (quoted, "dim"))]
    sentence = timing_sentence(note)
    if sentence is not None:
        lines.append(Text(sentence, style="dim"))
    return lines


def connection_table(t: ConnectionTimeline) -> Group:
    symptoms = ", ".join(s.replace("_", " ") for s in t.symptoms) or "no symptom"
    latency = f", {t.added_latency:.3f} s added by retransmissions" if t.added_latency else ""
    head = Text.assemble(
        (f"Connection {t.id}: {t.client} → {t.server}  ", "bold"),
        (t.outcome.replace("_", " "), OUTCOME_STYLES.get(t.outcome, "") + " bold"),
        (f", {symptoms}; first packet {utc_clock(t.first_time)} UTC, {t.duration:.3f} s{latency}", ""),
    )
    table = Table(show_edge=False, pad_edge=False, box=None, padding=(0, 1))
    table.add_column("frame", justify="right")
    table.add_column("time", justify="right")
    table.add_column("")
    table.add_column("flags")
    table.add_column("seq", justify="right")
    table.add_column("ack", justify="right")
    table.add_column("len", justify="right")
    if t.path is not None:
        table.add_column("path", no_wrap=True)
    table.add_column("what it means", overflow="fold")
    for i, r in enumerate(t.rows):
        style = "red" if r.kind in ("rst", "vanished") else "yellow" if "retransmit" in r.kind else ""
        path = [Text(t.path[i], style="red" if "✕" in t.path[i] else "")] if t.path is not None else []
        table.add_row(
            (str(r.frame) + (f"/{r.file}" if r.file else "")) if r.frame else "-", f"{r.offset:.6f}", r.arrow, r.flags,
            "" if r.seq is None else str(r.seq), "" if r.ack is None else str(r.ack), str(r.length), *path, Text(r.note, style=style),
        )
    parts: list[Any] = [head]
    if t.path_legend is not None:
        parts.append(Text(t.path_legend, style="dim"))
    if t.proxy_log is not None:
        parts += proxy_log_lines(t.proxy_log)
    parts.append(table)
    if t.events_dropped:
        parts.append(Text(f"{t.events_dropped} later events were not kept.", style="dim"))
    parts.append(Text(""))
    return Group(*parts)


def render_timelines(timelines: list[ConnectionTimeline], aggregate: Optional[Aggregate], matched: int) -> Group:
    parts: list[Any] = []
    if aggregate is not None:
        parts += [aggregate_table(aggregate), Text("")]
    if timelines or aggregate is None:
        more = f"; --limit shows more" if matched > len(timelines) else ""
        parts.append(Text(f"{len(timelines)} of {matched} matching connections{more}. → client to server, ← server to client.\n", style="dim"))
    parts += [connection_table(t) for t in timelines]
    return Group(*parts)
