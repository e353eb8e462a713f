"""Findings for people: what went wrong, where, when, how sure, and what to change."""

from __future__ import annotations


from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pcapq.diagnose import Diagnosis, Finding
from pcapq.report.evidence import section_rows
from pcapq.report.finding_rows import finding_rows

from pcapq.causes.registry import title


def finding_title(f: Finding) -> str:
    return f"{title(f.cause)} on {f.server}"


def render_finding(f: Finding, capture_start: float | None) -> Panel:
    rows = Table.grid(padding=(0, 2))
    rows.add_column(style="bold")
    rows.add_column()
    for row in finding_rows(f, capture_start):
        rows.add_row(row.label, Text(row.text))
    title = Text(finding_title(f), style="bold red" if f.confidence >= 0.7 else "bold yellow")
    return Panel(rows, title=title, title_align="left", expand=True)


def render_findings(d: Diagnosis, capture_start: float | None) -> Group:
    parts: list[object] = []
    if d.interrupted is not None:
        parts.append(Text(d.interrupted.sentence() + ".", style="bold yellow"))
    if not d.findings:
        parts.append(Text(d.nothing_found(), style="yellow" if d.no_tcp else "green"))
    for f in d.findings:
        parts.append(render_finding(f, capture_start))
    parts.append(Text(f"Capture point: {d.capture_point.side} ({d.capture_point.reason})", style="dim"))
    for sentence in d.settings:
        parts.append(Text(f"Kernel: {sentence}", style="dim"))
    evidence = section_rows(d)
    if evidence:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for label, text in evidence:
            table.add_row(label, text)
        parts.append(Panel(table, title=Text("Evidence beyond the capture", style="bold"), title_align="left", expand=True))
    return Group(*parts)
