"""`pcapq ARGS` run in this process, as the console script runs a command line with options
(`pcapq.launch` hands it to `pcapq.cli.main`): the exit code, stdout and stderr, without the
interpreter's start-up and imports that a new process pays for every run."""

from __future__ import annotations

import io
import os
import sys
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Iterator
from unittest import mock

from pcapq.cli import main


def run_main(*args: str) -> tuple[int, str, str]:
    """`pcapq ARGS` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), mock.patch.object(sys, "argv", ["pcapq", *args]):
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """Runs the body from `path` (a capture given by a relative path keeps that path in reports)."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)
