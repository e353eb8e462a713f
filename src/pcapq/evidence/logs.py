"""nginx's error.log and access.log, and HAProxy's log (`evidence.haproxy`), read into what the
join needs (docs/evidence.md).

Each line becomes `LogLine`s: when (epoch seconds on the log's clock, read as UTC), about which
upstream, and what happened (`kind`, a slug of the core's `VOCABULARY["log_kinds"]`, or one
that no connection of the capture can show: `no_live_upstreams`, `unix_*`, `other`). Lines
that are neither are counted as unreadable, with the first few kept to show.
"""

from __future__ import annotations

import calendar
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional, TypedDict

from pcapq.evidence.envoy import compile_envoy_format, envoy_line, is_envoy_format
from pcapq.evidence.haproxy import Formats, Guess, Session, guess_format, haproxy_line, is_plain
from pcapq.evidence.log_line import VARIABLE
from pcapq.evidence.log_line import LogError as LogError
from pcapq.evidence.log_line import LogLine as LogLine

# Kinds no TCP connection of the capture can show: counted, never tied.
UNTIED_KINDS = ("no_live_upstreams", "unix_eagain", "unix_refused", "unix_missing", "unix_other", "other")
UNREADABLE_KEPT = 5
TEXT_KEPT = 300

# What nginx returns for each kind (ngx_http_upstream_next(): timeouts 504, the rest 502).
STATUS = {
    "connect_timeout": 504, "read_timeout": 504, "send_timeout": 504, "gateway_timeout": 504,
    "refused": 502, "reset": 502, "premature_close": 502, "bad_gateway": 502, "no_live_upstreams": 502,
    "unix_eagain": 502, "unix_refused": 502, "unix_missing": 502, "unix_other": 502,
}


class _TimesSeen(TypedDict):
    connect: Optional[float]
    first_byte: Optional[float]


class _Through(TypedDict):
    file: str
    line: int


class _NoteSaid(TypedDict):
    file: str
    line: int
    status: Optional[int]
    kind: str
    text: str
    exact: bool
    """Tied by the proxy's source port."""


class ProxyLogNote(_NoteSaid, total=False):
    """A connection's `proxy_log` note: the log line tied to it (docs/evidence.md)."""

    timings: dict[str, float]
    """The line's own times (`LogLine.timings`)."""
    capture: _TimesSeen
    """Seconds from the first SYN to the handshake's ACK and to the server's first byte, as the capture shows."""
    timings_agree: dict[str, bool]
    """Per measure of `timings` ("connect", "header"), whether the capture agrees (the core's `times_agree`)."""
    ambiguous_with: list[int]
    """Ids of other connections the line fits as well: the log cannot tell them from this one."""
    through: _Through
    """The access-log line of the same request the error line was tied through (`pairing`)."""


@dataclass
class LogFile:
    path: str
    format: str
    """`error`, `combined`, `combined+upstream`, `json`, `key_value` (`name=value` pairs after a
    bare time and status), `log_format` (the one given, nginx's or Envoy's), `haproxy` (httplog or
    tcplog), `envoy` (Envoy's default format, or Istio's), `envoy_json` (Envoy's JSON lines)."""
    lines: list[LogLine] = field(default_factory=list)
    total: int = 0
    """Non-empty lines read."""
    unreadable: int = 0
    unreadable_examples: list[tuple[int, str]] = field(default_factory=list)
    zone: Optional[float] = None
    """Log clock minus UTC, seconds, when the file says it (access logs' `+0100`)."""
    resolution: float = 1.0
    guessed: Optional[Guess] = None
    """The HAProxy log-format its lines were read with, guessed from their shapes (none given
    matched them)."""


# ---- error.log ----

ERROR_LINE = re.compile(r"^(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d) \[(\w+)\] \d+#\d+: (?:\*(\d+) )?(.*)$")
REQUEST_FIELD = re.compile(r', request: "((?:[^"\\]|\\.)*)"')
UPSTREAM_FIELD = re.compile(r'upstream: "(?:[a-z]+://)?([^"]*)"')
ENDPOINT = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){3}:\d+|\[[0-9a-fA-F:.]+\]:\d+)")
UNIX = re.compile(r"unix:([^\s\"]+?):?(?:\s|\"|$)")


def error_kind(message: str) -> Optional[str]:
    """The kind of an error-log message about an upstream, or None for one about something else."""
    m = message
    if "connect() to unix:" in m:
        if "(11: " in m:
            return "unix_eagain"
        if "(111: " in m:
            return "unix_refused"
        if "(2: " in m:
            return "unix_missing"
        return "unix_other"
    if "no live upstreams" in m:
        return "no_live_upstreams"
    if "upstream timed out" in m or "(110: Connection timed out)" in m:
        if "while connecting to upstream" in m:
            return "connect_timeout"
        if "while sending request" in m:
            return "send_timeout"
        return "read_timeout"
    if "(111: Connection refused)" in m:
        return "refused"
    if "(104: Connection reset by peer)" in m:
        return "reset"
    if "upstream prematurely closed connection" in m:
        return "premature_close"
    if "upstream" in m and ("failed (" in m or "upstream sent" in m):
        return "other"
    return None


def _error_line(number: int, text: str) -> Optional[LogLine] | str:
    """A LogLine, None for a readable line not about an upstream, or "unreadable"."""
    m = ERROR_LINE.match(text)
    if not m:
        return "unreadable"
    y, mo, d, hh, mm, ss = (int(g) for g in m.groups()[:6])
    try:
        when = calendar.timegm((y, mo, d, hh, mm, ss, 0, 0, 0))
        datetime(y, mo, d, hh, mm, ss)
    except ValueError:
        return "unreadable"
    message = m.group(9)
    kind = error_kind(message)
    if kind is None:
        return None
    upstream = socket = None
    u = UPSTREAM_FIELD.search(message)
    target = u.group(1) if u else ""
    if kind.startswith("unix_") or target.startswith("unix:"):
        s = UNIX.search(message)
        socket = s.group(1) if s else None
    else:
        e = ENDPOINT.match(target)
        upstream = e.group(1) if e else None
    request = REQUEST_FIELD.search(message)
    return LogLine(number, float(when), kind, upstream, STATUS.get(kind), socket,
                   request=request.group(1) if request else None, serial=int(m.group(8)) if m.group(8) else None)


# ---- access.log ----

MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
# `$time_local`: 21/Nov/2026:08:29:34 +0000.
TIME_LOCAL = r"\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}"
TIME_LOCAL_PARTS = re.compile(r"(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)")
COMBINED = re.compile(
    rf'^(\S+) \S+ (\S+) \[({TIME_LOCAL})\] "((?:[^"\\]|\\.)*)" (\d{{3}}) (\S+)'
    r'(?: "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)")?(.*)$'
)
KEY_VALUE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
# Names custom formats give the upstream variables (`upstream_addr=$upstream_addr`, `ua=...`).
KEYS = {
    "addr": ("upstream_addr", "upstream", "ua", "upstream_address", "upaddr", "backend"),
    "status": ("upstream_status", "us", "ustatus", "upstream_code"),
    "connect": ("upstream_connect_time", "uct", "connect_time"),
    "header": ("upstream_header_time", "uht", "header_time"),
    "response": ("upstream_response_time", "urt", "upstream_time", "response_time"),
    "request": ("request_time", "rt"),
}


def _field(fields: dict[str, str], what: str) -> Optional[str]:
    for k in KEYS[what]:
        if k in fields:
            return fields[k].strip('"')
    return None


def _split(value: Optional[str]) -> list[str]:
    """The attempts of an upstream variable: "10.0.0.2:9000, 10.0.0.3:9000 : 10.0.0.4:9000"
    (a comma between servers of one group, a colon between groups)."""
    return [p.strip() for p in re.split(r"[,:] (?=\S)", value)] if value else []


def _request_of(fields: dict[str, str]) -> tuple[Optional[str], Optional[int]]:
    """(request line, nginx's connection number) of an access line's fields."""
    request = fields.get("request")
    serial = fields.get("connection", "")
    return (request.strip('"') if request else None), (int(serial) if serial.isdigit() else None)


def _seconds(value: Optional[str]) -> Optional[float]:
    try:
        return float(value) if value not in (None, "", "-") else None
    except ValueError:
        return None


def _attempts(fields: dict[str, str]) -> list[tuple[Optional[str], Optional[str], Optional[str], dict[str, float]]]:
    """(upstream, status, connect time, timings) of each upstream the request tried."""
    addrs, statuses = _split(_field(fields, "addr")), _split(_field(fields, "status"))
    timed = {what: _split(_field(fields, what)) for what in ("connect", "header", "response")}
    n = max(len(addrs), len(statuses), 1)

    def at(values: list[str], i: int) -> Optional[str]:
        return values[i] if i < len(values) else None

    out = []
    for i in range(n):
        timings = {what: t for what, values in timed.items() if (t := _seconds(at(values, i))) is not None}
        out.append((at(addrs, i), at(statuses, i), at(timed["connect"], i), timings))
    return out


def access_kind(status: Optional[int], connect: Optional[str], knows_connect: bool) -> Optional[str]:
    if status is None:
        return None
    if status == 504:
        if not knows_connect:
            return "gateway_timeout"
        return "connect_timeout" if connect in (None, "-", "") else "read_timeout"
    if status == 502:
        return "bad_gateway"
    if status == 499:
        return None  # the proxy's client left first: nothing about the upstream
    return "answered"


def _upstream_endpoint(addr: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """(endpoint, unix socket) of an `$upstream_addr` entry."""
    if not addr or addr == "-":
        return None, None
    if addr.startswith("unix:"):
        return None, addr[5:]
    e = ENDPOINT.match(addr)
    return (e.group(1) if e else None), None


def _access_items(number: int, when: float, request_status: int, fields: dict[str, str], fmt_has_upstream: bool,
                  resolution: float = 1.0) -> list[LogLine]:
    ustatus = _field(fields, "status")
    knows_connect = any(k in fields for k in KEYS["connect"])
    request, serial = _request_of(fields)
    if not fmt_has_upstream:
        kind = access_kind(request_status, None, False)
        return [LogLine(number, when, kind, None, request_status, request=request, serial=serial)] if kind else []
    items = []
    attempts = _attempts(fields)
    took = _seconds(_field(fields, "request"))
    # The request's only attempt began as the request did (nginx connects once it has the headers).
    start = when - took if took is not None and len(attempts) == 1 and resolution < 1 else None
    for i, (a, s, c, timings) in enumerate(attempts):
        # Without $upstream_status, the request's status is its last attempt's.
        last = i == len(attempts) - 1 and ustatus is None
        status = int(s) if s and s.isdigit() else (request_status if (a in (None, "-") or last) and s is None else None)
        endpoint, socket = _upstream_endpoint(a)
        if a in (None, "-"):
            continue  # nginx did not try an upstream (a static file, a cache hit, no live upstreams)
        kind = access_kind(status, c, knows_connect)
        if kind is None:
            continue
        if socket is not None:
            kind = "unix_other" if kind != "answered" else "answered"
            if kind == "answered":
                continue
        items.append(LogLine(number, when, kind, endpoint, status, socket, timings=timings, start=start,
                             request=request, serial=serial))
    return items


def _time_local(value: str) -> Optional[tuple[float, float]]:
    """(epoch seconds on the log's clock read as UTC, zone in seconds) of a `$time_local`."""
    m = TIME_LOCAL_PARTS.fullmatch(value)
    if not m or m.group(2) not in MONTHS:
        return None
    day, mon, year, hh, mm, ss = m.group(1), MONTHS[m.group(2)], m.group(3), m.group(4), m.group(5), m.group(6)
    try:
        when = calendar.timegm((int(year), mon, int(day), int(hh), int(mm), int(ss), 0, 0, 0))
        datetime(int(year), mon, int(day), int(hh), int(mm), int(ss))
    except ValueError:
        return None
    return float(when), float((1 if m.group(7) == "+" else -1) * (int(m.group(8)) * 3600 + int(m.group(9)) * 60))


def _combined(number: int, text: str) -> Optional[tuple[float, float, int, dict[str, str], bool]]:
    m = COMBINED.match(text)
    if not m:
        return None
    local = _time_local(m.group(3))
    if local is None:
        return None
    when, zone = local
    rest = m.group(9) or ""
    fields = {k: v for k, v in KEY_VALUE.findall(rest)}
    if not fields:
        # Positional: `$upstream_addr $upstream_status ...` after the combined fields.
        tokens = rest.split()
        if tokens and (ENDPOINT.match(tokens[0]) or tokens[0].startswith("unix:") or tokens[0] == "-"):
            fields["upstream_addr"] = tokens[0]
            if len(tokens) > 1:
                fields["upstream_status"] = tokens[1]
    has_upstream = any(k in fields for k in KEYS["addr"])
    fields.setdefault("request", m.group(4))
    return when, zone, int(m.group(5)), fields, has_upstream


def _json_access(text: str) -> Optional[tuple[float, Optional[float], float, int, dict[str, str]]]:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    fields = {str(k): str(v) for k, v in doc.items()}
    return _timed(fields, fields.get("status", ""))


def _timed(fields: dict[str, str], status: Optional[str]) -> Optional[tuple[float, Optional[float], float, int, dict[str, str]]]:
    """(time, zone, resolution, status, fields) of an access line whose fields hold its time
    (`msec`, `time_iso8601`, `time` or `time_local`) and whose status is `status`."""
    if status is None or not status.isdigit():
        return None
    when = next((w for w in map(_when, (fields.get(k, "") for k in ("msec", "time_iso8601", "time"))) if w), None)
    if when is None and "time_local" in fields:
        local = _time_local(fields["time_local"])
        when = (local[0], local[1], 1.0) if local else None
    return (when[0], when[1], when[2], int(status), fields) if when else None


# ---- key=value access lines: `$msec $status rt=$request_time uct="$upstream_connect_time" ...` ----

EPOCH = re.compile(r"^(\d{9,10})(?:\.(\d{1,6}))?$")
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
ISO_FRACTION = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.(\d{1,6})")
STATUS_TOKEN = re.compile(r"^[1-5]\d\d$")
BRACKETED_TIME_LOCAL = re.compile(rf"\[({TIME_LOCAL})\]")


def _when(token: str) -> Optional[tuple[float, Optional[float], float]]:
    """(epoch seconds, zone, resolution) of a time as nginx writes `$msec` or `$time_iso8601`
    (quoted or bracketed)."""
    token = token.strip('"[]')
    e = EPOCH.match(token)
    if e:
        return float(token), 0.0, (10.0 ** -len(e.group(2))) if e.group(2) else 1.0
    if ISO_TIME.match(token):
        try:
            t = datetime.fromisoformat(token)
        except ValueError:
            return None
        off = t.utcoffset()
        # `$time_iso8601` has whole seconds; configurations add `$msec`'s digits after a point.
        digits = ISO_FRACTION.match(token)
        resolution = 10.0 ** -len(digits.group(1)) if digits else 1.0
        return (calendar.timegm(t.replace(tzinfo=None).timetuple()) + t.microsecond / 1e6,
                (off.total_seconds() if off is not None else None), resolution)
    return None


def _key_value_access(text: str) -> Optional[tuple[float, Optional[float], float, int, dict[str, str]]]:
    """A custom access line of a bare time (`$msec`, `$time_iso8601`, `[$time_local]`), a bare
    status and `name=value` pairs with at least one upstream variable (`KEYS`): (time, zone,
    resolution, status, fields)."""
    fields = {k: v.strip('"') for k, v in KEY_VALUE.findall(text)}
    if not any(k in fields for names in KEYS.values() for k in names):
        return None
    # The bare tokens: the time and status written without a name.
    bare = KEY_VALUE.sub(" ", text)
    local = BRACKETED_TIME_LOCAL.search(bare)
    if local:
        fields.setdefault("time_local", local.group(1))
        bare = bare.replace(local.group(0), " ")
    tokens = bare.split()
    if not any(k in fields for k in ("msec", "time_iso8601", "time", "time_local")):
        epoch_or_iso = next((t for t in tokens if _when(t)), None)
        if epoch_or_iso is not None:
            fields["msec"] = epoch_or_iso.strip('"[]')
    return _timed(fields, fields.get("status") or next((t for t in tokens if STATUS_TOKEN.match(t)), None))


# ---- a log_format given by the user (`--log-format`) ----



def compile_log_format(log_format: str) -> re.Pattern[str]:
    """A regular expression matching the lines nginx writes with `log_format` (its string, the
    parts joined): each variable a named group, the text between them literal. An Envoy format
    string (`%COMMAND%` operators, no `$variable`) is compiled by `envoy.compile_envoy_format`.

    Raises:
        LogError: the format has no time variable ($msec, $time_local, $time_iso8601) or no $status
        (Envoy's: no %START_TIME%, or neither %RESPONSE_FLAGS% nor %UPSTREAM_HOST%).
    """

    if is_envoy_format(log_format):
        return compile_envoy_format(log_format)
    pattern, names, at = "^", set(), 0
    for m in VARIABLE.finditer(log_format):
        pattern += re.escape(log_format[at:m.start()])
        name = m.group(1) or m.group(2)
        pattern += f"(?P<{name}>.*?)" if name not in names else ".*?"
        names.add(name)
        at = m.end()
    pattern += re.escape(log_format[at:]) + "$"
    if not names & {"msec", "time_local", "time_iso8601"}:
        raise LogError("the log format has no time ($msec, $time_local or $time_iso8601): its lines cannot be placed in the capture")
    if "status" not in names:
        raise LogError("the log format has no $status")
    return re.compile(pattern)


def _formatted_access(pattern: re.Pattern[str], text: str) -> Optional[tuple[float, Optional[float], float, int, dict[str, str]]]:
    m = pattern.match(text)
    if not m:
        return None
    fields = {k: v for k, v in m.groupdict().items() if v is not None}
    return _timed(fields, fields.get("status", ""))


# ---- HAProxy ----


def _haproxy_item(number: int, session: Session) -> LogLine:
    kind = session.kind or "other"
    # HAProxy's own status (503 for a failed connect, 504 for a server timeout; none in TCP mode).
    return LogLine(number, session.time, kind, session.upstream, session.status,
                   local_port=session.local_port, timings=session.timings, start=session.start)


# ---- either ----


def _kinds(texts: list[str], pattern: Optional[re.Pattern[str]], haproxy: Optional[Formats],
           envoy_format: bool) -> dict[str, int]:
    """How many of `texts` read as each format."""
    kinds = {"error": 0, "combined": 0, "json": 0, "key_value": 0, "log_format": 0, "haproxy": 0, "envoy": 0, "envoy_json": 0}
    for text in texts:
        if pattern is None and (haproxy_line(text, haproxy) or is_plain(text)):
            kinds["haproxy"] += 1
        elif pattern is not None:
            kinds["log_format"] += bool(envoy_line(0, text, pattern) if envoy_format else _formatted_access(pattern, text))
        elif ERROR_LINE.match(text):
            kinds["error"] += 1
        elif COMBINED.match(text):
            kinds["combined"] += 1
        elif text.startswith("{") and envoy_line(0, text):
            kinds["envoy_json"] += 1
        elif text.startswith("{") and _json_access(text):
            kinds["json"] += 1
        elif envoy_line(0, text):
            kinds["envoy"] += 1
        elif _key_value_access(text):
            kinds["key_value"] += 1
    return kinds


def read_log(path: str, log_format: Optional[str] = None, haproxy_format: Optional[str | Formats] = None,
             servers: Optional[dict[tuple[str, str], str]] = None) -> LogFile:
    """Reads an nginx error or access log, an Envoy or an HAProxy log; the format is found from
    its lines, or is the access log's `log_format` string when given. HAProxy's lines are also
    read in `haproxy_format` (a `log-format`, or the formats of haproxy.cfg's frontends, each
    line in its own frontend's), their servers' addresses taken from `servers` ((backend,
    server) -> address, haproxy.cfg's). HAProxy lines no format given matches are read in the
    log-format their shapes show (`haproxy.guess_format`), said in `LogFile.guessed`.

    Raises:
        LogError: the file cannot be read, or no line of it is a line of a log pcapq reads.
    """

    pattern = compile_log_format(log_format) if log_format else None
    haproxy_pattern = Formats.of([haproxy_format]) if isinstance(haproxy_format, str) else haproxy_format
    envoy_format = log_format is not None and is_envoy_format(log_format)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise LogError(f"{path}: cannot read the log: {e.strerror or e}") from None
    head = raw[:4096]
    # A stray control byte is a garbled line; a tenth of them is a binary file.
    if head and sum(b < 32 and b not in (9, 10, 13) for b in head) > len(head) // 10:
        raise LogError(f"{path}: not a text file, so not a proxy's log")
    texts = raw.decode("utf-8", errors="replace").splitlines()
    kinds = _kinds(texts[:200], pattern, haproxy_pattern, envoy_format)
    guessed = None
    if pattern is None and not (haproxy_pattern and haproxy_pattern.patterns) and not any(
            kinds[k] for k in kinds if k != "haproxy"):
        # No format given matches, or only httplog's or tcplog's loosely (without the fields a
        # custom format adds, such as the source port).
        guessed = guess_format(texts)
        if guessed is not None and (kinds["haproxy"] == 0 or "%bp" in guessed.log_format):
            haproxy_pattern = Formats.of([guessed.log_format])
            kinds = _kinds(texts[:200], pattern, haproxy_pattern, envoy_format)
        else:
            guessed = None
    fmt = max(kinds, key=lambda k: kinds[k])
    if kinds[fmt] == 0:
        first = next((t for t in texts if t.strip()), "")
        if pattern is not None:
            raise LogError(f"{path}: no line matches the log format given (first line: {first[:80]!r})")
        raise LogError(
            f"{path}: not an nginx, HAProxy or Envoy log pcapq recognises (first line: {first[:80]!r}); "
            "give its format with --log-format (nginx's log_format, HAProxy's log-format or Envoy's format string)"
        )
    log = LogFile(path, fmt, guessed=guessed)
    upstream_seen = False
    zones: list[float] = []
    for number, text in enumerate(texts, 1):
        if not text.strip():
            continue
        log.total += 1
        items: Optional[list[LogLine]] = None
        if fmt == "error":
            got = _error_line(number, text)
            items = None if got == "unreadable" else ([got] if isinstance(got, LogLine) else [])
        elif fmt == "haproxy":
            session = haproxy_line(text, haproxy_pattern, servers)
            if session:
                log.resolution = session.resolution
                if session.zone is not None:
                    zones.append(session.zone)
                items = [_haproxy_item(number, session)] if session.kind else []
            elif is_plain(text):
                items = []
        elif fmt == "combined":
            parsed = _combined(number, text)
            if parsed:
                when, zone, status, fields, has_upstream = parsed
                zones.append(zone)
                upstream_seen |= has_upstream
                items = _access_items(number, when, status, fields, has_upstream)
        elif fmt in ("envoy", "envoy_json") or envoy_format:
            envoy_read = envoy_line(number, text, pattern if envoy_format else None)
            if envoy_read:
                items, envoy_zone, log.resolution = envoy_read
                zones.append(envoy_zone)
        else:
            parsed_json = (
                _json_access(text) if fmt == "json"
                else _key_value_access(text) if fmt == "key_value"
                else _formatted_access(pattern, text) if pattern is not None else None
            )
            if parsed_json:
                when, json_zone, resolution, status, fields = parsed_json
                if json_zone is not None:
                    zones.append(json_zone)
                log.resolution = resolution
                has_upstream = any(k in fields for k in KEYS["addr"])
                upstream_seen |= has_upstream
                items = _access_items(number, when, status, fields, has_upstream, resolution)
        if items is None:
            log.unreadable += 1
            if len(log.unreadable_examples) < UNREADABLE_KEPT:
                log.unreadable_examples.append((number, text[:120]))
            continue
        for item in items:
            item.text = text[:TEXT_KEPT]
        log.lines.extend(items)
    if fmt == "combined" and upstream_seen:
        log.format = "combined+upstream"
    if zones:
        log.zone = max(set(zones), key=zones.count)
    return log
