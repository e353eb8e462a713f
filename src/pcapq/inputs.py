"""What the user named on the command line, as a list of capture files.

An argument is standard input (``-``), an existing file (taken as it is, even when its name
holds ``*`` or ``[``), a directory (walked for captures, recognised by their magic number, not
their extension), or a glob pattern (for shells that did not expand it, or a quoted one).
Anything else is passed on unchanged, so that the core reports the missing file itself.
"""

from __future__ import annotations

import os
import struct
import zlib
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
                import gzip  # only for compressed inputs: its import is a few ms of start-up

                f.seek(0)
                with gzip.GzipFile(fileobj=f) as inflated:
                    head = inflated.read(4)
    except (OSError, EOFError, zlib.error):
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
            import glob  # a pattern only: glob and fnmatch are not imported for plain files

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


def first_packet_time(path: str) -> float | None:
    """The capture time of the file's first packet (epoch seconds), read from its first
    records only; None for standard input, a file without packets or one that cannot be read
    (the analysis reports why)."""
    if path == "-":
        return None
    try:
        with open(path, "rb") as raw:
            if raw.read(2) == GZIP_MAGIC:
                import gzip

                raw.seek(0)
                with gzip.GzipFile(fileobj=raw) as f:
                    return _first_time(f.read(_PEEK_BYTES))
            raw.seek(0)
            return _first_time(raw.read(_PEEK_BYTES))
    except (OSError, EOFError, zlib.error, struct.error, ValueError):
        return None


# Enough for a pcapng section header, interface descriptions and the first packet block.
_PEEK_BYTES = 1 << 16
# Classic pcap magic as it appears in the file: byte order and timestamp units.
_PCAP_MAGICS = {
    "d4c3b2a1": ("<", 1e6),
    "a1b2c3d4": (">", 1e6),
    "4d3cb2a1": ("<", 1e9),
    "a1b23c4d": (">", 1e9),
}


def _first_time(head: bytes) -> float | None:
    magic = head[:4]
    if magic.hex() in _PCAP_MAGICS:
        endian, units = _PCAP_MAGICS[magic.hex()]
        if len(head) < 40:
            return None
        seconds: int
        fraction: int
        seconds, fraction = struct.unpack(endian + "II", head[24:32])
        return seconds + fraction / units
    if magic == bytes.fromhex("0a0d0d0a"):
        return _first_pcapng_time(head)
    return None


def _first_pcapng_time(head: bytes) -> float | None:
    """First enhanced or obsolete packet block's time, with its interface's if_tsresol and
    if_tsoffset (pcapng spec §4.2, §4.3)."""
    endian = "<" if head[8:12] == bytes.fromhex("4d3c2b1a") else ">"
    interfaces: list[tuple[float, int]] = []
    at = 0
    while at + 12 <= len(head):
        block_type, length = struct.unpack_from(endian + "II", head, at)
        if length < 12 or at + length > len(head):
            return None
        body = head[at + 8 : at + length - 4]
        if block_type == 0x0A0D0D0A:
            interfaces = []
        elif block_type == 1:
            interfaces.append(_interface_clock(body[8:], endian))
        elif block_type in (6, 2) and len(body) >= 12:
            interface: int
            high: int
            low: int
            interface, high, low = struct.unpack_from(endian + "III", body, 0)
            if block_type == 2:
                interface &= 0xFFFF
            if interface >= len(interfaces):
                return None
            units, offset = interfaces[interface]
            return ((high << 32) | low) / units + offset
        at += length
    return None


def _interface_clock(options: bytes, endian: str) -> tuple[float, int]:
    """(units per second, offset in seconds) from an interface description's options."""
    units, offset, at = 1e6, 0, 0
    while at + 4 <= len(options):
        code, length = struct.unpack_from(endian + "HH", options, at)
        value = options[at + 4 : at + 4 + length]
        if code == 0:
            break
        if code == 9 and value:
            resolution = value[0]
            units = float(2 ** (resolution & 0x7F)) if resolution & 0x80 else float(10 ** resolution)
        elif code == 14 and len(value) == 8:
            offset = struct.unpack(endian + "q", value)[0]
        at += 4 + length + (-length % 4)
    return units, offset
