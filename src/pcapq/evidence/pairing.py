"""nginx's error-log lines paired with the access-log lines of the same requests.

An error line's time is to the second; an access line written with `$msec` (or JSON's, or
`$time_iso8601` with milliseconds) is to the millisecond and carries the request's own times
(`$upstream_connect_time`, `$request_time`). nginx writes both as one request fails, from the
same cached time (ngx_time_update()): the error line first, then the access line, in the same
second. An error line's request is the access line of that second with the same upstream, the
same outcome (the status the error's kind gives, 504 or 502), the same request line where both
say it, taken in the order both were written; where both say nginx's connection number (the
error line's `*N`, the access log's `$connection`), that alone pairs them. Through its access
line the error line is then tied to its connection by the access line's milliseconds and timings
(`pcapq.evidence.tie_connections`, in the core).

The error log's clock is local time without a zone; the offset to the access log's is searched
in quarter hours (time zones), keeping the one that pairs the most lines.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, AbstractSet, Optional

if TYPE_CHECKING:
    from pcapq.evidence.logs import LogFile, LogLine

QUARTER_HOUR = 900
LARGEST_ZONE = 14 * 3600
# An access line finer than this is to the millisecond (or near it): worth pairing through.
FINE = 0.01

Key = tuple[int, Optional[int], Optional[str]]
# Which side of connect() a kind is about: an error line and an access line of one request agree.
PHASES = {"connect_timeout": "connect", "refused": "connect", "read_timeout": "after", "send_timeout": "after",
          "reset": "after", "premature_close": "after"}


def _agree(error: LogLine, access: LogLine) -> bool:
    """Whether nothing the two lines say differs: the request line, the side of connect()."""
    if error.request and access.request and error.request != access.request:
        return False
    phases = PHASES.get(error.kind), PHASES.get(access.kind)
    return None in phases or phases[0] == phases[1]


def _key(line: LogLine, offset: int) -> Key:
    """The second (on the access log's clock), outcome and upstream of a line."""
    return int(line.time) - offset, line.status, line.upstream


def pair(logs: list[LogFile], joinable: AbstractSet[str]) -> dict[tuple[int, int], tuple[int, int]]:
    """(file, index in its lines) of each error line -> (file, index) of the access line of the
    same request, for the lines whose kinds are in `joinable`."""
    errors = [(fi, i, line) for fi, log in enumerate(logs) if log.format == "error"
              for i, line in enumerate(log.lines) if line.kind in joinable]
    access = [(fi, i, line) for fi, log in enumerate(logs) if log.format != "error" and log.resolution <= FINE
              and not log.format.startswith("haproxy") for i, line in enumerate(log.lines) if line.kind in joinable]
    if not errors or not access:
        return {}
    out: dict[tuple[int, int], tuple[int, int]] = {}
    by_serial = {(line.serial, line.status): (fi, i) for fi, i, line in access if line.serial is not None}
    rest = []
    for fi, i, line in errors:
        found = by_serial.get((line.serial, line.status)) if line.serial is not None else None
        if found is not None:
            out[(fi, i)] = found
        else:
            rest.append((fi, i, line))
    if not rest:
        return out
    taken = set(out.values())
    groups: dict[Key, list[tuple[int, int, LogLine]]] = defaultdict(list)
    for fa, j, line in sorted(access, key=lambda a: a[2].time):
        if (fa, j) not in taken:
            groups[_key(line, 0)].append((fa, j, line))
    offsets = sorted(range(-LARGEST_ZONE, LARGEST_ZONE + 1, QUARTER_HOUR), key=abs)
    best, best_count = 0, 0
    for offset in offsets:
        count = sum(1 for _, _, line in rest if _key(line, offset) in groups)
        if count > best_count:
            best, best_count = offset, count
    used: dict[Key, int] = defaultdict(int)
    for fi, i, line in rest:
        candidates = groups.get(_key(line, best), [])
        # The first of the second's access lines not yet paired whose request line agrees.
        start = used[_key(line, best)]
        for n, (fa, j, access_line) in enumerate(candidates[start:], start):
            if not _agree(line, access_line):
                continue
            out[(fi, i)] = (fa, j)
            if n == start:
                used[_key(line, best)] = n + 1
            else:
                candidates.pop(n)
            break
    return out
