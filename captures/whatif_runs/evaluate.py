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

A count is scored twice: against the run's own, and against the kernel's median over the run and
its replicates (the same load and settings run again, make.py's fold(); each truth file holds
three). The kernel's runs of one load spread widely where a queue is on the edge of overflowing
(at backlog 16 and 2 workers, 45 to 94 failed of 350): one run is one draw from that spread, the
median is the kernel's answer, and a replay's median is the model's. Within tolerance:
|predicted - kernel| <= within(). Direction: where the kernel's medians for A and B differ by more
than both their tolerances together, the predicted change (predicted - A's replayed) has its sign.

"Failed" is a connection its client did not see answered (5 s after connect()); "SYN-retransmitted"
a connection whose client sent its SYN more than once (TCP_INFO, see load_scenarios.truth()).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from itertools import permutations
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent

# The tolerance of a count against the kernel's: 5 % of the connections or a share of the true count
# (30 % for failed connections, 20 % for SYN-retransmitted ones), whichever is larger.
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

    def kernel(self, key: str) -> tuple[int, ...]:
        """The count in this run, then in its replicates (other runs of the same load and settings,
        make.py's fold())."""
        return (self.count(key), *(int(n) for n in self.truth.get("replicates", {}).get(key, ())))


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
    """One predicted count against the kernel's: its run, and the median over that run and its replicates
    (the same load and settings run again), the kernel's own answer where one run is a draw from a wide
    spread."""

    count: str
    predicted: int
    kernel: tuple[int, ...]
    """The count in the target's run, then in its replicates."""
    connections: int
    baseline: tuple[int, ...] = ()
    """Pairs: the count in the run the prediction started from, and in its replicates."""
    baseline_replayed: int | None = None
    """Pairs: the same count as whatif replayed that run."""

    @property
    def truth(self) -> int:
        return self.kernel[0]

    @property
    def center(self) -> float:
        return statistics.median(self.kernel)

    @property
    def tolerance(self) -> float:
        return within(self.count, self.truth, self.connections)

    @property
    def center_tolerance(self) -> float:
        return within(self.count, self.center, self.connections)

    @property
    def within(self) -> bool:
        """Within tolerance of the target's one run."""
        return abs(self.predicted - self.truth) <= self.tolerance

    @property
    def within_center(self) -> bool:
        """Within tolerance of the median over the target's run and its replicates."""
        return abs(self.predicted - self.center) <= self.center_tolerance

    @property
    def direction_checked(self) -> bool:
        """The kernel's medians differ by more than both tolerances together (less is its own spread)."""
        if not self.baseline:
            return False
        base = statistics.median(self.baseline)
        return abs(self.center - base) > self.center_tolerance + within(self.count, base, self.connections)

    @property
    def direction_right(self) -> bool:
        if not self.direction_checked:
            return True
        assert self.baseline_replayed is not None
        return _sign(self.predicted - self.baseline_replayed) == _sign(self.center - statistics.median(self.baseline))


@dataclass
class PairCheck:
    source: str
    target: str
    counts: list[CountCheck] = field(default_factory=list)

    @property
    def within(self) -> bool:
        return all(c.within for c in self.counts)

    @property
    def within_center(self) -> bool:
        return all(c.within_center for c in self.counts)

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
    def replayed_center_share(self) -> float:
        checks = [c for counts in self.replayed.values() for c in counts]
        return sum(c.within_center for c in checks) / len(checks) if checks else 0.0

    @property
    def pairs_share(self) -> float:
        return sum(p.within for p in self.pairs) / len(self.pairs) if self.pairs else 0.0

    @property
    def pairs_center_share(self) -> float:
        return sum(p.within_center for p in self.pairs) / len(self.pairs) if self.pairs else 0.0

    @property
    def wrong_directions(self) -> list[PairCheck]:
        return [p for p in self.pairs if not p.direction_right]


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def within(count: str, truth: float, connections: int) -> float:
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
        scores.replayed[run.name] = [
            CountCheck(key, int(replayed[run.name][wkey]), run.kernel(key), run.count("connections"))
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
        pair = PairCheck(source.name, target.name)
        for key, wkey in COUNTS.items():
            pair.counts.append(CountCheck(key, int(predicted[wkey]), target.kernel(key), target.count("connections"),
                                          source.kernel(key), int(replayed[source.name][wkey])))
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
    lines = ["runs: the kernel's run (median over it and its replicates) | replayed, for failed and SYN-retransmitted "
             "(~: outside tolerance of the run, within it of the median; x: outside both); "
             "settings: inferred [low, high] vs truth",
             f"{'run':<36}{'settings':<22}{'failed':>18}{'SYN re-sent':>20}  settings"]
    for run in runs:
        rep = {c.count: c for c in scores.replayed.get(run.name, [])}
        cells = []
        for key in COUNTS:
            c = rep.get(key)
            cells.append(f"{run.count(key)} ({statistics.median(run.kernel(key)):g}) | "
                         f"{_count(c) if c else '-'}")
        checks = [c for c in scores.settings if c.run == run.name and (c.must_show or c.inferred is not None)]
        shown = " ".join(f"{c.setting}={'-' if c.inferred is None else _range(c.inferred)}"
                         f"{'' if c.holds else '(truth ' + str(c.truth) + ')'}" for c in checks)
        lines.append(f"{run.name:<36}{_settings_label(run):<22}{cells[0]:>18}{cells[1]:>20}  {shown}")
    lines.append("")
    lines.append("pairs: whatif SOURCE --set TARGET's settings; predicted vs TARGET's run (median) "
                 "(~: outside tolerance of the run, within it of the median; x: outside both; !: direction wrong)")
    lines.append(f"{'source':<36}{'target':<36}{'failed':>20}{'SYN re-sent':>20}")
    for pair in scores.pairs:
        cells = [f"{c.predicted} vs {c.truth} ({c.center:g}){_mark(c)}" for c in pair.counts]
        lines.append(f"{pair.source:<36}{pair.target:<36}{cells[0]:>20}{cells[1]:>20}")
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
    lines.append(f"replayed: {sum(c.within_center for c in replays)}/{len(replays)} counts within tolerance of the "
                 f"kernel's median ({scores.replayed_center_share:.0%}); of its one run: "
                 f"{sum(c.within for c in replays)} ({scores.replayed_share:.0%})")
    lines.append(f"pairs: {sum(p.within_center for p in scores.pairs)}/{len(scores.pairs)} within tolerance of the "
                 f"kernel's median ({scores.pairs_center_share:.0%}); of its one run: "
                 f"{sum(p.within for p in scores.pairs)} ({scores.pairs_share:.0%}); direction wrong in "
                 f"{len(scores.wrong_directions)}")
    shares = ", ".join(f"{share:.0%} for {count}" for count, share in RELATIVE_SHARE.items())
    lines.append(f"tolerance: |predicted - truth| <= max({ABSOLUTE_SHARE:.0%} of the connections, a share of the "
                 f"true count: {shares})")
    for error in scores.errors:
        lines.append(f"error: {error}")
    return "\n".join(lines)


def _mark(c: CountCheck) -> str:
    """A count's marks: ~ outside tolerance of the run only, x of the median too, ! direction wrong."""
    within = "" if c.within_center and c.within else " ~" if c.within_center else " x"
    return within + ("" if c.direction_right else " !")


def _count(c: CountCheck) -> str:
    return f"{c.predicted}{_mark(c)}"


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
                          "replayed": {k: [asdict(c) | {"within": c.within, "within_center": c.within_center}
                                           for c in v] for k, v in scores.replayed.items()},
                          "pairs": [{"source": p.source, "target": p.target, "within": p.within,
                                     "within_center": p.within_center,
                                     "direction_right": p.direction_right, "counts": [asdict(c) for c in p.counts]}
                                    for p in scores.pairs],
                          "errors": scores.errors}, indent=1))
    else:
        print(table(runs, scores))
    return 1 if scores.errors else 0


if __name__ == "__main__":
    sys.exit(main())
