"""A moment is the same number in the Python API, the JSON document and the Parquet tables:
epoch seconds rounded to the microsecond (issue 27), so that an equality join of a finding's
times with its connections' (docs/queries.md) finds them, on a nanosecond capture too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from craft import START, Conversation, write_pcap
from test_cli import conversations, troubled

import pcapq

# Nanoseconds that do not round to themselves at the microsecond.
ODD_NS = 0.000000789


def _capture(tmp_path: Path) -> Path:
    packets = troubled() + conversations(5, start=START + 3 + ODD_NS)
    late = Conversation(client=("10.0.0.1", 41000), start=START + 4.000000501, packets=packets)
    late.syn(0.0)
    late.syn(1.0)
    late.syn(3.0)
    return write_pcap(tmp_path / "nano.pcap", sorted(packets, key=lambda p: p.time), nano=True)


def test_api_json_and_findings_give_one_number_per_moment(tmp_path: Path) -> None:
    path = _capture(tmp_path)
    proc = subprocess.run(["pcapq", "analyze", "--format", "json", str(path)], capture_output=True, timeout=60)
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    in_json = {c["id"]: (c["first_time"], c["last_time"]) for c in doc["connections"]}
    api = {c["id"]: (c["first_time"], c["last_time"]) for c in pcapq.analyze([str(path)]).connections(lean=True)}
    assert in_json and api == in_json
    # Rounded to the microsecond: the nanoseconds given are gone.
    assert all(round(t, 6) == t for pair in api.values() for t in pair)
    findings = doc["findings"] + doc["minor_observations"]
    assert findings, "no finding: nothing to compare"
    for f in findings:
        ids = f["connections"]["ids"]
        assert f["first"] == min(in_json[i][0] for i in ids), f["cause"]
        assert f["last"] == max(in_json[i][1] for i in ids), f["cause"]
