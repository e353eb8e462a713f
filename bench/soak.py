#!/usr/bin/env python3
"""A soak of `pcapq watch`: a long generated capture piped into it as fast as it reads, its
resident memory sampled every second, to see whether memory stays flat as capture time grows.

The capture is `bench/generate.py --rate R --seconds S` (steady connections with an accept
queue overflow episode every 5 minutes), written once to bench/out/ and then piped into
`pcapq watch --keep K -` by a writer thread here that counts what it wrote, so each sample
knows how far into the stream it is. VmRSS comes from /proc/PID/status. The result gives RSS at
25, 50, 75 and 100 % of the stream and whether the last three are within 10 % of each other
(flat after the warm-up), and goes to bench/out/soak.json.

    python bench/soak.py                             # 200 connections/s, 35 min, --keep 5m
    python bench/soak.py --minutes 120 --keep 10m
    python bench/soak.py --keep none                 # the default window (1 h), as before --keep
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHUNK = 1 << 20


def rss_kib(pid: int) -> int | None:
    """VmRSS of `pid` in KiB, None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def capture(rate: float, seconds: float, data: Path) -> Path:
    path = data / f"soak-rate{rate:g}-{seconds:g}s.pcap"
    if not path.exists():
        data.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(HERE / "generate.py"), "--rate", str(rate), "--seconds", str(seconds), "--out", str(path)],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def at_fraction(samples: list[dict], fraction: float) -> dict | None:
    """The first sample taken once `fraction` of the stream was written."""
    return next((s for s in samples if s["fraction"] >= fraction), samples[-1] if samples else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=200, help="connections per second of capture time (default 200)")
    ap.add_argument("--minutes", type=float, default=35, help="capture time (default 35)")
    ap.add_argument("--keep", default="5m", help="pcapq watch --keep (default 5m; 'none' to leave it out)")
    ap.add_argument("--pcapq", default=shutil.which("pcapq") or "pcapq", help="the pcapq command (default: the one on PATH)")
    ap.add_argument("--data", default=str(HERE / "out"), help="where the capture is written once (default bench/out)")
    ap.add_argument("--json", default=str(HERE / "out" / "soak.json"), help="where the result goes (default bench/out/soak.json)")
    args = ap.parse_args(argv)

    path = capture(args.rate, args.minutes * 60, Path(args.data))
    total = path.stat().st_size
    report = Path(args.json).with_suffix(".report.txt")
    report.parent.mkdir(parents=True, exist_ok=True)
    keep = [] if args.keep == "none" else ["--keep", args.keep]
    command = [args.pcapq, "watch", *keep, "--every", "5", "--no-color", "-o", str(report), "-"]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    written = [0]
    errors: list[bytes] = []

    def write() -> None:
        assert proc.stdin is not None
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                try:
                    proc.stdin.write(chunk)
                except BrokenPipeError:
                    break
                written[0] += len(chunk)
        proc.stdin.close()

    def drain() -> None:
        assert proc.stderr is not None
        errors.extend(proc.stderr)

    started = time.monotonic()
    writer = threading.Thread(target=write, daemon=True)
    reader = threading.Thread(target=drain, daemon=True)
    writer.start()
    reader.start()
    samples: list[dict] = []
    while proc.poll() is None:
        kib = rss_kib(proc.pid)
        if kib is not None:
            samples.append({"seconds": round(time.monotonic() - started, 1), "fraction": round(written[0] / total, 4), "rss_mib": round(kib / 1024, 1)})
        time.sleep(1.0)
    wall = time.monotonic() - started
    writer.join(timeout=10)
    reader.join(timeout=10)
    marks = {f"{int(f * 100)}%": at_fraction(samples, f) for f in (0.25, 0.5, 0.75, 1.0)}
    last_three = [m["rss_mib"] for m in list(marks.values())[1:] if m is not None]
    flat = len(last_three) == 3 and max(last_three) <= 1.10 * min(last_three)
    err = b"".join(errors).decode(errors="replace")
    all_time = next((line.strip() for line in report.read_text().splitlines() if line.strip().startswith("Since the watch began")), None) \
        if report.exists() else None
    result = {
        "capture": str(path),
        "capture_bytes": total,
        "capture_minutes": args.minutes,
        "rate": args.rate,
        "command": " ".join(command),
        "exit_code": proc.returncode,
        "wall_seconds": round(wall, 1),
        "rss_mib_at": {k: (v["rss_mib"] if v else None) for k, v in marks.items()},
        "peak_rss_mib": max((s["rss_mib"] for s in samples), default=None),
        "flat_after_warmup": flat,
        "all_time_line": all_time,
        "stderr_tail": err.splitlines()[-5:],
        "samples": samples,
    }
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    return 0 if proc.returncode in (0, 1) else 1


if __name__ == "__main__":
    sys.exit(main())
