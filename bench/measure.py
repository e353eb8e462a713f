"""What the bench scripts share: a command timed under GNU time, and the generated captures.

Peak RSS comes from `/usr/bin/time -f %M`, a small parent, rather than from the script's own
`wait4`: a child's `ru_maxrss` starts at its parent's high-water mark (it survives fork and exec).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import generate

GNU_TIME = "/usr/bin/time"


def timed(argv: list[str], stdin=None) -> dict:
    """Runs `argv` once under GNU time, its standard output discarded: wall and user+system CPU
    seconds, peak RSS in MiB, exit status and the end of its standard error."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        started = time.perf_counter()
        proc = subprocess.run(
            [GNU_TIME, "-o", report.name, "-f", "%U %S %M", *argv],
            stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        wall = time.perf_counter() - started
        user, system, rss_kib = report.read().split()[-3:]
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(float(user) + float(system), 3),
        "peak_rss_mib": round(int(rss_kib) / 1024, 1),
        "exit": proc.returncode,
        "stderr": proc.stderr.decode(errors="replace")[-500:],
    }


def generated(packets: int, data: Path, seed: int = 1) -> Path:
    """The generated capture of `packets` packets in `data` (bench/generate.py), made first if
    missing, with its FILE.json of what was generated beside it."""
    data.mkdir(parents=True, exist_ok=True)
    capture = data / (f"nginx-php-{packets}.pcap" if seed == 1 else f"nginx-php-{packets}-seed{seed}.pcap")
    if not capture.exists():
        print(f"generating {capture} ({packets:,} packets, seed {seed}) ...", file=sys.stderr, flush=True)
        began = time.perf_counter()
        info = generate.generate(packets, capture, seed)
        Path(str(capture) + ".json").write_text(json.dumps(info, indent=2) + "\n")
        print(f"  done in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    return capture
