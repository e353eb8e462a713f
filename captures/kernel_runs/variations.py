#!/usr/bin/env python3
"""Varied kernel runs of the catalog's scenarios (capture point, backlog, timers, load, RTT),
each analysed at once: what pcapq found, material and minor, against what the run makes.
Needs root, like make.py; the captures go to a scratch directory, not into the repository:

    sudo python3 captures/kernel_runs/variations.py [-o DIR] [NAME ...]    # about 8 minutes

A line per run: ok (the material findings are the expected causes), WRONG, or ? (no single
right answer: judge the line), then what was found. README.md has the last results."""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import tempfile
from pathlib import Path

from pcapq.lab import scenarios as sc, twin_scenarios as tw
from pcapq.lab.catalog import SCENARIOS
from pcapq.lab.runner import run_scenario

# name, catalog scenario it varies, run(net, pcap), capture point (None: the scenario's), the
# material causes expected (None: no single right answer).
VARIATIONS = [
    ("aq_b1_client", "accept_queue_overflow", lambda n, p: sc.accept_queue_overflow(n, p), "client", {"accept_queue_overflow"}),
    ("aq_b3_c14", "accept_queue_overflow", lambda n, p: sc.accept_queue_overflow(n, p, connections=14, backlog=3, accept_delay=3.0), None, {"accept_queue_overflow"}),
    ("aq_b3_c14_client", "accept_queue_overflow", lambda n, p: sc.accept_queue_overflow(n, p, connections=14, backlog=3, accept_delay=3.0), "client", {"accept_queue_overflow"}),
    ("aq_b2_delay8", "accept_queue_overflow", lambda n, p: sc.accept_queue_overflow(n, p, connections=10, backlog=2, accept_delay=8.0), None, {"accept_queue_overflow"}),
    ("abort_client", "abort_on_overflow", lambda n, p: sc.abort_on_overflow(n, p), "client", {"accept_queue_overflow"}),
    ("abort_b1", "abort_on_overflow", lambda n, p: sc.abort_on_overflow(n, p, connections=6, backlog=1), None, {"accept_queue_overflow"}),
    ("synq_client", "syn_queue_overflow", lambda n, p: sc.syn_queue_overflow(n, p), "client", {"syn_queue_overflow"}),
    ("synq_retries2", "syn_queue_overflow", lambda n, p: sc.syn_queue_overflow(n, p, synack_retries=2, half_open=8), None, {"syn_queue_overflow"}),
    ("closed_client", "closed_port", lambda n, p: sc.closed_port(n, p, connections=3), "client", {"closed_port"}),
    ("timeout_client", "client_timeout_rst", lambda n, p: sc.client_timeout_rst(n, p), "client", {"slow_server"}),
    ("healthy_client", "healthy", lambda n, p: sc.healthy(n, p), "client", set()),
    ("loss_client", "packet_loss", lambda n, p: sc.packet_loss(n, p), "client", {"network_loss"}),
    ("loss_1pct", "packet_loss", lambda n, p: sc.packet_loss(n, p, loss_percent=1, connections=30), None, None),
    ("defer_client", "defer_accept", lambda n, p: sc.defer_accept(n, p), "client", set()),
    ("lost_ack_quick", "lost_ack", lambda n, p: tw.lost_ack(n, p, idle=0.3), None, set()),
    ("lost_ack_quick_path", "lost_ack_on_path", lambda n, p: tw.lost_ack(n, p, where="client", idle=0.3), None, set()),
    ("lost_2acks", "lost_ack", lambda n, p: tw.lost_ack(n, p, acks=2, idle=2.5), None, set()),
    ("read_timeout_rtt", "proxy_read_timeout", lambda n, p: tw.proxy_read_timeout(n, p, one_way=0.15, timeout=2.0, reply_delay=1.8), None, {"slow_server"}),
    ("crossed_1p2", "crossed_synack_client", lambda n, p: tw.crossed_synack(n, p, one_way=0.6), "client", set()),
    ("haproxy_b3_c12", "haproxy_overflow", lambda n, p: sc.haproxy_overflow(n, p, p.with_suffix(""), backlog=3, connections=12), None, {"accept_queue_overflow"}),
    ("haproxy_client", "haproxy_overflow", lambda n, p: sc.haproxy_overflow(n, p, p.with_suffix("")), "client", {"accept_queue_overflow"}),
    ("lost_synack_rtt1", "lost_synack_client", lambda n, p: tw.lost_synack(n, p, one_way=0.5), "client", {"network_loss"}),
]



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("names", nargs="*", help="only these variations")
    parser.add_argument("-o", "--output", type=Path, help="where the captures go (default: a new temporary directory)")
    args = parser.parse_args()
    out = args.output or Path(tempfile.mkdtemp(prefix="pcapq-variations-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"captures in {out}", flush=True)
    for name, base, run, at, expected in VARIATIONS:
        if args.names and name not in args.names:
            continue
        scenario = SCENARIOS[base]
        SCENARIOS[name] = dataclasses.replace(scenario, name=name, run=run, capture_at=at or scenario.capture_at)
        pcap = out / f"{name}.pcap"
        try:
            result = run_scenario(name, pcap)
        except Exception as e:  # noqa: BLE001 - a run that fails is reported, the others go on
            print(f"fail  {name}: the run failed: {e}", flush=True)
            continue
        proc = subprocess.run(["pcapq", "analyze", "--format", "json", str(pcap)], capture_output=True, text=True)
        doc = json.loads(proc.stdout)
        found = {f["cause"]: f["confidence"] for f in doc["findings"]}
        minor = [f["cause"] for f in doc["minor_observations"]]
        verdict = "?" if expected is None else ("ok" if set(found) == expected else "WRONG")
        print(f"{verdict:5} {name:20} capture at {at or 'default':7} found {found} minor {minor} expected "
              f"{sorted(expected) if expected is not None else '-'}"
              + (f"; run: {'; '.join(result.problems)}" if result.problems else ""), flush=True)


if __name__ == "__main__":
    main()
