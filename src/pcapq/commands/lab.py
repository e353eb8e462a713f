"""`pcapq lab` once its options are read: a scenario of the catalog run with this kernel, and
what pcapq finds in its capture."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

import click

from pcapq import _core
from pcapq.exitcodes import ExitCode
from pcapq.output import fail


def run(scenario: str | None, list_: bool, output: str | None) -> None:
    """Lists the scenarios, or runs the one named."""
    from pcapq.lab.catalog import SCENARIOS

    if list_:
        width = max(map(len, SCENARIOS))
        for name, entry in SCENARIOS.items():
            click.echo(f"{name:<{width}}  {entry.summary}")
        return
    if scenario is None:
        fail("name a scenario (pcapq lab --list shows them)", ExitCode.USAGE)
    if scenario not in SCENARIOS:
        fail(f"unknown scenario {scenario!r}; one of: {', '.join(SCENARIOS)}", ExitCode.USAGE)
    _run_lab(scenario, Path(output or f"{scenario}.pcap"))


def _run_lab(name: str, pcap: Path) -> None:
    import gc

    # A scenario runs servers and clients for up to minutes: the cyclic garbage collector back
    # on (pcapq.launch turns it off for the short runs).
    gc.enable()
    from pcapq.lab import counters
    from pcapq.lab.errors import LabError, LabNeedsRoot, LabUnavailable
    from pcapq.lab.runner import run_scenario

    if not pcap.parent.is_dir() or not os.access(pcap.parent, os.W_OK):
        fail(f"cannot write the capture to {pcap}: {pcap.parent} is not a writable directory", ExitCode.CANT_WRITE)

    def say(line: str) -> None:
        # Flushed at once: the narration goes as the lab goes, also into a pipe or a file.
        click.echo(f"lab: {line}")
        sys.stdout.flush()

    try:
        result = run_scenario(name, pcap, say)
    except LabNeedsRoot as e:
        fail(str(e), ExitCode.NOT_ROOT)
    except LabUnavailable as e:
        fail(f"lab: {e}", ExitCode.UNAVAILABLE)
    except LabError as e:
        fail(f"lab: scenario {name} failed: {e}", ExitCode.LAB_FAILED)
    except KeyboardInterrupt:
        click.echo("pcapq: interrupted; the lab's namespaces and processes are cleaned up", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    run = result.run
    say(f"done in {run.elapsed:.1f} s: {pcap.stat().st_size:,} bytes captured")
    for line in counters.highlights(run.nstat_before, run.nstat_after):
        say(f"  {line}")
    statuses = run.extra.get("statuses")
    if statuses:
        say("  nginx answered: " + ", ".join(f"{n} x {status}" for status, n in statuses.items()))
    say("wrote " + ", ".join(str(f) for f in result.files))
    _say_findings(pcap, say)
    say(f"next: pcapq analyze {pcap}   and   pcapq explain {pcap}")
    if result.problems:
        fail(f"lab: scenario {name} did not go as meant: {'; '.join(result.problems)}", ExitCode.LAB_FAILED)


def _say_findings(pcap: Path, say: Callable[[str], None]) -> None:
    """What pcapq finds in the fresh capture, one line per finding."""
    from pcapq.causes.registry import phrase
    from pcapq.diagnose import diagnose

    try:
        diagnosis = diagnose(_core.analyze([str(pcap)], keep_connections=False, keep_events=False))
    except _core.CaptureError as e:
        say(f"pcapq cannot read the capture: {e.args[0]}")
        return
    for f in diagnosis.every_finding():
        n = f.connection_count
        minor = f"; minor: {f.minor}" if f.minor is not None else ""
        say(f"pcapq finds {phrase(f.cause)} on {f.server} (confidence {f.confidence:.2f}, {n:,} connection{'s' if n != 1 else ''}{minor})")
    if not diagnosis.findings:
        say("pcapq finds nothing wrong" + (" that matters" if diagnosis.minor_observations else ""))
