"""The crosscheck report for people: the terminal (rich), Markdown for a ticket, one
self-contained HTML page. The JSON is `Crosscheck.to_json()`."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pcapq.crosscheck import Crosscheck
from pcapq.crosscheck.compare import AGREE, EXPLAINED, UNEXPLAINED, Row, TableRow


def _heading(c: Crosscheck) -> str:
    return f"{c.path}: {c.packets:,} packets; tshark: {c.tshark.version}, two-pass (-2), {c.tshark.note}"


def _verdict(rows: list[TableRow]) -> tuple[str, bool]:
    """The closing sentence, and whether anything is unexplained."""
    agree = sum(t[AGREE] for t in rows)
    explained = sum(t[EXPLAINED] for t in rows)
    unexplained = sum(t[UNEXPLAINED] for t in rows)
    return f"{agree:,} agree, {explained:,} explained differences, {unexplained:,} unexplained.", bool(unexplained)


TABLE_HEADER = ["pcapq label", "tshark flag", "agree", "explained", "unexplained"]
DISAGREEMENT_HEADER = ["frame", "tshark said", "pcapq said", "reason"]


def _reason(r: Row) -> str:
    return "UNEXPLAINED" if r.verdict == UNEXPLAINED else r.reason


def render_markdown(c: Crosscheck) -> str:
    from pcapq.report.escape import md_text
    from pcapq.report.markdown import table

    rows = c.comparison.table()
    out = ["# pcapq crosscheck", "", md_text(_heading(c)), ""]
    if rows:
        out += ["## Agreement per label", ""]
        out += table(
            TABLE_HEADER,
            [[md_text(t["pcapq"]), md_text(t["tshark"]), str(t[AGREE]), str(t[EXPLAINED]), str(t[UNEXPLAINED])] for t in rows],
            right={2, 3, 4},
        )
        out.append("")
    else:
        out += ["Neither pcapq nor tshark labels any frame: nothing to compare.", ""]
    if c.comparison.disagreements:
        out += ["## Disagreements", ""]
        out += table(
            DISAGREEMENT_HEADER,
            [[str(r.frame), md_text(r.tshark), md_text(r.pcapq), md_text(_reason(r))] for r in c.comparison.disagreements],
            right={0},
        )
        out.append("")
    sentence, bad = _verdict(rows)
    out += [f"**{sentence}**" if bad else sentence, ""]
    return "\n".join(out)


def render_html(c: Crosscheck) -> str:
    from pcapq.report.escape import html_text as h
    from pcapq.report.html import page

    def html_table(header: list[str], rows: list[list[str]], right: set[int], bad: list[bool], wrap: int = -1) -> str:
        def cls(i: int) -> str:
            return ' class="num"' if i in right else ' class="wrap"' if i == wrap else ""

        head = "".join(f"<th{cls(i)}>{h(x)}</th>" for i, x in enumerate(header))
        body = "".join(
            ("<tr class=\"bad\">" if flagged else "<tr>")
            + "".join(f"<td{cls(i)}>{h(x)}</td>" for i, x in enumerate(row))
            + "</tr>"
            for row, flagged in zip(rows, bad)
        )
        return f'<table class="conns captures"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'

    rows = c.comparison.table()
    body = [f"<h1>pcapq crosscheck: {h(c.path)}</h1>", f'<p class="muted">{h(_heading(c))}</p>']
    if rows:
        body += [
            "<h2>Agreement per label</h2>",
            html_table(
                TABLE_HEADER,
                [[t["pcapq"], t["tshark"], str(t[AGREE]), str(t[EXPLAINED]), str(t[UNEXPLAINED])] for t in rows],
                {2, 3, 4},
                [bool(t[UNEXPLAINED]) for t in rows],
            ),
        ]
    else:
        body.append("<p>Neither pcapq nor tshark labels any frame: nothing to compare.</p>")
    found = c.comparison.disagreements
    if found:
        body += [
            "<h2>Disagreements</h2>",
            html_table(
                DISAGREEMENT_HEADER,
                [[str(r.frame), r.tshark, r.pcapq, _reason(r)] for r in found],
                {0},
                [r.verdict == UNEXPLAINED for r in found],
                wrap=len(DISAGREEMENT_HEADER) - 1,
            ),
        ]
    sentence, bad = _verdict(rows)
    body.append(f"<p><strong>{h(sentence)}</strong></p>" if bad else f"<p>{h(sentence)}</p>")
    return page(f"pcapq crosscheck: {c.path}", "\n".join(body))


def render(c: Crosscheck) -> Group:
    parts: list[RenderableType] = []
    comp = c.comparison
    parts.append(Text(_heading(c)))
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

    sentence, bad = _verdict(rows)
    parts.append(Text(f"\n{sentence}", style="bold red" if bad else "bold green"))
    return Group(*parts)
