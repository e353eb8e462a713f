#!/usr/bin/env python3
"""Regenerates the runs in this directory: one seeded offered load against a prefork server, under a
grid of listen settings (README.md says what each shows). Needs root, ip, tcpdump, nstat
(src/pcapq/lab/load_scenarios.py):

    sudo python3 captures/whatif_runs/make.py                       # the shipped runs, about 4 minutes
    sudo python3 captures/whatif_runs/make.py prefork_bursts_b4_w2
    sudo python3 captures/whatif_runs/make.py --all --out DIR --connections   # the whole grid

Each run is the lab's prefork_bursts_b16_w2 or prefork_waves_b16_w4 scenario (src/pcapq/lab/catalog.py)
in fresh namespaces (client 10.231.1.1, server 10.231.1.2:9000, tcpdump on the server's veth, or the
client's for the runs named _client) with the run's settings, and writes NAME.pcap (NAME.pcap.gz in
this directory, to keep it small: pcapq reads it as it is), NAME.nstat.txt (the server namespace's counters that moved)
and NAME.truth.json (the settings as set, the clients' outcomes counted, both namespaces' counters;
see load_scenarios.truth()); with --connections also NAME.clients.jsonl (each connection as its
client saw it) and NAME.workers.jsonl (each connection a worker took). Runs of the same load share
its pattern and seed; NAME_r2, _r3, _r4 are replicates of a shipped run's settings, whose counts
go into its truth file (fold()).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import platform
import sys
from pathlib import Path
from typing import Any

from pcapq.lab import load_scenarios
from pcapq.lab.catalog import SCENARIOS
from pcapq.lab.errors import LabUnavailable
from pcapq.lab.runner import run_scenario

HERE = Path(__file__).resolve().parent
SEED = 1
# Each load's name in the runs' names, and the catalog scenario that runs it.
LOADS = {"steady_bursts": "prefork_bursts", "waves": "prefork_waves"}
TEMPLATES = {"steady_bursts": "prefork_bursts_b16_w2", "waves": "prefork_waves_b16_w4"}
# NAME.pcap.gz here; the grid's NAME.pcap are about four times larger.
MAX_BYTES = 120_000


def _grid() -> dict[str, dict[str, Any]]:
    """Run name -> prefork_load's settings (and "capture_at")."""
    runs: dict[str, dict[str, Any]] = {}

    def add(pattern: str, backlog: int, workers: int, suffix: str = "", **more: Any) -> None:
        runs[f"{LOADS[pattern]}_b{backlog}_w{workers}{suffix}"] = {
            "pattern": pattern, "seed": SEED, "backlog": backlog, "workers": workers, **more}

    # First the runs that show the most, so that a partial grid is already of use.
    add("steady_bursts", 4, 2)
    add("steady_bursts", 16, 4)
    add("steady_bursts", 64, 8)
    add("steady_bursts", 16, 2)
    for backlog in (4, 16, 64):
        for workers in (2, 4, 8):
            add("steady_bursts", backlog, workers)
    add("steady_bursts", 64, 2, "_somaxconn8", somaxconn=8)
    add("steady_bursts", 16, 2, "_nocookies", syncookies=0)
    add("steady_bursts", 16, 2, "_synack2", synack_retries=2)
    add("steady_bursts", 16, 2, "_abort", abort_on_overflow=1)
    add("steady_bursts", 16, 2, "_client", capture_at="client")
    for backlog, workers in ((4, 2), (16, 2), (64, 2), (16, 4), (4, 8), (64, 8)):
        add("waves", backlog, workers)
    add("waves", 16, 4, "_client", capture_at="client")
    # Replicates of every shipped run's settings: the kernel's own spread (see fold()).
    for name in SHIPPED:
        for replicate in REPLICATES:
            runs[name + replicate] = dict(runs[name])
    return runs


# The runs shipped in this directory: small enough to keep, varied enough to test on.
SHIPPED = ("prefork_bursts_b4_w2", "prefork_bursts_b16_w2", "prefork_bursts_b64_w2", "prefork_bursts_b16_w8",
           "prefork_bursts_b64_w2_somaxconn8", "prefork_bursts_b16_w2_nocookies", "prefork_bursts_b16_w2_synack2",
           "prefork_waves_b16_w2", "prefork_waves_b16_w4")
# The suffixes of a shipped run's replicates: the same load and settings, run again.
REPLICATES = ("_r2", "_r3", "_r4")
RUNS = _grid()


def make(name: str, out: Path, connections: bool, attempts: int = 2) -> int:
    settings = dict(RUNS[name])
    capture_at = settings.pop("capture_at", None)
    pcap = out / f"{name}.pcap"
    scenario = dataclasses.replace(
        SCENARIOS[TEMPLATES[settings["pattern"]]], name=name, capture_at=capture_at,
        run=lambda net, pcap: load_scenarios.prefork_load(net, pcap, **settings))
    original = SCENARIOS.get(name)
    SCENARIOS[name] = scenario
    try:
        for attempt in range(1, attempts + 1):
            result = run_scenario(name, pcap, say=lambda line: print(f"  {line}", flush=True))
            if not result.problems:
                break
            print(f"{name} (attempt {attempt}): {'; '.join(result.problems[:5])}", file=sys.stderr, flush=True)
        else:
            return 1
    finally:
        if original is None:
            del SCENARIOS[name]
        else:
            SCENARIOS[name] = original
    run = result.run
    truth = {
        "schema": "pcapq.whatif_run",
        "name": name,
        "listener": run.server,
        "capture_at": capture_at or "server",
        "kernel": platform.release(),
        "setup": run.setup,
        "tcpdump_dropped": run.tcpdump_dropped,
        **run.extra["truth"],
    }
    (out / f"{name}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    if connections:
        (out / f"{name}.clients.jsonl").write_text("".join(json.dumps(c) + "\n" for c in run.clients))
        (out / f"{name}.workers.jsonl").write_text(
            "".join(json.dumps(w) + "\n" for w in run.extra["workers_log"]))
    replicate_of = fold(name, truth) if out == HERE else None
    if replicate_of:
        print(f"== {name}: {truth['outcome']['failed']} failed, {truth['outcome']['syn_retransmitted']} with a "
              f"SYN re-sent; counted in {replicate_of}.truth.json's replicates", flush=True)
    if out == HERE and replicate_of:
        for made in (pcap, out / f"{name}.truth.json", out / f"{name}.nstat.txt"):
            made.unlink(missing_ok=True)
        return 0
    if out == HERE:
        pcap = compress(pcap)
    size = pcap.stat().st_size
    outcome = truth["outcome"]
    print(f"== {name}: {outcome['connections']} connections, {outcome['failed']} failed, "
          f"{outcome['syn_retransmitted']} with a SYN re-sent; {size} bytes, {run.elapsed:.1f} s", flush=True)
    if out == HERE and size > MAX_BYTES:
        print(f"{pcap.name} is over {MAX_BYTES} bytes", file=sys.stderr)
        return 1
    return 0


def fold(name: str, truth: dict[str, Any]) -> str | None:
    """A replicate's counts go into its shipped run's truth, under "replicates" (each count's list, in
    the order of "names"); returns the shipped run's name, or None for a run that is no replicate.
    Only for runs made in this directory: a grid made elsewhere (--out) leaves the shipped truth as it is."""
    base = next((name[: -len(r)] for r in REPLICATES if name.endswith(r) and name[: -len(r)] in SHIPPED), None)
    if base is None:
        return None
    path = HERE / f"{base}.truth.json"
    shipped = json.loads(path.read_text())
    kept = shipped.get("replicates", {})
    names = list(kept.get("names", ()))
    counts = {key: list(kept.get(key, ())) for key in ("failed", "syn_retransmitted")}
    if name in names:
        at = names.index(name)
        for key in counts:
            counts[key][at] = truth["outcome"][key]
    else:
        names.append(name)
        for key in counts:
            counts[key].append(truth["outcome"][key])
    shipped["replicates"] = {"names": names, **counts}
    path.write_text(json.dumps(shipped, indent=1) + "\n")
    return base


def compress(pcap: Path) -> Path:
    """NAME.pcap -> NAME.pcap.gz (mtime 0: the same capture gives the same bytes)."""
    packed = pcap.with_name(pcap.name + ".gz")
    with pcap.open("rb") as raw, packed.open("wb") as f, gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9, mtime=0) as gz:
        gz.write(raw.read())
    pcap.unlink()
    return packed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help="runs of the grid (default: the shipped ones)")
    parser.add_argument("--all", action="store_true", help="every run of the grid")
    parser.add_argument("--out", type=Path, default=HERE, help="the directory to write to (default: this one)")
    parser.add_argument("--connections", action="store_true", help="also write NAME.clients.jsonl, NAME.workers.jsonl")
    parser.add_argument("--skip-existing", action="store_true", help="leave runs whose truth file exists")
    args = parser.parse_args()
    names = list(RUNS) if args.all else args.names or list(SHIPPED)
    unknown = set(names) - set(RUNS)
    if unknown:
        parser.error(f"unknown run {', '.join(sorted(unknown))}; known: {', '.join(RUNS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    worst = 0
    try:
        for name in names:
            if args.skip_existing and (args.out / f"{name}.truth.json").exists():
                continue
            worst = max(worst, make(name, args.out, args.connections))
    except LabUnavailable as e:
        print(f"cannot run: {e}", file=sys.stderr)
        return 2
    return worst


if __name__ == "__main__":
    sys.exit(main())
