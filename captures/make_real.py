#!/usr/bin/env python3
"""Regenerates the real captures in this directory. Needs root, ip, tcpdump, tc, nstat (nft for
packet_loss, scapy for syn_queue_overflow):

    sudo python3 captures/make_real.py                 # all of them
    sudo python3 captures/make_real.py healthy

Each scenario runs in fresh network namespaces (tests/netns.py, tests/kernel_scenarios.py;
client 10.231.1.1, server 10.231.1.2:9000, tcpdump on the server's veth) and writes NAME.pcap
and NAME.nstat.txt (the server namespace's counters that moved) next to this script.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import pytest  # noqa: E402  (netns.py skips through pytest)

import kernel_scenarios  # noqa: E402
from netns import NetnsPair  # noqa: E402

SCENARIOS = {
    "healthy": lambda net, pcap: kernel_scenarios.healthy(net, pcap, connections=20, request=100, response=1000),
    "accept_queue_overflow": lambda net, pcap: kernel_scenarios.accept_queue_overflow(
        net, pcap, connections=8, backlog=1, accept_delay=5.0, request=24, response=1000
    ),
    "abort_on_overflow": lambda net, pcap: kernel_scenarios.abort_on_overflow(
        net, pcap, connections=9, backlog=3, accept_delay=2.0, request=24, response=1000
    ),
    "syn_queue_overflow": lambda net, pcap: kernel_scenarios.syn_queue_overflow(
        net, pcap, backlog=3, half_open=6, connections=3, synack_retries=1, client_delay=0.5
    ),
    "closed_port": lambda net, pcap: kernel_scenarios.closed_port(net, pcap, connections=5),
    "client_timeout_rst": lambda net, pcap: kernel_scenarios.client_timeout_rst(
        net, pcap, connections=3, timeout=1.0, reply_delay=1.5, pause=0.6
    ),
    "packet_loss": lambda net, pcap: kernel_scenarios.packet_loss(
        net, pcap, connections=20, loss_percent=4, response=16000, snaplen=96
    ),
}
# The client errors a scenario is meant to produce; any other error is a failed run.
CLIENT_ERRORS = {
    "abort_on_overflow": "ConnectionResetError",
    "closed_port": "ConnectionRefusedError",
    "client_timeout_rst": "TimeoutError",
}
MAX_BYTES = 100_000


def nstat_text(name: str, run: kernel_scenarios.Run) -> str:
    captured = [line.strip() for line in run.tcpdump.splitlines() if "packets" in line]
    lines = [
        f"# {name}.pcap: `nstat -az` in the server namespace before and after; counters that moved.",
        f"# kernel {platform.release()}",
        *(f"# {line}" for line in run.setup),
        *(f"# sysctl {key} = {value}" for key, value in run.sysctls.items()),
        f"# tcpdump: {'; '.join(captured)}",
        "",
        run.nstat_report(),
        "",
    ]
    return "\n".join(lines)


def make(name: str) -> int:
    pcap = HERE / f"{name}.pcap"
    with NetnsPair(subnet=1, tools=("ip", "tcpdump", "tc", "nstat")) as net:
        run = SCENARIOS[name](net, pcap)
    failed = [c for c in run.clients if c["error"] and CLIENT_ERRORS.get(name, "no error") not in c["error"]]
    if failed or run.tcpdump_dropped:
        print(f"{name}: client errors {failed}, tcpdump dropped {run.tcpdump_dropped}", file=sys.stderr)
        return 1
    (HERE / f"{name}.nstat.txt").write_text(nstat_text(name, run))
    size = pcap.stat().st_size
    print(f"== {pcap.name}: {size} bytes, {run.elapsed:.1f} s")
    print(run.nstat_report())
    subprocess.run(["pcapq", "analyze", "--no-color", str(pcap)], check=False)
    if size > MAX_BYTES:
        print(f"{pcap.name} is over {MAX_BYTES} bytes", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of {', '.join(SCENARIOS)} (default: all)")
    names = parser.parse_args().names or list(SCENARIOS)
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenario {', '.join(sorted(unknown))}")
    try:
        return max(make(name) for name in names)
    except pytest.skip.Exception as e:
        print(f"cannot run: {e.msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
