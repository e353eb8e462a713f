#!/usr/bin/env python3
"""Regenerates the two-point captures in this directory (README.md): each run of
pcapq.lab.two_point_scenarios in fresh namespaces writes NAME/proxy.pcap, NAME/server.pcap and
NAME/truth.json (the router's nftables counts of what it dropped each way, the server
namespace's counters that moved, the setup). Needs root, ip, tcpdump, nft, nstat:

    sudo python3 captures/two_points/make.py                 # all of them, about a minute
    sudo python3 captures/two_points/make.py firewall
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pcapq.lab.namespaces import NetnsRouted
from pcapq.lab.two_point_scenarios import RUNS

HERE = Path(__file__).resolve().parent
MAX_BYTES = 200_000


def make(name: str) -> int:
    out = HERE / name
    out.mkdir(exist_ok=True)
    with NetnsRouted(tools=("ip", "tcpdump", "nft", "nstat")) as net:
        run = RUNS[name](net, out)
    (out / "truth.json").write_text(json.dumps(run.truth(), indent=2) + "\n")
    sizes = {p.name: p.stat().st_size for p in (run.proxy, run.server)}
    print(f"== {name}: {sizes}, dropped to the server {run.to_server}, to the client {run.to_client}", flush=True)
    return int(any(size > MAX_BYTES for size in sizes.values()))


def main(names: list[str]) -> int:
    return max((make(name) for name in names or list(RUNS)), default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
