"""`pcapq annotate` once its options are read: the capture written back as pcapng, with pcapq's
words on each packet it labels."""

from __future__ import annotations

import os
import sys

import click

from pcapq import _core
from pcapq.exitcodes import ExitCode
from pcapq.output import deliver, fail, refuse_overwriting_inputs, warn


def run(files: tuple[str, ...], output: str | None, failed: bool, causes: tuple[str, ...], coloring: str | None) -> None:
    """Reads and diagnoses the captures, writes them back annotated (and the colouring rules)."""
    from pcapq import annotate as labels

    if "-" in files:
        fail("annotate reads its input twice (once to analyse, once to write it back): give files, not standard input", ExitCode.USAGE)
    target = output or os.path.basename(files[0]).removesuffix(".gz").rsplit(".", 1)[0] + ".pcapq.pcapng"
    refuse_overwriting_inputs(files, target)
    try:
        # Every connection's record when every connection is labelled; the problem ones only otherwise.
        result = _core.analyze(list(files), keep_connections=not (failed or causes), keep_events=True)
    except _core.CaptureError as e:
        fail(e.args[0], ExitCode.UNREADABLE)
    for warning in result.warnings():
        warn(warning)
    if result.summary()["tcp_segments"] == 0:
        fail(f"no TCP segments to annotate in {', '.join(files)}", ExitCode.NO_TCP)
    from pcapq.diagnose import diagnose

    diagnosis = diagnose(result)
    ids = sorted({i for f in diagnosis.every_finding() if f.cause in causes for i in f.connections}) if causes else None
    selection = (f"the connections of {', '.join(causes)}" if causes else
                 "the connections with a problem" if failed else "every connection")
    section = labels.section_comment(files, diagnosis.findings, diagnosis.minor_observations, selection)
    names = labels.finding_names(diagnosis.findings + diagnosis.minor_observations)
    try:
        written = result.write_annotated(list(files), target, ids, names, section)
    except _core.CaptureError as e:
        warn(f"{e.args[0]}; {target} holds the packets before it")
        written = None
    except OSError as e:
        fail(f"cannot write {target}: {e.strerror or e}", ExitCode.CANT_WRITE)
    if coloring:
        deliver(coloring, True, lambda out, _colourless: (out.write(labels.coloring_rules()), out.flush()) and None)
    if written is not None:
        click.echo(f"pcapq: wrote {target}: {written['packets']:,} packets, {written['commented']:,} with pcapq's words "
                   f"({selection}); in Wireshark: frame.comment contains \"pcapq: \"", err=True)
    if written is None or any(c["read_stop"] in ("corrupt", "io_error") for c in result.captures()):
        sys.exit(int(ExitCode.DAMAGED))
