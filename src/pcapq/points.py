"""Analyses input files per capture point: each file is analysed as a mergeable part, the parts
are grouped into capture points (pcapq.capture_points) by name and packet times, and the parts
of each point are joined in time order into one analysis (docs/merging.md).

Files are analysed `jobs` at a time in the order the grouping needs them (each name group in
order of first packet, read from the files' first records), and each batch is joined onto its
point before the next one starts: memory holds one analysis per point and one batch of parts,
not every part of the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from pcapq import _core
from pcapq.capture_points import CapturePoint, FileTimes, Grouper, processing_order
from pcapq.inputs import first_packet_time


@dataclass
class PointAnalysis:
    """One capture point and the analysis of its files as one capture."""

    point: CapturePoint
    analysis: _core.Analysis

    @property
    def name(self) -> str:
        return self.point.name


def file_times(path: str, part: _core.Analysis) -> FileTimes:
    (info,) = part.captures()
    return FileTimes(path, info["first_time"], info["last_time"])


class Joiner:
    """Joins parts onto their capture points as they come (in `processing_order`)."""

    def __init__(self, merge: bool) -> None:
        self.grouper = Grouper(merge)
        self.analyses: dict[int, _core.Analysis] = {}

    def add(self, path: str, part: _core.Analysis) -> None:
        point, new = self.grouper.add(file_times(path, part))
        key = id(point)
        self.analyses[key] = part if new else self.analyses[key].merge(part)

    def points(self) -> list[PointAnalysis]:
        return [PointAnalysis(p, self.analyses[id(p)]) for p in self.grouper.points()]


def planned(paths: Sequence[str], merge: bool) -> list[str]:
    """The files in the order their parts must be joined."""
    return processing_order(list(paths), [first_packet_time(p) for p in paths], merge)


def join_parts(parts: Iterable[tuple[str, _core.Analysis]], merge: bool) -> list[PointAnalysis]:
    """Joins (path, part) pairs, given in `planned` order, into capture points."""
    joiner = Joiner(merge)
    for path, part in parts:
        joiner.add(path, part)
    return joiner.points()


def _batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def analyze_points(
    paths: Sequence[str],
    *,
    merge: bool = False,
    keep_connections: bool = False,
    keep_events: bool = False,
    jobs: int = 0,
    max_connections: int = 0,
    progress: Callable[[int], None] | None = None,
) -> list[PointAnalysis]:
    """Every capture point among `paths`, analysed. One file is one plain analysis; several
    are analysed as parts, `jobs` files at a time (0: one per core), and joined.
    `keep_connections` keeps every connection; `keep_events` the events of the connections
    kept; `max_connections` caps the connections live at once in each file (0: no limit);
    `progress(bytes)` gets the bytes read over all files. Raises _core.CaptureError."""
    options = dict(keep_connections=keep_connections, keep_events=keep_events, max_connections=max_connections)
    if len(paths) == 1:
        analysis = _core.analyze(list(paths), progress=progress, **options)
        grouper = Grouper(merge)
        grouper.add(file_times(paths[0], analysis))
        return [PointAnalysis(grouper.points()[0], analysis)]
    threads = jobs or os.cpu_count() or 1
    order = planned(paths, merge)
    read_before = 0  # bytes of the batches done

    def parts() -> Iterator[tuple[str, _core.Analysis]]:
        nonlocal read_before
        for batch in _batches(order, threads):
            per_file = [0] * len(batch)

            def part_progress(index: int, done: int) -> None:
                per_file[index] = done
                if progress is not None:
                    progress(read_before + sum(per_file))

            found = _core.analyze_parts(list(batch), jobs=threads, progress=part_progress if progress else None, **options)
            read_before += sum(per_file)
            yield from zip(batch, found)

    return join_parts(parts(), merge)

