#!/usr/bin/env python3
"""Regenerates the real captures in this directory with `pcapq lab` (src/pcapq/lab/). Needs
root, ip, tcpdump, tc, nstat (nft for packet_loss and firewall_drop, scapy for syn_queue_overflow,
nginx, php-fpm and ab for nginx_php_fpm, ss for reuseport_stuck_listener, nmap for syn_scan and
connect_scan):

    sudo python3 captures/make_real.py                 # all of them
    sudo python3 captures/make_real.py healthy

Each scenario runs in fresh network namespaces (client 10.231.1.1, server 10.231.1.2:9000,
tcpdump on the server's veth; the path MTU ones put a router between, server 10.232.1.2:9000,
tcpdump on the client's veth) and writes NAME.pcap and NAME.nstat.txt (the server namespace's
counters that moved) next to this script, as `sudo pcapq lab NAME -o captures/NAME.pcap` does;
this script also refuses a run that did not go as meant or a capture over MAX_BYTES.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from pcapq.lab.catalog import SCENARIOS
from pcapq.lab.errors import LabUnavailable
from pcapq.lab.runner import run_scenario

HERE = Path(__file__).resolve().parent
# The two nmap scans are 2,000 packets of headers at least (one SYN and one answer per port).
MAX_BYTES = 170_000


def make(name: str) -> int:
    # The kernel runs (captures/kernel_runs/, make.py there) go to their own folder.
    pcap = HERE / SCENARIOS[name].shipped_in / f"{name}.pcap"
    result = run_scenario(name, pcap, say=lambda line: print(f"  {line}"))
    if result.problems:
        print(f"{name}: {'; '.join(result.problems)}", file=sys.stderr)
        return 1
    size = pcap.stat().st_size
    print(f"== {pcap.name}: {size} bytes, {result.run.elapsed:.1f} s")
    print(result.run.nstat_report())
    subprocess.run(["pcapq", "analyze", "--no-color", str(pcap)], check=False)
    if size > MAX_BYTES:
        print(f"{pcap.name} is over {MAX_BYTES} bytes", file=sys.stderr)
        return 1
    return 0


def run_named(doc: str, known: list[str], default: list[str], make_one) -> int:
    """The command line of a regeneration script: the names given (or `default`), each made
    by `make_one`; the worst exit status."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of {', '.join(known)} (default: all)")
    names = parser.parse_args().names or default
    unknown = set(names) - set(known)
    if unknown:
        parser.error(f"unknown scenario {', '.join(sorted(unknown))}")
    try:
        return max(make_one(name) for name in names)
    except LabUnavailable as e:
        print(f"cannot run: {e}", file=sys.stderr)
        return 2


def main() -> int:
    return run_named(__doc__ or "", list(SCENARIOS), [name for name, s in SCENARIOS.items() if not s.shipped_in], make)


if __name__ == "__main__":
    sys.exit(main())
