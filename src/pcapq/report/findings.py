"""Findings for people: what went wrong, where, when, how sure, and what to change."""

from __future__ import annotations


from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pcapq.diagnose import Diagnosis, Finding
from pcapq.report.clock import utc_clock

from pcapq.causes.registry import title


def finding_title(f: Finding) -> str:
    return f"{title(f.cause)} on {f.server}"


def render_finding(f: Finding, capture_start: float | None) -> Panel:
    rows = Table.grid(padding=(0, 2))
    rows.add_column(style="bold")
    rows.add_column()
    offset = f" (+{f.first - capture_start:.3f} s into the capture)" if capture_start is not None else ""
    rows.add_row("when", f"{utc_clock(f.first)} to {utc_clock(f.last)} UTC{offset}")
    ids = ", ".join(str(i) for i in f.connections[:12]) + (" ..." if len(f.connections) > 12 else "")
    rows.add_row("connections", f"{f.connection_count:,} (ids {ids})" if ids else f"{f.connection_count:,}")
    rows.add_row("confidence", f"{f.confidence:.2f}: {f.confidence_reason}")
    frames = ", ".join(f"{e['frame']}" + (f" (file {e['file']})" if e["file"] else "") for e in f.evidence)
    rows.add_row("open in Wireshark", f"frames {frames}" if frames else "-")
    if f.rests_on:
        rows.add_row("rests on", "; ".join(f.rests_on))
    if f.disproved_by:
        rows.add_row("would disprove it", "; ".join(f.disproved_by))
    for key in ("estimate_note", "suggestion_note"):
        if key in f.details:
            rows.add_row("queue" if key == "estimate_note" else "sizing", f.details[key])
    for line in f.proxy_log:
        rows.add_row("proxy log", line)
    rows.add_row("what to do", f.advice)
    title = Text(finding_title(f), style="bold red" if f.confidence >= 0.7 else "bold yellow")
    return Panel(rows, title=title, title_align="left", expand=True)


def render_findings(d: Diagnosis, capture_start: float | None) -> Group:
    parts: list[object] = []
    if d.interrupted is not None:
        parts.append(Text(d.interrupted.sentence() + ".", style="bold yellow"))
    if not d.findings:
        parts.append(Text("No failures found: no connection shows a listen-queue, loss or timeout problem.", style="green"))
    for f in d.findings:
        parts.append(render_finding(f, capture_start))
    parts.append(Text(f"Capture point: {d.capture_point.side} ({d.capture_point.reason})", style="dim"))
    for sentence in d.settings:
        parts.append(Text(f"Kernel: {sentence}", style="dim"))
    return Group(*parts)
