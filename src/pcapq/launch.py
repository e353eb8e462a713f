"""The `pcapq` console script. Most runs are `pcapq analyze FILE...` with no option: that one runs
without importing click (pcapq.cli), whose import is a large share of a short run's start-up;
every other command line goes through click.
"""

from __future__ import annotations

import gc
import os
import sys


def main() -> None:
    # pcapq is a short-lived process. Its imports make tens of thousands of objects, and the
    # cyclic garbage collector runs dozens of times among them for a few hundred objects of
    # garbage. It stays off while the command runs; what may last minutes or hours (reading
    # standard input, a Dask cluster, the lab) turns it back on.
    gc.disable()
    files = plain_analyze(sys.argv[1:])
    if files is None:
        from pcapq.cli import main as click_main

        click_main()
        return
    from pcapq.output import exit_on_errors

    exit_on_errors(lambda: _run_plain(files))


def _run_plain(files: tuple[str, ...]) -> None:
    from pcapq.commands.analyze import run
    from pcapq.exitcodes import ExitCode
    from pcapq.output import say
    from pcapq.commands.request import AnalyzeRequest

    try:
        # Every option at its default (tests/test_launch.py holds AnalyzeRequest's to click's).
        run(AnalyzeRequest(files))
    except (EOFError, KeyboardInterrupt):
        # What click does around a command: a blank line closes the terminal's ^C echo, and
        # pcapq.cli exits 130 without a word.
        say("")
        sys.exit(int(ExitCode.INTERRUPTED))


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
