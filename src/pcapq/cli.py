"""The `pcapq` command line: each command's options and help, then its `run` in
pcapq.commands, which does the work."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

import click

from pcapq import _core
from pcapq.causes.registry import SLUGS
from pcapq.exitcodes import ExitCode
from pcapq.output import exit_on_errors, say

if TYPE_CHECKING:
    from pcapq.commands.request import ReportFormat
    from pcapq.commands.timeline import TimelineFormat

# A click command, or the function it is made from, as a decorator takes and gives it back.
Command = TypeVar("Command", bound=Callable[..., Any])

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT)
@click.version_option(_core.__version__, "-V", "--version", prog_name="pcapq")
def cli() -> None:
    """Explain why TCP connections between a proxy and its upstream failed.

    pcapq reads captures taken with tcpdump (pcap or pcapng, plain or gzip), rebuilds
    every TCP connection (handshake, SYN, SYN-ACK and data retransmissions, duplicate
    ACKs, zero windows, FINs and RSTs, each with the frame number Wireshark shows), gives
    each one a verdict, and says what went wrong: a full accept or SYN queue, a closed
    port, packet loss, clients giving up, a slow server, exhausted ports.

    \b
    Start here:
      $ pcapq analyze dump.pcap                 findings, worst connections, totals
      $ pcapq analyze --format html -o r.html dump.pcap   the same as one page with pictures
      $ pcapq analyze --format json dump.pcap   one JSON record per connection
      $ pcapq timeline --failed dump.pcap       failed connections, packet by packet
      $ tcpdump -i any -w - port 9000 | pcapq analyze -
      $ tcpdump -i any -U -w - port 9000 | pcapq watch -   live lines, then the report
      $ pcapq crosscheck dump.pcap              pcapq's labels against tshark's
      $ pcapq explain dump.pcap                 one connection told step by step
      $ sudo pcapq lab --list                   failures to reproduce with your kernel
    """


REPORT_FORMATS = ["text", "json", "markdown", "html"]


def report_format(fmt: str) -> ReportFormat:
    """--format of analyze and watch: click's choice is one of `ReportFormat`."""
    return cast("ReportFormat", fmt)


def format_option(help: str, choices: list[str] | None = None) -> Callable[[Command], Command]:
    return click.option(
        "--format", "fmt", type=click.Choice(choices or ["text", "json"]), default="text", show_default=True, help=help
    )


output_option = click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    help="Write the report to this file instead of standard output.",
)
# analyze's -o also takes a directory, for the Parquet tables.
analyze_output_option = click.option(
    "-o",
    "--output",
    type=click.Path(writable=True, allow_dash=True),
    default="-",
    help="Write the report to this file instead of standard output; with --format parquet, a file of connections, "
    "or a directory (DIR/) for connections.parquet, events.parquet and findings.parquet.",
)


def log_options(tied: str, output: str, conf_timeouts: bool = False) -> Callable[[Command], Command]:
    """--log, --nginx-conf and --log-format: the proxy's logs, each line tied to the capture's
    connection it describes (docs/evidence.md), read by `pcapq.evidence.read`. `tied` says what
    the tied lines do in the command, `output` what goes on without a log pcapq cannot read;
    with `conf_timeouts`, nginx.conf also gives the upstream timeouts (analyze and watch)."""
    timeouts = (
        ", and the upstream connect and read timeouts (proxy_, fastcgi_, uwsgi_, scgi_, grpc_) where "
        "--proxy-timeouts does not state them"
        if conf_timeouts
        else ""
    )
    options = [
        click.option(
            "--log",
            "logs",
            multiple=True,
            type=click.Path(dir_okay=False, allow_dash=False),
            metavar="FILE",
            help=f"The proxy's log (repeatable): nginx's error.log or access.log, HAProxy's log or Envoy's access log: {tied} "
            f"(docs/evidence.md). A log pcapq cannot read is a warning; the {output} goes on without it.",
        ),
        click.option(
            "--nginx-conf",
            "nginx_conf",
            type=click.Path(dir_okay=False, allow_dash=False),
            metavar="FILE",
            help=f"The proxy's nginx.conf (its includes are followed): the log_format each --log access log is written "
            f"with{timeouts}.",
        ),
        click.option(
            "--haproxy-cfg",
            "haproxy_cfg",
            type=click.Path(dir_okay=False, allow_dash=False),
            metavar="FILE",
            help="HAProxy's haproxy.cfg: the log-format its frontends write, its servers' addresses (a line names its "
            f"server, the capture its address){', and its timeout connect and timeout server' if conf_timeouts else ''}.",
        ),
        click.option(
            "--log-format",
            "log_format",
            metavar="FORMAT",
            help="The log's format string, for a format pcapq does not recognise by itself: nginx's log_format as in "
            "nginx.conf (its parts joined: '$msec $status $upstream_addr $upstream_connect_time'; it needs a time and "
            "$status), HAProxy's log-format ('%ci:%cp [%tr] %b/%s %Tc %ST %ts %bi:%bp'; it needs a date) or Envoy's "
            "format ('[%START_TIME%] %RESPONSE_CODE% %RESPONSE_FLAGS% %UPSTREAM_HOST% %UPSTREAM_LOCAL_ADDRESS%').",
        ),
    ]

    def decorate(command: Command) -> Command:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def report_options(command: Command) -> Command:
    """The options of the report `analyze` and `watch` write, and the evidence it weighs."""
    options = [
        format_option(
            "text: findings, worst connections and totals for people. json: every connection with its events (schema in "
            "docs/json.md). markdown: the text report for a ticket. html: one self-contained file with charts, ladder "
            "diagrams and a table of connections (docs/reports.md). parquet: one row per connection, for DuckDB, pandas "
            "or polars (docs/parquet.md); needs -o.",
            [*REPORT_FORMATS, "parquet"],
        ),
        analyze_output_option,
        click.option("--pretty", is_flag=True, help="Indent the JSON for reading."),
        click.option("--no-color", is_flag=True, help="No colour, even on a terminal (NO_COLOR=1 does the same)."),
        click.option(
            "--max-connections",
            type=click.IntRange(min=0),
            default=0,
            metavar="N",
            help="At most N connections live at once per capture; beyond, the longest idle are finalised early, with a warning  [default: 0, no limit].",
        ),
        click.option(
            "--proxy-timeouts",
            metavar="connect=S,read=S",
            help="The proxy's connect and read timeouts in seconds (nginx proxy_/fastcgi_connect_timeout and _read_timeout), "
            "for the sizing sentence and the predicted proxy log. Without it, they are inferred from when connections gave up, "
            "and said to be a guess where the capture does not show them.",
        ),
        log_options("each upstream error line is tied to its connection", "report", conf_timeouts=True),
        click.option(
            "--nstat",
            "nstat",
            multiple=True,
            type=click.Path(dir_okay=False, allow_dash=False),
            metavar="FILE",
            help="The upstream host's `nstat -az` or `netstat -s` output: one file, or two (before and after); confirms or contradicts each finding.",
        ),
        click.option(
            "--ss",
            type=click.Path(dir_okay=False, allow_dash=False),
            metavar="FILE",
            help="The upstream host's `ss -lnt` output: each listener's backlog (Send-Q) and queue (Recv-Q) against pcapq's estimate.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@cli.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@report_options
@click.option(
    "--merge",
    is_flag=True,
    help="Analyse every file as one capture, in order of first packet, instead of one capture per capture point.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=0),
    default=0,
    metavar="N",
    help="Threads: capture points (or files of long ring buffers) analysed at once  [default: 0, one per core].",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Analyse one capture point (a ring buffer's files) per task on this Dask cluster (tcp://HOST:8786); the workers must see the files at the same paths. Needs pip install 'pcapq[dask]'.",
)
def analyze(
    files: tuple[str, ...], fmt: str, output: str, pretty: bool, no_color: bool, max_connections: int,
    proxy_timeouts: str | None, logs: tuple[str, ...], nginx_conf: str | None, haproxy_cfg: str | None,
    log_format: str | None, nstat: tuple[str, ...], ss: str | None, merge: bool, jobs: int, scheduler: str | None,
) -> None:
    """Say what went wrong in the captures, the worst connections, then totals.

    FILE is a pcap or pcapng capture, optionally gzip-compressed, a directory (every
    capture in it, found by content), or a glob pattern ('ring/*.pcap*'); '-' reads
    standard input. Files are grouped into capture points (one tcpdump on one host) by
    directory and name pattern and put in time order; the files of one point are one
    capture, so a connection that spans two files of a ring buffer stays one connection.
    Several points are reported side by side (docs/capture-points.md).

    \b
    Examples:
      $ pcapq analyze dump.pcap
      $ pcapq analyze ring.pcap0 ring.pcap1 ring.pcap2
      $ pcapq analyze 'web1/*.pcap' 'web2/*.pcap'        two hosts, side by side
      $ pcapq analyze --merge captures/                 everything as one capture
      $ pcapq analyze --jobs 4 'hosts/*/dump.pcap*'     four hosts at a time
      $ pcapq analyze --scheduler tcp://10.0.0.5:8786 /shared/cap/   one task per capture point
      $ pcapq analyze --format json -o report.json dump.pcap.gz
      $ pcapq analyze --format parquet -o web1/ 'web1/*.pcap'   tables for DuckDB
      $ pcapq analyze --format html -o report.html dump.pcap
      $ tcpdump -i any -s 96 -w - 'tcp port 9000' | pcapq analyze -
      $ pcapq analyze --log error.log --log access.log --nstat before.txt --nstat after.txt dump.pcap

    \b
    Exit codes: 0 analysed, nothing wrong found; 1 analysed, and a problem was found (a
    finding); 2 usage error; 3 a capture could not be read (or a pattern or directory holds
    none); 4 a capture is damaged (analysed up to the damage); 5 no TCP in the capture; 69
    --scheduler: dask missing or the scheduler unreachable; 70 a bug in pcapq; 74 the report
    could not be written.
    """
    from pcapq.commands.analyze import run
    from pcapq.commands.request import AnalyzeRequest

    run(AnalyzeRequest(
        files, report_format(fmt), output, pretty, no_color, merge=merge, jobs=jobs, max_connections=max_connections,
        proxy_timeouts=proxy_timeouts, scheduler=scheduler, logs=logs, log_format=log_format, nginx_conf=nginx_conf,
        haproxy_cfg=haproxy_cfg, nstat=nstat, ss=ss,
    ))


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.5; not subscriptable in 8.1, the floor
    """A span of time: 90s, 30m, 2h, 1d (a bare number is seconds); to seconds."""

    name = "duration"
    UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip().lower()
        number, unit = text, "s"
        for name in sorted(self.UNITS, key=len, reverse=True):
            if text.endswith(name):
                number, unit = text[: -len(name)].strip(), name
                break
        try:
            seconds = float(number) * self.UNITS[unit]
        except ValueError:
            self.fail(f"{value!r} is not a duration (30m, 2h, 1d)", param, ctx)
        if not seconds >= 4 or seconds == float("inf"):
            self.fail(f"{value!r} is too short: at least 4 s", param, ctx)
        return seconds


@cli.command(context_settings=CONTEXT)
@click.argument("source", required=False, metavar="-")
@click.option(
    "--follow",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE",
    help="Read the capture file tcpdump -w FILE is writing, waiting for more at its end, instead of standard input.",
)
@click.option(
    "--keep",
    type=Duration(),
    default="1h",
    show_default=True,
    metavar="DURATION",
    help="The report at the end covers the last DURATION of capture time (30m, 2h, 1d), plus the totals since the watch began; memory stays flat over days.",
)
@click.option(
    "--every",
    type=click.FloatRange(min=0.5),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How often to say what happened: one line per listener that saw connections in that time.",
)
@click.option(
    "--metrics",
    "metrics",
    metavar="HOST:PORT",
    help="Serve Prometheus metrics at http://HOST:PORT/metrics while the capture is read, until the report is "
    "written: per listener, connections begun and answered, SYN-ACKs re-sent after the client's ACK (an accept "
    "queue overflowing), SYNs re-sent, connections waiting for accept(), handshake times (docs/monitoring.md). "
    "127.0.0.1:9465 for this host only, :9465 for every address, [::1]:9465 for IPv6.",
)
@click.option(
    "--max-listeners",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    metavar="N",
    help="With --metrics: the N busiest listeners get series of their own, the others are summed under "
    'listener="other" (bounds the series Prometheus stores).',
)
@report_options
def watch(
    source: str | None,
    follow: str | None,
    keep: float,
    every: float,
    metrics: str | None,
    max_listeners: int,
    fmt: str,
    output: str,
    pretty: bool,
    no_color: bool,
    max_connections: int,
    proxy_timeouts: str | None,
    logs: tuple[str, ...] = (),
    log_format: str | None = None,
    nginx_conf: str | None = None,
    haproxy_cfg: str | None = None,
    nstat: tuple[str, ...] = (),
    ss: str | None = None,
) -> None:
    """Follow a live capture on standard input (or a file); on Ctrl-C or its end, the report.

    Give it tcpdump's output as it is written (-U flushes each packet, -w - writes to
    standard output). While tcpdump runs, every --every seconds, one line per listener
    (server IP:port) on standard error: connections begun, answered, failed (refused,
    reset, or closed by the client before any answer), and the signs seen (SYNs re-sent,
    SYN-ACKs re-sent after the client's ACK, requests re-sent unacknowledged, ...). A
    listener's episode is said when it opens, with its first signs, and when it recovers
    (5 s without a sign while it answered connections), with how long it lasted and how
    many connections it touched. Signs are not a diagnosis: where one points to a single
    cause the line says "signs of" it, and the report at the end decides. With --metrics,
    the counts since the start are also served to Prometheus (docs/monitoring.md has the
    metrics, alert rules and a Grafana dashboard).

    Ctrl-C (SIGINT to the whole pipeline), SIGTERM or the end of the input ends the watch:
    the report follows, as `pcapq analyze` writes it (any --format, -o), marked interrupted
    after Ctrl-C or SIGTERM, with analyze's exit codes. It covers the last --keep of capture
    time (1 h by default), with one line of the totals since the watch began. The lines go to
    standard error, the report to standard output (or -o), so --format json stays parseable.

    --follow FILE reads a capture file that tcpdump (-w FILE, with or without -U) is still
    writing, pcap or pcapng, waiting at its end for more; it ends on Ctrl-C or SIGTERM, or
    when tcpdump starts over (another file at that path, or the file shrank).

    \b
    Examples:
      $ tcpdump -i any -U -w - port 9000 | pcapq watch -
      $ tcpdump -i any -U -s 96 -w - 'tcp port 9000' | pcapq watch --every 10 -
      $ tcpdump -i eth0 -U -w - port 9000 | pcapq watch --format json -o report.json -
      $ tcpdump -i any -U -w - port 9000 | tee dump.pcap | pcapq watch -   keep the capture too
      $ tcpdump -i any -w dump.pcap port 9000 &  pcapq watch --follow dump.pcap
      $ tcpdump -i any -U -w - port 9000 | pcapq watch --keep 2h -   a sidecar for days

    \b
    As a monitoring sidecar, scraped by Prometheus (alerts and a dashboard in deploy/):
      $ tcpdump -i any -s 96 -U -w - 'tcp port 9000' | pcapq watch --metrics :9465 -

    \b
    Exit codes, as analyze's: 0 nothing wrong found; 1 a problem was found (a finding); 2
    usage error; 3 standard input (or FILE) is not a capture, FILE does not exist (or Ctrl-C
    came before a capture arrived); 4 the capture is damaged (analysed up to the damage); 5 no
    TCP in it; 70 a bug in pcapq; 74 the report could not be written.
    """
    from pcapq.commands.request import AnalyzeRequest
    from pcapq.commands.watch import run

    run(source, follow, metrics, keep, every, max_listeners, AnalyzeRequest(
        (), report_format(fmt), output, pretty, no_color, max_connections=max_connections, proxy_timeouts=proxy_timeouts,
        logs=logs, log_format=log_format, nginx_conf=nginx_conf, haproxy_cfg=haproxy_cfg, nstat=nstat, ss=ss,
    ))


CAUSES = SLUGS
OUTCOMES = list(_core.VOCABULARY["outcomes"])


@cli.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--conn", "conn", metavar="ID|PORT|IP:PORT",
    help="The connection with this id (the reports' id column; #ID for an id only), from this client port, or from this client endpoint.",
)
@click.option("--failed", is_flag=True, help="Connections with a problem: a failed outcome or any symptom.")
@click.option("--outcome", "outcomes", multiple=True, type=click.Choice(OUTCOMES), help="Connections with this outcome (repeatable).")
@click.option("--cause", "causes", multiple=True, type=click.Choice(CAUSES), help="Connections of a finding (or minor observation) with this cause (repeatable).")
@click.option("--server", metavar="IP:PORT", help="Connections to this server endpoint (and the aggregate of its connections only).")
@click.option("--since", metavar="WHEN", help="Connections still going at or after WHEN (and the aggregate from then): seconds into the capture (12.5), HH:MM:SS[.fff] UTC, or an ISO date-time.")
@click.option("--until", metavar="WHEN", help="Connections begun at or before WHEN (same forms as --since).")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Show at most this many connections.")
@click.option("--aggregate", is_flag=True, help="Show the timeline across the capture (per time bucket); alone, only that.")
@click.option("--bucket", type=click.IntRange(min=1), metavar="SECONDS", help="Width of the aggregate's buckets (default: at most 60 buckets).")
@format_option("text: tables for a terminal. json: rows and notes as data. markdown: tables for a ticket. html: one self-contained page with ladder diagrams.", REPORT_FORMATS)
@output_option
@click.option("--no-color", is_flag=True, help="No colour, even on a terminal (NO_COLOR=1 does the same).")
@log_options("each connection shown gets the line tied to it", "timeline")
def timeline(
    files: tuple[str, ...], conn: str | None, failed: bool, outcomes: tuple[str, ...], causes: tuple[str, ...],
    server: str | None, since: str | None, until: str | None, limit: int, aggregate: bool, bucket: int | None,
    fmt: str, output: str, no_color: bool, logs: tuple[str, ...] = (), nginx_conf: str | None = None,
    log_format: str | None = None, haproxy_cfg: str | None = None,
) -> None:
    """Annotated packet-by-packet timelines of connections, and the capture's timeline.

    Per connection, one row per packet pcapq labelled: frame number, time since the
    connection's first packet, direction (→ client to server, ← server to client), flags,
    relative seq/ack/len, and what it means in plain words, with each retransmission's wait
    set against the kernel's schedule. Without a selection, the timeline across the capture
    (new connections by outcome, retransmissions, connections waiting for the server, per
    time bucket) and the connections with a problem.

    \b
    Examples:
      $ pcapq timeline dump.pcap
      $ pcapq timeline --conn 52206 dump.pcap          client port 52206
      $ pcapq timeline --conn '#7' dump.pcap           connection id 7 (the reports' id column)
      $ pcapq timeline --cause accept_queue_overflow --limit 5 dump.pcap
      $ pcapq timeline --outcome timed_out --since 10:15:00 --until 10:16:00 dump.pcap
      $ pcapq timeline --aggregate --bucket 10 dump.pcap
      $ pcapq timeline --failed --format html -o ladders.html dump.pcap
      $ pcapq timeline --failed --log error.log --log access.log dump.pcap   with nginx's lines

    \b
    Exit codes: 0 shown; 2 usage error (also a bad --conn, --server, --since or --until, or a
    --conn that matches no connection);
    3 a capture could not be read; 4 a capture is damaged (shown up to the damage); 5 no TCP
    in the capture; 70 a bug in pcapq; 74 the report could not be written.
    """
    from pcapq.commands.timeline import TimelineRequest, run

    # click's choice of --format is one of `TimelineFormat`.
    run(TimelineRequest(
        files, conn=conn, failed=failed, outcomes=outcomes, causes=causes, server=server, since=since, until=until,
        limit=limit, aggregate=aggregate, bucket=bucket, fmt=cast("TimelineFormat", fmt), output=output, no_color=no_color,
        logs=logs, nginx_conf=nginx_conf, log_format=log_format, haproxy_cfg=haproxy_cfg,
    ))


@cli.command(context_settings=CONTEXT)
@click.argument("file", metavar="FILE")
@format_option(
    "text: agreement table and disagreements for people. json: the same as one document. markdown: for a "
    "ticket. html: one self-contained page.",
    REPORT_FORMATS,
)
@output_option
@click.option(
    "--method",
    type=click.Choice(["auto", "pyshark", "fields"]),
    default="auto",
    show_default=True,
    help="How to run tshark: through pyshark, or directly with -T fields (auto: pyshark up to 20,000 packets).",
)
@click.option("--no-color", is_flag=True, help="No colour, even on a terminal (NO_COLOR=1 does the same).")
def crosscheck(file: str, fmt: str, output: str, method: str, no_color: bool) -> None:
    """Check pcapq's labels against tshark's TCP analysis, frame by frame.

    Runs tshark's two-pass analysis (tshark -2) on FILE and lines up every frame pcapq
    labels (SYN and SYN-ACK retransmits, final ACK dropped, request re-sent, data and FIN
    retransmits, duplicate ACKs, zero windows, port reuse, RSTs) with tshark's
    tcp.analysis flags on the same frame number. Prints an agreement table per label and
    every disagreement with its reason; a disagreement that no documented difference
    explains is listed as UNEXPLAINED (docs/crosscheck.md). Needs tshark; small captures are read through pyshark,
    large ones with tshark -T fields directly (the report says which).

    \b
    Examples:
      $ pcapq crosscheck dump.pcap
      $ pcapq crosscheck --format json -o crosscheck.json dump.pcap

    \b
    Exit codes: 0 every disagreement explained; 6 an unexplained disagreement; 2 usage
    error; 3 the capture could not be read; 5 no TCP in the capture; 69 tshark is not
    installed or failed on the capture; 70 a bug in pcapq; 74 the report could not be
    written.
    """
    from pcapq.commands.crosscheck import run

    run(file, fmt, output, method, no_color)


@cli.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--conn", metavar="PORT|IP:PORT", help="The connection to explain, by its client's port or address and port.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "markdown", "json", "html", "svg"]), default="text",
    show_default=True,
    help="text for a terminal, markdown for a page, json for programs, html for a page with the "
    "connection's ladder diagram, svg for the ladder alone.",
)
@output_option
@log_options("the story ends with the line tied to the connection, set against the line pcapq predicted", "story")
def explain(
    files: tuple[str, ...], conn: str | None, fmt: str, output: str, logs: tuple[str, ...] = (),
    nginx_conf: str | None = None, log_format: str | None = None, haproxy_cfg: str | None = None,
) -> None:
    """Walk through one connection, packet by packet, for someone learning TCP.

    For each step: the frame, what the client's and the server's kernel did and why, the
    queue involved (SYN queue, accept queue), the kernel function and sysctl behind it,
    and what the application saw (connect() returned, read timed out, ECONNRESET, the
    proxy's 502 or 504). Terms are defined where they first appear. Without --conn, the
    most instructive connection is chosen: the richest connection of the most certain
    finding (docs/explain.md).

    \b
    Examples:
      $ pcapq explain captures/accept_queue_overflow.pcap
      $ pcapq explain --conn 52206 captures/accept_queue_overflow.pcap
      $ pcapq explain --format markdown -o story.md dump.pcap
      $ pcapq explain --format html -o story.html dump.pcap
      $ pcapq explain --format svg -o ladder.svg dump.pcap
      $ pcapq explain --log error.log --log access.log dump.pcap   with what nginx logged

    \b
    Exit codes: 0 explained; 2 usage error (--conn matches nothing or is not PORT or
    IP:PORT); 3 a capture could not be read; 4 a capture is damaged (explained up to the
    damage); 5 no TCP in the capture; 70 a bug in pcapq; 74 the output could not be written.
    """
    from pcapq.commands.explain import run

    run(files, conn, fmt, output, logs, nginx_conf, log_format, haproxy_cfg)


@cli.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, allow_dash=False), metavar="OUT.pcapng",
    help="The annotated capture (pcapng)  [default: the first FILE's name with .pcapq.pcapng, in the current directory].",
)
@click.option("--failed", is_flag=True, help="Label only the connections with a problem (a failed outcome or any symptom).")
@click.option("--cause", "causes", multiple=True, type=click.Choice(CAUSES),
              help="Label only the connections of findings (or minor observations) with this cause (repeatable).")
@click.option("--coloring-rules", "coloring", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE",
              help="Also write Wireshark colouring rules that mark pcapq's labels (View > Coloring Rules > Import); "
              "'-' for standard output.")
def annotate(files: tuple[str, ...], output: str | None, failed: bool, causes: tuple[str, ...], coloring: str | None) -> None:
    """Write the capture back as pcapng, with pcapq's words on each packet it labels.

    Every packet of the input is kept, its bytes, timestamp and frame number unchanged;
    each packet pcapq labels gets a packet comment saying what `pcapq timeline` says of it
    ("SYN-ACK #2, spurious: the client already ACKed in frame 23 ..."), and the first packet
    of each problem connection also its outcome and its finding. The section header carries
    the findings and pcapq's version. Open it in Wireshark: the comments show in the packet
    detail, `frame.comment contains "pcapq: "` filters on them, and --coloring-rules marks
    them in the packet list (docs/wireshark.md). Comments already in a pcapng input are
    kept, pcapq's after them.

    \b
    Examples:
      $ pcapq annotate dump.pcap                      writes dump.pcapq.pcapng
      $ pcapq annotate --failed -o out.pcapng dump.pcap.gz
      $ pcapq annotate --cause accept_queue_overflow --coloring-rules pcapq.colorfilters dump.pcap
      $ tshark -r dump.pcapq.pcapng -Y 'frame.comment contains "spurious"'

    \b
    Exit codes: 0 written; 2 usage error; 3 a capture could not be read; 4 a capture is
    damaged (written up to the damage); 5 no TCP in the capture; 70 a bug in pcapq; 74 the
    output could not be written.
    """
    from pcapq.commands.annotate import run

    run(files, output, failed, causes, coloring)


@cli.command(context_settings=CONTEXT)
@click.argument("scenario", required=False, metavar="SCENARIO")
@click.option("--list", "list_", is_flag=True, help="List the scenarios and what each shows.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=False),
    default=None,
    help="Write the capture here (default: SCENARIO.pcap). Its companions go beside it.",
)
def lab(scenario: str | None, list_: bool, output: str | None) -> None:
    """Reproduce a scenario of the catalog with your own Linux kernel.

    Creates two network namespaces joined by a veth pair (client 10.231.1.1, server
    10.231.1.2), sets the scenario's sysctls inside them only, runs a server and a
    bounded client load, and captures on the server's side with tcpdump. Next to the
    capture it writes NAME.nstat.txt, the server namespace's kernel counters (nstat:
    ListenOverflows, ListenDrops, TCPReqQFullDrop, ...) before and after; nginx_php_fpm
    also keeps nginx's NAME.error.log and NAME.access.log. The host's own network
    settings are never touched, and the namespaces and every process started are removed
    at the end, also on Ctrl-C. Needs root, ip and tcpdump (iproute2, tcpdump).

    \b
    Examples:
      $ pcapq lab --list
      $ sudo pcapq lab accept_queue_overflow -o aq.pcap
      $ pcapq explain aq.pcap

    \b
    Exit codes: 0 the scenario ran as meant; 2 usage error (unknown scenario); 69 a tool
    is missing (the message says how to install it); 71 the scenario failed or did not
    show what it should; 74 the output cannot be written; 77 not root; 130 Ctrl-C.
    """
    from pcapq.commands.lab import run

    run(scenario, list_, output)


@cli.command(context_settings=CONTEXT)
@click.argument("file", metavar="FILE")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="A setting to replay with (repeatable): backlog, workers, syncookies, synack_retries, syn_retries, "
              "syn_linear_timeouts, client_timeout_s, abort_on_overflow. The others keep what the capture shows.")
@click.option("--listener", metavar="IP:PORT", help="The listener to replay (default: the one whose connections failed most).")
@format_option("text: a table, observed | replayed | predicted, and what the change does. json: the same as one document.")
@output_option
def whatif(file: str, sets: tuple[str, ...], listener: str | None, fmt: str, output: str) -> None:
    """What the capture's load would have done with other listen settings.

    Replays every connection of one listener, its first SYN at the time it came and its
    service time as the capture showed it (drawn from the answered ones' for those never
    answered), through a model of the kernel's SYN and accept queues, the SYN-ACK and
    client timers and the server's workers (docs/whatif.md): first with the settings the
    capture shows (replayed: how closely the model matches what happened), then with those
    given by --set (predicted).

    \b
    Examples:
      $ pcapq whatif --set backlog=128 dump.pcap
      $ pcapq whatif --set workers=8 --set backlog=64 --format json dump.pcap
      $ pcapq whatif --listener 10.0.0.2:9000 --set syncookies=0 dump.pcap

    \b
    Exit codes: 0 replayed; 2 usage error (a bad --set or --listener, or a listener with no
    connections); 3 the capture could not be read; 4 it is damaged (replayed up to the damage);
    5 no TCP in it; 70 a bug in pcapq; 74 the report could not be written.
    """
    from pcapq.commands.whatif import WhatifFormat, run

    run(file, sets, listener, cast("WhatifFormat", fmt), output)


def main() -> None:
    """Console-script entry point: maps every failure to a documented exit code, no tracebacks."""
    exit_on_errors(_run_click)


def _run_click() -> None:
    """The command line through click; its errors are usage errors (exit 2)."""
    try:
        cli.main(prog_name="pcapq", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.UsageError as e:
        # One line, as for every other bad input, with where to read more.
        where = e.ctx.command_path if e.ctx is not None else "pcapq"
        say(f"pcapq: {e.format_message()} (see '{where} --help')")
        sys.exit(int(ExitCode.USAGE))
    except click.ClickException as e:
        say(f"pcapq: {e.format_message()}")
        sys.exit(int(ExitCode.USAGE))
    except click.exceptions.Abort:
        sys.exit(int(ExitCode.INTERRUPTED))


if __name__ == "__main__":
    main()
