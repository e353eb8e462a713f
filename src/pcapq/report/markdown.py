"""Markdown reports that paste cleanly into a ticket (GitHub / GitLab flavoured tables).
Text from the capture (file names) goes through `escape.md_text`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Collection, Optional

from pcapq.report import inferred
from pcapq.report import timeline as tl
from pcapq.report.finding_rows import MINOR_HEADER, finding_rows, minor_rows
from pcapq.report.escape import md_code, md_text
from pcapq.causes.registry import title
from pcapq.report.notes import note_rows
from pcapq.report.model import AnalyzeReport, ConnectionRow
from pcapq.report.clock import utc_clock
from pcapq.report.proxy_line import timing_sentence, verdict, where
from pcapq.report.evidence import section_rows

if TYPE_CHECKING:
    from pcapq.evidence.logs import ProxyLogNote


def _utc_date(epoch: float) -> str:
    return utc_clock(epoch, with_date=True) + " UTC"


def table(header: list[str], rows: list[list[str]], right: Collection[int] = frozenset()) -> list[str]:
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _latency(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds else "-"


def worst_table(rows: list[ConnectionRow]) -> list[str]:
    return table(
        ["id", "client port", "server", "outcome", "symptoms", "added latency", "first frame"],
        [
            [
                str(r.id), r.client_port, md_text(r.server), md_code(r.outcome),
                ", ".join(md_code(s) for s in r.symptoms) or "-", _latency(r.added_latency),
                str(r.frame) + (f" (file {r.file})" if r.file else ""),
            ]
            for r in rows
        ],
        right={0, 1, 5, 6},
    )


def aggregate_table(agg: tl.Aggregate) -> list[str]:
    outcomes = [o for o in tl.OUTCOMES if any(b.new[o] for b in agg.buckets)]
    rows = []
    for b in agg.buckets:
        rows.append(
            [utc_clock(b.start)[:8], str(b.connections)]
            + [str(b.new[o]) for o in outcomes]
            + [str(b.retransmissions), str(b.waiting_peak)]
        )
    header = ["start (UTC)", "new"] + [o.replace("_", " ") for o in outcomes] + ["retransmissions", "waiting (peak)"]
    servers = f" Summed over {agg.servers} servers." if agg.servers > 1 else ""
    return [f"Buckets of {agg.width} s. *waiting*: connections established for the client and not yet answered "
            f"by the server (an estimate of the accept queue: the most at the end of any second of the bucket).{servers}"] + [""] + table(
        header, rows, right=set(range(1, len(header)))
    )


def render_analyze(report: AnalyzeReport) -> str:
    d = report.diagnosis
    out: list[str] = ["# pcapq analysis", ""]
    files = ", ".join(md_text(c["path"] if c["path"] != "-" else "standard input") for c in report.captures)
    out += [f"Captures: {files}", ""]
    if d.interrupted is not None:
        out += [f"> **{md_text(d.interrupted.sentence())}.**", ""]
    notes = note_rows(report.captures)
    if notes:
        out += ["## Capture notes", ""] + table(["what", "text"], [[md_text(what), md_text(text)] for what, text in notes]) + [""]
    out += ["## Findings", ""]
    if not d.findings:
        out += [md_text(d.nothing_found()), ""]
    for f in d.findings:
        out += [f"### {title(f.cause)} on {md_text(f.server)}", ""]
        for row in finding_rows(f, report.start, lambda t: utc_clock(t, with_date=True)):
            text = md_code(row.text) if row.kind == "code" else md_text(row.text)
            out.append(f"- **{row.label[0].upper() + row.label[1:]}:** {text}")
        out.append("")
    if d.minor_observations:
        out += ["## Minor observations", ""]
        out += table(list(MINOR_HEADER), [[md_text(cell) for cell in row] for row in minor_rows(d)], right={2}) + [""]
    out += [f"Capture point: {md_code(d.capture_point.side)} ({md_text(d.capture_point.reason)})", ""]
    for sentence in d.settings:
        out.append(f"- Kernel: {md_text(sentence)}")
    if d.settings:
        out.append("")
    if d.inferred_settings is not None:
        out += [f"## {md_text(inferred.title(d.inferred_settings))}", ""]
        out += table(list(inferred.HEADER), [[md_text(cell) for cell in row] for row in inferred.rows(d.inferred_settings)])
        out.append("")
    evidence = section_rows(d)
    if evidence:
        out += ["## Evidence beyond the capture", ""]
        out += table(["what", "says"], [[md_text(label.strip()), md_text(text)] for label, text in evidence]) + [""]
    if report.worst:
        more = f" ({report.problems:,} in all)" if report.problems > len(report.worst) else ""
        out += [f"## Worst connections{more}", ""] + worst_table(report.worst) + [""]
    if report.aggregate is not None and report.aggregate.buckets:
        out += ["## Timeline", ""] + aggregate_table(report.aggregate) + [""]
    s = report.summary
    total = s["connections"]

    def pct(n: int) -> str:
        return f"{n:,} ({100.0 * n / total:.1f}%)" if total else f"{n:,}"

    rows = [
        ["packets", f"{s['packets']:,}"],
        ["TCP segments", f"{s['tcp_segments']:,}"],
        ["connections", f"{total:,}"],
        ["handshakes completed", pct(s["handshakes_completed"])],
        ["with SYN retransmits", pct(s["with_syn_retransmits"])],
        ["with SYN-ACK retransmits", pct(s["with_synack_retransmits"])],
        ["with data retransmits", pct(s["with_data_retransmits"])],
        ["reset (RST)", pct(s["reset"])],
    ]
    rows += [[f"outcome {md_code(k)}", pct(v)] for k, v in s["outcomes"].items() if v]
    rows += [[f"symptom {md_code(k)}", pct(v)] for k, v in s["symptoms"].items() if v]
    out += ["## Totals", ""] + table(["", "count"], rows, right={1}) + [""]
    for w in report.warnings:
        out.append(f"> warning: {md_text(w)}")
    return "\n".join(out).rstrip() + "\n"


def proxy_log_lines(note: ProxyLogNote) -> list[str]:
    """The proxy's line tied to a connection, as written (escaped: a log's text is no Markdown), and
    the proxy's times against the capture's."""
    out = [f"**Proxy log** {md_text(where(note))}, {md_text(verdict(note))}: \"{md_text(note['text'])}\"", ""]
    sentence = timing_sentence(note)
    if sentence is not None:
        out += [md_text(sentence), ""]
    return out


def connection_section(t: tl.ConnectionTimeline) -> list[str]:
    symptoms = ", ".join(md_code(s) for s in t.symptoms) or "no symptom"
    out = [
        f"### Connection {t.id}: {md_text(t.client)} → {md_text(t.server)}",
        "",
        f"{md_code(t.outcome)}, {symptoms}; first packet {_utc_date(t.first_time)}, lasted {t.duration:.3f} s"
        + (f", {t.added_latency:.3f} s added by retransmissions" if t.added_latency else ""),
        "",
    ]
    if t.proxy_log is not None:
        out += proxy_log_lines(t.proxy_log)
    rows = [
        [
            str(r.frame) + (f" (file {r.file})" if r.file else ""), f"{r.offset:.6f}", r.arrow, md_code(r.flags),
            "" if r.seq is None else str(r.seq), "" if r.ack is None else str(r.ack), str(r.length), md_text(r.note),
        ]
        for r in t.rows
    ]
    out += table(["frame", "time (s)", "dir", "flags", "seq", "ack", "len", "what it means"], rows, right={0, 1, 4, 5, 6})
    if t.events_dropped:
        out += ["", f"{t.events_dropped} later events were not kept (a long transfer's duplicate ACKs)."]
    return out + [""]


def render_timelines(
    timelines: list[tl.ConnectionTimeline], aggregate: Optional[tl.Aggregate], matched: int, source: str
) -> str:
    out = [f"# pcapq timeline: {md_text(source)}", ""]
    if aggregate is not None and aggregate.buckets:
        out += ["## Across the capture", ""] + aggregate_table(aggregate) + [""]
    if timelines or aggregate is None:
        out += [f"## Connections ({len(timelines)} of {matched} matching)", "", "→ client to server, ← server to client.", ""]
    for t in timelines:
        out += connection_section(t)
    return "\n".join(out).rstrip() + "\n"
