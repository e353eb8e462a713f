"""Time per packet and peak RSS of `pcapq analyze` as the capture grows (1M, 5M, 50M packets).

For each size, the generated capture (bench/generate.py, seed 1) is analysed once per format
under /usr/bin/time: the core alone with --core, text, and JSON up to --json-up-to packets (default 5M: the document has
every connection, about 190 MiB of it per million packets). A capture missing
from --data is generated there and deleted after its runs (50M packets is about 18 GB);
--stream instead pipes the generator into `pcapq analyze -` and stores nothing (the time per
packet is then the generator's, about 6 us, so only the peak RSS means anything).

    python bench/curve.py                                   # 1M, 5M, 50M; text and JSON to 5M
    python bench/curve.py --packets 1000000,5000000 --data /work/benchdata
    python bench/curve.py --packets 50000000 --stream
    python bench/curve.py --packets 20000000 --prefix-of bench/out/nginx-php-50000000.pcap
    python bench/curve.py --pcapq "python -c 'from pcapq.cli import main; main()'"   # another build
    python bench/curve.py --core --packets 1000000,5000000   # and the core alone, per packet

Results go to bench/out/results-memory-curve.json; docs/performance.md ("Memory as the capture
grows") has the measured table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from measure import generated, timed  # noqa: E402

GENERATE = [sys.executable, str(HERE / "generate.py")]
FORMATS = {"text": [], "json": ["--format", "json", "-o", os.devnull]}
# The core alone (no diagnosis, no report), with this interpreter's pcapq.
CORE = [sys.executable, "-c", "import sys, pcapq; pcapq.analyze([sys.argv[1]], keep_connections=False, keep_events=False)"]


def command(pcapq: list[str], fmt: str, source: str) -> list[str]:
    return [*CORE, source] if fmt == "core" else [*pcapq, "analyze", *FORMATS[fmt], source]


def run(pcapq: list[str], packets: int, fmt: str, data: Path, stream: bool, prefix_of: Path | None) -> dict:
    if stream or prefix_of:
        # The generator is deterministic: the first N packets of a longer capture are the N-packet one.
        source = ["tcpdump", "-r", str(prefix_of), "-c", str(packets), "-w", "-"] if prefix_of else [*GENERATE, "--packets", str(packets), "--out", "-"]
        gen = subprocess.Popen(source, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        result = timed(command(pcapq, fmt, "-"), stdin=gen.stdout)
        gen.stdout.close()
        gen.wait()
    else:
        path = generated(packets, data)
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
        result = timed(command(pcapq, fmt, str(path)))
    result.update(packets=packets, format=fmt, stream=stream or bool(prefix_of))
    result["ns_per_packet"] = round(result["wall_s"] * 1e9 / packets)
    result["cpu_ns_per_packet"] = round(result["cpu_s"] * 1e9 / packets)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", default="1000000,5000000,50000000", help="sizes, comma-separated")
    ap.add_argument("--data", type=Path, default=HERE / "out", help="where captures are found or generated")
    ap.add_argument("--json-up-to", type=int, default=5_000_000, help="largest size to run JSON on (0: none)")
    ap.add_argument("--core", action="store_true", help="also time the core alone (pcapq.analyze without diagnosis or report)")
    ap.add_argument("--stream", action="store_true", help="pipe the generator into pcapq analyze -, store nothing")
    ap.add_argument("--prefix-of", type=Path, help="pipe the first N packets of this longer generated capture (tcpdump -c N) instead")
    ap.add_argument("--pcapq", default="pcapq", help="the command to run (default: pcapq on PATH)")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "results-memory-curve.json")
    args = ap.parse_args(argv)
    pcapq = shlex.split(args.pcapq)
    args.data.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| packets | format | wall s | ns/packet | CPU ns/packet | peak RSS MiB |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for packets in [int(n) for n in args.packets.split(",")]:
        made = not args.stream and not args.prefix_of and not (args.data / f"nginx-php-{packets}.pcap").exists()
        for fmt in (["core"] if args.core else []) + ["text"] + (["json"] if packets <= args.json_up_to else []):
            r = run(pcapq, packets, fmt, args.data, args.stream, args.prefix_of)
            rows.append(r)
            note = "" if r["exit"] in (0, 1) else f" (exit {r['exit']}: {r['stderr'].strip()})"
            print(f"| {packets:,} | {fmt} | {r['wall_s']:.2f} | {r['ns_per_packet']:,} | {r['cpu_ns_per_packet']:,} | {r['peak_rss_mib']:,.1f} |{note}", flush=True)
        if made:
            (args.data / f"nginx-php-{packets}.pcap").unlink()
            (args.data / f"nginx-php-{packets}.pcap.json").unlink(missing_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()}
    args.out.write_text(json.dumps({"machine": machine, "date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
