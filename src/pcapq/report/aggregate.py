"""The aggregate timeline: the core's per-second counts of a capture (`Analysis.timeline()`)
in buckets, with the findings' episodes to shade on it. The text, Markdown, HTML and JSON
renderers share it; `pcapq.report.timeline` tells single connections."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Optional

from pcapq._core import VOCABULARY, Analysis

if TYPE_CHECKING:
    from pcapq._core import _Timeline

# Outcomes in which the connection did not do its job, in the core's order (docs/diagnosis.md,
# "Outcome"; src/detect/mod.rs: Outcome::is_failure).
FAILED_OUTCOMES = tuple(VOCABULARY["failed_outcomes"])
# Every outcome, in the core's order (its vocabulary, which tests/test_vocabulary.py holds to the stub).
OUTCOMES: tuple[str, ...] = tuple(VOCABULARY["outcomes"])

# Bucket widths to choose from, seconds.
BUCKET_WIDTHS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)


@dataclass(frozen=True)
class Bucket:
    """The connections and retransmissions of one bucket of the aggregate timeline."""

    start: float  # epoch seconds
    new: dict[str, int]  # connections begun in the bucket, by outcome
    retransmissions: int
    # Most connections waiting for the server's answer, sampled at the end of each second of
    # the bucket: exact at those instants; a connection that came and went within one second
    # is not seen.
    waiting_peak: int

    @property
    def connections(self) -> int:
        return sum(self.new.values())

    @property
    def failed(self) -> int:
        return sum(self.new[o] for o in FAILED_OUTCOMES)


@dataclass(frozen=True)
class Episode:
    """A finding's span, to shade on the aggregate timeline."""

    cause: str
    server: str
    first: float
    last: float


@dataclass
class Aggregate:
    """The capture's per-second counts in buckets of `width` seconds."""

    width: int  # seconds per bucket
    buckets: list[Bucket]
    episodes: list[Episode] = field(default_factory=list)
    # With several servers: each one's waiting peaks, bucket by bucket (a listen queue is per
    # listener; `Bucket.waiting_peak` adds up every server's).
    waiting_by_server: dict[str, list[int]] = field(default_factory=dict)
    servers: int = 1  # server endpoints counted

    def to_json(self) -> dict[str, Any]:
        return {
            "bucket_seconds": self.width,
            "buckets": [asdict(b) for b in self.buckets],
            "episodes": [asdict(e) for e in self.episodes],
            "waiting_by_server": self.waiting_by_server,
        }


def choose_width(span_s: float, max_buckets: int) -> int:
    for width in BUCKET_WIDTHS:
        if span_s / width <= max_buckets:
            return width
    return BUCKET_WIDTHS[-1] * (int(span_s / (BUCKET_WIDTHS[-1] * max_buckets)) + 1)


def aggregate(
    per_second: _Timeline,
    width: Optional[int] = None,
    max_buckets: int = 60,
    episodes: Iterable[Episode] = (),
    grid: Optional[tuple[int, int]] = None,
) -> Aggregate:
    """Re-buckets the core's per-second counts (`Analysis.timeline()`) into buckets of `width`
    seconds (chosen so that there are at most `max_buckets` when not given), every bucket from
    the first second to the last, empty ones included; or onto `grid` (first bucket's start,
    number of buckets) with `width`, to line up with another aggregate."""
    seconds: list[int] = per_second["seconds"]
    if not seconds:
        return Aggregate(width or 1, [], list(episodes))
    first, last = seconds[0], seconds[-1]
    if width is None:
        width = choose_width(last - first + 1, max_buckets)
    if grid is not None:
        start, count = grid
    else:
        start = first - first % width
        count = (last - start) // width + 1
    new = [dict.fromkeys(OUTCOMES, 0) for _ in range(count)]
    retransmissions = [0] * count
    peaks = [0] * count
    level = 0  # connections waiting at the end of the latest second counted
    index = 0
    for i, second in enumerate(seconds):
        b = min(max(0, (second - start) // width), count - 1)
        # Seconds with nothing in them keep the level: carry it into the buckets they span.
        while index < b:
            index += 1
            peaks[index] = max(peaks[index], level)
        for outcome, column in per_second["new"].items():
            new[b][outcome] = new[b].get(outcome, 0) + column[i]
        retransmissions[b] += per_second["retransmissions"][i]
        level += per_second["waiting_in"][i] - per_second["waiting_out"][i]
        peaks[b] = max(peaks[b], level)
    while index < count - 1:
        index += 1
        peaks[index] = max(peaks[index], level)
    buckets = [Bucket(start + k * width, new[k], retransmissions[k], peaks[k]) for k in range(count)]
    return Aggregate(width, buckets, list(episodes))


# Servers whose waiting counts are drawn apart, at most.
MAX_SERVER_LINES = 6


def capture_aggregate(
    analysis: Analysis,
    episodes: Iterable[Episode] = (),
    server: Optional[str] = None,
    width: Optional[int] = None,
    max_buckets: int = 60,
    since: Optional[float] = None,
    until: Optional[float] = None,
) -> Aggregate:
    """The aggregate timeline of the capture (or of one server), and with several servers the
    waiting counts of the busiest ones apart; only the buckets between `since` and `until`
    (epoch seconds) when given."""
    per_second = analysis.timeline(server)
    seconds = per_second["seconds"]
    if width is None and seconds and (since is not None or until is not None):
        first = max(seconds[0], int(since if since is not None else seconds[0]))
        last = min(seconds[-1], int(until if until is not None else seconds[-1]))
        width = choose_width(max(1, last - first + 1), max_buckets)
    agg = aggregate(per_second, width=width, max_buckets=max_buckets, episodes=episodes)
    # Every bucket of the capture (first bucket's start, count), before `since`/`until` cut
    # them: the servers' own aggregates line up on it.
    grid = (int(agg.buckets[0].start), len(agg.buckets)) if agg.buckets else (0, 0)
    keep = [
        i
        for i, b in enumerate(agg.buckets)
        if (since is None or b.start + agg.width > since) and (until is None or b.start <= until)
    ]
    if len(keep) < len(agg.buckets):
        agg.buckets = [agg.buckets[i] for i in keep]
    if server is not None or not agg.buckets:
        return agg
    servers = analysis.servers()
    agg.servers = len(servers)
    if len(servers) < 2:
        return agg
    lines = {}
    for s in servers:
        mine = aggregate(analysis.timeline(s["server"]), width=agg.width, grid=grid)
        lines[s["server"]] = [mine.buckets[i].waiting_peak for i in keep]
    busiest = sorted(lines, key=lambda name: (-max(lines[name]), name))[:MAX_SERVER_LINES]
    agg.waiting_by_server = {name: lines[name] for name in busiest if max(lines[name]) > 0}
    return agg
