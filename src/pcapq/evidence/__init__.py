"""Evidence beyond the capture: the proxy's logs joined to the connections (in the core), and the
upstream host's counters and listeners set against each finding (docs/evidence.md).

`read(logs, nstat, ss)` reads the files (raising `EvidenceError` with one clear sentence), and
`apply(analysis, diagnosis, evidence)` ties the log lines to connections, gives each finding its
`confirmed_by`, `contradicted_by` and `logged`, adds a finding for unix-socket failures, and sets
`diagnosis.evidence` (the JSON `evidence` section).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from pcapq.causes import unix_socket_overflow
from pcapq.causes.registry import CAUSES
from pcapq.evidence import timings
from pcapq.evidence.counters import CounterError, Counters, Listener, Movement, listener_for, movement, read_counters, read_ss
from pcapq.evidence.haproxy import FormatError, compile_haproxy_format, is_haproxy_format
from pcapq.evidence.haproxy_cfg import HaproxyCfg, HaproxyCfgError, read_haproxy_cfg
from pcapq.evidence.nginx_conf import NginxConf, NginxConfError, read_nginx_conf
from pcapq.evidence.logs import (
    STATUS, UNTIED_KINDS, LogError, LogFile, LogLine, ProxyLogNote, compile_log_format, read_log,
)

if TYPE_CHECKING:
    from pcapq.diagnose import Diagnosis, Finding
    from pcapq._core import Analysis, _JoinFile, _LogJoin

__all__ = ["Evidence", "EvidenceError", "Ties", "read", "apply", "tie_connections", "predicted"]

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


class EvidenceError(ValueError):
    """A log, counter or ss file pcapq cannot read: the message is one sentence."""


@dataclass
class Evidence:
    logs: list[LogFile] = field(default_factory=list)
    counters: list[Counters] = field(default_factory=list)
    listeners: list[Listener] = field(default_factory=list)
    ss_path: Optional[str] = None
    warnings: list[str] = field(default_factory=list)
    """Logs that could not be read: the run goes on without them."""
    nginx_conf: Optional[NginxConf] = None
    haproxy_cfg: Optional[HaproxyCfg] = None

    def __bool__(self) -> bool:
        return bool(self.logs or self.counters or self.listeners)


def _read_log(path: str, log_format: Optional[str], haproxy: Optional[HaproxyCfg] = None) -> LogFile:
    """The log read with `log_format` (an access log's, or HAProxy's log-format), else by the
    format its lines have (an error log beside it)."""
    haproxy_format = haproxy.custom_format() if haproxy else None
    if log_format and is_haproxy_format(log_format):
        haproxy_format, log_format = log_format, None
    servers = haproxy.servers if haproxy else None
    if log_format:
        try:
            return read_log(path, log_format)
        except LogError as given:
            try:
                return read_log(path, haproxy_format=haproxy_format, servers=servers)
            except LogError:
                raise given from None
    return read_log(path, haproxy_format=haproxy_format, servers=servers)


def read(logs: tuple[str, ...] = (), nstat: tuple[str, ...] = (), ss: Optional[str] = None,
         log_format: Optional[str] = None, nginx_conf: Optional[str] = None,
         haproxy_cfg: Optional[str] = None) -> Evidence:
    """Reads every file given. A log that cannot be read is a warning, not a failed run: the
    capture's report stands without it. An access log's format is `log_format` when given,
    else the one `nginx_conf` says it is written with, else found from its lines; HAProxy's is
    `log_format` when it is an HAProxy log-format, else the one `haproxy_cfg` says.

    Raises:
        EvidenceError: an nstat, ss, nginx or HAProxy configuration file is missing, unreadable
        or not of a format pcapq reads; more than two --nstat; a --log-format without a time or
        a status.
    """
    if len(nstat) > 2:
        raise EvidenceError(f"--nstat takes one file or two (before and after), not {len(nstat)}")
    if log_format:
        try:
            if is_haproxy_format(log_format):
                compile_haproxy_format(log_format)
            else:
                compile_log_format(log_format)
        except (LogError, FormatError) as e:
            raise EvidenceError(f"--log-format: {e}") from None
    ev = Evidence()
    if nginx_conf:
        try:
            ev.nginx_conf = read_nginx_conf(nginx_conf)
        except NginxConfError as e:
            raise EvidenceError(str(e)) from None
    if haproxy_cfg:
        try:
            ev.haproxy_cfg = read_haproxy_cfg(haproxy_cfg)
            if ev.haproxy_cfg.custom_format():
                compile_haproxy_format(ev.haproxy_cfg.custom_format() or "")
        except (HaproxyCfgError, FormatError) as e:
            raise EvidenceError(f"{haproxy_cfg}: {e}" if isinstance(e, FormatError) else str(e)) from None
    for path in logs:
        try:
            given = log_format or (ev.nginx_conf.format_for(path) if ev.nginx_conf else None)
            ev.logs.append(_read_log(path, given, ev.haproxy_cfg))
        except LogError as e:
            ev.warnings.append(f"{e}; the report goes on without it")
    try:
        ev.counters = [read_counters(p) for p in nstat]
        if ss:
            ev.listeners, ev.ss_path = read_ss(ss), ss
    except CounterError as e:
        raise EvidenceError(str(e)) from None
    if len(ev.counters) == 2 and ev.counters[0].format != ev.counters[1].format:
        raise EvidenceError(f"--nstat files differ in format ({ev.counters[0].format}, {ev.counters[1].format}): give two of one kind")
    return ev


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
    section: dict[str, Any] = {}
    tied_kind: dict[int, tuple[str, str, int, int]] = {}  # connection id -> (kind, file, line, status)
    if ev.logs:
        section["logs"] = _join(analysis, diagnosis, ev, tied_kind)
    if ev.counters:
        m = movement(ev.counters)
        for f in diagnosis.every_finding():
            _judge_counters(f, m)
        section["counters"] = {
            "files": [c.path for c in ev.counters],
            "format": ev.counters[0].format,
            "window": m.window,
            "moved": {k: v for k, v in sorted(m.deltas.items()) if v},
        }
    if ev.listeners:
        for f in diagnosis.every_finding():
            _judge_listener(f, ev.listeners, ev.ss_path or "ss")
        section["listeners"] = [
            {"local": x.local, "recv_q": x.recv_q, "send_q": x.send_q, "unix": x.unix} for x in ev.listeners
        ]
    diagnosis.evidence = section
    return {x["path"]: x["warning"] for x in section.get("logs", {}).get("files", []) if x.get("warning")}


@dataclass
class Ties:
    """The logs' lines tied to the capture's connections (`tie_connections`)."""
    result: _LogJoin
    """`Analysis.join_log`'s answer."""
    items: list[tuple[int, LogLine]]
    """(file index, line) of every line offered to the join, in the order the ties refer to."""
    by_id: dict[int, ProxyLogNote]
    """Connection id -> its `proxy_log` note (the JSON field of docs/json.md)."""
    tied_lines: set[tuple[int, int]]
    """(file index, line number) of each tied line."""


def tie_connections(analysis: Analysis, logs: list[LogFile]) -> Ties:
    """Ties the lines of `logs` to the connections of `analysis` (in the core) and notes each
    tied connection's `proxy_log` in its JSON record."""
    from pcapq._core import VOCABULARY

    joinable = set(VOCABULARY["log_kinds"])
    items = [(fi, line) for fi, log in enumerate(logs) for line in log.lines if line.kind in joinable]
    result = analysis.join_log(
        [line.time for _, line in items],
        [fi for fi, _ in items],
        [line.upstream for _, line in items],
        [line.local_port for _, line in items],
        [(line.timings.get("connect"), line.timings.get("header")) for _, line in items],
        [line.kind for _, line in items],
        [log.resolution for log in logs],
        [log.zone for log in logs],
    )
    tied_lines: set[tuple[int, int]] = set()
    by_id: dict[int, ProxyLogNote] = {}
    for position, conn_id, _index, shape, (connect, first_byte), (connect_agrees, header_agrees) in result["ties"]:
        fi, line = items[position]
        tied_lines.add((fi, line.line))
        note: ProxyLogNote = {"file": logs[fi].path, "line": line.line, "status": line.status or STATUS.get(line.kind),
                "kind": line.kind, "text": line.text, "exact": line.local_port is not None}
        if line.timings:
            note["timings"] = line.timings
        if connect is not None or first_byte is not None:
            note["capture"] = {"connect": connect, "first_byte": first_byte}
        agreement = {measure: a for measure, a in (("connect", connect_agrees), ("header", header_agrees)) if a is not None}
        if agreement:
            note["timings_agree"] = agreement
        # An error-log line says more than an access-log line about the same connection; the
        # access line's timings are kept with it.
        before = by_id.get(conn_id)
        if before is None or logs[fi].format == "error":
            if before is not None and "timings" in before and "timings" not in note:
                _copy_timed(before, note)
            by_id[conn_id] = note
        elif "timings" in note and "timings" not in before:
            _copy_timed(note, before)
    analysis.note_connections({i: json.dumps({"proxy_log": n}) for i, n in by_id.items()})
    return Ties(result, items, by_id, tied_lines)


def _copy_timed(source: ProxyLogNote, to: ProxyLogNote) -> None:
    """A note's fields about the proxy's timings (kept together when two lines tie one
    connection), from `source` onto `to`."""
    if "timings" in source:
        to["timings"] = source["timings"]
    if "capture" in source:
        to["capture"] = source["capture"]
    if "timings_agree" in source:
        to["timings_agree"] = source["timings_agree"]


def _join(analysis: Analysis, diagnosis: Diagnosis, ev: Evidence,
          tied_kind: dict[int, tuple[str, str, int, int]]) -> dict[str, Any]:
    ties = tie_connections(analysis, ev.logs)
    result, by_id, tied_lines = ties.result, ties.by_id, ties.tied_lines
    from pcapq._core import VOCABULARY

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
    files: list[dict[str, Any]] = []
    for fi, log in enumerate(ev.logs):
        kinds_all = Counter(line.kind for line in log.lines)
        upstream_lines = [line for line in log.lines if line.kind != "answered"]
        tied_here = {ln for f2, ln in tied_lines if f2 == fi}
        untied = [line for line in upstream_lines if line.line not in tied_here and line.kind in joinable]
        clock = result["files"][fi]  # one per log: join_log gets a zone for each
        elsewhere = _elsewhere(log, result["capture"]) if not tied_here else None
        files.append({
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
        })
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
    from pcapq.causes.proxy_log import LINES

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
