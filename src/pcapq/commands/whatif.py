"""`pcapq whatif` once its options are read: a listener's offered load replayed through the core's
model of the listen queues (src/whatif), first with the settings the capture shows, then with the
ones given."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, TextIO, Union

from pcapq import _core
from pcapq.endpoint import parse as parse_endpoint
from pcapq.exitcodes import ExitCode
from pcapq.output import deliver, fail, refuse_overwriting_inputs, warn

SettingValue = Union[int, float, None]
Source = Literal["set", "inferred", "default"]
WhatifFormat = Literal["text", "json"]

# The seed of the service times drawn for the connections the capture never saw answered.
SEED = 0


@dataclass(frozen=True)
class Setting:
    """A setting `--set` takes: its words, how its value is read, and Linux's default (None: none,
    the capture must show it)."""

    what: str
    parse: Callable[[str], SettingValue]
    default: SettingValue


def _count(low: int, high: int | None = None) -> Callable[[str], SettingValue]:
    def parse(text: str) -> SettingValue:
        value = int(text)
        if value < low or (high is not None and value > high):
            raise ValueError(f"from {low}" + (f" to {high}" if high is not None else " up"))
        return value

    return parse


def _seconds(text: str) -> SettingValue:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError("a number of seconds above 0")
    return value


SETTINGS: dict[str, Setting] = {
    "backlog": Setting("the effective listen backlog (after the net.core.somaxconn clamp)", _count(0, 1 << 20), None),
    "workers": Setting("how many requests the server serves at once", _count(1, 1 << 16), None),
    "syncookies": Setting("net.ipv4.tcp_syncookies", _count(0, 2), 1),
    "synack_retries": Setting("net.ipv4.tcp_synack_retries", _count(0, 255), 5),
    "syn_retries": Setting("the client's net.ipv4.tcp_syn_retries", _count(1, 127), 6),
    "syn_linear_timeouts": Setting("the client's net.ipv4.tcp_syn_linear_timeouts", _count(0, 255), 4),
    "client_timeout_s": Setting("seconds after its first SYN a client gives up", _seconds, None),
    "abort_on_overflow": Setting("net.ipv4.tcp_abort_on_overflow", _count(0, 1), 0),
}

# The counts each outcome has in the JSON document, in order.
COUNTS = ("connections", "answered", "failed", "syn_retransmitted", "listen_overflows", "wait_p50_s", "wait_p99_s")


def parse_sets(sets: tuple[str, ...]) -> dict[str, SettingValue]:
    """`--set NAME=VALUE`s as values by name; a bad one exits 2 with one line."""
    out: dict[str, SettingValue] = {}
    for item in sets:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in SETTINGS:
            fail(f"--set {item}: expected NAME=VALUE with NAME one of {', '.join(SETTINGS)}", ExitCode.USAGE)
        try:
            out[name] = SETTINGS[name].parse(text.strip())
        except ValueError as e:
            detail = str(e) if str(e) and not str(e).startswith(("invalid literal", "could not convert")) else "a number"
            fail(f"--set {item}: {name} takes {detail}", ExitCode.USAGE)
    return out


def run(file: str, sets: tuple[str, ...], listener: str | None, fmt: WhatifFormat, output: str) -> None:
    """Reads the capture, replays its load with the settings it shows and with those given, writes
    the comparison."""
    given = parse_sets(sets)
    if listener is not None:
        try:
            listener = str(parse_endpoint(listener))
        except ValueError as e:
            fail(f"--listener {listener}: {e}", ExitCode.USAGE)
    refuse_overwriting_inputs((file,), output)
    try:
        analysis = _core.analyze([file])
    except _core.CaptureError as e:
        fail(e.args[0], ExitCode.UNREADABLE)
    for warning in analysis.warnings():
        warn(warning)
    if analysis.summary()["tcp_segments"] == 0:
        fail(f"no TCP segments in {file}", ExitCode.NO_TCP)
    inferred_all = analysis.inferred_settings()
    chosen = listener or default_listener(analysis, inferred_all)
    if chosen is None or chosen not in {s["server"] for s in analysis.servers()}:
        fail(f"no connections to {listener} in {file}" if listener else f"no listener in {file}", ExitCode.USAGE)
    report = whatif(analysis, chosen, inferred_all.get(chosen), given)
    render = render_json if fmt == "json" else render_text
    text = render(report)
    deliver(output, True, lambda out, _colourless: write(out, text))
    if any(c["read_stop"] in ("corrupt", "io_error") for c in analysis.captures()):
        sys.exit(int(ExitCode.DAMAGED))


def write(out: TextIO, text: str) -> None:
    out.write(text)
    out.flush()


def default_listener(analysis: _core.Analysis, inferred_all: Mapping[str, _core._InferredSettings]) -> str | None:
    """The listener whose connections failed most (the one the findings are about), else the
    busiest."""
    servers = analysis.servers()
    if not servers:
        return None
    return max(servers, key=lambda s: (s["connections"] - s["answered"], s["server"] in inferred_all, s["connections"]))["server"]


def whatif(analysis: _core.Analysis, listener: str, inferred: Mapping[str, object] | None,
           given: dict[str, SettingValue]) -> dict[str, Any]:
    """The report: the settings used and where each came from, the observed outcome, the replay
    with the capture's settings and the prediction with the given ones (None where the capture
    cannot support one, with `note` saying why). `inferred`: the listener's inferred settings,
    None where the capture shows none."""
    shown: dict[str, tuple[SettingValue, Source]] = {}
    for name, setting in SETTINGS.items():
        value = inferred_value(name, (inferred or {}).get(name))
        if value is not None:
            shown[name] = (value, "inferred")
        elif setting.default is not None:
            shown[name] = (setting.default, "default")
    missing = [n for n in ("workers",) if n not in shown]
    notes: list[str] = []
    if "backlog" not in shown:
        # The accept queue never overflowed: any backlog at least as deep as it ever got gives the
        # same replay; the kernel's somaxconn default stands for it.
        shown["backlog"] = (4096, "default")
        notes.append("the capture never shows the accept queue full: its backlog is taken as deep as Linux's somaxconn "
                     "default (4096)")
    if "client_timeout_s" not in shown and "client_timeout_s" not in given:
        notes.append("the capture shows no client giving up: the replay's clients wait for ever, so it counts no "
                     "timeouts (--set client_timeout_s=SECONDS gives them one)")
    capture_workers = shown["workers"][0] if "workers" in shown else None
    chosen = {**shown, **{name: (value, "set") for name, value in given.items()}}
    settings = {name: chosen[name] for name in SETTINGS if name in chosen}
    runs = [] if missing else [model_settings(shown), model_settings(settings)]
    result = analysis.whatif(listener, int(capture_workers) if capture_workers is not None else None, runs, SEED)
    if missing:
        notes = ["the capture shows no queue: no moment when the server's workers were all busy, so the model has no "
                 "service rate to replay; it predicts nothing"]
    replayed = result["runs"][0] if result["runs"] else None
    predicted = result["runs"][1] if result["runs"] else None
    return {
        "listener": listener,
        "settings": {n: {"value": v, "source": s} for n, (v, s) in settings.items()},
        "observed": result["observed"],
        "replayed": replayed,
        "predicted": predicted,
        "note": "; ".join(notes) or None,
    }


# Where an inferred setting is a range, the end the model takes: the most connections the accept
# queue held at a drop bounds the backlog from above (it was full then); the most requests the
# server was seen serving at once while others waited bounds the workers from below.
RANGE_END: dict[str, Literal["low", "high"]] = {"backlog": "high", "workers": "low"}


def inferred_value(name: str, estimate: Any) -> SettingValue:
    """An inferred setting's value. With only a range: its end in `RANGE_END`, else Linux's
    default where the range holds it, else the bound nearest to it; None when nothing is known."""
    if not isinstance(estimate, dict):
        return None
    value = estimate.get("value")
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    low, high = estimate.get("low"), estimate.get("high")
    end = estimate.get(RANGE_END[name]) if name in RANGE_END else None
    if isinstance(end, (int, float)):
        return end
    default = SETTINGS[name].default
    if default is None:
        return low if isinstance(low, (int, float)) else high if isinstance(high, (int, float)) else None
    if isinstance(low, (int, float)) and default < low:
        return low
    if isinstance(high, (int, float)) and default > high:
        return high
    return None


def model_settings(settings: dict[str, tuple[SettingValue, Source]]) -> _core._WhatifSettings:
    def count(name: str) -> int:
        value = settings[name][0]
        return int(value) if value is not None else 0

    timeout = settings.get("client_timeout_s", (None, "default"))[0]
    return {
        "backlog": count("backlog"),
        "workers": count("workers"),
        "syncookies": count("syncookies"),
        "synack_retries": count("synack_retries"),
        "syn_retries": count("syn_retries"),
        "syn_linear_timeouts": count("syn_linear_timeouts"),
        "client_timeout_s": float(timeout) if timeout is not None else None,
        "abort_on_overflow": bool(count("abort_on_overflow")),
    }


# A replay's counts that come with the range of the middle 80 % of its replays.
RANGES = {"failed": "failed_range", "syn_retransmitted": "syn_retransmitted_range"}


def _outcome_json(outcome: _core._WhatifOutcome | None) -> dict[str, Any] | None:
    if outcome is None:
        return None
    doc: dict[str, Any] = {k: outcome[k] for k in COUNTS}  # type: ignore[literal-required]
    for key in RANGES.values():
        span = outcome[key]  # type: ignore[literal-required]
        if span is not None:
            doc[key] = list(span)
    return doc


def render_json(report: dict[str, Any]) -> str:
    doc = {
        "schema": "pcapq.whatif",
        "listener": report["listener"],
        "settings": report["settings"],
        "observed": _outcome_json(report["observed"]),
        "replayed": _outcome_json(report["replayed"]),
        "predicted": _outcome_json(report["predicted"]),
    }
    if report["note"]:
        doc["note"] = report["note"]
    return json.dumps(doc, indent=2) + "\n"


ROWS = (
    ("connections", "connections"),
    ("answered", "answered"),
    ("failed", "failed"),
    ("  never connected", "failed_connecting"),
    ("  no answer in time", "failed_waiting"),
    ("  reset", "failed_reset"),
    ("SYN re-sent", "syn_retransmitted"),
    ("listen overflows", "listen_overflows"),
    ("wait p50 (s)", "wait_p50_s"),
    ("wait p99 (s)", "wait_p99_s"),
)


def _cell(outcome: _core._WhatifOutcome | None, key: str) -> str:
    if outcome is None:
        return "-"
    value = outcome[key]  # type: ignore[literal-required]
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    span = outcome[RANGES[key]] if key in RANGES else None  # type: ignore[literal-required]
    if span is not None and span[0] != span[1]:
        return f"{value} ({span[0]}–{span[1]})"
    return str(value)


def render_text(report: dict[str, Any]) -> str:
    observed, replayed, predicted = report["observed"], report["replayed"], report["predicted"]
    settings = report["settings"]
    lines = [f"What if: {report['listener']}, {observed['connections']} connections"]
    lines.append("settings: " + ", ".join(f"{n} {v['value']} ({v['source']})" for n, v in settings.items()))
    lines.append("")
    header = ("", "observed", "replayed", "predicted")
    rows = [header] + [(label, _cell(observed, key), _cell(replayed, key), _cell(predicted, key)) for label, key in ROWS]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)).rstrip())
    lines.append("")
    if report["note"]:
        lines.append(f"Note: {report['note']}.")
    if replayed is not None and predicted is not None:
        lines.append(replay_sentence(observed, replayed))
        lines.append(change_sentence(settings, replayed, predicted))
    lines.append("A replay's count is the median of its seeded replays, (low–high) the middle 80 % of them: the kernel's "
                 "own runs of one load spread widely too where a queue is on the edge of overflowing. Observed listen "
                 "overflows are an estimate (SYNs never answered, SYN-ACKs re-sent after the client's ACK); waits run "
                 "from the first SYN until a worker has the request.")
    return "\n".join(lines) + "\n"


def replay_sentence(observed: _core._WhatifOutcome, replayed: _core._WhatifOutcome) -> str:
    n = max(observed["connections"], 1)
    gap = replayed["failed"] - observed["failed"]
    return (f"The replay with the settings the capture shows: {replayed['failed']} failed where the capture shows "
            f"{observed['failed']} ({gap:+d}, {abs(gap) / n:.0%} of the connections), {replayed['syn_retransmitted']} "
            f"with their SYN re-sent where it shows {observed['syn_retransmitted']}.")


def change_sentence(settings: dict[str, Any], replayed: _core._WhatifOutcome, predicted: _core._WhatifOutcome) -> str:
    changed = [f"{n} {v['value']}" for n, v in settings.items() if v["source"] == "set"]
    what = ", ".join(changed) if changed else "the same settings"
    before, after = replayed["failed"], predicted["failed"]
    kinds = ("failed_connecting", "failed_waiting", "failed_reset")
    words = {"failed_connecting": "SYNs dropped", "failed_waiting": "no answer in time", "failed_reset": "resets"}
    main_before = max(kinds, key=lambda k: replayed[k])  # type: ignore[literal-required]
    main_after = max(kinds, key=lambda k: predicted[k])  # type: ignore[literal-required]
    if after == before:
        effect = f"changes nothing that fails: {before} → {after} failed"
    elif after > before:
        effect = f"makes it worse: {before} → {after} failed"
    elif after > 0 and main_after != main_before:
        effect = f"moves the failures from {words[main_before]} to {words[main_after]}: {before} → {after} failed"
    else:
        effect = f"{before} → {after} failed"
    return f"With {what}: {effect}."
