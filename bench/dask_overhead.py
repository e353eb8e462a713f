"""What one Dask task costs `pcapq analyze --scheduler` beyond the analysis itself, and what a
task sends back: the numbers behind the projection in docs/dask.md.

On a LocalCluster of --workers processes (one thread each):

- per-task overhead: a tiny capture point (--tiny-packets packets) analysed as a task, one task
  at a time (submit, wait for the result, deserialise it), against the same analysis in this
  process (`pcapq.points.analyze_points`, one thread); best and median of --runs;
- the client's cost to connect to the scheduler (paid once per run);
- for a real capture point (CAPTURE, e.g. the 1M-packet benchmark capture): the serialised
  result a task returns, for the text report (`keep_connections=False`) and for JSON (every
  connection with its events), and the client's time to deserialise it.

    python bench/dask_overhead.py /work/benchdata/nginx-php-1000000.pcap
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def best_median(times: list[float]) -> str:
    return f"best {min(times) * 1e3:.1f} ms, median {statistics.median(times) * 1e3:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", nargs="?", help="a capture point (one file) to measure what a task sends back")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--tiny-packets", type=int, default=100)
    args = ap.parse_args(argv)

    from distributed import Client, LocalCluster

    from pcapq import _core
    from pcapq.cluster import analyze_group
    from pcapq.points import analyze_points

    options = dict(merge=False, keep_connections=False, keep_events=False, max_connections=0)
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
    ) as cluster:
        tiny = str(Path(tmp) / "tiny.pcap")
        subprocess.run([sys.executable, str(HERE / "generate.py"), "--packets", str(args.tiny_packets), "--out", tiny],
                       check=True, stdout=subprocess.DEVNULL)
        started = time.perf_counter()
        client = Client(cluster.scheduler_address, set_as_default=False)
        connect_s = time.perf_counter() - started
        with client:
            local, remote = [], []
            for _ in range(args.runs):
                started = time.perf_counter()
                analyze_points([tiny], jobs=1)
                local.append(time.perf_counter() - started)
                started = time.perf_counter()
                future = client.submit(analyze_group, [tiny], pure=False, **options)
                for _, data in future.result():
                    _core.Analysis.from_bytes(data)
                future.release()
                remote.append(time.perf_counter() - started)
        overhead = [r - l for r, l in zip(remote, local)]
        print(f"workers: {args.workers} processes x 1 thread; tiny capture point: {args.tiny_packets} packets")
        print(f"connect to the scheduler: {connect_s * 1e3:.1f} ms (once per run)")
        print(f"tiny point in this process: {best_median(local)}")
        print(f"tiny point as a task (submit, result, deserialise): {best_median(remote)}")
        print(f"per-task overhead: {best_median(overhead)}")

    if args.capture:
        for label, keep in (("text report", False), ("JSON (every connection, with events)", True)):
            started = time.perf_counter()
            ((_, data),) = analyze_group([args.capture], False, keep, keep, 0)
            analysed = time.perf_counter() - started
            started = time.perf_counter()
            _core.Analysis.from_bytes(data)
            loaded = time.perf_counter() - started
            size = Path(args.capture).stat().st_size
            print(f"{args.capture}, {label}: analysed and serialised in {analysed:.2f} s; sends back "
                  f"{len(data):,} bytes ({len(data) / size:.2%} of the capture); deserialised in {loaded * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
