"""`pcapq timeline` once its options are read (a `TimelineRequest`): the connections selected,
each packet by packet, and the capture's timeline across time, in the format asked."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NoReturn, TextIO

import click

from pcapq import _core
from pcapq.commands.analyze import exit_code
from pcapq.exitcodes import ExitCode
from pcapq.output import console_for, deliver, fail, refuse_overwriting_inputs
from pcapq.proxy_logs import lines_by_connection, read_logs
from pcapq.report import timeline as tl

if TYPE_CHECKING:
    from pcapq._core import _Path
    from pcapq.finding import Finding
    from pcapq.report.timeline import Aggregate, ConnectionTimeline
    from pcapq.two_points import TwoPointFacts

TimelineFormat = Literal["text", "json", "markdown", "html"]


@dataclass(frozen=True)
class TimelineRequest:
    """What `pcapq timeline` was asked (its options, as click reads them)."""

    files: tuple[str, ...]
    conn: str | None = None
    failed: bool = False
    outcomes: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    server: str | None = None
    since: str | None = None
    until: str | None = None
    limit: int = 20
    aggregate: bool = False
    bucket: int | None = None
    fmt: TimelineFormat = "text"
    output: str = "-"
    no_color: bool = False
    logs: tuple[str, ...] = ()
    nginx_conf: str | None = None
    log_format: str | None = None
    haproxy_cfg: str | None = None

    @property
    def selecting(self) -> bool:
        """Whether an option selects connections (else: the aggregate and the problem ones)."""
        return bool(self.conn or self.failed or self.outcomes or self.causes or self.server or self.since or self.until)

    @property
    def show_connections(self) -> bool:
        return self.selecting or not self.aggregate

    @property
    def show_aggregate(self) -> bool:
        return self.aggregate or not self.selecting


def run(request: TimelineRequest) -> NoReturn:
    """Read, select, write; exit 0, or with the capture's damage."""
    refuse_overwriting_inputs(request.files, request.output)
    selection = _selection(request)
    # The logs too: a bad --log-format or --nginx-conf stops the run before the capture is read.
    proxy_logs = read_logs(request.logs, request.log_format, request.nginx_conf, request.haproxy_cfg)
    if request.causes:
        selection.connection_ids = set()  # filled from the findings below
    # Connections with a problem are kept with their events in any case; every record when the
    # selection may want a connection without one, or for the logs' join (a line about an
    # answered request describes a healthy connection), as analyze keeps them.
    every_record = request.show_connections and (not selection.wants_problems_only() or bool(proxy_logs))
    result, two = _read(request, every_record)
    starts = [c["first_time"] for c in result.captures() if c["first_time"] is not None]
    start = min(starts) if starts else 0.0
    selection.since = parse_when(request.since, start, "--since")
    selection.until = parse_when(request.until, start, "--until")
    findings = _findings(request, result, two[2] if two is not None else None, selection)
    timelines: list[ConnectionTimeline] = []
    matched = 0
    if request.show_connections:
        indices, matched = tl.select(result, selection)
        timelines = [tl.connection_timeline(result, i) for i in indices]
        if two is not None:
            from pcapq.report.four_lines import add_path

            point = next(p for p in two[1]["points"] if p != two[2].other)
            for t in timelines:
                add_path(t, two[1], point)
    if proxy_logs and timelines:
        tied = lines_by_connection(result, proxy_logs)
        for t in timelines:
            t.proxy_log = tied.get(t.id)
    if request.conn is not None:
        _say_conn(request.conn, selection, timelines, matched)
    agg = None
    if request.show_aggregate:
        episodes = [tl.Episode(f.cause, f.server, f.first, f.last) for f in findings if selection.server in (None, f.server)]
        agg = tl.capture_aggregate(
            result, episodes, server=selection.server, width=request.bucket, since=selection.since, until=selection.until
        )
    deliver(request.output, request.no_color, lambda out, colourless: write(request, timelines, agg, matched, out, colourless))
    sys.exit(int(exit_code([(None, result)], [])))


def _selection(request: TimelineRequest) -> tl.Selection:
    """The options that select connections, checked before the capture is read."""
    selection = tl.Selection(
        conn=check_conn(request.conn),
        failed=request.failed or not request.selecting,
        outcomes=request.outcomes,
        server=check_endpoint(request.server, "--server"),
        limit=request.limit,
    )
    # The times' form is checked before reading; seconds into the capture need its first packet.
    for text, option in ((request.since, "--since"), (request.until, "--until")):
        parse_when(text, 0.0, option)
    return selection


def _read(request: TimelineRequest, every_record: bool) -> tuple[_core.Analysis, tuple[_core.Analysis, _Path, TwoPointFacts] | None]:
    """The captures as one, or, for two capture points that saw the same connections, the point
    nearer the clients, its `paths` entry and facts: the timelines are that point's, drawn on
    four lines (docs/two-points.md)."""
    files = request.files
    two = None
    if len(files) > 1 and request.show_connections:
        from pcapq.two_points import story_point

        try:
            two = story_point(list(files), every_record)
        except _core.CaptureError as e:
            fail(e.args[0], ExitCode.UNREADABLE)
    if two is not None:
        return two[0], two
    from pcapq.report.progress import progress_for

    try:
        # With a progress bar on a terminal for large inputs.
        with progress_for(files) as progress:
            return _core.analyze(list(files), keep_connections=every_record, keep_events=request.show_connections, progress=progress), None
    except _core.CaptureError as e:
        fail(e.args[0], ExitCode.UNREADABLE)


def _findings(request: TimelineRequest, result: _core.Analysis, facts: TwoPointFacts | None, selection: tl.Selection) -> list[Finding]:
    """The material findings, whose episodes shade the aggregate; with --cause, the selection's
    connections are those of the findings (minor observations too) of those causes."""
    if not (request.causes or request.show_aggregate):
        return []
    from pcapq.diagnose import diagnose

    diagnosis = diagnose(result, two_points=facts)
    if request.causes:
        selection.connection_ids = {i for f in diagnosis.every_finding() if f.cause in request.causes for i in f.connections}
    return diagnosis.findings


def _say_conn(conn: str, selection: tl.Selection, timelines: list[ConnectionTimeline], matched: int) -> None:
    """What --conn matched, on standard error; a usage error when nothing."""
    if not matched:
        fail(f"--conn {conn} matches no connection (neither a connection id nor a client port or endpoint "
             "of this capture; the reports' id column lists the ids)", ExitCode.USAGE)
    how = " and a ".join(sorted(selection.conn_matched_by))
    click.echo(f"pcapq: --conn {conn} is a {how}: " + "; ".join(f"connection {t.id}, {t.client} → {t.server}" for t in timelines), err=True)


def write(request: TimelineRequest, timelines: list[ConnectionTimeline], agg: Aggregate | None, matched: int,
          out: TextIO, colourless: bool) -> None:
    """The timelines and the aggregate in the format asked."""
    source = ", ".join("standard input" if f == "-" else f for f in request.files)
    if request.fmt == "json":
        import json

        doc = {
            "schema": "pcapq.timeline",
            "schema_version": 1,
            "aggregate": agg.to_json() if agg is not None else None,
            "matched": matched,
            "connections": [t.to_json() for t in timelines],
        }
        out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    elif request.fmt == "markdown":
        from pcapq.report.markdown import render_timelines

        out.write(render_timelines(timelines, agg, matched, source))
    elif request.fmt == "html":
        from pcapq.report.html import render_timelines as render_html

        out.write(render_html(timelines, agg, matched, source))
    else:
        from pcapq.report.timeline_text import render_timelines as render_text

        console_for(out, colourless).print(render_text(timelines, agg, matched if request.show_connections else 0))
    out.flush()


def check_conn(conn: str | None) -> str | None:
    """--conn: N (an id or a client port), #N or id:N (an id), or IP:PORT (a client endpoint)."""
    if conn is None or conn.isdigit():
        return conn
    for prefix in ("#", "id:"):
        if conn.startswith(prefix):
            if not conn[len(prefix):].isdigit():
                raise click.BadParameter(f"{conn!r} is not {prefix}ID (a number of the reports' id column)", param_hint="--conn")
            return conn
    return check_endpoint(conn, "--conn")


def check_endpoint(text: str | None, option: str) -> str | None:
    """"10.0.0.1:9000" or "[2001:db8::1]:9000", written as the core writes endpoints."""
    if text is None:
        return None
    from pcapq.endpoint import parse

    try:
        return str(parse(text))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not IP:PORT (IPv6 as [addr]:PORT)", param_hint=option) from None


def parse_when(text: str | None, start: float, option: str) -> float | None:
    """Seconds into the capture ("12.5"), a UTC time of day on the capture's first day
    ("06:36:12.5"), or an ISO date-time (UTC unless it says otherwise); epoch seconds."""
    if text is None:
        return None
    from datetime import datetime, timezone

    try:
        return start + float(text)
    except ValueError:
        pass
    try:
        if "T" in text or "-" in text:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return when.timestamp()
        day = datetime.fromtimestamp(start, tz=timezone.utc).date()
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(text)
        hours, minutes = int(parts[0]), int(parts[1])
        seconds = float(parts[2]) if len(parts) == 3 else 0.0
        midnight = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
        if not (0 <= hours < 24 and 0 <= minutes < 60 and 0 <= seconds < 61):
            raise ValueError(text)
        return midnight + hours * 3600 + minutes * 60 + seconds
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not seconds into the capture, HH:MM:SS[.fff] (UTC) or an ISO date-time", param_hint=option
        ) from None
