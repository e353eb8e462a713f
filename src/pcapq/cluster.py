"""Analysis on a Dask cluster (``pcapq analyze --scheduler tcp://HOST:8786``).

One task per name group of files (a tcpdump ring buffer: one capture point, or a few when
hosts share a name pattern, pcapq.capture_points): a worker analyses the group's files in time
order exactly as the local path does (pcapq.points, on one thread) and returns each capture
point's analysis serialised (``Analysis.to_bytes``: compact, versioned). The client puts the
points side by side and names them; nothing is merged on the client. Workers must see the
files at the same paths as the client (shared storage), and run the same pcapq version.

Nothing here is imported without ``--scheduler``; dask.distributed is an optional dependency
(``pip install 'pcapq[dask]'``).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Sequence

from pcapq import _core
from pcapq.capture_points import CapturePoint, FileTimes, name_groups, named
from pcapq.inputs import first_packet_time
from pcapq.points import PointAnalysis, analyze_points

# How long to wait for the scheduler to answer before giving up, unless Dask's configuration
# says otherwise (distributed.comm.timeouts.connect; DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT).
CONNECT_TIMEOUT_S = 30
# A scheduler that has not answered after this long gets a line saying what pcapq waits for.
SAY_WAITING_AFTER_S = 1.0


def _connect_timeout_s() -> float:
    """Dask's connect timeout when its configuration sets one, else CONNECT_TIMEOUT_S."""
    import dask.config
    from dask.utils import parse_timedelta

    configured = dask.config.get("distributed.comm.timeouts.connect", None)
    try:
        seconds = parse_timedelta(configured, default="seconds") if configured is not None else None
    except (ValueError, TypeError, KeyError):
        seconds = None
    return float(seconds) if seconds else float(CONNECT_TIMEOUT_S)


class ClusterUnavailable(Exception):
    """dask.distributed is not installed, or the scheduler cannot be reached."""


def analyze_group(
    paths: list[str], merge: bool, keep_connections: bool, keep_events: bool, max_connections: int
) -> list[tuple[list[tuple[str, float | None, float | None]], bytes]] | tuple[object, ...]:
    """The task a worker runs: one name group's files (one group with `merge`), analysed as
    the local path does; per capture point found, its files (path, first and last packet time)
    in join order and its analysis serialised. For a file that cannot be read, the
    CaptureError's arguments instead (the client raises it again: the exception class itself
    does not survive the trip)."""
    try:
        points = analyze_points(
            paths, merge=merge, keep_connections=keep_connections, keep_events=keep_events, jobs=1,
            max_connections=max_connections,
        )
    except _core.CaptureError as e:
        return tuple(e.args)
    return [([(f.path, f.first_time, f.last_time) for f in p.point.files], p.analysis.to_bytes()) for p in points]


def analyze_on_cluster(
    paths: Sequence[str],
    scheduler: str,
    *,
    merge: bool = False,
    keep_connections: bool = False,
    keep_events: bool = False,
    max_connections: int = 0,
) -> list[PointAnalysis]:
    """Every capture point among `paths`, analysed one task per name group on the cluster
    behind `scheduler`. Raises ClusterUnavailable, or the _core.CaptureError a worker raised."""
    try:
        from distributed import Client
    except ImportError as e:
        raise ClusterUnavailable("--scheduler needs dask.distributed: pip install 'pcapq[dask]'") from e
    timeout = _connect_timeout_s()
    try:
        # Connecting is silent until it succeeds or the timeout runs out: past a second, say
        # what pcapq is waiting for.
        waiting = threading.Timer(SAY_WAITING_AFTER_S, lambda: print(
            f"pcapq: waiting for the Dask scheduler at {scheduler} (giving up after {timeout:g} s)",
            file=sys.stderr, flush=True))
        waiting.daemon = True
        waiting.start()
        try:
            # distributed leaves Client.__init__ unannotated.
            client = Client(scheduler, timeout=timeout, set_as_default=False)  # type: ignore[no-untyped-call]
        finally:
            waiting.cancel()
    except (OSError, TimeoutError, ValueError) as e:
        raise ClusterUnavailable(f"cannot reach the Dask scheduler at {scheduler}: {e}") from e
    groups = name_groups(list(paths), [first_packet_time(p) for p in paths], merge)
    given = {os.path.abspath(p): p for p in paths}
    with client:
        futures = client.map(
            analyze_group,
            [[os.path.abspath(p) for p in group] for group in groups],
            merge=merge,
            keep_connections=keep_connections,
            keep_events=keep_events,
            max_connections=max_connections,
            pure=False,
        )
        found: list[PointAnalysis] = []
        for future in futures:
            result = future.result()
            future.release()  # type: ignore[no-untyped-call]  # distributed: unannotated
            if isinstance(result, tuple):
                raise _core.CaptureError(*result)
            for files, data in result:
                point = CapturePoint("", [FileTimes(given[path], first, last) for path, first, last in files])
                found.append(PointAnalysis(point, _core.Analysis.from_bytes(data)))
        named([p.point for p in found], merge)
        return found
