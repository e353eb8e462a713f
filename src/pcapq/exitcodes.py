"""Exit codes of the `pcapq` command (documented in docs/exit-codes.md)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    """Analysed, nothing wrong found. A capture cut short at its last record still exits 0, with a
    warning on stderr."""
    PROBLEMS = 1
    """analyze: analysed, and a problem was found (at least one finding). Damage (4) and no TCP (5)
    take precedence."""
    USAGE = 2
    """The command line is wrong (unknown option, missing argument)."""
    UNREADABLE = 3
    """A capture could not be read at all: missing, not readable, empty, or not a capture."""
    DAMAGED = 4
    """A capture is damaged in the middle: it was analysed up to the damage, the rest was lost."""
    NO_TCP = 5
    """The capture holds no TCP segment pcapq could decode: nothing to analyse."""
    DISAGREE = 6
    """crosscheck: pcapq and tshark disagree on a frame and no documented difference explains it."""
    TSHARK_MISSING = 69
    """crosscheck: tshark is not installed (EX_UNAVAILABLE), or it failed to read the capture."""
    UNAVAILABLE = 69
    """analyze --scheduler: dask.distributed is not installed, or the scheduler cannot be reached."""
    INTERNAL = 70
    """A bug in pcapq (EX_SOFTWARE). Please report it."""
    CANT_WRITE = 74
    """The report could not be written (EX_IOERR): the -o file cannot be created, or the disk is full."""
    INTERRUPTED = 130
    """Stopped with Ctrl-C."""
