"""What the user named on the command line, as a list of capture files.

An argument is standard input (``-``), an existing file (taken as it is, even when its name
holds ``*`` or ``[``), a directory (walked for captures, recognised by their magic number, not
their extension), or a glob pattern (for shells that did not expand it, or a quoted one).
Anything else is passed on unchanged, so that the core reports the missing file itself.
"""

from __future__ import annotations

import glob
import gzip
import os
from typing import Iterable

# First four bytes of a capture, in either byte order (pcap micro/nanosecond, pcapng SHB).
CAPTURE_MAGICS = {
    bytes.fromhex("d4c3b2a1"),
    bytes.fromhex("a1b2c3d4"),
    bytes.fromhex("4d3cb2a1"),
    bytes.fromhex("a1b23c4d"),
    bytes.fromhex("0a0d0d0a"),
}
GZIP_MAGIC = b"\x1f\x8b"
GLOB_CHARACTERS = set("*?[")


class InputError(Exception):
    """An argument names nothing to read (a glob or directory without captures)."""


def is_capture(path: str) -> bool:
    """Does the file start like a pcap or pcapng capture, plain or gzip-compressed?"""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            if head[:2] == GZIP_MAGIC:
                f.seek(0)
                with gzip.GzipFile(fileobj=f) as inflated:
                    head = inflated.read(4)
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    return head in CAPTURE_MAGICS


def _walk(directory: str) -> list[str]:
    """Every capture under `directory`, in path order; hidden entries are skipped."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            if not name.startswith(".") and os.path.isfile(path) and is_capture(path):
                found.append(path)
    return found


def expand(arguments: Iterable[str]) -> list[str]:
    """The capture files the arguments name, in order, each once. Raises InputError for a glob
    or a directory that yields no capture."""
    out: list[str] = []
    seen: set[str] = set()
    for arg in arguments:
        if arg == "-" or os.path.isfile(arg):
            paths = [arg]
        elif os.path.isdir(arg):
            paths = _walk(arg)
            if not paths:
                raise InputError(f"{arg}: directory holds no pcap or pcapng capture")
        elif GLOB_CHARACTERS & set(arg):
            matches = sorted(glob.glob(arg, recursive=True))
            paths = [m for m in matches if os.path.isfile(m)]
            for d in (m for m in matches if os.path.isdir(m)):
                paths.extend(_walk(d))
            if not paths:
                raise InputError(f"{arg}: no file matches this pattern")
        else:
            paths = [arg]
        for p in paths:
            if p not in seen or p == "-":
                out.append(p)
                seen.add(p)
    if out.count("-") > 1:
        raise InputError("standard input ('-') can be read only once")
    return out
