"""Evidence beyond the capture: the proxy's logs, the upstream host's counters and listeners
(docs/evidence.md), read; and the logs' lines tied to the capture's connections (in the core).

`read(logs, nstat, ss)` reads the files (raising `EvidenceError` with one clear sentence);
`tie_connections(analysis, logs)` ties the lines. The findings are weighed against them by
`pcapq.diagnose.weigh_evidence`, above the causes: nothing here imports a cause.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from pcapq.evidence.counters import CounterError, Counters, Listener, read_counters, read_ss
from pcapq.evidence.haproxy import FormatError, Formats, compile_haproxy_format, is_haproxy_format
from pcapq.evidence.haproxy_cfg import HaproxyCfg, HaproxyCfgError, read_haproxy_cfg
from pcapq.evidence.nginx_conf import NginxConf, NginxConfError, read_nginx_conf
from pcapq.evidence.pairing import pair
from pcapq.evidence.logs import (
    STATUS, LogError, LogFile, LogLine, ProxyLogNote, compile_log_format, read_log,
)

if TYPE_CHECKING:
    from pcapq._core import Analysis, _LogJoin

__all__ = ["Evidence", "EvidenceError", "Ties", "read", "tie_connections"]


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
    format its lines have (an error log beside it); HAProxy's lines each in the format of the
    frontend that wrote it, where haproxy.cfg says."""
    haproxy_format: Optional[Formats] = Formats.of(haproxy.formats, haproxy.frontends) if haproxy else None
    if log_format and is_haproxy_format(log_format):
        haproxy_format, log_format = Formats.of([log_format]), None
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
            for custom in ev.haproxy_cfg.custom_formats():
                compile_haproxy_format(custom)
        except (HaproxyCfgError, FormatError) as e:
            raise EvidenceError(f"{haproxy_cfg}: {e}" if isinstance(e, FormatError) else str(e)) from None
    for path in logs:
        try:
            given = log_format or (ev.nginx_conf.format_for(path) if ev.nginx_conf else None)
            log = _read_log(path, given, ev.haproxy_cfg)
            ev.logs.append(log)
            if log.guessed is not None:
                ev.warnings.append(
                    f"{path}: no log-format given matches its lines; read as HAProxy's '{log.guessed.log_format}', "
                    f"guessed from their shapes" + (f" ({log.guessed.said})" if log.guessed.said else "")
                    + "; give --log-format or --haproxy-cfg if that is not its format")
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
    keys = [(fi, i) for fi, log in enumerate(logs) for i, line in enumerate(log.lines) if line.kind in joinable]
    index_of = {key: n for n, key in enumerate(keys)}
    items = [(fi, logs[fi].lines[i]) for fi, i in keys]
    through = pair(logs, joinable)
    result = analysis.join_log(
        [line.time for _, line in items],
        [fi for fi, _ in items],
        [line.upstream for _, line in items],
        [line.local_port for _, line in items],
        [(line.timings.get("connect"), line.timings.get("header")) for _, line in items],
        [line.kind for _, line in items],
        [log.resolution for log in logs],
        [log.zone for log in logs],
        [line.start for _, line in items],
        [index_of.get(through[key]) if key in through else None for key in keys],
    )
    tied_lines: set[tuple[int, int]] = set()
    by_id: dict[int, ProxyLogNote] = {}
    for position, conn_id, _index, shape, (connect, first_byte), (connect_agrees, header_agrees), ambiguous, via in result["ties"]:
        fi, line = items[position]
        tied_lines.add((fi, line.line))
        note: ProxyLogNote = {"file": logs[fi].path, "line": line.line, "status": line.status or STATUS.get(line.kind),
                "kind": line.kind, "text": line.text, "exact": line.local_port is not None}
        if ambiguous:
            note["ambiguous_with"] = ambiguous
        if via is not None:
            access_file, access_line = items[via]
            note["through"] = {"file": logs[access_file].path, "line": access_line.line}
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


