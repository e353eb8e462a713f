"""The crosscheck report for people (rich) and as JSON."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from pcapq.crosscheck import Crosscheck
from pcapq.crosscheck.compare import AGREE, EXPLAINED, UNEXPLAINED


def render(c: Crosscheck):
    parts: list = []
    comp = c.comparison
    parts.append(
        Text(f"{c.path}: {c.packets:,} packets; tshark: {c.tshark.version}, two-pass (-2), {c.tshark.note}")
    )
    table = Table(title="Agreement per label", title_justify="left", show_edge=False)
    table.add_column("pcapq label")
    table.add_column("tshark flag")
    table.add_column("agree", justify="right")
    table.add_column("explained", justify="right")
    table.add_column("unexplained", justify="right")
    rows = comp.table()
    for t in rows:
        style = "bold red" if t[UNEXPLAINED] else None
        table.add_row(t["pcapq"], t["tshark"], str(t[AGREE]), str(t[EXPLAINED]), str(t[UNEXPLAINED]), style=style)
    if rows:
        parts += [Text(), table]
    else:
        parts += [Text(), Text("Neither pcapq nor tshark labels any frame: nothing to compare.")]

    if comp.disagreements:
        d = Table(title="Disagreements", title_justify="left", show_edge=False)
        d.add_column("frame", justify="right")
        d.add_column("tshark said")
        d.add_column("pcapq said")
        d.add_column("reason")
        for r in comp.disagreements:
            if r.verdict == UNEXPLAINED:
                d.add_row(str(r.frame), r.tshark, r.pcapq, Text("UNEXPLAINED", style="bold red"))
            else:
                d.add_row(str(r.frame), r.tshark, r.pcapq, r.reason)
        parts += [Text(), d]

    agree = sum(t[AGREE] for t in rows)
    explained = sum(t[EXPLAINED] for t in rows)
    unexplained = sum(t[UNEXPLAINED] for t in rows)
    verdict = Text(
        f"\n{agree:,} agree, {explained:,} explained differences, {unexplained:,} unexplained.",
        style="bold red" if unexplained else "bold green",
    )
    parts.append(verdict)
    return Group(*parts)
