"""The report of `analyze` and `watch` written in the format asked (`render`): JSON, text,
Markdown, HTML or Parquet, for one capture point, several, or two aligned."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from pcapq import _core
from pcapq.exitcodes import ExitCode
from pcapq.output import console_for, deliver, fail, reason

if TYPE_CHECKING:
    from rich.console import Console

    from pcapq.diagnose.findings import Diagnosis
    from pcapq.finding import Finding
    from pcapq.points import PointAnalysis
    from pcapq.report.model import AnalyzeReport
    from pcapq.commands.request import AnalyzeRequest
    from pcapq.two_points import Aligned


def render(request: AnalyzeRequest, points: list[PointAnalysis], diagnoses: list[Diagnosis], aligned: Aligned | None) -> None:
    """The report of the diagnosed points, to `request.output`."""
    fmt, output, pretty, no_color = request.fmt, request.output, request.pretty, request.no_color
    if fmt == "html" and len(points) > 1 and aligned is None:
        names = ", ".join(p.name for p in points)
        fail(f"an HTML report shows one capture point and these files are {len(points)} ({names}): add --merge, or give one point's files", ExitCode.USAGE)
    if fmt == "parquet":
        _write_parquet(points, diagnoses, output, request.parquet_dir)
    elif fmt == "html" and aligned is not None:
        two = aligned
        deliver(output, no_color, lambda out, colourless: _write_two_points_html(points, diagnoses, two, out))
    elif len(points) == 1:
        result, diagnosis = points[0].analysis, diagnoses[0]

        def json_file(path: str) -> None:
            # The core writes the file itself, without passing every chunk through Python.
            result.write_json(path, pretty=pretty, extra=json_extra(diagnosis, pretty))

        deliver(
            output,
            no_color,
            lambda out, colourless: write_report(result, diagnosis, fmt, pretty, colourless, out),
            json_file if fmt == "json" else None,
        )
    else:
        deliver(
            output,
            no_color,
            lambda out, colourless: _write_points_report(points, diagnoses, fmt, pretty, colourless, out, aligned),
        )


def _write_parquet(points: list[PointAnalysis], diagnoses: list[Diagnosis], output: str, directory: bool) -> None:
    """The Parquet tables of every capture point (docs/parquet.md). Each connection's cause is
    the one of the first finding, in the registry's precedence order, that lists it."""
    import json

    from pcapq.causes.registry import CAUSES

    def precedence(finding: Finding) -> int:
        cause = CAUSES.get(finding.cause)
        return cause.precedence if cause is not None else len(CAUSES)

    tables = [
        (p.analysis, p.name, json.dumps([f.to_json() for f in sorted(d.findings, key=precedence)]))
        for p, d in zip(points, diagnoses)
    ]
    try:
        _core.write_parquet(output, tables, directory=directory)
    except OSError as e:
        fail(f"cannot write the report to {output}: {reason(e)}", ExitCode.CANT_WRITE)


def write_report(result: _core.Analysis, diagnosis: Diagnosis, fmt: str, pretty: bool, no_color: bool, out: TextIO) -> None:
    if fmt == "json":
        result.write_json(out, pretty=pretty, extra=json_extra(diagnosis, pretty))
        out.flush()
        return
    from pcapq.report import model

    report = model.build(result, diagnosis, with_table=fmt == "html", with_ladders=fmt == "html", with_aggregate=fmt != "text")
    if fmt == "markdown":
        from pcapq.report.markdown import render_analyze

        out.write(render_analyze(report))
        return
    if fmt == "html":
        from pcapq.report.html import render_analyze_parts

        # Piece by piece: the page joined would be one more copy of its embedded table.
        out.writelines(render_analyze_parts(report))
        return
    print_text_report(result, diagnosis, console_for(out, no_color), report)


def print_text_report(result: _core.Analysis, diagnosis: Diagnosis, console: Console, report: AnalyzeReport | None = None) -> None:
    """Findings, the worst connections, then totals, for a terminal."""
    from pcapq.report import model
    from pcapq.report.findings import render_findings
    from pcapq.report.summary import print_summary
    from pcapq.report.timeline_text import symptom_legend, worst_table

    if report is None:
        report = model.build(result, diagnosis, with_table=False, with_ladders=False, with_aggregate=False)
    console.print(render_findings(diagnosis, report.start))
    console.print()
    if report.worst:
        console.print(worst_table(report.worst, report.problems))
        legend = symptom_legend(report.worst)
        if legend is not None:
            console.print(legend)
        console.print()
    print_summary(result, console)


def _write_two_points_html(points: list[PointAnalysis], diagnoses: list[Diagnosis], aligned: Aligned, out: TextIO) -> None:
    """Two aligned points as one HTML page: the report of the point nearer the clients (the
    story is told from there, as `explain` tells it), the section "Between the two points"
    after its findings, and the other point's findings in a line."""
    from pcapq.causes.registry import title
    from pcapq.report import model
    from pcapq.report.between import render_html
    from pcapq.report.escape import html_text
    from pcapq.report.html import render_analyze_parts

    names = [p.name for p in points]
    near = names.index(aligned.entry["client_side"]) if aligned.entry["client_side"] in names else 0
    far = 1 - near
    others = [f"{title(f.cause)} on {f.server}" + (f" ({f.between_points['says']})" if f.between_points else "")
              for f in diagnoses[far].findings]
    between = render_html(aligned.entry, html_text, [f"{names[far]}: {line}" for line in others] or [f"{names[far]}: no finding"])
    report = model.build(points[near].analysis, diagnoses[near], with_table=True, with_ladders=True, with_aggregate=True)
    out.writelines(render_analyze_parts(report, between))


def _write_points_report(points: list[PointAnalysis], diagnoses: list[Diagnosis], fmt: str, pretty: bool, no_color: bool, out: TextIO,
                         aligned: Aligned | None = None) -> None:
    """Several capture points: JSON, one document with a section per point; Markdown, a section
    per point; text, the points side by side, then each one's report. Two points aligned
    (`aligned`, pcapq.two_points.Aligned): JSON adds `paths`, the others a section "Between the
    two points" first."""
    import json

    if fmt == "json":
        indent = "\n  " if pretty else ""
        out.write('{"capture_points": [')
        for i, (p, d) in enumerate(zip(points, diagnoses)):
            head = json.dumps({"name": p.name, "files": p.point.paths})
            out.write(("," if i else "") + indent + head[:-1] + ', "report": ')
            p.analysis.write_json(out, pretty=pretty, extra=json_extra(d, pretty))
            out.write("}")
        out.write(("\n" if pretty else "") + "]")
        if aligned is not None:
            out.write(', "paths": ' + json.dumps([aligned.entry], indent=2 if pretty else None))
        out.write("}\n")
        out.flush()
        return
    if fmt == "markdown":
        from pcapq.report.escape import md_text

        if aligned is not None:
            from pcapq.report.between import render_markdown

            out.write(render_markdown(aligned.entry) + "\n")
        for p, d in zip(points, diagnoses):
            out.write(f"# Capture point {md_text(p.name)}\n\n")
            write_report(p.analysis, d, fmt, pretty, no_color, out)
            out.write("\n")
        return
    from pcapq.report.points import print_points

    console = console_for(out, no_color)
    between = None
    if aligned is not None:
        from pcapq.report.between import render_text

        between = render_text(aligned.entry)
    print_points(points, diagnoses, console, lambda p, d, _: print_text_report(p.analysis, d, console), between)


def json_extra(diagnosis: Diagnosis, pretty: bool) -> str:
    import json

    return json.dumps(diagnosis.to_json(), indent=2 if pretty else None)

