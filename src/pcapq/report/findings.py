"""Findings for people: what went wrong, where, when, how sure, and what to change."""

from __future__ import annotations


from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pcapq.diagnose import Diagnosis, Finding
from pcapq.report.evidence import section_rows
from pcapq.report.finding_rows import finding_rows

from pcapq.causes.registry import title


def finding_title(f: Finding) -> str:
    return f"{title(f.cause)} on {f.server}"


class LabelledRows:
    """A finding's rows as a grid: the labels in bold, the texts beside them, wrapped.

    To size a grid's columns rich measures every cell: the longest line and the longest word of
    each text, about a quarter of the time the findings take to render (docs/performance.md).
    Where a text runs past the width left to it, the sizes rich arrives at are known: the
    labels' width (their longest line, which is what rich measures), and the rest for the
    texts. The grid is given those, and measures nothing more. A narrow console, or texts that
    all fit, keep rich's measuring. The output is the same either way (tests/test_findings.py
    renders both at many widths).
    """

    # Table.grid(padding=(0, 2)): two columns apart; nothing before the first or after the last.
    GAP = 2

    def __init__(self, rows: list[tuple[str, Text]]) -> None:
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.grid(*self.widths(console, options))

    def widths(self, console: Console, options: ConsoleOptions) -> tuple[int | None, int | None]:
        """The columns' widths rich would give them, or (None, None) for rich to measure."""
        label_width = max(widest_line(console.render_str(label, markup=options.markup, highlight=False)) for label, _ in self.rows)
        text_width = options.max_width - label_width - self.GAP
        longest = max(widest_line(text) for _, text in self.rows)
        # rich narrows the wider column first: the texts', down to the labels' width at most.
        if text_width >= label_width + self.GAP and longest >= text_width:
            return label_width, text_width
        return None, None

    def grid(self, label_width: int | None, text_width: int | None) -> Table:
        grid = Table.grid(padding=(0, self.GAP))
        grid.add_column(style="bold", width=label_width)
        grid.add_column(width=text_width)
        for label, text in self.rows:
            grid.add_row(label, text)
        return grid


def widest_line(text: Text) -> int:
    """The cells of a text's longest line: the most rich measures it needs (Text.__rich_measure__)."""
    return max((cell_len(line) for line in text.plain.splitlines()), default=0)


def render_finding(f: Finding, capture_start: float | None) -> Panel:
    rows = LabelledRows([(row.label, Text(row.text)) for row in finding_rows(f, capture_start)])
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
