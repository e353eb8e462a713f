#!/usr/bin/env python3
"""A soak of `pcapq watch`: a long generated capture piped into it as fast as it reads, its
resident memory sampled four times a second, to see whether memory stays flat as capture time grows.

The capture is `bench/generate.py --rate R --seconds S` (steady connections with an accept
queue overflow episode every 5 minutes), written once to bench/out/ and then piped into
`pcapq watch --keep K --metrics 127.0.0.1:PORT -` (scraped every 2 s, as Prometheus would)
by a writer thread here that counts what it wrote, so each sample
knows how far into the stream it is. VmRSS comes from /proc/PID/status. The result gives RSS at
25, 50, 75 and 100 % of the stream and whether it is flat after the warm-up (nothing in the
second half above the peak of the second quarter by more than 10 %), and goes to
bench/out/soak.json.

    python bench/soak.py                             # 200 connections/s, 35 min, --keep 5m
    python bench/soak.py --minutes 120 --keep 10m
    python bench/soak.py --keep none                 # the default window (1 h), as before --keep
    python bench/soak.py --metrics none              # without the metrics server
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHUNK = 1 << 20
# How often the watch's memory is sampled; every eighth sample also scrapes its metrics.
SAMPLE_S = 0.25


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> dict | None:
    """One scrape of the watch's /metrics: its series, and the connections counted so far."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    connections = sum(float(line.rsplit(" ", 1)[1]) for line in series if line.startswith("pcapq_connections_total{"))
    return {"series": len(series), "bytes": len(text), "connections_total": int(connections)}


def at_fraction(samples: list[dict], fraction: float) -> dict | None:
    """The first sample taken once `fraction` of the stream was written."""
    return next((s for s in samples if s["fraction"] >= fraction), samples[-1] if samples else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=200, help="connections per second of capture time (default 200)")
    ap.add_argument("--minutes", type=float, default=35, help="capture time (default 35)")
    ap.add_argument("--keep", default="5m", help="pcapq watch --keep (default 5m; 'none' to leave it out)")
    ap.add_argument("--metrics", default="on", help="serve Prometheus metrics while it runs, scraped every 2 s ('on': a free port on 127.0.0.1; 'none' to leave it out)")
    ap.add_argument("--pcapq", default=shutil.which("pcapq") or "pcapq", help="the pcapq command (default: the one on PATH)")
    ap.add_argument("--data", default=str(HERE / "out"), help="where the capture is written once (default bench/out)")
    ap.add_argument("--json", default=str(HERE / "out" / "soak.json"), help="where the result goes (default bench/out/soak.json)")
    args = ap.parse_args(argv)

    path = capture(args.rate, args.minutes * 60, Path(args.data))
    total = path.stat().st_size
    report = Path(args.json).with_suffix(".report.txt")
    report.parent.mkdir(parents=True, exist_ok=True)
    keep = [] if args.keep == "none" else ["--keep", args.keep]
    port = free_port() if args.metrics != "none" else None
    metrics = [] if port is None else ["--metrics", f"127.0.0.1:{port}"]
    command = [args.pcapq, "watch", *keep, *metrics, "--every", "5", "--no-color", "-o", str(report), "-"]
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
    scrapes: list[dict] = []
    while proc.poll() is None:
        kib = rss_kib(proc.pid)
        if kib is not None:
            samples.append({"seconds": round(time.monotonic() - started, 1), "fraction": round(written[0] / total, 4), "rss_mib": round(kib / 1024, 1)})
        if port is not None and (not scrapes or len(samples) % 8 == 0):
            scraped = scrape(port)
            if scraped is not None:
                scrapes.append(scraped)
        time.sleep(SAMPLE_S)
    wall = time.monotonic() - started
    writer.join(timeout=10)
    reader.join(timeout=10)
    marks = {f"{int(f * 100)}%": at_fraction(samples, f) for f in (0.25, 0.5, 0.75, 1.0)}
    # Flat once warm: nothing in the second half of the stream above the first half's second
    # quarter by more than a tenth.
    second_quarter = [s["rss_mib"] for s in samples if 0.25 <= s["fraction"] < 0.5]
    second_half = [s["rss_mib"] for s in samples if s["fraction"] >= 0.5]
    flat = bool(second_quarter and second_half) and max(second_half) <= 1.10 * max(second_quarter)
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
        "scrapes": len(scrapes),
        "last_scrape": scrapes[-1] if scrapes else None,
        "stderr_tail": err.splitlines()[-5:],
        "samples": samples,
    }
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    return 0 if proc.returncode in (0, 1) else 1


if __name__ == "__main__":
    sys.exit(main())
