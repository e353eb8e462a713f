"""`pcapq watch` once its options are read: where to read checked, then `analyze`'s phases with
the watch's live lines and metrics (pcapq.commands.analyze)."""

from __future__ import annotations

import dataclasses
import os
from typing import NoReturn

from pcapq.commands import analyze
from pcapq.commands.request import AnalyzeRequest, WatchOptions
from pcapq.exitcodes import ExitCode
from pcapq.output import fail


def run(source: str | None, follow: str | None, metrics: str | None, keep: float, every: float, max_listeners: int,
        report: AnalyzeRequest) -> NoReturn:
    """`source` ('-' or None) or `follow` (a file tcpdump is writing) read as `report` asks, its
    files aside; `metrics` ("HOST:PORT") served while it is read."""
    if follow is not None:
        if follow == "-":
            fail("--follow reads a file tcpdump is writing, not standard input: for a pipe, give '-' alone (tcpdump -w - | pcapq watch -)", ExitCode.USAGE)
        if source is not None:
            fail(f"--follow {follow} reads that file: give no {source!r} as well", ExitCode.USAGE)
        if not os.path.exists(follow):
            fail(f"{follow}: no such file (start tcpdump -w {follow} first)", ExitCode.UNREADABLE)
        if os.path.isdir(follow):
            fail(f"{follow}: is a directory, not a capture file", ExitCode.UNREADABLE)
    elif source not in (None, "-"):
        fail(f"watch reads standard input ('-'), not {source!r}: pipe tcpdump into it, use --follow {source} for a file tcpdump is "
             f"writing, or `pcapq analyze {source}`", ExitCode.USAGE)
    address = None
    if metrics is not None:
        from pcapq.metrics import MetricsAddressError, parse_address

        try:
            address = parse_address(metrics)
        except MetricsAddressError as e:
            fail(str(e), ExitCode.USAGE)
    files = (follow,) if follow is not None else ("-",)
    analyze.run(dataclasses.replace(report, files=files, watch=WatchOptions(every, keep, follow, address, max_listeners)))
