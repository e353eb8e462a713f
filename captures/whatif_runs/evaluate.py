#!/usr/bin/env python3
"""Scores `pcapq analyze`'s inferred settings and `pcapq whatif`'s replays and predictions against the
kernel's truth of the runs in a directory (this one by default; make.py writes them):

    python3 captures/whatif_runs/evaluate.py                 # the shipped runs
    python3 captures/whatif_runs/evaluate.py DIR [--pcapq CMD] [--json]

Three scores, each printed as a table:

- settings: for each run, each setting the capture can show (must_show(): the effective backlog where
  the accept queue overflowed, the workers where they were all busy at once, syncookies where the
  SYN queue overflowed, the client's timeout where clients gave up) and each one pcapq reports:
  the truth lies in [low, high]. A setting that must be shown and is absent is a miss; one
  reported outside the truth is wrong.
- replayed: `pcapq whatif RUN` replays the run with its inferred settings; its failed and
  SYN-retransmitted counts against what the run's clients saw.
- pairs: for every two runs A, B of the same load (pattern and seed) whose settings whatif can
  set, `pcapq whatif A --set` B's settings predicts B's failed and SYN-retransmitted counts.
  Within tolerance: |predicted - truth| <= within(). Direction: where B's truth differs from A's
  by more than both their tolerances together (less is within the kernel's own spread between two
  runs), the predicted change (predicted - A's replayed) has its sign.

"Failed" is a connection its client did not see answered (5 s after connect()); "SYN-retransmitted"
a connection whose client sent its SYN more than once (TCP_INFO, see load_scenarios.truth()).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from itertools import permutations
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent

# The tolerance of a count against the kernel's: 5 % of the connections or a share of the true count
# (30 % for failed connections, 20 % for SYN-retransmitted ones), whichever is larger. The kernel's
# own spread is about that large for failures and a third of it for SYN re-sends (README.md:
# replicates of the same settings at 2 workers).
ABSOLUTE_SHARE = 0.05
RELATIVE_SHARE = {"failed": 0.30, "syn_retransmitted": 0.20}
# Counts compared: the truth's outcome key -> whatif's key.
COUNTS = {"failed": "failed", "syn_retransmitted": "syn_retransmitted"}
# The settings whatif can set, as named in the truth.
SETTABLE = ("backlog", "workers", "syncookies", "synack_retries", "client_timeout_s")
# Inferred settings checked against the truth, by their name in both.
INFERRED = ("backlog", "workers", "syncookies", "synack_retries", "syn_retries", "syn_linear_timeouts",
            "client_timeout_s")

# Runs a pcapq command line (its arguments after `pcapq`) and returns its stdout; raises on failure.
Pcapq = Callable[[list[str]], str]


@dataclass(frozen=True)
class Run:
    name: str
    capture: Path
    truth: dict[str, Any]

    @property
    def load(self) -> tuple[str, int]:
        return self.truth["load"]["pattern"], self.truth["load"]["seed"]

    @property
    def settings(self) -> dict[str, Any]:
        return self.truth["settings"]

    def count(self, key: str) -> int:
        return int(self.truth["outcome"][key])

    def replicates(self, key: str) -> tuple[int, ...]:
        """The same count in other runs of the same load and settings (the kernel's own spread)."""
        return tuple(int(n) for n in self.truth.get("replicates", {}).get(key, ()))


@dataclass
class SettingCheck:
    run: str
    setting: str
    truth: Any
    inferred: dict[str, Any] | None
    must_show: bool

    @property
    def holds(self) -> bool:
        return self.inferred is not None and holds(self.truth, self.inferred)


@dataclass
class CountCheck:
    """One predicted count against the kernel's."""

    count: str
    truth: int
    predicted: int
    tolerance: float
    baseline_truth: int | None = None
    """Pairs: the count in the run the prediction started from, as its clients saw it."""
    baseline_replayed: int | None = None
    """Pairs: the same count as whatif replayed that run."""

    @property
    def within(self) -> bool:
        return abs(self.predicted - self.truth) <= self.tolerance

    baseline_tolerance: float = 0.0
    replicates: tuple[int, ...] = ()
    """The same count in other kernel runs of the target's load and settings."""

    @property
    def within_spread(self) -> bool:
        """Within tolerance of the range the kernel gave over this run and its replicates."""
        counts = (self.truth, *self.replicates)
        return min(counts) - self.tolerance <= self.predicted <= max(counts) + self.tolerance

    @property
    def direction_checked(self) -> bool:
        return (self.baseline_truth is not None
                and abs(self.truth - self.baseline_truth) > self.tolerance + self.baseline_tolerance)

    @property
    def direction_right(self) -> bool:
        if not self.direction_checked:
            return True
        assert self.baseline_truth is not None and self.baseline_replayed is not None
        return _sign(self.predicted - self.baseline_replayed) == _sign(self.truth - self.baseline_truth)


@dataclass
class PairCheck:
    source: str
    target: str
    counts: list[CountCheck] = field(default_factory=list)

    @property
    def within(self) -> bool:
        return all(c.within for c in self.counts)

    @property
    def within_spread(self) -> bool:
        return all(c.within_spread for c in self.counts)

    @property
    def direction_right(self) -> bool:
        return all(c.direction_right for c in self.counts)


@dataclass
class Scores:
    settings: list[SettingCheck]
    replayed: dict[str, list[CountCheck]]
    pairs: list[PairCheck]
    errors: list[str]

    @property
    def settings_share(self) -> float:
        cases = [c for c in self.settings if c.must_show or c.inferred is not None]
        return sum(c.holds for c in cases) / len(cases) if cases else 0.0

    @property
    def replayed_share(self) -> float:
        checks = [c for counts in self.replayed.values() for c in counts]
        return sum(c.within for c in checks) / len(checks) if checks else 0.0

    @property
    def pairs_share(self) -> float:
        return sum(p.within for p in self.pairs) / len(self.pairs) if self.pairs else 0.0

    @property
    def pairs_spread_share(self) -> float:
        return sum(p.within_spread for p in self.pairs) / len(self.pairs) if self.pairs else 0.0

    @property
    def wrong_directions(self) -> list[PairCheck]:
        return [p for p in self.pairs if not p.direction_right]


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def within(count: str, truth: int, connections: int) -> float:
    """How far a predicted `count` may be from the kernel's `truth` of `connections`."""
    return max(ABSOLUTE_SHARE * connections, RELATIVE_SHARE[count] * truth)


def holds(truth: Any, inferred: dict[str, Any]) -> bool:
    """The truth lies in the inferred [low, high] (a missing bound is open). Without either bound
    the value must be the truth (syncookies: true or false); with neither, nothing is shown."""
    low, high = inferred.get("low"), inferred.get("high")
    if low is None and high is None:
        return inferred.get("value") is not None and float(inferred["value"]) == float(truth)
    value = float(truth)
    return (low is None or float(low) <= value) and (high is None or value <= float(high))


def must_show(truth: dict[str, Any]) -> set[str]:
    """The settings a capture of this run shows, by what the kernel did."""
    counters, outcome, settings = truth["server_counters"], truth["outcome"], truth["settings"]
    shown = set()
    if counters.get("TcpExtListenOverflows", 0) > 0:
        shown.add("backlog")
    server = truth.get("server", {})
    if server.get("max_busy_workers") == settings["workers"]:
        shown.add("workers")
    if counters.get("TcpExtSyncookiesSent", 0) > 0 or (settings["syncookies"] == 0 and counters.get("TcpExtTCPReqQFullDrop", 0) > 0):
        shown.add("syncookies")
    if outcome["errors"].get("timeout", 0) > 0:
        shown.add("client_timeout_s")
    return shown


def load_runs(directory: Path) -> list[Run]:
    runs = []
    for truth_file in sorted(directory.glob("*.truth.json")):
        name = truth_file.name.removesuffix(".truth.json")
        capture = next((p for p in (directory / f"{name}.pcap", directory / f"{name}.pcap.gz") if p.exists()), None)
        if capture is not None:
            runs.append(Run(name, capture, json.loads(truth_file.read_text())))
    return runs


def pcapq_command(command: str) -> Pcapq:
    """Runs `command` (e.g. "pcapq") with the arguments; its stdout. Exit 1 is a report with findings."""
    argv0 = shlex.split(command)

    def run(args: list[str]) -> str:
        proc = subprocess.run([*argv0, *args], capture_output=True, text=True, timeout=300)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"pcapq {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    return run


def whatif_args(run: Run, settings: dict[str, Any] | None = None) -> list[str]:
    args = ["whatif", str(run.capture), "--format", "json"]
    for key, value in (settings or {}).items():
        args += ["--set", f"{key}={value}"]
    return args


def score(runs: list[Run], pcapq: Pcapq) -> Scores:
    scores = Scores([], {}, [], [])
    replayed: dict[str, dict[str, Any]] = {}
    for run in runs:
        try:
            doc = json.loads(pcapq(["analyze", "--format", "json", str(run.capture)]))
            inferred = doc.get("inferred_settings") or {}
        except (RuntimeError, ValueError) as e:
            scores.errors.append(f"{run.name}: {e}")
            inferred = {}
        needed = must_show(run.truth)
        for setting in INFERRED:
            truth = run.settings.get(setting)
            if truth is None:
                continue
            shown = inferred.get(setting)
            scores.settings.append(SettingCheck(run.name, setting, truth, shown if isinstance(shown, dict) else None,
                                                setting in needed))
        try:
            replayed[run.name] = json.loads(pcapq(whatif_args(run)))["replayed"]
        except (RuntimeError, ValueError, KeyError) as e:
            scores.errors.append(f"{run.name}: whatif: {e}")
            continue
        connections = run.count("connections")
        scores.replayed[run.name] = [
            CountCheck(key, run.count(key), int(replayed[run.name][wkey]), within(key, run.count(key), connections))
            for key, wkey in COUNTS.items()]
    for source, target in permutations(runs, 2):
        if source.load != target.load or source.name not in replayed:
            continue
        if source.settings.get("abort_on_overflow") != target.settings.get("abort_on_overflow"):
            continue  # whatif does not set tcp_abort_on_overflow
        sets = {key: target.settings[key] for key in SETTABLE}
        try:
            predicted = json.loads(pcapq(whatif_args(source, sets)))["predicted"]
        except (RuntimeError, ValueError, KeyError) as e:
            scores.errors.append(f"{source.name} -> {target.name}: {e}")
            continue
        connections = target.count("connections")
        pair = PairCheck(source.name, target.name)
        for key, wkey in COUNTS.items():
            pair.counts.append(CountCheck(key, target.count(key), int(predicted[wkey]),
                                          within(key, target.count(key), connections), source.count(key),
                                          int(replayed[source.name][wkey]),
                                          within(key, source.count(key), source.count("connections")),
                                          target.replicates(key)))
        scores.pairs.append(pair)
    return scores


def _settings_label(run: Run) -> str:
    s = run.settings
    parts = [f"b{s['backlog']}", f"w{s['workers']}"]
    if s["listen_backlog"] != s["backlog"]:
        parts.append(f"listen {s['listen_backlog']}")
    if not s["syncookies"]:
        parts.append("cookies 0")
    if s["synack_retries"] != 5:
        parts.append(f"synack {s['synack_retries']}")
    if s.get("abort_on_overflow"):
        parts.append("abort 1")
    return " ".join(parts)


def table(runs: list[Run], scores: Scores) -> str:
    lines = ["runs: truth | replayed (failed, SYN-retransmitted); settings: inferred [low, high] vs truth",
             f"{'run':<36}{'settings':<22}{'failed':>14}{'SYN re-sent':>16}  settings"]
    for run in runs:
        rep = {c.count: c for c in scores.replayed.get(run.name, [])}
        cells = []
        for key in COUNTS:
            c = rep.get(key)
            cells.append(f"{run.count(key)} | {c.predicted if c else '-'}{'' if c is None or c.within else ' x'}")
        checks = [c for c in scores.settings if c.run == run.name and (c.must_show or c.inferred is not None)]
        shown = " ".join(f"{c.setting}={'-' if c.inferred is None else _range(c.inferred)}"
                         f"{'' if c.holds else '(truth ' + str(c.truth) + ')'}" for c in checks)
        lines.append(f"{run.name:<36}{_settings_label(run):<22}{cells[0]:>14}{cells[1]:>16}  {shown}")
    lines.append("")
    lines.append("pairs: whatif SOURCE --set TARGET's settings; predicted vs TARGET's truth "
                 "(~: outside tolerance of this run, within it of the kernel's replicates; x: outside both; "
                 "!: direction wrong)")
    lines.append(f"{'source':<36}{'target':<36}{'failed':>16}{'SYN re-sent':>16}")
    for pair in scores.pairs:
        cells = [f"{c.predicted} vs {c.truth}{'' if c.within else ' ~' if c.within_spread else ' x'}"
                 f"{'' if c.direction_right else ' !'}" for c in pair.counts]
        lines.append(f"{pair.source:<36}{pair.target:<36}{cells[0]:>16}{cells[1]:>16}")
    lines.append("")
    settings_cases = [c for c in scores.settings if c.must_show or c.inferred is not None]
    lines.append(f"settings: {sum(c.holds for c in settings_cases)}/{len(settings_cases)} hold the truth "
                 f"({scores.settings_share:.0%}); must be shown and absent: "
                 f"{sum(1 for c in settings_cases if c.must_show and c.inferred is None)}")
    for setting in INFERRED:
        these = [c for c in settings_cases if c.setting == setting]
        if these:
            lines.append(f"  {setting}: {sum(c.holds for c in these)}/{len(these)} hold, "
                         f"{sum(1 for c in these if c.inferred is None)} absent where the capture shows it")
    replays = [c for counts in scores.replayed.values() for c in counts]
    lines.append(f"replayed: {sum(c.within for c in replays)}/{len(replays)} counts within tolerance "
                 f"({scores.replayed_share:.0%})")
    lines.append(f"pairs: {sum(p.within for p in scores.pairs)}/{len(scores.pairs)} within tolerance "
                 f"({scores.pairs_share:.0%}), {sum(p.within_spread for p in scores.pairs)} within tolerance of the "
                 f"kernel's spread over replicates ({scores.pairs_spread_share:.0%}); direction wrong in "
                 f"{len(scores.wrong_directions)}")
    shares = ", ".join(f"{share:.0%} for {count}" for count, share in RELATIVE_SHARE.items())
    lines.append(f"tolerance: |predicted - truth| <= max({ABSOLUTE_SHARE:.0%} of the connections, a share of the "
                 f"true count: {shares})")
    for error in scores.errors:
        lines.append(f"error: {error}")
    return "\n".join(lines)


def _range(inferred: dict[str, Any]) -> str:
    low, high = inferred.get("low"), inferred.get("high")
    return f"{inferred.get('value')}[{'' if low is None else low},{'' if high is None else high}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", nargs="?", type=Path, default=HERE)
    parser.add_argument("--pcapq", default="pcapq", help="the pcapq command (default: pcapq from PATH)")
    parser.add_argument("--json", action="store_true", help="the checks as JSON instead of tables")
    args = parser.parse_args()
    runs = load_runs(args.directory)
    if not runs:
        print(f"evaluate.py: no NAME.truth.json with its capture in {args.directory}", file=sys.stderr)
        return 2
    scores = score(runs, pcapq_command(args.pcapq))
    if args.json:
        print(json.dumps({"settings": [asdict(c) | {"holds": c.holds} for c in scores.settings],
                          "replayed": {k: [asdict(c) | {"within": c.within} for c in v] for k, v in scores.replayed.items()},
                          "pairs": [{"source": p.source, "target": p.target, "within": p.within,
                                     "direction_right": p.direction_right, "counts": [asdict(c) for c in p.counts]}
                                    for p in scores.pairs],
                          "errors": scores.errors}, indent=1))
    else:
        print(table(runs, scores))
    return 1 if scores.errors else 0


if __name__ == "__main__":
    sys.exit(main())
