#!/usr/bin/env python3
"""Time and peak RSS of `pcapq analyze` writing each machine-readable format to a file.

    python bench/formats.py                                  # the 1M and 5M captures of bench/out
    python bench/formats.py dump.pcap --formats json,parquet,parquet-dir,text --runs 3

JSON and Parquet hand every connection, as it finishes, to a temporary file beside the output
and write the report from it (docs/performance.md), so their peak RSS should stay near the text
report's and flat as the capture grows. Each (capture, format) runs --runs times; the table
shows the best wall time and the largest peak RSS (GNU time's %M).
Results also go to bench/out/results-formats.json. Captures missing from bench/out are made
with bench/generate.py first.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
sys.path.insert(0, str(BENCH))

from measure import generated, timed  # noqa: E402

TARGET_JSON_RSS_MIB = 200  # issue 13: JSON streamed to its file
TARGET_PARQUET_RSS_MIB = 250  # issue 16: a 5M-packet export


def measure(capture: Path, fmt: str, scratch: Path) -> tuple[float, float, int]:
    """One run: wall seconds, peak RSS in MiB, bytes written."""
    out = scratch / ("tables" if fmt == "parquet-dir" else f"out.{fmt}")
    shutil.rmtree(scratch / "tables", ignore_errors=True)
    # A name ending in "/" asks for the three tables in that directory.
    target = f"{out}/" if fmt == "parquet-dir" else str(out)
    args = ["pcapq", "analyze", "--format", fmt.split("-")[0], "-o", target, str(capture)]
    run = timed(args)
    if run["exit"] not in (0, 1):
        sys.exit(f"formats.py: {' '.join(args)} exited {run['exit']}: {run['stderr']}")
    size = sum(p.stat().st_size for p in out.iterdir()) if out.is_dir() else out.stat().st_size
    return run["wall_s"], run["peak_rss_mib"], size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("captures", nargs="*", type=Path, help="captures (default: bench/out/nginx-php-{1M,5M}.pcap)")
    parser.add_argument("--formats", default="text,json,parquet,parquet-dir")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    captures = args.captures or [generated(1_000_000, OUT), generated(5_000_000, OUT)]
    formats = args.formats.split(",")
    results = []
    with tempfile.TemporaryDirectory(prefix="pcapq-formats-") as scratch:
        print(f"{'capture':<28} {'format':<12} {'best s':>8} {'peak MiB':>9} {'written MiB':>12}")
        for capture in captures:
            for fmt in formats:
                runs = [measure(capture, fmt, Path(scratch)) for _ in range(args.runs)]
                best = min(r[0] for r in runs)
                peak = max(r[1] for r in runs)
                size = runs[-1][2] / 2**20
                print(f"{capture.name:<28} {fmt:<12} {best:>8.2f} {peak:>9.0f} {size:>12.1f}")
                results.append({"capture": str(capture), "format": fmt, "best_s": best, "peak_rss_mib": peak, "written_mib": size})
    targets = {"json": TARGET_JSON_RSS_MIB, "parquet": TARGET_PARQUET_RSS_MIB, "parquet-dir": TARGET_PARQUET_RSS_MIB}
    for r in results:
        target = targets.get(r["format"])
        if target is not None and r["peak_rss_mib"] > target:
            print(f"over target: {r['format']} on {Path(r['capture']).name} peaked at {r['peak_rss_mib']:.0f} MiB (target {target})")
    OUT.mkdir(exist_ok=True)
    (OUT / "results-formats.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
