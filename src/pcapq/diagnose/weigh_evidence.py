"""The findings weighed against the evidence beyond the capture (pcapq.evidence): the logs'
lines tied to the connections, the counters that moved, the listeners `ss` saw. Each finding
gets its `confirmed_by`, `contradicted_by` and `logged`; the logs' unix-socket lines add a
finding; `Diagnosis.evidence` gets the JSON `evidence` section (docs/json.md)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Optional, cast

from pcapq._core import VOCABULARY
from pcapq.causes import unix_socket_overflow
from pcapq.causes.proxy_log import LINES
from pcapq.causes.registry import CAUSES
from pcapq.evidence import Evidence, tie_connections, timings
from pcapq.evidence.counters import Listener, Movement, listener_for, movement
from pcapq.evidence.logs import UNTIED_KINDS, LogFile
from pcapq.evidence.section import CountersSection, EvidenceSection, LogFileSection, LogsSection

if TYPE_CHECKING:
    from pcapq._core import Analysis, _JoinFile
    from pcapq.diagnose.findings import Diagnosis
    from pcapq.finding import Finding

# Failed connections no line describes, shown at most.
SILENT_SHOWN = 10
# Kinds a finding's expected lines accept (the access log's 504 is either timeout).
ACCEPTS = {
    "timed_out": {"connect_timeout", "gateway_timeout"},
    "read_timeout": {"read_timeout", "send_timeout", "gateway_timeout"},
    "refused": {"refused", "bad_gateway"},
    "reset_by_server": {"reset", "bad_gateway", "premature_close", "upstream_closed"},
    "premature_close": {"premature_close", "reset", "bad_gateway", "upstream_closed"},
}



def _signed(n: int) -> str:
    return f"+{n:,}" if n >= 0 else f"{n:,}"


def _counter_notes(m: Movement, names: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(moved, unchanged) sentences for these counters."""
    moved, still = [], []
    for name in names:
        n = m.get(name)
        if n is None:
            continue
        if n > 0:
            moved.append(f"{m.source}: {name} {_signed(n)}" + ("" if m.window else " (since boot)"))
        elif n == 0:
            still.append(f"{m.source}: {name} unchanged" if m.window else f"{m.source}: {name} 0")
    return moved, still


def _judge_counters(f: Finding, m: Movement) -> None:
    signs = CAUSES[f.cause].counters
    if signs is None:
        return
    moved, still = _counter_notes(m, signs.rise)
    f.confirmed_by += moved
    if still and not moved:
        if signs.none_rose:
            f.contradicted_by.append("; ".join(still) + ": " + signs.none_rose)
        if signs.cleared is not None:
            signs.cleared(f, still)


def _judge_listener(f: Finding, listeners: list[Listener], ss_path: str) -> None:
    sign = CAUSES[f.cause].listener
    if sign is None:
        return
    listener = listener_for(listeners, f.server)
    if listener is None:
        if sign.listening:
            f.contradicted_by.append(f"ss: no listener on {f.server} in {ss_path}")
        else:
            f.confirmed_by.append(f"ss: no listener on {f.server}")
        return
    said = f"ss: {listener.local} Recv-Q {listener.recv_q}, Send-Q {listener.send_q} (backlog)"
    if not sign.listening:
        f.contradicted_by.append(f"{said}: something listens there")
    elif sign.weigh is not None:
        sign.weigh(f, listener, said)


def apply(analysis: Analysis, diagnosis: Diagnosis, ev: Evidence) -> dict[str, str]:
    """Ties the logs to the connections and sets every finding's confirmations and contradictions.
    Returns warnings: log path -> a sentence, for the logs whose lines all lie far from the
    capture's time."""
    for f in diagnosis.every_finding():
        f.checked = True
    section: EvidenceSection = {}
    tied_kind: dict[int, tuple[str, str, int, int]] = {}  # connection id -> (kind, file, line, status)
    if ev.logs:
        section["logs"] = _join(analysis, diagnosis, ev, tied_kind)
    if ev.counters:
        m = movement(ev.counters)
        for f in diagnosis.every_finding():
            _judge_counters(f, m)
        section["counters"] = CountersSection({
            "files": [c.path for c in ev.counters],
            "format": ev.counters[0].format,
            "window": m.window,
            "moved": {k: v for k, v in sorted(m.deltas.items()) if v},
        })
    if ev.listeners:
        for f in diagnosis.every_finding():
            _judge_listener(f, ev.listeners, ev.ss_path or "ss")
        section["listeners"] = [
            {"local": x.local, "recv_q": x.recv_q, "send_q": x.send_q, "unix": x.unix} for x in ev.listeners
        ]
    diagnosis.evidence = section
    logs = section.get("logs")
    return {x["path"]: x["warning"] for x in (logs["files"] if logs is not None else []) if "warning" in x}


def _join(analysis: Analysis, diagnosis: Diagnosis, ev: Evidence,
          tied_kind: dict[int, tuple[str, str, int, int]]) -> LogsSection:
    ties = tie_connections(analysis, ev.logs)
    result, by_id, tied_lines = ties.result, ties.by_id, ties.tied_lines
    joinable = set(VOCABULARY["log_kinds"])
    for f in diagnosis.every_finding():
        # Over the tied connections (as many as lines), not the finding's.
        kinds = Counter(by_id[i]["kind"] for i in sorted(by_id.keys() & f.connections))
        f.logged = dict(kinds.most_common())
        expected = _expected_keys(f)
        fits = sum(n for k, n in kinds.items() if any(k in ACCEPTS.get(e, ()) for e in expected))
        others = sum(n for k, n in kinds.items() if k != "answered") - fits
        if fits:
            f.confirmed_by.append(f"proxy log: {fits} line{'s' if fits != 1 else ''} of the kind predicted tied to its connections")
        confirming, contradicting = timings.sentences(timings.compare((i, by_id[i]) for i in sorted(by_id.keys() & f.connections)))
        f.confirmed_by += confirming
        f.contradicted_by += contradicting
        if others:
            odd = ", ".join(f"{n} {k}" for k, n in kinds.items()
                            if k != "answered" and not any(k in ACCEPTS.get(e, ()) for e in expected))
            f.contradicted_by.append(f"proxy log: {odd} tied to its connections, not what this cause makes a proxy log")
    files: list[LogFileSection] = []
    for fi, log in enumerate(ev.logs):
        kinds_all = Counter(line.kind for line in log.lines)
        upstream_lines = [line for line in log.lines if line.kind != "answered"]
        tied_here = {ln for f2, ln in tied_lines if f2 == fi}
        untied = [line for line in upstream_lines if line.line not in tied_here and line.kind in joinable]
        clock = result["files"][fi]  # one per log: join_log gets a zone for each
        elsewhere = _elsewhere(log, result["capture"]) if not tied_here else None
        # The keys in this order, `warning` among them when there is one (docs/json.md).
        files.append(cast(LogFileSection, {
            "path": log.path,
            "format": log.format,
            "lines": log.total,
            "unreadable": log.unreadable,
            "unreadable_examples": [{"line": n, "text": t} for n, t in log.unreadable_examples],
            "upstream_lines": len(upstream_lines),
            "matched": len({line.line for line in upstream_lines if line.line in tied_here}),
            "exact": len({line.line for line in log.lines if line.line in tied_here and line.local_port is not None}),
            "answered_matched": len({line.line for line in log.lines if line.kind == "answered" and line.line in tied_here}),
            "by_kind": dict(kinds_all.most_common()),
            "untied": [{"line": line.line, "kind": line.kind, "upstream": line.upstream} for line in untied[:SILENT_SHOWN]],
            "untied_count": len(untied),
            "clock_offset": _offset(clock),
            **({"warning": elsewhere} if elsewhere else {}),
            "clock": clock,
        }))
        unix = [line for line in log.lines if line.kind.startswith("unix_")]
        if unix:
            diagnosis.findings.append(unix_socket_overflow.finding(log, unix, (clock.get("zone") or log.zone or 0.0), ev.listeners))
    upstream_total = sum(x["upstream_lines"] for x in files)
    matched_total = sum(x["matched"] for x in files)
    by_kind: Counter[str] = Counter()
    for x in files:
        by_kind.update({k: v for k, v in x["by_kind"].items() if k != "answered"})
    silent = result["silent"]
    return {
        "lines": upstream_total,
        "matched": matched_total,
        "by_kind": dict(by_kind.most_common()),
        "files": files,
        "connections_tied": len(by_id),
        "timings": {measure: c.to_json() for measure, c in timings.compare(sorted(by_id.items())).items()},
        "no_line": {shape: {"count": s["count"], "ids": s["ids"][:SILENT_SHOWN]} for shape, s in silent.items()},
        "not_tied_by_nature": {k: sum(x["by_kind"].get(k, 0) for x in files) for k in UNTIED_KINDS
                               if any(x["by_kind"].get(k) for x in files)},
    }


def _expected_keys(f: Finding) -> set[str]:
    # A predicted line may carry words around nginx's own ("probably ...", the timeout it follows).
    return {key for key, text in LINES.items() for said in f.proxy_log if text in said}


def predicted(f: Finding, kind: str) -> bool:
    """Whether a line of `kind` is one finding `f` says the proxy logged (its `proxy_log`), as the
    findings' `confirmed_by` counts them."""
    return any(kind in ACCEPTS.get(key, ()) for key in _expected_keys(f))


# How far a log's clock may be from the capture's: any time zone when the log does not say
# its own, else a few minutes (a proxy's timeout after the capture's end).
ANY_ZONE = 14 * 3600 + 60
KNOWN_ZONE = 300


def _elsewhere(log: LogFile, capture: tuple[float, float]) -> Optional[str]:
    """A sentence when every line of `log` lies too far from the capture's span to be about its
    connections (a log of another day, a capture of another host), else None."""
    if not log.lines:
        return None
    zone = log.zone or 0.0
    margin = ANY_ZONE if log.zone is None else KNOWN_ZONE
    first, last = min(x.time for x in log.lines) - zone, max(x.time for x in log.lines) - zone
    if first <= capture[1] + margin and last >= capture[0] - margin:
        return None

    def when(t: float) -> str:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")

    clock = "UTC" if log.zone is not None else "the log's local time read as UTC"
    return (f"{log.path}: its lines run from {when(first)} to {when(last)} ({clock}), the capture from "
            f"{when(capture[0])} to {when(capture[1])} UTC: none can be about the capture's connections")


def _offset(clock: _JoinFile) -> Optional[float]:
    if clock["ties"] == 0:
        return None
    skew = clock["skew"]
    return round(clock["zone"] + (skew if skew is not None else 0.0), 1)
