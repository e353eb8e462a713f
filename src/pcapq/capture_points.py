"""Which input files belong to one capture point, and in what order (docs/capture-points.md).

A capture point is one tcpdump on one host and interface, cut into files by ``-C``/``-W``
(``dump.pcap``, ``dump.pcap1``, ...) or ``-G`` (``dump-20261121-0800.pcap``, ...). The rule:

1. Files are grouped by directory and name stem. The stem is the file name without a
   compression suffix (``.gz``), without the digits tcpdump appends at the end (``-C``), and
   with every run of four or more digits (dates and times, ``-G``) replaced by ``#``. Shorter
   digit runs stay, so ``web1.pcap`` and ``web2.pcap`` are two points.
2. Within a group, files are ordered by their first packet's time. A file that begins before
   the previous file of its point ended (an overlap), or more than ``MAX_GAP_S`` after it (a
   gap), starts another point: two hosts writing files with the same name pattern into one
   directory, or captures taken at different times.

Files without packets are kept with the file before them. ``--merge`` puts every file in
one point, ordered by first packet time.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Optional, Sequence, TypeVar

# Longer than TIME-WAIT and the SYN-ACK retries (pcapq's tracker forgets idle connections
# after 120 s, src/flow/store/table.rs LINGER_NS): across a longer gap no connection can be joined,
# so the files are not one continuous capture.
MAX_GAP_S = 120.0

_COMPRESSION = re.compile(r"\.gz$")
_ROTATION_COUNTER = re.compile(r"\d+$")
_TIMESTAMP = re.compile(r"\d{4,}")


@dataclass(frozen=True)
class FileTimes:
    """An input file and the times of its first and last packets (epoch seconds)."""

    path: str
    first_time: Optional[float]
    last_time: Optional[float]


@dataclass
class CapturePoint:
    """The files of one tcpdump on one host, in time order."""

    name: str
    files: list[FileTimes] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def last_time(self) -> Optional[float]:
        times = [f.last_time for f in self.files if f.last_time is not None]
        return max(times) if times else None


def stem(path: str) -> str:
    """The name pattern of a file of a tcpdump ring or timed rotation (see the module doc)."""
    name = _COMPRESSION.sub("", os.path.basename(path))
    name = _ROTATION_COUNTER.sub("", name) or name
    return _TIMESTAMP.sub("#", name)


def _group_key(path: str) -> tuple[str, str]:
    return (os.path.dirname(os.path.abspath(path)) if path != "-" else "", stem(path))


def group(files: Sequence[FileTimes], merge: bool = False) -> list[CapturePoint]:
    """The capture points of `files`, each with its files in time order; points in order of
    their first file on the command line."""
    grouper = Grouper(merge)
    for f in processing_order(files, [f.first_time for f in files], merge):
        grouper.add(f)
    return grouper.points()


# A file as a path, or with its times.
_Item = TypeVar("_Item", str, FileTimes)


def processing_order(items: Sequence[_Item], first_times: Sequence[Optional[float]], merge: bool = False) -> list[_Item]:
    """`items` (one per file, with the file's first packet time) in the order `Grouper.add`
    must see them: name groups in order of their first file on the command line, each in time
    order (files without packets last)."""
    return [item for members in name_groups(items, first_times, merge) for item in members]


def name_groups(items: Sequence[_Item], first_times: Sequence[Optional[float]], merge: bool = False) -> list[list[_Item]]:
    """`items` by name group (rule 1; one group with `merge`), each in time order."""
    groups: dict[tuple[str, str], list[tuple[bool, float, str, int, _Item]]] = {}
    for i, (item, first) in enumerate(zip(items, first_times)):
        path = item if isinstance(item, str) else item.path
        key = ("", "") if merge else _group_key(path)
        groups.setdefault(key, []).append((first is None, first or 0.0, path, i, item))
    return [[entry[-1] for entry in sorted(members, key=lambda e: e[:4])] for members in groups.values()]


def continuous(files: Sequence[FileTimes]) -> bool:
    """Do the files (one name group, in time order) form a single capture point?"""
    grouper = Grouper()
    return len({id(grouper.add(f)[0]) for f in files}) == 1


class Grouper:
    """Assigns files to capture points one at a time, in `processing_order`."""

    def __init__(self, merge: bool = False) -> None:
        self.merge = merge
        self.groups: dict[tuple[str, str], list[CapturePoint]] = {}

    def add(self, f: FileTimes) -> tuple[CapturePoint, bool]:
        """The point `f` joins, and whether it is a new one."""
        key = ("", "") if self.merge else _group_key(f.path)
        chains = self.groups.setdefault(key, [])
        chain = (chains[0] if chains else None) if self.merge else _chain_for(chains, f)
        new = chain is None
        if chain is None:
            chain = CapturePoint("")
            chains.append(chain)
        chain.files.append(f)
        return chain, new

    def points(self) -> list[CapturePoint]:
        return named([p for chains in self.groups.values() for p in chains], self.merge)


def named(points: list[CapturePoint], merge: bool = False) -> list[CapturePoint]:
    """`points` (every point of a run, in `Grouper.points` order) with their names."""
    if merge or len(points) == 1:
        for p in points:
            p.name = _common_name(p.files)
    else:
        _name(points)
    return points


def _chain_for(chains: list[CapturePoint], f: FileTimes) -> Optional[CapturePoint]:
    """The point `f` continues: the one that ended last before `f` began, within MAX_GAP_S."""
    if f.first_time is None:
        return chains[-1] if chains else None
    best: Optional[CapturePoint] = None
    best_end = float("-inf")
    for chain in chains:
        end = chain.last_time()
        if end is None:
            return chain
        if end <= f.first_time and f.first_time - end <= MAX_GAP_S and end > best_end:
            best, best_end = chain, end
    return best


def _display(path: str) -> str:
    return "standard input" if path == "-" else path


def _common_name(files: Sequence[FileTimes]) -> str:
    if not files:
        return ""
    if len(files) == 1:
        return _display(files[0].path)
    first = files[0].path
    return os.path.join(os.path.dirname(first), stem(first)) if first != "-" else "standard input"


def _name(points: list[CapturePoint]) -> None:
    """Names a point by its directory and stem (the file, for one file), without the directory
    every point shares; points sharing a name get #2, #3 in time order."""
    counts: dict[str, int] = {}
    names = [_common_name(p.files) for p in points]
    if "standard input" not in names and len({os.path.isabs(n) for n in names}) > 1:
        # Relative and absolute paths given together: their shared directory is an absolute one.
        names = [os.path.abspath(n) for n in names]
    shared = os.path.commonpath([os.path.dirname(n) or "." for n in names]) if "standard input" not in names else ""
    for p, base in zip(points, names):
        if shared and shared != ".":
            base = os.path.relpath(base, shared)
        counts[base] = counts.get(base, 0) + 1
        p.name = base if counts[base] == 1 else f"{base} #{counts[base]}"
