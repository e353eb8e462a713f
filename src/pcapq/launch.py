"""The `pcapq` console script. Most runs are `pcapq analyze FILE...` with no option: that one runs
without importing click (pcapq.cli), 10-12 ms of the 80 a run on a small capture took
(docs/performance-history.md); every other command line goes through click.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any


def main() -> None:
    # pcapq is a short-lived process. Its imports make about 25,000 objects, and the cyclic
    # garbage collector runs some 40 times among them, for a few hundred objects of garbage:
    # about 5 ms of start-up (docs/performance-history.md). It stays off while the command runs; what
    # may last minutes or hours (reading standard input, a Dask cluster, the lab) turns it back on.
    gc.disable()
    files = plain_analyze(sys.argv[1:])
    if files is None:
        from pcapq.cli import main as click_main

        click_main()
        return
    from pcapq.output import exit_on_errors

    exit_on_errors(lambda: _run_plain(files))


def _run_plain(files: tuple[str, ...]) -> None:
    from pcapq.analyze_run import analyze_and_report
    from pcapq.exitcodes import ExitCode
    from pcapq.output import say

    try:
        # The defaults of `pcapq analyze`'s options (tests/test_launch.py holds them to click's).
        analyze_and_report(files, **ANALYZE_DEFAULTS)
    except (EOFError, KeyboardInterrupt):
        # What click does around a command: a blank line closes the terminal's ^C echo, and
        # pcapq.cli exits 130 without a word.
        say("")
        sys.exit(int(ExitCode.INTERRUPTED))


ANALYZE_DEFAULTS: dict[str, Any] = dict(
    fmt="text",
    output="-",
    pretty=False,
    no_color=False,
    merge=False,
    jobs=0,
    max_connections=0,
    proxy_timeouts=None,
    scheduler=None,
    logs=(),
    log_format=None,
    nginx_conf=None,
    haproxy_cfg=None,
    nstat=(),
    ss=None,
)


def plain_analyze(args: list[str]) -> tuple[str, ...] | None:
    """The files of `analyze FILE...` with no option ('-', standard input, is a file); None for
    any other command line, which click reads."""
    if len(args) < 2 or args[0] != "analyze" or "_PCAPQ_COMPLETE" in os.environ:
        # click's shell completion (_PCAPQ_COMPLETE=bash_source pcapq) answers, whatever the arguments.
        return None
    files = args[1:]
    if any(f.startswith("-") and f != "-" for f in files):
        return None
    return tuple(files)
