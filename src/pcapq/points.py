"""Analyses input files per capture point: each file is analysed as a mergeable part, the parts
are grouped into capture points (pcapq.capture_points) by name and packet times, and the parts
of each point are joined in time order into one analysis (docs/merging.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from pcapq import _core
from pcapq.capture_points import CapturePoint, FileTimes, group


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


def join(point: CapturePoint, parts: dict[str, _core.Analysis]) -> PointAnalysis:
    """The parts of `point`'s files merged in its order (the parts are used up)."""
    analyses = [parts.pop(path) for path in point.paths]
    joined = analyses[0]
    for later in analyses[1:]:
        joined = joined.merge(later)
    return PointAnalysis(point, joined)


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
    are analysed one part per file on `jobs` threads (0: every core), grouped, and joined.
    `keep_connections` keeps every connection; `keep_events` the events of the connections
    kept; `max_connections` caps the connections live at once in each file (0: no limit);
    `progress(bytes)` gets the bytes read over all files. Raises _core.CaptureError."""
    options = dict(keep_connections=keep_connections, keep_events=keep_events, max_connections=max_connections)
    if len(paths) == 1:
        analysis = _core.analyze(list(paths), progress=progress, **options)
        return [PointAnalysis(group([file_times(paths[0], analysis)])[0], analysis)]
    per_file = [0] * len(paths)

    def part_progress(index: int, done: int) -> None:
        per_file[index] = done
        if progress is not None:
            progress(sum(per_file))

    found = _core.analyze_parts(list(paths), jobs=jobs, progress=part_progress if progress else None, **options)
    return join_parts(dict(zip(paths, found)), paths, merge)


def join_parts(parts: dict[str, _core.Analysis], paths: Sequence[str], merge: bool) -> list[PointAnalysis]:
    """Groups the parts (one per path, analysed with mergeable=True) into capture points and
    joins each point's parts in time order."""
    points = group([file_times(p, parts[p]) for p in paths], merge=merge)
    return [join(point, parts) for point in points]
