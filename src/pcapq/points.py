"""Analyses input files per capture point (pcapq.capture_points), on `jobs` threads.

Files are grouped by name and put in time order from their first records. Two ways to use
several cores:

- **Across points**: a name group whose files are short (less than `PARTS_MIN_FILE_S` apart)
  is read as one capture, one file after the other with one tracker, which is exact; groups run
  in parallel. If the files turn out not to be one point (an overlap or a gap), the group is
  analysed again as parts.
- **Within a point**: a group of long files is analysed as mergeable parts, `jobs` files at a
  time in join order, and each batch is joined onto its point (docs/merging.md) before the next
  starts: memory holds one analysis per point and one batch of parts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence, TypeVar

from pcapq import _core
from pcapq.capture_points import CapturePoint, FileTimes, Grouper, continuous, name_groups
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

    def add_capture(self, analysis: _core.Analysis) -> None:
        """An analysis of a whole capture point's files, read as one capture."""
        points = {id(self.grouper.add(FileTimes(c["path"], c["first_time"], c["last_time"]))[0]) for c in analysis.captures()}
        (key,) = points
        self.analyses[key] = analysis

    def points(self) -> list[PointAnalysis]:
        return [PointAnalysis(p, self.analyses[id(p)]) for p in self.grouper.points()]


_T = TypeVar("_T")


def _batches(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# A part keeps, until it is joined, the records of the connections of its first 135 s (the
# join window, src/flow/track/tracker.rs JOIN_WINDOW_NS). With files at least four times as long,
# that is at most a quarter of them, and analysing the files as parts on several cores beats
# reading them one after the other; with shorter files, joining costs more than it saves.
PARTS_MIN_FILE_S = 4 * 135.0


def _long_files(group: Sequence[str], first_times: dict[str, float | None]) -> bool:
    """Are the group's files (in time order) long enough to be analysed as parts?"""
    starts = [t for t in (first_times[p] for p in group) if t is not None]
    gaps = sorted(b - a for a, b in zip(starts, starts[1:]))
    return bool(gaps) and gaps[len(gaps) // 2] >= PARTS_MIN_FILE_S


def analyze_points(
    paths: Sequence[str],
    *,
    merge: bool = False,
    keep_connections: bool = False,
    keep_events: bool = False,
    jobs: int = 0,
    max_connections: int = 0,
    progress: Callable[[int], None] | None = None,
    spill_dir: str | None = None,
) -> list[PointAnalysis]:
    """Every capture point among `paths`, analysed on `jobs` threads (0: one per core).
    `keep_connections` keeps every connection; `keep_events` the events of the connections
    kept; `max_connections` caps the connections live at once in each capture (0: no limit);
    `progress(bytes)` gets the bytes read over all files. `spill_dir`: every connection of a
    point read as one capture goes, as it finishes, to a temporary file there instead of memory
    (`_core.analyze_many`); points read as parts keep every connection in memory then.
    Raises _core.CaptureError."""
    threads = jobs or os.cpu_count() or 1
    first_times = {p: first_packet_time(p) for p in paths}
    groups = name_groups(list(paths), [first_times[p] for p in paths], merge)
    whole = [g for g in groups if len(g) == 1 or not _long_files(g, first_times)]
    read_whole: dict[int, _core.Analysis] = {}
    read = _ReadBytes(progress)
    for batch in _batches(whole, threads):
        found = _core.analyze_many([list(g) for g in batch], jobs=threads, progress=read.batch(),
                                   keep_connections=keep_connections, keep_events=keep_events,
                                   max_connections=max_connections, spill_dir=spill_dir or None)
        read.batch_done()
        for group, analysis in zip(batch, found):
            files = [FileTimes(c["path"], c["first_time"], c["last_time"]) for c in analysis.captures()]
            if merge or continuous(files):
                read_whole[id(group)] = analysis

    joiner = Joiner(merge)
    for group in groups:
        if id(group) in read_whole:
            joiner.add_capture(read_whole.pop(id(group)))
            continue
        for part_paths in _batches(group, threads):
            # Parts cannot spill: with a spill directory they keep every connection.
            found = _core.analyze_parts(list(part_paths), jobs=threads, progress=read.batch(),
                                        keep_connections=keep_connections or bool(spill_dir), keep_events=keep_events,
                                        max_connections=max_connections)
            read.batch_done()
            for path, part in zip(part_paths, found):
                joiner.add(path, part)
    return joiner.points()


class _ReadBytes:
    """Adds up the core's per-capture progress reports of successive batches into one count
    of bytes read, for `progress(bytes)`."""

    def __init__(self, progress: Callable[[int], None] | None) -> None:
        self.progress = progress
        self.before = 0  # bytes of the batches done
        self.current: dict[int, int] = {}

    def batch(self) -> Callable[[int, int], None] | None:
        """The callback for one batch's `analyze_many`/`analyze_parts` (None without a bar)."""
        if self.progress is None:
            return None
        self.current = {}

        def report(index: int, done: int) -> None:
            self.current[index] = done
            if self.progress is not None:
                self.progress(self.before + sum(self.current.values()))

        return report

    def batch_done(self) -> None:
        self.before += sum(self.current.values())
        self.current = {}
