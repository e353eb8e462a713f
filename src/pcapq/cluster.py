"""Analysis on a Dask cluster (``pcapq analyze --scheduler tcp://HOST:8786``).

One task per file: a worker analyses the file as a mergeable part and returns it serialised
(``Analysis.to_bytes``: compact, versioned). The client groups the parts into capture points
and merges them in time order, exactly as the local path does (pcapq.points). Workers must see
the files at the same paths as the client (shared storage), and run the same pcapq version.

Nothing here is imported without ``--scheduler``; dask.distributed is an optional dependency
(``pip install 'pcapq[dask]'``).
"""

from __future__ import annotations

import sys
import threading

import os
from typing import Sequence

from pcapq import _core
from pcapq.points import PointAnalysis, join_parts, planned

# How long to wait for the scheduler to answer before giving up.
CONNECT_TIMEOUT_S = 30
# A scheduler that has not answered after this long gets a line saying what pcapq waits for.
SAY_WAITING_AFTER_S = 1.0


class ClusterUnavailable(Exception):
    """dask.distributed is not installed, or the scheduler cannot be reached."""


def analyze_part(path: str, keep_connections: bool, keep_events: bool, max_connections: int) -> bytes | tuple:
    """The task a worker runs: one file as a mergeable part, serialised; or, for a file that
    cannot be read, the CaptureError's arguments (the client raises it again: the exception
    class itself does not survive the trip)."""
    try:
        part = _core.analyze(
            [path],
            keep_connections=keep_connections,
            keep_events=keep_events,
            mergeable=True,
            max_connections=max_connections,
        )
    except _core.CaptureError as e:
        return tuple(e.args)
    return part.to_bytes()


def analyze_on_cluster(
    paths: Sequence[str],
    scheduler: str,
    *,
    merge: bool = False,
    keep_connections: bool = False,
    keep_events: bool = False,
    max_connections: int = 0,
) -> list[PointAnalysis]:
    """Every capture point among `paths`, analysed one task per file on the cluster behind
    `scheduler`. Raises ClusterUnavailable, or the _core.CaptureError a worker raised."""
    try:
        from distributed import Client
    except ImportError as e:
        raise ClusterUnavailable("--scheduler needs dask.distributed: pip install 'pcapq[dask]'") from e
    order = planned(paths, merge)
    try:
        # Connecting is silent until it succeeds or the timeout runs out: past a second, say
        # what pcapq is waiting for.
        waiting = threading.Timer(SAY_WAITING_AFTER_S, lambda: print(
            f"pcapq: waiting for the Dask scheduler at {scheduler} (giving up after {CONNECT_TIMEOUT_S} s)",
            file=sys.stderr, flush=True))
        waiting.daemon = True
        waiting.start()
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        finally:
            waiting.cancel()
    except (OSError, TimeoutError, ValueError) as e:
        raise ClusterUnavailable(f"cannot reach the Dask scheduler at {scheduler}: {e}") from e
    with client:
        futures = client.map(
            analyze_part,
            [os.path.abspath(p) for p in order],
            keep_connections=keep_connections,
            keep_events=keep_events,
            max_connections=max_connections,
            pure=False,
        )

        def parts():
            # In join order, one at a time: the client holds one serialised part at once,
            # the others wait on their workers.
            for path, future in zip(order, futures):
                result = future.result()
                future.release()
                if isinstance(result, tuple):
                    raise _core.CaptureError(*result)
                yield path, _core.Analysis.from_bytes(result)

        return join_parts(parts(), merge)
