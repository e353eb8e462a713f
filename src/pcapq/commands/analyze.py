"""`analyze` and `watch` once their options are read (an `AnalyzeRequest`), in three phases:
read the captures (`read`), diagnose them (`diagnose`), write the report
(`pcapq.commands.analyze_report.render`); then exit with the code it deserves."""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, NoReturn, TypedDict, TypeVar

from pcapq import _core
from pcapq.exitcodes import ExitCode
from pcapq.output import fail, reason, refuse_overwriting_inputs, say, warn

if TYPE_CHECKING:
    from pcapq.diagnose.findings import Diagnosis
    from pcapq.evidence import Evidence
    from pcapq.finding import Finding
    from pcapq.live import StdinRead
    from pcapq.metrics import MetricsServer
    from pcapq.points import PointAnalysis
    from pcapq.commands.request import AnalyzeRequest, WatchOptions
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


@dataclass
class StatedTimeouts:
    """The proxy's timeouts as the user stated them (--proxy-timeouts) or a configuration gave
    them, and where each was said."""

    seconds: dict[str, float] | None = None
    said_by: dict[str, str] | None = None


@dataclass
class Captures:
    """What the read phase hands on: each capture point's analysis, and what came with them."""

    points: list[PointAnalysis]
    # Two capture points matched packet for packet (pcapq.two_points), or None.
    aligned: Aligned | None = None
    evidence: Evidence | None = None
    timeouts: StatedTimeouts = field(default_factory=StatedTimeouts)
    # How reading standard input ended; None for files.
    stdin: StdinRead | None = None
    # The metrics server of `watch --metrics`, serving until the report is written.
    metrics: MetricsServer | None = None


def run(request: AnalyzeRequest) -> NoReturn:
    """`analyze` and `watch`: read, diagnose, write the report, exit with the code it deserves."""
    from pcapq.commands.analyze_report import render

    captures = read(request)
    diagnoses = diagnose(captures)
    render(request, captures.points, diagnoses, captures.aligned)
    findings = [f for d in diagnoses for f in d.findings]
    points = captures.points
    code = exit_code([(p.name if len(points) > 1 else None, p.analysis) for p in points], findings)
    if captures.metrics is not None:
        # The final counts were served until the report was written. (An early exit ends the
        # process, and the server's thread with it.)
        captures.metrics.stop()
    sys.exit(int(code))


def read(request: AnalyzeRequest) -> Captures:
    """The captures read (files, standard input, or a Dask cluster), with the evidence given
    and the proxy's stated timeouts; two points aligned when they saw the same connections."""
    from pcapq.inputs import InputError, expand
    from pcapq.report.progress import record_bytes

    if request.fmt == "parquet" and request.output == "-":
        fail("parquet is a binary table for programs, not for a terminal: give -o out.parquet, or -o DIR/ for the three tables", ExitCode.USAGE)
    timeouts = _stated_timeouts(request.proxy_timeouts)
    try:
        paths = expand(request.files)
    except InputError as e:
        fail(str(e), ExitCode.UNREADABLE)
    refuse_overwriting_inputs(tuple(paths), request.output)
    if request.parquet_dir:
        # -o DIR/: the directory the three tables go to, made before anything is read.
        try:
            os.makedirs(request.output, exist_ok=True)
        except OSError as e:
            fail(f"cannot make the directory {request.output}: {reason(e)}", ExitCode.CANT_WRITE)
    evidence = _read_evidence(request, timeouts) if request.wants_evidence else None
    if request.scheduler and "-" in paths:
        fail("standard input cannot be sent to a Dask cluster; give files", ExitCode.USAGE)
    # A followed file grows: its size now says nothing of what the watch will read.
    keep = _keep_records(request, None if request.follow is not None else record_bytes(tuple(paths)))
    spill_dir = _spill(request)
    captures = Captures(points=[], evidence=evidence, timeouts=timeouts)
    try:
        if request.scheduler:
            captures.points = _read_on_cluster(request, paths, keep)
        elif request.follow is not None or paths == ["-"]:
            _read_stdin(request, keep, spill_dir, captures)
        else:
            captures.points = _read_files(request, paths, keep, spill_dir)
    except _core.CaptureError as e:
        fail(e.args[0], ExitCode.UNREADABLE)
    if len(captures.points) == 2 and request.fmt != "parquet" and not request.scheduler:
        # Two capture points that saw the same connections: matched packet for packet
        # (pcapq.two_points); None when they share none. Not on a Dask cluster: the files may
        # be on the workers' storage only.
        from pcapq.two_points import align

        try:
            captures.aligned = align(captures.points)
        except _core.CaptureError as e:
            fail(e.args[0], ExitCode.UNREADABLE)
    return captures


def diagnose(captures: Captures) -> list[Diagnosis]:
    """Each capture point diagnosed, weighed against the evidence given, and marked when
    standard input was interrupted."""
    from pcapq.diagnose import diagnose as diagnose_point

    facts = captures.aligned.facts if captures.aligned is not None else {}
    stated = captures.timeouts
    diagnoses = [diagnose_point(p.analysis, stated.seconds, stated.said_by, facts.get(p.name)) for p in captures.points]
    if captures.evidence:
        from pcapq.diagnose.weigh_evidence import apply as apply_evidence

        # A log far from every capture point's time is said once.
        far = [apply_evidence(p.analysis, d, captures.evidence) for p, d in zip(captures.points, diagnoses)]
        for path, warning in (far[0] if far else {}).items():
            if all(path in other for other in far):
                warn(warning)
    if captures.stdin is not None and captures.stdin.interrupted:
        warn(captures.stdin.sentence())
        for d in diagnoses:
            d.interrupted = captures.stdin
    return diagnoses


def _stated_timeouts(text: str | None) -> StatedTimeouts:
    from pcapq.finding.timeouts import BadTimeouts, parse

    try:
        return StatedTimeouts(parse(text) if text is not None else None)
    except BadTimeouts as e:
        fail(f"--proxy-timeouts: {e}", ExitCode.USAGE)


def _read_evidence(request: AnalyzeRequest, timeouts: StatedTimeouts) -> Evidence:
    """The logs, counters, listeners and configurations given; a configuration's timeouts
    join `timeouts` for the kinds --proxy-timeouts (or a configuration read before) did not
    state."""
    from pcapq.evidence import EvidenceError
    from pcapq.evidence import read as read_evidence

    try:
        evidence = read_evidence(request.logs, request.nstat, request.ss, request.log_format, request.nginx_conf, request.haproxy_cfg)
    except EvidenceError as e:
        fail(str(e), ExitCode.USAGE)
    for warning in evidence.warnings:
        warn(warning)
    for conf in (evidence.nginx_conf, evidence.haproxy_cfg):
        if conf is None or not conf.timeouts:
            continue
        given = timeouts.seconds or {}
        timeouts.seconds = {**{kind: seconds for kind, (seconds, _) in conf.timeouts.items()}, **given}
        name = os.path.basename(conf.path)
        timeouts.said_by = {**(timeouts.said_by or {}),
                            **{kind: f"{name}: {directive}" for kind, (_, directive) in conf.timeouts.items() if kind not in given}}
    return evidence


def _keep_records(request: AnalyzeRequest, size: int | None) -> KeepRecords:
    """What the core keeps for the report asked. JSON has every connection and its events. HTML
    draws ladders from the events of the connections with a problem, and lists every connection
    in its table when the input (`size` bytes of records; None: unknown) is small enough. The
    other reports need only the counts and the connections with a problem. The join of log
    lines needs every connection (a line about an answered request describes a healthy one)
    and the FINs and RSTs of the connections with a problem (events)."""
    fmt = request.fmt
    every_connection = fmt in ("json", "parquet") or (fmt == "html" and size is not None and size <= HTML_EVERY_CONNECTION_BYTES)
    return KeepRecords(
        keep_connections=every_connection or bool(request.logs),
        keep_events=fmt in ("json", "html") or request.parquet_dir or bool(request.logs),
        max_connections=request.max_connections,
    )


def _spill(request: AnalyzeRequest) -> str | None:
    """JSON and Parquet (from files or standard input) have every connection handed, as it
    finishes, to a temporary file beside the output instead of kept in memory
    (docs/performance.md): the directory for it, or None."""
    if request.fmt in ("json", "parquet") and not request.logs:
        return _spill_dir(request.output, request.parquet_dir)
    return None


def _read_on_cluster(request: AnalyzeRequest, paths: list[str], keep: KeepRecords) -> list[PointAnalysis]:
    from pcapq.cluster import ClusterUnavailable, analyze_on_cluster

    # A Dask client may run for hours, and its event loop makes cyclic garbage: the
    # collector back on (pcapq.launch turns it off for the short runs).
    gc.enable()
    try:
        return analyze_on_cluster(paths, request.scheduler or "", merge=request.merge, **keep)
    except ClusterUnavailable as e:
        fail(str(e), ExitCode.UNAVAILABLE)


def _read_stdin(request: AnalyzeRequest, keep: KeepRecords, spill_dir: str | None, captures: Captures) -> None:
    """Standard input (or a followed file) read live: counted as it arrives, and Ctrl-C reports
    what was read (pcapq.live); with `watch`, its lines and metrics as it goes."""
    from pcapq.live import analyze_stdin
    from pcapq.points import Joiner
    from pcapq.watch import Watcher

    # Reading standard input may last hours: the cyclic garbage collector back on.
    gc.enable()
    watch: WatchOptions | None = request.watch
    listeners: dict[str, int] = {}
    if watch is not None and watch.metrics is not None:
        captures.metrics = _serve_metrics(watch.metrics)
        listeners["metrics_listeners"] = watch.max_listeners
    watcher = Watcher(watch.every, metrics=captures.metrics) if watch is not None else None
    analysis, captures.stdin = analyze_stdin(**keep, watch=watcher, spill_dir=spill_dir, follow=request.follow,
                                             keep=watch.keep if watch is not None else None, **listeners)
    joiner = Joiner(request.merge)
    joiner.add_capture(analysis)
    captures.points = joiner.points()


def _serve_metrics(address: tuple[str, int]) -> MetricsServer:
    """Listening before any input is read: a port in use fails at once."""
    from pcapq.metrics import MetricsAddressError, MetricsServer

    try:
        server = MetricsServer(*address)
    except MetricsAddressError as e:
        fail(str(e), ExitCode.USAGE)
    say(f"pcapq: serving metrics on {server.url}")
    return server


def _read_files(request: AnalyzeRequest, paths: list[str], keep: KeepRecords, spill_dir: str | None) -> list[PointAnalysis]:
    from pcapq.points import analyze_points
    from pcapq.report.progress import progress_for

    with progress_for(tuple(paths)) as progress:
        return _while_importing(
            lambda: analyze_points(paths, merge=request.merge, jobs=request.jobs, progress=progress, spill_dir=spill_dir, **keep),
            request.fmt,
        )


# What each report imports once the core is done (pcapq.commands.analyze_report's lazy imports):
# imported while the core reads. A module missing here is only imported later.
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
    for name in ("pcapq.diagnose", "pcapq.commands.analyze_report", "pcapq.report.model", *_REPORT_MODULES.get(fmt, ())):
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
        # Made by read().
        return output
    return os.path.dirname(os.path.abspath(output))


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
