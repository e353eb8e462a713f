"""Findings for people: what went wrong, where, when, how sure, and what to change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from pcapq.diagnose import Diagnosis, Finding
from pcapq.report import inferred
from pcapq.report.evidence import section_rows
from pcapq.report.finding_rows import MINOR_HEADER, finding_rows, minor_rows

from pcapq.causes.registry import title

if TYPE_CHECKING:
    from pcapq._core import _InferredSettings


def finding_title(f: Finding) -> str:
    return f"{title(f.cause)} on {f.server}"


class LabelledRows:
    """A finding's rows: the labels in bold, the texts beside them, wrapped, as a grid lays them
    out.

    To size a grid's columns rich measures every cell: the longest line and the longest word of
    each text, a large share of the time the findings take to render.
    Where a text runs past the width left to it, the sizes rich arrives at are known: the
    labels' width (their longest line, which is what rich measures), and the rest for the
    texts (`widths`). With those, the rows are laid out here as the grid would lay them out,
    cell by cell with rich's own wrapping and padding, without the grid's and its cells' layers
    of rendering (`lines`). A narrow console, or texts that all fit, get rich's grid (`grid`).
    The output is the same either way (tests/test_findings.py renders both at many widths).
    """

    # Table.grid(padding=(0, 2)): two columns apart; nothing before the first or after the last.
    GAP = 2

    def __init__(self, rows: list[tuple[str, Text]]) -> None:
        self.rows = rows

    def widths(self, console: Console, options: ConsoleOptions) -> tuple[int | None, int | None]:
        """The columns' widths rich would give them, or (None, None) for rich to measure."""
        label_width = max(widest_line(console.render_str(label, markup=options.markup, highlight=False)) for label, _ in self.rows)
        text_width = options.max_width - label_width - self.GAP
        longest = max(widest_line(text) for _, text in self.rows)
        # rich narrows the wider column first: the texts', down to the labels' width at most.
        if text_width >= label_width + self.GAP and longest >= text_width:
            return label_width, text_width
        return None, None

    def lines(self, console: Console, options: ConsoleOptions, label_width: int, text_width: int) -> list[list[Segment]]:
        """The grid's lines at these widths: each label bold and padded to its column, the gap
        (bold too, as the label's cell padding is), the text wrapped and padded to the rest; the
        shorter cell of a row filled with blank lines of its style."""
        label_style, text_style = console.get_style("bold"), Style.null()
        # What the grid gives each cell: its column's width and rich's defaults for a column.
        cell = options.update(justify="left", overflow="ellipsis", no_wrap=False, highlight=False, height=None)
        label_options, text_options = cell.update_width(label_width), cell.update_width(text_width)
        gap = Segment(" " * self.GAP, label_style)
        label_blank = [Segment(" " * (label_width + self.GAP), label_style)]
        text_blank = [Segment(" " * text_width, text_style)]
        out = []
        for label, text in self.rows:
            labels = [line + [gap] for line in console.render_lines(label, label_options, style=label_style)]
            texts = console.render_lines(text, text_options, style=text_style)
            for i in range(max(len(labels), len(texts))):
                out.append((labels[i] if i < len(labels) else label_blank) + (texts[i] if i < len(texts) else text_blank))
        return out

    def grid(self) -> Table:
        """The rows as rich's grid, which measures every cell."""
        grid = Table.grid(padding=(0, self.GAP))
        grid.add_column(style="bold")
        grid.add_column()
        for label, text in self.rows:
            grid.add_row(label, text)
        return grid


def widest_line(text: Text) -> int:
    """The cells of a text's longest line: the most rich measures it needs (Text.__rich_measure__)."""
    return max((cell_len(line) for line in text.plain.splitlines()), default=0)


class FindingPanel:
    """A finding as a panel: `Panel(rows.grid(), title=title, title_align="left", expand=True)`,
    with the border drawn here around the rows' lines when `LabelledRows` lays them out itself,
    instead of through the panel's and its padding's layers of rendering. The top and bottom
    lines are rich's own, from the panel with nothing in it."""

    def __init__(self, rows: LabelledRows, title: Text) -> None:
        self.rows = rows
        self.title = title

    def panel(self, renderable: RenderableType) -> Panel:
        return Panel(renderable, title=self.title, title_align="left", expand=True)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # The panel's border and its padding of one column each side.
        inner = options.update_width(options.max_width - 4)
        label_width, text_width = self.rows.widths(console, inner)
        if label_width is None or text_width is None:
            yield self.panel(self.rows.grid())
            return
        empty = self.panel("")
        top, _, bottom = console.render_lines(empty, options, new_lines=True)
        # The body as Panel draws it: the box's sides in the border style (none), the
        # padding unstyled.
        box = empty.box.substitute(options, safe=console.safe_box)
        border, pad = console.get_style(empty.border_style), Style.null()
        start = [Segment(box.mid_left, border), Segment(" ", pad)]
        end = [Segment(" ", pad), Segment(box.mid_right, border), Segment.line()]
        yield from top
        for line in self.rows.lines(console, inner, label_width, text_width):
            yield from start
            yield from line
            yield from end
        yield from bottom


def render_finding(f: Finding, capture_start: float | None) -> FindingPanel:
    rows = LabelledRows([(row.label, Text(row.text)) for row in finding_rows(f, capture_start)])
    title = Text(finding_title(f), style="bold red" if f.confidence >= 0.7 else "bold yellow")
    return FindingPanel(rows, title)


def minor_table(d: Diagnosis) -> Table:
    """The findings below their cause's materiality, a line each."""
    t = Table(title="Minor observations", title_justify="left", show_edge=False, pad_edge=False)
    for name in MINOR_HEADER:
        t.add_column(name, justify="right" if name == "connections" else "left")
    for row in minor_rows(d):
        t.add_row(*row)
    return t


def inferred_table(settings: _InferredSettings) -> Table:
    """The settings the capture shows of the listener (pcapq.report.inferred)."""
    t = Table(title=inferred.title(settings), title_justify="left", show_edge=False, pad_edge=False)
    for name in inferred.HEADER:
        t.add_column(name, overflow="fold")
    for row in inferred.rows(settings):
        t.add_row(*row)
    return t


def render_findings(d: Diagnosis, capture_start: float | None) -> Group:
    parts: list[RenderableType] = []
    if d.interrupted is not None:
        parts.append(Text(d.interrupted.sentence() + ".", style="bold yellow"))
    if not d.findings:
        parts.append(Text(d.nothing_found(), style="yellow" if d.no_tcp else "green"))
    for f in d.findings:
        parts.append(render_finding(f, capture_start))
    if d.minor_observations:
        parts.append(minor_table(d))
    parts.append(Text(f"Capture point: {d.capture_point.side} ({d.capture_point.reason})", style="dim"))
    for sentence in d.settings:
        parts.append(Text(f"Kernel: {sentence}", style="dim"))
    if d.inferred_settings is not None:
        parts.append(inferred_table(d.inferred_settings))
    evidence = section_rows(d)
    if evidence:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for label, text in evidence:
            table.add_row(label, text)
        parts.append(Panel(table, title=Text("Evidence beyond the capture", style="bold"), title_align="left", expand=True))
    return Group(*parts)
