"""The `pcapq` command. Thin: parse options, call the core, hand the result to a renderer."""

from __future__ import annotations

import os
import sys
from typing import Callable, NoReturn, TextIO

import click

from pcapq import _core
from pcapq.exitcodes import ExitCode

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _fail(message: str, code: ExitCode) -> NoReturn:
    click.echo(f"pcapq: {message}", err=True)
    sys.exit(int(code))


def _warn(message: str) -> None:
    click.echo(f"pcapq: warning: {message}", err=True)


# Width of the summary in a file or pipe, where rich would otherwise wrap at 80 columns and
# split a row (a timestamp) over two lines. COLUMNS still wins.
FILE_WIDTH = 200


def _console(file: TextIO | None = None, no_color: bool = False):  # -> rich.console.Console
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1; the reader of our output going away is not an error (exit 0).
            raise BrokenPipeError

    stream = file if file is not None else sys.stdout
    to_terminal = hasattr(stream, "isatty") and stream.isatty()
    width = None if to_terminal or os.environ.get("COLUMNS") else FILE_WIDTH
    return _Console(file=file, no_color=no_color or None, highlight=False, soft_wrap=False, width=width)


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
      $ pcapq analyze dump.pcap                 summary of every connection
      $ pcapq analyze --format json dump.pcap   one JSON record per connection
      $ tcpdump -i any -w - port 9000 | pcapq analyze -
      $ pcapq crosscheck dump.pcap              pcapq's labels against tshark's
    """


def format_option(help: str):
    return click.option(
        "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help=help
    )


output_option = click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True),
    default="-",
    help="Write the report to this file instead of standard output.",
)


@cli.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@format_option("text: a summary for people. json: every connection with its events (schema in docs/json.md).")
@output_option
@click.option("--pretty", is_flag=True, help="Indent the JSON for reading.")
@click.option("--no-color", is_flag=True, help="No colour, even on a terminal (NO_COLOR=1 does the same).")
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
    "--max-connections",
    type=click.IntRange(min=0),
    default=0,
    metavar="N",
    help="At most N connections live at once per capture; beyond, the longest idle are finalised early, with a warning  [default: 0, no limit].",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Analyse one file per task on this Dask cluster (tcp://HOST:8786); the workers must see the files at the same paths. Needs pip install 'pcapq[dask]'.",
)
def analyze(
    files: tuple[str, ...],
    fmt: str,
    output: str,
    pretty: bool,
    no_color: bool,
    merge: bool,
    jobs: int,
    max_connections: int,
    scheduler: str | None,
) -> None:
    """Say what went wrong in the captures, then summarise every TCP connection.

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
      $ pcapq analyze --scheduler tcp://10.0.0.5:8786 /shared/cap/   one task per file
      $ pcapq analyze --format json -o report.json dump.pcap.gz
      $ tcpdump -i any -s 96 -w - 'tcp port 9000' | pcapq analyze -

    \b
    Exit codes: 0 analysed; 2 usage error; 3 a capture could not be read (or a pattern or
    directory holds none); 4 a capture is damaged (analysed up to the damage); 5 no TCP in
    the capture; 69 --scheduler: dask missing or the scheduler unreachable; 70 a bug in
    pcapq; 74 the report could not be written.
    """
    from pcapq.inputs import InputError, expand
    from pcapq.points import analyze_points

    try:
        paths = expand(files)
    except InputError as e:
        _fail(str(e), ExitCode.UNREADABLE)
    _refuse_overwriting_inputs(tuple(paths), output)
    if scheduler and "-" in paths:
        _fail("standard input cannot be sent to a Dask cluster; give files", ExitCode.USAGE)
    try:
        if scheduler:
            from pcapq.cluster import ClusterUnavailable, analyze_on_cluster

            try:
                points = analyze_on_cluster(
                    paths, scheduler, merge=merge, keep_connections=fmt == "json", max_connections=max_connections
                )
            except ClusterUnavailable as e:
                _fail(str(e), ExitCode.UNAVAILABLE)
        else:
            points = analyze_points(
                paths, merge=merge, keep_connections=fmt == "json", jobs=jobs, max_connections=max_connections
            )
    except _core.CaptureError as e:
        _fail(e.args[0], ExitCode.UNREADABLE)

    if len(points) == 1:
        result = points[0].analysis

        def json_file(path: str) -> None:
            # The core writes the file itself, without passing every chunk through Python.
            from pcapq.diagnose import diagnose

            result.write_json(path, pretty=pretty, extra=_json_extra(diagnose(result), pretty))

        _deliver(
            output,
            no_color,
            lambda out, colourless: _write_report(result, fmt, pretty, colourless, out),
            json_file if fmt == "json" else None,
        )
    else:
        _deliver(output, no_color, lambda out, colourless: _write_points_report(points, fmt, pretty, colourless, out))

    several = len(points) > 1
    damaged = False
    segments = packets = 0
    skipped: dict[str, list] = {}
    for p in points:
        for warning in p.analysis.warnings():
            _warn(f"{p.name}: {warning}" if several else warning)
        damaged |= any(c["read_stop"] in ("corrupt", "io_error") for c in p.analysis.captures())
        summary = p.analysis.summary()
        segments += summary["tcp_segments"]
        packets += summary["packets"]
        for slug, (n, meaning) in p.analysis.skipped().items():
            skipped.setdefault(slug, [0, meaning])[0] += n
    if segments == 0:
        what = ", ".join(f"{n:,} {meaning}" for n, meaning in skipped.values()) or "no packets at all"
        _fail(f"no TCP segments to analyse in {packets:,} packets ({what})", ExitCode.NO_TCP)
    if damaged:
        sys.exit(int(ExitCode.DAMAGED))


TSHARK_INSTALL = "apt-get install tshark (Debian/Ubuntu)"


@cli.command(context_settings=CONTEXT)
@click.argument("file", metavar="FILE")
@format_option("text: agreement table and disagreements for people. json: the same as one document.")
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
    every disagreement with its reason; one no documented difference explains is listed as
    UNEXPLAINED (docs/crosscheck.md). Needs tshark; small captures are read through pyshark,
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
    from pcapq import crosscheck as xc

    _refuse_overwriting_inputs((file,), output)
    try:
        result = xc.crosscheck(file, method)
    except xc.TsharkMissing:
        _fail(f"tshark is not installed; install it with: {TSHARK_INSTALL}", ExitCode.TSHARK_MISSING)
    except xc.TsharkFailed as e:
        _fail(f"tshark could not analyse {file}: {e}", ExitCode.TSHARK_MISSING)
    except _core.CaptureError as e:
        _fail(e.args[0], ExitCode.UNREADABLE)
    if result.tcp_segments == 0:
        _fail(f"no TCP segments to compare in {file}", ExitCode.NO_TCP)

    def write(out: TextIO, colourless: bool) -> None:
        if fmt == "json":
            import json

            out.write(json.dumps(result.to_json(), indent=2) + "\n")
        else:
            from pcapq.crosscheck.report import render

            _console(out, colourless).print(render(result))
        out.flush()

    _deliver(output, no_color, write)
    if result.comparison.unexplained:
        sys.exit(int(ExitCode.DISAGREE))


def _deliver(
    output: str,
    no_color: bool,
    to_stream: Callable[[TextIO, bool], None],
    to_path: Callable[[str], None] | None = None,
) -> None:
    """Writes a report to standard output ("-") or to the file `output`: `to_stream(out,
    colourless)` writes it to a text stream, `to_path(path)`, when given, writes the file itself.
    A reader that went away (`pcapq ... | head`) ends quietly; other write errors exit 74."""
    try:
        if output == "-":
            to_stream(sys.stdout, no_color)
            sys.stdout.flush()
        elif to_path is not None:
            to_path(output)
        else:
            with open(output, "w", encoding="utf-8") as out:
                to_stream(out, True)
    except BrokenPipeError:
        _stop_on_broken_pipe()
    except OSError as e:
        where = "standard output" if output == "-" else output
        _fail(f"cannot write the report to {where}: {_reason(e)}", ExitCode.CANT_WRITE)


def _reason(e: OSError) -> str:
    """'No space left on device' rather than '[Errno 28] No space left on device'."""
    return e.strerror or str(e) or type(e).__name__


def _stop_on_broken_pipe() -> NoReturn:
    """The reader of our output is gone: stop quietly, exit 0."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(int(ExitCode.OK))


def _write_report(result: _core.Analysis, fmt: str, pretty: bool, no_color: bool, out: TextIO) -> None:
    from pcapq.diagnose import diagnose

    diagnosis = diagnose(result)
    if fmt == "json":
        result.write_json(out, pretty=pretty, extra=_json_extra(diagnosis, pretty))
        out.flush()
        return
    from pcapq.report.findings import render_findings
    from pcapq.report.summary import print_summary

    console = _console(out, no_color)
    starts = [c["first_time"] for c in result.captures() if c["first_time"] is not None]
    console.print(render_findings(diagnosis, min(starts) if starts else None))
    console.print()
    print_summary(result, console)


def _write_points_report(points, fmt: str, pretty: bool, no_color: bool, out: TextIO) -> None:
    """Several capture points: JSON, one document with a section per point; text, the points
    side by side, then each one's findings and summary."""
    import json

    from pcapq.diagnose import diagnose

    diagnoses = [diagnose(p.analysis) for p in points]
    if fmt == "json":
        indent = "\n  " if pretty else ""
        out.write('{"capture_points": [')
        for i, (p, d) in enumerate(zip(points, diagnoses)):
            head = json.dumps({"name": p.name, "files": p.point.paths})
            out.write(("," if i else "") + indent + head[:-1] + ', "report": ')
            p.analysis.write_json(out, pretty=pretty, extra=_json_extra(d, pretty))
            out.write("}")
        out.write(("\n" if pretty else "") + "]}\n")
        out.flush()
        return
    from pcapq.report.findings import render_findings
    from pcapq.report.points import print_points
    from pcapq.report.summary import print_summary

    def print_one(p, d, console) -> None:
        starts = [c["first_time"] for c in p.analysis.captures() if c["first_time"] is not None]
        console.print(render_findings(d, min(starts) if starts else None))
        console.print()
        print_summary(p.analysis, console)

    print_points(points, diagnoses, _console(out, no_color), print_one)


def _json_extra(diagnosis, pretty: bool) -> str:
    import json

    return json.dumps(diagnosis.to_json(), indent=2 if pretty else None)


def _refuse_overwriting_inputs(files: tuple[str, ...], output: str) -> None:
    """Nothing the user gave is modified: the report never goes over an input capture."""
    if output == "-" or not os.path.exists(output):
        return
    for f in files:
        if f != "-" and os.path.exists(f) and os.path.samefile(f, output):
            _fail(f"refusing to write the report over the input capture {f}", ExitCode.USAGE)


def main() -> None:
    """Console-script entry point: maps every failure to a documented exit code, no tracebacks."""
    try:
        cli.main(prog_name="pcapq", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(int(ExitCode.USAGE))
    except click.exceptions.Abort:
        sys.exit(int(ExitCode.INTERRUPTED))
    except KeyboardInterrupt:
        click.echo("pcapq: interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except BrokenPipeError:
        # `pcapq ... | head` is fine; stop quietly.
        _stop_on_broken_pipe()
    except _core.InternalError as e:
        click.echo(f"pcapq: {e.args[0]}", err=True)
        sys.exit(int(ExitCode.INTERNAL))
    except _core.PcapqError as e:
        click.echo(f"pcapq: {e.args[0] if e.args else e}", err=True)
        sys.exit(int(ExitCode.INTERNAL))
    except OSError as e:
        click.echo(f"pcapq: {e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}", err=True)
        sys.exit(int(ExitCode.UNREADABLE))


if __name__ == "__main__":
    main()
