#!/usr/bin/env python3
"""Times the alignment of two capture points (src/align, docs/two-points.md) against the
analysis of both, on a pair of 1M-packet captures.

    python bench/two_points.py              # bench/out/nginx-php-1000000.pcap and its server-side copy
    python bench/two_points.py --runs 5
    python bench/two_points.py --capture dump.pcap

The second point is the first capture with every 500th packet left out (vanished between the
points) and every time 2.5 s later (another clock), written once beside it. The target (issue
31): aligning takes at most twice the time of analysing both points (`_core.analyze_many` of
the two, one per core, as `pcapq analyze` reads them). Prints one row per measure and the
offset found.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
sys.path.insert(0, str(BENCH))

from measure import generated  # noqa: E402

SHIFT_S = 2.5
LEAVE_OUT_EVERY = 500
TARGET_RATIO = 2.0


def second_point(first: Path) -> Path:
    """The capture of the other point: every LEAVE_OUT_EVERY-th packet gone, SHIFT_S later
    (written once, record by record, into bench/out)."""
    out = OUT / (first.stem + "-second-point.pcap")
    if out.exists():
        return out
    OUT.mkdir(parents=True, exist_ok=True)
    with open(first, "rb") as src, open(out, "wb") as dst:
        head = src.read(24)
        magic = struct.unpack_from("<I", head, 0)[0]
        assert magic in (0xA1B2C3D4, 0xA1B23C4D), "classic little-endian pcap expected"
        per_second = 1_000_000 if magic == 0xA1B2C3D4 else 1_000_000_000
        dst.write(head)
        n = 0
        while len(record := src.read(16)) == 16:
            sec, frac, incl, orig = struct.unpack("<IIII", record)
            data = src.read(incl)
            n += 1
            if n % LEAVE_OUT_EVERY:
                total = sec * per_second + frac + int(SHIFT_S * per_second)
                dst.write(struct.pack("<IIII", total // per_second, total % per_second, incl, orig) + data)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--capture", type=Path, help="the first point's capture (default: the generated one in bench/out)")
    args = parser.parse_args()
    from pcapq import _core

    first = args.capture or generated(args.packets, OUT)
    second = second_point(first)
    analyse, align = [], []
    entry = None
    for _ in range(args.runs):
        t = time.perf_counter()
        _core.analyze_many([[str(first)], [str(second)]], keep_connections=False, keep_events=False)
        analyse.append(time.perf_counter() - t)
        t = time.perf_counter()
        entry, _, _ = _core.align_points([str(first)], [str(second)], ("first", "second"))
        align.append(time.perf_counter() - t)
    assert entry is not None
    a, b = min(analyse), min(align)
    print(f"{'measure':40} {'best s':>8} {'median s':>9}")
    print(f"{'analyse both points (analyze_many)':40} {a:8.3f} {statistics.median(analyse):9.3f}")
    print(f"{'align the two points (align_points)':40} {b:8.3f} {statistics.median(align):9.3f}")
    print(f"align / analyse: {b / a:.2f} (target <= {TARGET_RATIO})")
    print(f"offset {entry['clock_offset']:.6f} s (applied {SHIFT_S}) ± {entry['offset_uncertainty']}, "
          f"matched {entry['matched_packets']:,}, vanished {entry['vanished_packets']}")
    return 0 if b / a <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
