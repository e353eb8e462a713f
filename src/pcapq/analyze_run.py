"""`analyze` and `watch` once their options are read: read the captures, diagnose, write the
report, exit with the code it deserves."""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, NoReturn, TextIO, TypedDict, TypeVar

from pcapq import _core
from pcapq.exitcodes import ExitCode
from pcapq.output import console_for, deliver, fail, reason, refuse_overwriting_inputs, say, warn

if TYPE_CHECKING:
    from rich.console import Console

    from pcapq.finding import Finding
    from pcapq.diagnose.findings import Diagnosis
    from pcapq.points import PointAnalysis
    from pcapq.report.model import AnalyzeReport
    from pcapq.two_points import Aligned

class KeepRecords(TypedDict):
    """What the core keeps of each connection (`_core.analyze`'s arguments of the same names)."""

    keep_connections: bool
    keep_events: bool
    max_connections: int


T = TypeVar("T")

# The HTML report's table lists every connection for inputs of up to this many bytes of records
# (about 16,000 connections of a proxy's capture); beyond, or from standard input, pcapq keeps
# only the connections with a problem, so memory follows the live connections.
HTML_EVERY_CONNECTION_BYTES = 64 << 20


def analyze_and_report(
    files: tuple[str, ...],
    fmt: str,
    output: str,
    pretty: bool,
    no_color: bool,
    merge: bool,
    jobs: int,
    max_connections: int,
    proxy_timeouts: str | None,
    scheduler: str | None,
    logs: tuple[str, ...],
    nstat: tuple[str, ...],
    ss: str | None,
    watch_every: float | None = None,
    log_format: str | None = None,
    nginx_conf: str | None = None,
    haproxy_cfg: str | None = None,
    metrics: tuple[str, int] | None = None,
    max_listeners: int = 20,
    follow: str | None = None,
    keep: float | None = None,
) -> NoReturn:
    """`analyze` and `watch`: read, diagnose, write the report, exit with the code it deserves.
    `metrics` (watch): (host, port) to serve Prometheus metrics on while standard input is read
    and until the report is written, of the `max_listeners` busiest listeners (pcapq.metrics).
    `follow` (watch): the capture file tcpdump is writing, read as it grows, instead of standard
    input; `keep` (watch): the report covers the last `keep` seconds of capture time, plus the
    totals since the watch began."""
    from pcapq.finding.timeouts import BadTimeouts, parse
    from pcapq.inputs import InputError, expand
    from pcapq.report.progress import progress_for, record_bytes

    if fmt == "parquet" and output == "-":
        fail("parquet is a binary table for programs, not for a terminal: give -o out.parquet, or -o DIR/ for the three tables", ExitCode.USAGE)
    try:
        stated = parse(proxy_timeouts) if proxy_timeouts is not None else None
    except BadTimeouts as e:
        fail(f"--proxy-timeouts: {e}", ExitCode.USAGE)
    try:
        paths = expand(files)
    except InputError as e:
        fail(str(e), ExitCode.UNREADABLE)
    refuse_overwriting_inputs(tuple(paths), output)
    evidence = None
    said_by: dict[str, str] | None = None
    if logs or nstat or ss or nginx_conf or haproxy_cfg:
        # Imported only when asked for: a few ms of every other run.
        from pcapq.evidence import EvidenceError
        from pcapq.evidence import read as read_evidence

        try:
            evidence = read_evidence(logs, nstat, ss, log_format, nginx_conf, haproxy_cfg)
        except EvidenceError as e:
            fail(str(e), ExitCode.USAGE)
        for warning in evidence.warnings:
            warn(warning)
        for conf in (evidence.nginx_conf, evidence.haproxy_cfg):
            if conf is None or not conf.timeouts:
                continue
            # The configuration's timeouts, for the kinds --proxy-timeouts (or a configuration
            # read before) did not state.
            given = stated or {}
            stated = {**{kind: seconds for kind, (seconds, _) in conf.timeouts.items()}, **given}
            name = os.path.basename(conf.path)
            said_by = {**(said_by or {}), **{kind: f"{name}: {directive}" for kind, (_, directive) in conf.timeouts.items() if kind not in given}}
    if scheduler and "-" in paths:
        fail("standard input cannot be sent to a Dask cluster; give files", ExitCode.USAGE)
    # JSON has every connection and its events. HTML draws ladders from the events of the
    # connections with a problem, and lists every connection in its table when the input is
    # small enough. The other reports need only the counts and the connections with a problem.
    # A followed file grows: its size now says nothing of what the watch will read.
    size = None if follow is not None else record_bytes(tuple(paths))
    every_connection = fmt in ("json", "parquet") or (fmt == "html" and size is not None and size <= HTML_EVERY_CONNECTION_BYTES)
    parquet_dir = fmt == "parquet" and (output.endswith(os.sep) or os.path.isdir(output))
    # The join of log lines needs every connection in memory (a line about an answered request
    # describes a healthy one) and the FINs and RSTs of the connections with a problem (events).
    keep_records = KeepRecords(
        keep_connections=every_connection or bool(logs),
        keep_events=fmt in ("json", "html") or parquet_dir or bool(logs),
        max_connections=max_connections,
    )
    # JSON and Parquet (from files or standard input) have every connection handed, as it
    # finishes, to a temporary file beside the output instead of kept in memory
    # (docs/performance.md).
    spill_dir = _spill_dir(output, parquet_dir) if fmt in ("json", "parquet") and not logs else None
    read = None  # how reading standard input ended (pcapq.live.StdinRead)
    server = None  # the metrics server (pcapq.metrics.MetricsServer)
    try:
        if scheduler:
            from pcapq.cluster import ClusterUnavailable, analyze_on_cluster

            # A Dask client may run for hours, and its event loop makes cyclic garbage: the
            # collector back on (pcapq.launch turns it off for the short runs).
            gc.enable()

            try:
                points = analyze_on_cluster(paths, scheduler, merge=merge, **keep_records)
            except ClusterUnavailable as e:
                fail(str(e), ExitCode.UNAVAILABLE)
        elif follow is not None or paths == ["-"]:
            # Reading standard input may last hours: the cyclic garbage collector back on.
            gc.enable()
            # Read live: counted as it arrives, and Ctrl-C reports what was read (pcapq.live).
            from pcapq.live import analyze_stdin
            from pcapq.points import Joiner

            from pcapq.watch import Watcher

            more: dict[str, Any] = {}
            if metrics is not None:
                from pcapq.metrics import MetricsAddressError, MetricsServer

                # Listening before any input is read: a port in use fails at once.
                try:
                    server = MetricsServer(*metrics)
                except MetricsAddressError as e:
                    fail(str(e), ExitCode.USAGE)
                say(f"pcapq: serving metrics on {server.url}")
                more["metrics_listeners"] = max_listeners
            watcher = Watcher(watch_every, metrics=server) if watch_every is not None else None
            analysis, read = analyze_stdin(**keep_records, watch=watcher, spill_dir=spill_dir, follow=follow, keep=keep, **more)
            joiner = Joiner(merge)
            joiner.add_capture(analysis)
            points = joiner.points()
        else:
            from pcapq.points import analyze_points

            with progress_for(tuple(paths)) as progress:
                points = _while_importing(
                    lambda: analyze_points(paths, merge=merge, jobs=jobs, progress=progress, spill_dir=spill_dir, **keep_records), fmt
                )
    except _core.CaptureError as e:
        fail(e.args[0], ExitCode.UNREADABLE)

    from pcapq.diagnose import diagnose

    aligned = None
    if len(points) == 2 and fmt != "parquet" and not scheduler:
        # Two capture points that saw the same connections: matched packet for packet
        # (pcapq.two_points); None when they share none. Not on a Dask cluster: the files may
        # be on the workers' storage only.
        from pcapq.two_points import align

        try:
            aligned = align(points)
        except _core.CaptureError as e:
            fail(e.args[0], ExitCode.UNREADABLE)
    facts = aligned.facts if aligned is not None else {}
    diagnoses = [diagnose(p.analysis, stated, said_by, facts.get(p.name)) for p in points]
    if evidence:
        from pcapq.diagnose.weigh_evidence import apply as apply_evidence

        # A log far from every capture point's time is said once.
        far = [apply_evidence(p.analysis, d, evidence) for p, d in zip(points, diagnoses)]
        for path, warning in (far[0] if far else {}).items():
            if all(path in other for other in far):
                warn(warning)
    if read is not None and read.interrupted:
        warn(read.sentence())
        for d in diagnoses:
            d.interrupted = read
    if fmt == "html" and len(points) > 1 and aligned is None:
        names = ", ".join(p.name for p in points)
        fail(f"an HTML report shows one capture point and these files are {len(points)} ({names}): add --merge, or give one point's files", ExitCode.USAGE)
    if fmt == "parquet":
        _write_parquet(points, diagnoses, output, parquet_dir)
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
    findings = [f for d in diagnoses for f in d.findings]
    code = exit_code([(p.name if len(points) > 1 else None, p.analysis) for p in points], findings)
    if server is not None:
        # The final counts were served until the report was written. (An early exit ends the
        # process, and the server's thread with it.)
        server.stop()
    sys.exit(int(code))


# What each report imports once the core is done (write_report's and print_text_report's lazy
# imports): imported while the core reads. A module missing here is only imported later.
_REPORT_MODULES = {
    "text": ("pcapq.report.findings", "pcapq.report.summary", "pcapq.report.timeline_text"),
    "markdown": ("pcapq.report.markdown",),
    "html": ("pcapq.report.html",),
}


def _while_importing(read: Callable[[], T], fmt: str) -> T:
    """Runs `read` (the core, which lets go of the GIL while it reads) on a thread while this
    one imports the diagnosis and the report `fmt` needs: about 20 ms of a text run on 1M
    packets the imports would otherwise add after it (docs/performance.md). Ctrl-C still
    stops the run here, and what `read` raises is raised here."""
    import importlib
    import threading

    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(read())
        except BaseException as e:  # raised again on this thread
            failed.append(e)

    # A daemon: an interrupted run exits without waiting for the core to finish reading.
    thread = threading.Thread(target=run, name="pcapq-core", daemon=True)
    thread.start()
    for name in ("pcapq.diagnose", "pcapq.report.model", *_REPORT_MODULES.get(fmt, ())):
        importlib.import_module(name)
    while thread.is_alive():
        thread.join(0.1)
    if failed:
        raise failed[0]
    return done[0]


def _spill_dir(output: str, directory: bool) -> str:
    """Where the connections wait for the report: beside the output (the same disk), or in the
    temporary directory for standard output."""
    import tempfile

    if output == "-" or (os.path.exists(output) and not os.path.isfile(output) and not directory):
        # Standard output, or a device such as /dev/null: nothing to write beside.
        return tempfile.gettempdir()
    if directory:
        try:
            os.makedirs(output, exist_ok=True)
        except OSError as e:
            fail(f"cannot make the directory {output}: {reason(e)}", ExitCode.CANT_WRITE)
        return output
    return os.path.dirname(os.path.abspath(output))


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


def exit_code(analyses: list[tuple[str | None, _core.Analysis]], findings: list[Finding]) -> ExitCode:
    """Warnings on stderr (named by capture point when there are several), then the exit code:
    no TCP (5) before damage (4) before problems found (1)."""
    damaged = False
    segments = packets = 0
    skipped: dict[str, tuple[int, str]] = {}
    for name, analysis in analyses:
        for warning in analysis.warnings():
            warn(f"{name}: {warning}" if name else warning)
        damaged |= any(c["read_stop"] in ("corrupt", "io_error") for c in analysis.captures())
        summary = analysis.summary()
        segments += summary["tcp_segments"]
        packets += summary["packets"]
        for slug, (n, meaning) in analysis.skipped().items():
            before, _ = skipped.get(slug, (0, meaning))
            skipped[slug] = (before + n, meaning)
    if segments == 0:
        what = ", ".join(f"{n:,} {meaning}" for n, meaning in skipped.values()) or "no packets at all"
        fail(f"no TCP segments to analyse in {packets:,} packets ({what})", ExitCode.NO_TCP)
    if damaged:
        return ExitCode.DAMAGED
    if findings:
        return ExitCode.PROBLEMS
    return ExitCode.OK


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

