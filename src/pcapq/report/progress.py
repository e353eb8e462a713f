"""A progress bar on standard error while the core reads large captures (rich.progress),
shown only when standard error is a terminal."""

from __future__ import annotations

import contextlib
import os
import struct
import sys
from typing import Callable, Iterator, Optional

# Inputs smaller than this are read before a bar would be worth drawing.
LARGE_INPUT_BYTES = 64 << 20
# Bytes of a file that are not records: a pcap file header (pcapng's headers are larger).
FILE_HEADER_BYTES = 24


def _record_bytes(path: str) -> Optional[int]:
    """About how many bytes of records `path` holds: its size, or for gzip the uncompressed
    size from the trailer (ISIZE, RFC 1952 §2.3.1, modulo 2^32); None for standard input."""
    if path == "-":
        return None
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                return max(0, size - FILE_HEADER_BYTES)
            if size < 18:
                return None
            f.seek(-4, os.SEEK_END)
            isize: int = struct.unpack("<I", f.read(4))[0]
            while isize < size:  # larger than 4 GiB uncompressed: ISIZE wrapped
                isize += 1 << 32
            return max(0, isize - FILE_HEADER_BYTES)
    except OSError:
        return None


def record_bytes(files: tuple[str, ...]) -> Optional[int]:
    """About how many bytes of records the inputs hold; None when unknown (standard input)."""
    sizes = [_record_bytes(f) for f in files]
    return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


@contextlib.contextmanager
def progress_for(files: tuple[str, ...]) -> Iterator[Optional[Callable[[int], None]]]:
    """Yields a callback for `_core.analyze(progress=...)`, or None when no bar is shown."""
    total = record_bytes(files)
    large = total is None or total >= LARGE_INPUT_BYTES
    if not (large and sys.stderr.isatty()) or os.environ.get("TERM") == "dumb":
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    columns = [TextColumn("reading"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("reading", total=total)

        def update(done: int) -> None:
            bar.update(task, completed=done)

        yield update
