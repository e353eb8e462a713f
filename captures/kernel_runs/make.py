#!/usr/bin/env python3
"""Regenerates the kernel runs in this directory: competing explanations and listener-level
situations, each beside a twin run that changes one setting (README.md says what each shows).
Needs root, ip, tcpdump, tc, nstat, nft, ss (src/pcapq/lab/):

    sudo python3 captures/kernel_runs/make.py                  # all of them, about 4 minutes
    sudo python3 captures/kernel_runs/make.py lost_ack crossed_synack

Each run is a `pcapq lab` scenario (src/pcapq/lab/catalog.py; the new ones are in
src/pcapq/lab/twin_scenarios.py) in fresh namespaces, and writes NAME.pcap and NAME.nstat.txt
(the server namespace's counters that moved, the settings, the delay line's and nftables'
counts) here. The twins that are catalog scenarios of captures/ (accept_queue_overflow, ...)
are run again so that each pair comes from the same kernel and the same day. A run that did
not go as meant (the scenario's own checks), or a capture over MAX_BYTES, fails the script.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pcapq.lab.catalog import KERNEL_RUNS, SCENARIOS
from pcapq.lab.runner import run_scenario

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from make_real import run_named  # noqa: E402
MAX_BYTES = 170_000
# The twins of captures/ run again here.
TWINS = ("accept_queue_overflow", "abort_on_overflow", "reuseport_stuck_listener", "pmtu_discovery",
         "mtu_black_hole_router")
RUNS = (*TWINS, *(name for name, s in SCENARIOS.items() if s.shipped_in == KERNEL_RUNS))


def make(name: str, attempts: int = 2) -> int:
    pcap = HERE / f"{name}.pcap"
    for attempt in range(1, attempts + 1):
        result = run_scenario(name, pcap, say=lambda line: print(f"  {line}", flush=True))
        if not result.problems:
            break
        print(f"{name} (attempt {attempt}): {'; '.join(result.problems)}", file=sys.stderr, flush=True)
    else:
        return 1
    size = pcap.stat().st_size
    print(f"== {pcap.name}: {size} bytes, {result.run.elapsed:.1f} s", flush=True)
    if size > MAX_BYTES:
        print(f"{pcap.name} is over {MAX_BYTES} bytes", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    return run_named(__doc__ or "", list(RUNS), list(RUNS), make)


if __name__ == "__main__":
    sys.exit(main())
