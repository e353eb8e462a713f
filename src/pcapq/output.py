"""Where a command's words go: error and warning lines on standard error, the report to standard
output or a file (through rich for the text reports), and the exit code of every failure.

No click here: `pcapq analyze FILE...` runs without importing it (pcapq.launch).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Callable, NoReturn, TextIO

from pcapq import _core
from pcapq.exitcodes import ExitCode

if TYPE_CHECKING:
    from rich.console import Console


def say(message: str) -> None:
    """One line on standard error, flushed (as click.echo(message, err=True) writes it)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def fail(message: str, code: ExitCode) -> NoReturn:
    say(f"pcapq: {message}")
    sys.exit(int(code))


def warn(message: str) -> None:
    say(f"pcapq: warning: {message}")


# Width of the text reports in a file or pipe (rich would otherwise take 80 columns); COLUMNS
# wins. Tables keep their rows on one line by wrapping their widest cells.
FILE_WIDTH = 100


def console_for(file: TextIO | None = None, no_color: bool = False) -> Console:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1; the reader of our output going away is not an error (exit 0).
            raise BrokenPipeError

    stream = file if file is not None else sys.stdout
    to_terminal = hasattr(stream, "isatty") and stream.isatty()
    width = None if to_terminal or os.environ.get("COLUMNS") else FILE_WIDTH
    # emoji=False: no report writes emoji codes, and replacing them loads rich's table of 4,000
    # names (about 6 ms of every run).
    return _Console(file=file, no_color=no_color or None, highlight=False, soft_wrap=False, width=width, emoji=False)


def deliver(
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
        stop_on_broken_pipe()
    except OSError as e:
        where = "standard output" if output == "-" else output
        fail(f"cannot write the report to {where}: {reason(e)}", ExitCode.CANT_WRITE)


def reason(e: OSError) -> str:
    """'No space left on device' rather than '[Errno 28] No space left on device'."""
    return e.strerror or str(e) or type(e).__name__


def stop_on_broken_pipe() -> NoReturn:
    """The reader of our output is gone: stop quietly, exit 0."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(int(ExitCode.OK))


def refuse_overwriting_inputs(files: tuple[str, ...], output: str) -> None:
    """Nothing the user gave is modified: the report never goes over an input capture."""
    if output == "-" or not os.path.exists(output):
        return
    for f in files:
        if f != "-" and os.path.exists(f) and os.path.samefile(f, output):
            fail(f"refusing to write the report over the input capture {f}", ExitCode.USAGE)


def exit_on_errors(run: Callable[[], None]) -> None:
    """Runs a command; maps every failure that is not the command line's to its documented exit
    code, with one line on standard error and no traceback."""
    try:
        run()
    except KeyboardInterrupt:
        say("pcapq: interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
    except BrokenPipeError:
        # `pcapq ... | head` is fine; stop quietly.
        stop_on_broken_pipe()
    except _core.InternalError as e:
        say(f"pcapq: {e.args[0]}")
        sys.exit(int(ExitCode.INTERNAL))
    except _core.PcapqError as e:
        say(f"pcapq: {e.args[0] if e.args else e}")
        sys.exit(int(ExitCode.INTERNAL))
    except OSError as e:
        say(f"pcapq: {e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}")
        sys.exit(int(ExitCode.UNREADABLE))
