#!/usr/bin/env python3
"""Scale benchmark: one big capture, the same capture as a ring buffer on one core and on all
cores, on a local Dask cluster, the measured cost of one file as a mergeable part, and a
projection of a 1 TB fleet capture on N Dask workers with one task per file (the first Dask
design; one task per capture point replaced it: bench/dask_overhead.py, docs/dask.md).

    python bench/generate.py --packets 28000000 --out bench/out/big-28M.pcap    # ~10 GB
    tcpdump -r bench/out/big-28M.pcap -w bench/out/ring/dump.pcap -C 1000       # ~1 GB files
    python bench/scale.py --big bench/out/big-28M.pcap --ring bench/out/ring

Every number is measured by this script, except the projection's stated assumptions
(network bandwidth). Results go to bench/out/scale.json and are printed as Markdown.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import measure  # noqa: E402

OUT = HERE / "out"
GIB = 1024**3


def timed(argv: list[str]) -> dict:
    """Runs `argv` (stdout discarded) under GNU time: wall seconds, CPU seconds, peak RSS."""
    result = measure.timed(argv)
    del result["stderr"]
    return {"argv": argv, **result}


def best(argv: list[str], runs: int) -> dict:
    results = [timed(argv) for _ in range(runs)]
    out = min(results, key=lambda r: r["wall_s"])
    out["runs"] = [r["wall_s"] for r in results]
    out["peak_rss_mib"] = max(r["peak_rss_mib"] for r in results)
    return out


def size(paths: list[str]) -> int:
    return sum(os.path.getsize(p) for p in paths)


def per_file_cost(path: str, parts: list[str]) -> dict:
    """In one process: the core's time on one file as a mergeable part (what a Dask task
    does), the serialised size, and the client's cost to deserialise and join one part."""
    from pcapq import _core

    t0 = time.perf_counter()
    part = _core.analyze([path], keep_connections=False, keep_events=False, mergeable=True)
    t1 = time.perf_counter()
    data = part.to_bytes()
    t2 = time.perf_counter()
    serialised = [data]
    for p in parts[1:]:
        serialised.append(_core.analyze([p], keep_connections=False, keep_events=False, mergeable=True).to_bytes())
    t3 = time.perf_counter()
    joined = _core.Analysis.from_bytes(serialised[0])
    for data_i in serialised[1:]:
        joined = joined.merge(_core.Analysis.from_bytes(data_i))
    t4 = time.perf_counter()
    joined.summary()
    return {
        "file": path,
        "file_bytes": os.path.getsize(path),
        "analyze_s": round(t1 - t0, 3),
        "to_bytes_s": round(t2 - t1, 4),
        "part_bytes": len(data),
        "parts_joined": len(serialised),
        "from_bytes_and_merge_s_per_part": round((t4 - t3) / max(1, len(serialised) - 1), 4),
        "part_bytes_all": [len(d) for d in serialised],
        "analyze_all_s": round(t3 - t2 + (t1 - t0), 3),
    }


def dask_run(ring: list[str], runs: int) -> dict:
    """`pcapq analyze --scheduler` against a LocalCluster of 2 worker processes, 1 thread each
    (cluster start-up not timed)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50) as c:
        return best(["pcapq", "analyze", "--scheduler", c.scheduler_address, *ring], runs)


def projection(cost: dict, ring_rate: float, workers: list[int], fleet_bytes: float, link_bytes_s: float) -> list[dict]:
    """T(N) = fleet / (N x r) + P x m + P x b / B: workers in parallel at the measured
    one-core rate r, then the client joins P parts one after the other (m each) and receives
    them (b bytes each over a link of B bytes/s)."""
    file_bytes = cost["file_bytes"]
    parts = fleet_bytes / file_bytes
    part_bytes = sum(cost["part_bytes_all"]) / len(cost["part_bytes_all"])
    merge_s = cost["from_bytes_and_merge_s_per_part"]
    rows = []
    for n in workers:
        work = fleet_bytes / (n * ring_rate)
        join = parts * merge_s
        transfer = parts * part_bytes / link_bytes_s
        rows.append({"workers": n, "analysis_s": work, "join_s": join, "transfer_s": transfer, "total_s": work + join + transfer})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--big", required=True, help="one big capture")
    ap.add_argument("--ring", required=True, help="directory of the same capture cut by tcpdump -C")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--skip", default="", help="comma-separated: big, core, jobs, fleet, dask, cost")
    ap.add_argument("--link-mbit", type=float, default=1000.0, help="client link for the projection (default 1 Gbit/s)")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    ring = sorted(glob.glob(os.path.join(args.ring, "dump.pcap*")), key=lambda p: (len(p), p))
    result: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": os.getloadavg(),
            "python": platform.python_version(),
            "kernel": platform.release(),
        },
        "big": {"file": args.big, "bytes": os.path.getsize(args.big)},
        "ring": {"files": len(ring), "bytes": size(ring)},
    }
    core = "import sys, pcapq; pcapq.analyze([sys.argv[1]], keep_connections=False, keep_events=False).summary()"
    parts = (
        "import sys, pcapq; from pcapq import _core; "
        "ps = _core.analyze_parts(sys.argv[2:], jobs=int(sys.argv[1]), keep_connections=False, keep_events=False); "
        "j = ps[0]\nfor p in ps[1:]: j = j.merge(p)\nj.summary()"
    )
    if "big" not in skip:
        result["big"]["text"] = best(["pcapq", "analyze", args.big], args.runs)
        result["big"]["core"] = best([sys.executable, "-c", core, args.big], args.runs)
        print("big", result["big"], file=sys.stderr)
    if "core" not in skip:
        for jobs in (1, 0):
            key = f"core_parts_jobs_{jobs or 'all'}"
            result["ring"][key] = best([sys.executable, "-c", parts, str(jobs), *ring], args.runs)
            print(key, result["ring"][key], file=sys.stderr)
    if "jobs" not in skip:
        for jobs in (1, 0):
            key = f"jobs_{jobs or 'all'}"
            result["ring"][key] = best(["pcapq", "analyze", "--jobs", str(jobs), *ring], args.runs)
            print(key, result["ring"][key], file=sys.stderr)
    if "fleet" not in skip:
        # Two capture points: the ring twice, as web1/ and web2/ (symbolic links, same bytes).
        fleet = OUT / "fleet"
        for host in ("web1", "web2"):
            (fleet / host).mkdir(parents=True, exist_ok=True)
            for f in ring:
                link = fleet / host / os.path.basename(f)
                if not link.exists():
                    link.symlink_to(os.path.abspath(f))
        result["fleet"] = {"points": 2, "files": 2 * len(ring), "bytes": 2 * size(ring)}
        for jobs in (1, 0):
            key = f"jobs_{jobs or 'all'}"
            result["fleet"][key] = best(["pcapq", "analyze", "--jobs", str(jobs), str(fleet)], args.runs)
            print("fleet", key, result["fleet"][key], file=sys.stderr)
    if "dask" not in skip:
        result["ring"]["dask_2_workers"] = dask_run(ring, args.runs)
        print("dask", result["ring"]["dask_2_workers"], file=sys.stderr)
    if "cost" not in skip:
        cost = per_file_cost(ring[0], ring)
        result["per_file"] = cost
        rate = cost["file_bytes"] / cost["analyze_s"]
        result["projection"] = {
            "fleet_bytes": 1e12,
            "file_bytes": cost["file_bytes"],
            "one_core_bytes_s": rate,
            "link_bytes_s": args.link_mbit * 1e6 / 8,
            "rows": projection(cost, rate, [1, 2, 8, 32, 128, 512], 1e12, args.link_mbit * 1e6 / 8),
        }
        print("cost", cost, file=sys.stderr)
    result["machine"]["load_after"] = os.getloadavg()
    OUT.mkdir(exist_ok=True)
    (OUT / "scale.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
