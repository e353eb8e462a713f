#!/usr/bin/env python3
"""What pcapq says now about each kernel run of this directory, in short, to compare with the
kernel's truth in README.md (regenerate after the diagnosis changes):

    python3 captures/kernel_runs/summarize.py                 # every NAME.pcap here
    python3 captures/kernel_runs/summarize.py lost_ack crossed_synack

Per run: `pcapq analyze --format json`'s capture point, findings (cause, confidence, server,
connections), minor observations, the connections' outcomes, and each connection that is not a
plain `completed` without symptoms with its events (kind, side, frame number).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def analyze(pcap: Path) -> dict:
    proc = subprocess.run(["pcapq", "analyze", "--format", "json", str(pcap)], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"pcapq analyze {pcap}: exit {proc.returncode}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def events(conn: dict) -> str:
    return " ".join(f"{e['kind']}/{e['from'][0]}@{e['frame']}" for e in conn["events"])


def summary(name: str, doc: dict) -> list[str]:
    lines = [f"## {name}"]
    point = doc.get("capture_point") or {}
    lines.append(f"capture point: {point.get('side')} ({point.get('reason', '')})")
    for f in doc["findings"]:
        extra = {k: f[k] for k in ("server", "connection_count", "connections") if k in f and not isinstance(f[k], list)}
        lines.append(f"finding: {f['cause']} confidence {f.get('confidence')} {extra}")
        for key in ("headline", "summary", "title"):
            if f.get(key):
                lines.append(f"  {key}: {f[key]}")
                break
    for m in doc.get("minor_observations") or []:
        lines.append(f"minor: {json.dumps(m)[:300]}")
    conns = doc["connections"]
    outcomes = Counter((c["outcome"], tuple(c["symptoms"])) for c in conns)
    lines.append("outcomes: " + "; ".join(f"{n} x {o}{list(s) if s else ''}" for (o, s), n in outcomes.most_common()))
    for c in conns:
        if c["outcome"] == "completed" and not c["symptoms"]:
            continue
        hs = c["handshake"]
        lines.append(f"  conn {c['id']} {c['client']} {c['outcome']} {c['symptoms']} syn x{hs['syn_attempts']} "
                     f"synack x{hs['synack_attempts']}: {events(c)}")
    return lines


def main() -> int:
    names = sys.argv[1:] or sorted(p.stem for p in HERE.glob("*.pcap"))
    for name in names:
        print("\n".join(summary(name, analyze(HERE / f"{name}.pcap"))))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
