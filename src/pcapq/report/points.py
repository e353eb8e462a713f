"""Several capture points side by side: one column per point, then each point's own report."""

from __future__ import annotations

from typing import Callable, Literal, Sequence

from rich.console import Console, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from pcapq.diagnose import Diagnosis
from pcapq.points import PointAnalysis

# The counts of `Analysis.summary()` a row can show.
_Count = Literal[
    "packets", "tcp_segments", "connections", "handshakes_completed", "with_syn_retransmits",
    "with_synack_retransmits", "with_data_retransmits", "reset",
]
# Rows of the side-by-side table: label and the summary field it shows.
ROWS: list[tuple[str, _Count]] = [
    ("packets", "packets"),
    ("TCP segments", "tcp_segments"),
    ("connections", "connections"),
    ("handshakes completed", "handshakes_completed"),
    ("with SYN retransmits", "with_syn_retransmits"),
    ("with SYN-ACK retransmits", "with_synack_retransmits"),
    ("with data retransmits", "with_data_retransmits"),
    ("reset (RST)", "reset"),
]


def render_side_by_side(points: Sequence[PointAnalysis], diagnoses: Sequence[Diagnosis]) -> Table:
    """How the capture points were formed, and their counts and findings, one column each."""
    table = Table(title="Capture points", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("")
    for p in points:
        # A file name is not rich markup.
        table.add_column(Text(p.name), justify="right", overflow="fold")
    table.add_row("files", *[str(len(p.point.files)) for p in points])
    summaries = [p.analysis.summary() for p in points]
    for label, key in ROWS:
        table.add_row(label, *[f"{s[key]:,}" for s in summaries])
    table.add_row("findings", *[str(len(d.findings)) for d in diagnoses])
    table.add_row("minor observations", *[str(len(d.minor_observations)) for d in diagnoses])
    table.add_row("first finding", *[f"{d.findings[0].cause} on {d.findings[0].server}" if d.findings else "-" for d in diagnoses])
    return table


def print_points(
    points: Sequence[PointAnalysis],
    diagnoses: Sequence[Diagnosis],
    console: Console,
    print_one: Callable[[PointAnalysis, Diagnosis, Console], None],
    between: RenderableType | None = None,
) -> None:
    """The side-by-side table, the files of each point in the order they were joined, what
    happened between the two points when they were aligned (`between`), then each point's
    report as `print_one` prints it."""
    console.print(render_side_by_side(points, diagnoses))
    console.print()
    for p in points:
        files = ", ".join("standard input" if f.path == "-" else f.path for f in p.point.files)
        console.print(Text(f"{p.name}: {files}", style="dim"))
    if between is not None:
        console.print()
        console.print(between)
    for p, d in zip(points, diagnoses):
        console.print()
        console.print(Rule(Text(p.name), align="left"))
        print_one(p, d, console)
