"""Envoy's access log: when the request or connection ended, on which upstream endpoint, from
which of the proxy's ports, and how, from its response flags and response code details
(Envoy's documentation, "Access logging": "Format Rules", "Default Format String", "Format
Dictionaries", "Command Operators", %RESPONSE_FLAGS%).

Read: Envoy's default format string, the one Istio's proxies use by default (Envoy's with
%RESPONSE_CODE_DETAILS%, %UPSTREAM_LOCAL_ADDRESS% and others added), one JSON object a line
(`json_format`, `typed_json_format`), and a format string given with `--log-format`.
"""

from __future__ import annotations

import calendar
import json
import re
from datetime import datetime
from typing import Optional

from pcapq.endpoint import parse
from pcapq.evidence.log_line import VARIABLE, LogError, LogLine

# Envoy's default format string ("Default Format String"), its newline left out.
DEFAULT_FORMAT = (
    '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" '
    '%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% '
    '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" '
    '"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"'
)
# Istio's, 1.9 on (pilot's EnvoyTextLogFormat; later ones write %UPSTREAM_CLUSTER_RAW%, the same
# field).
ISTIO_FORMAT = (
    '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" '
    '%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% '
    '"%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% '
    '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" '
    '"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER% '
    '%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% '
    '%REQUESTED_SERVER_NAME% %ROUTE_NAME%'
)

# `%COMMAND%`, `%COMMAND(ARGUMENT)%`, `%COMMAND(ARGUMENT):LENGTH%`.
OPERATOR = re.compile(r"%([A-Z][A-Z0-9_]+)(?:\(([^)]*)\))?(?::\d+)?%")
# The operators read, by the name their value is given (the same as the JSON keys below).
FIELDS = {
    "START_TIME": "start_time",
    "DURATION": "duration",
    "RESPONSE_CODE": "response_code",
    "RESPONSE_FLAGS": "response_flags",
    "RESPONSE_CODE_DETAILS": "response_code_details",
    "UPSTREAM_TRANSPORT_FAILURE_REASON": "upstream_transport_failure_reason",
    "RESPONSE_DURATION": "response_duration",
    "UPSTREAM_HOST": "upstream_host",
    "UPSTREAM_REMOTE_ADDRESS": "upstream_remote_address",
    "UPSTREAM_LOCAL_ADDRESS": "upstream_local_address",
    "UPSTREAM_LOCAL_PORT": "upstream_local_port",
}
# `%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%`: the router's milliseconds from the end of the request
# to the upstream's response headers.
SERVICE_TIME_HEADER = "X-ENVOY-UPSTREAM-SERVICE-TIME"

# Names JSON access logs give those values (the keys of `json_format` are the user's), as `_key`
# writes them: lower case, words joined by "_", nested objects' keys after their parent's
# (`{"upstream": {"host": ...}}` is `upstream_host`).
JSON_KEYS = {
    "start_time": ("start_time", "timestamp", "time", "date"),
    "duration": ("duration", "duration_ms", "total_duration"),
    "response_code": ("response_code", "status_code", "status", "code"),
    "response_flags": ("response_flags",),
    "response_code_details": ("response_code_details", "details"),
    "upstream_transport_failure_reason": ("upstream_transport_failure_reason", "transport_failure_reason"),
    "response_duration": ("response_duration",),
    "upstream_service_time": ("upstream_service_time", "x_envoy_upstream_service_time", "resp_x_envoy_upstream_service_time"),
    "upstream_host": ("upstream_host",),
    "upstream_remote_address": ("upstream_remote_address",),
    "upstream_local_address": ("upstream_local_address",),
    "upstream_local_port": ("upstream_local_port",),
}
# Either names the upstream endpoint (UPSTREAM_HOST the host chosen, UPSTREAM_REMOTE_ADDRESS the
# connection's peer).
UPSTREAM_NAMES = ("upstream_host", "upstream_remote_address")

# RESPONSE_FLAGS about the upstream, in the order they decide a line's kind ("UF,URX" is UF's).
UPSTREAM_FLAGS = {
    "UF": "connect_failure",   # upstream connection failure: refused, timed out or another (below)
    "UT": "gateway_timeout",   # upstream request timeout (the route's), connected or not
    "UC": "upstream_closed",   # upstream connection termination: its FIN or RST
    "UR": "reset",             # upstream remote reset
}
# No upstream was tried: no healthy host, no route, no cluster.
NO_UPSTREAM_FLAGS = {"UH", "NR", "NC"}
# About the downstream (the proxy's client): nothing about the upstream.
DOWNSTREAM_FLAGS = {"DC", "DPE", "DT", "IH"}
# Say nothing by themselves: the retry limit reached (with UF: the last attempt's failure; alone:
# the upstream's own answer passed on), a delay injected.
NEUTRAL_FLAGS = {"URX", "DI"}
# Any other flag (UO, LR, RL, UAEX, RLSE, LH, FI, SI, UPE, UMSDR, OM, DF, ...) is the proxy's own
# decision or not about a TCP connection: `other`.

ISO_TIME = re.compile(r"(\d{4})[-/](\d\d)[-/](\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?")
EPOCH_TIME = re.compile(r"(\d{9,11})(?:\.(\d{1,9}))?")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://")


def is_envoy_format(log_format: str) -> bool:
    """Whether a `--log-format` is an Envoy format string: `%COMMAND%` operators, no nginx
    `$variable`."""
    return bool(OPERATOR.search(log_format)) and not VARIABLE.search(log_format)


def compile_envoy_format(log_format: str) -> re.Pattern[str]:
    """A regular expression matching the lines Envoy writes with this format string, as in its
    configuration (a closing newline, real or written `\\n`, left out; `\\"` read as `"`): each
    operator read (`FIELDS`) a named group, the others unnamed, the text between them literal. A
    value alone between double quotes may hold spaces; any other holds none (Envoy writes `-` for
    an empty value), but START_TIME's as many as its own format.

    Raises:
        LogError: the format has no %START_TIME%, or neither %RESPONSE_FLAGS% nor %UPSTREAM_HOST%
        (or %UPSTREAM_REMOTE_ADDRESS%), or two operators with nothing between them.
    """
    text = log_format.replace('\\"', '"').rstrip()
    if text.endswith("\\n"):
        text = text[:-2].rstrip()
    pattern, names, at = "^", set(), 0
    for m in OPERATOR.finditer(text):
        before, after = text[at:m.start()], text[m.end():]
        name, argument = m.group(1), m.group(2)
        if at and not before:
            raise LogError(f"the log format has two operators with nothing between them (before %{name}%): "
                           "a line cannot tell their values apart")
        if before.endswith('"') and after.startswith('"'):
            value = r'[^"]*'
        elif name == "START_TIME" and argument:
            value = r"\S+" + r"(?: \S+)" * argument.count(" ")
        else:
            value = r"\S*?"
        service_time = name == "RESP" and (argument or "").upper() == SERVICE_TIME_HEADER
        field = "upstream_service_time" if service_time else FIELDS.get(name)
        pattern += re.escape(before)
        if field is not None and field not in names:
            pattern += f"(?P<{field}>{value})"
            names.add(field)
        else:
            pattern += f"(?:{value})"
        at = m.end()
    pattern += re.escape(text[at:]) + r"\s*$"
    if "start_time" not in names:
        raise LogError("the log format has no time (%START_TIME%): its lines cannot be placed in the capture")
    if not names & {"response_flags", *UPSTREAM_NAMES}:
        raise LogError("the log format has neither %RESPONSE_FLAGS% nor %UPSTREAM_HOST%: its lines say nothing of the upstream")
    return re.compile(pattern)


DEFAULT_PATTERNS = (compile_envoy_format(DEFAULT_FORMAT), compile_envoy_format(ISTIO_FORMAT))


def _key(name: str) -> str:
    """A JSON key as `JSON_KEYS` names it: `responseFlags`, `response-flags` -> `response_flags`."""
    snake = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return re.sub(r"[^a-z0-9]+", "_", snake).strip("_")


def _flat(doc: dict[str, object], prefix: str = "") -> dict[str, str]:
    """The values of a JSON object by `_key`, nested objects' under their parent's key; null is
    `-`, as Envoy writes an empty value."""
    out: dict[str, str] = {}
    for k, v in doc.items():
        key = _key(f"{prefix}_{k}" if prefix else str(k))
        if isinstance(v, dict):
            out.update(_flat(v, key))
        elif v is None:
            out.setdefault(key, "-")
        else:
            out.setdefault(key, v if isinstance(v, str) else json.dumps(v))
    return out


def json_fields(text: str) -> Optional[dict[str, str]]:
    """The fields (`FIELDS`' names) of a JSON access line, None when it is not Envoy's: Envoy's
    has a start time and response flags or an upstream host (nginx's JSON lines have neither)."""
    try:
        doc = json.loads(text)
        flat = _flat(doc) if isinstance(doc, dict) else None
    except (ValueError, RecursionError):
        return None
    if flat is None:
        return None
    fields = {}
    for name, keys in JSON_KEYS.items():
        found = next((flat[k] for k in keys if k in flat), None)
        if found is not None:
            fields[name] = found
    if "start_time" not in fields or not fields.keys() & {"response_flags", *UPSTREAM_NAMES}:
        return None
    return fields


def start_time(value: str) -> Optional[tuple[float, float, float]]:
    """(epoch seconds on the log's clock read as UTC, zone in seconds, resolution) of a
    START_TIME: Envoy's default `2016-04-15T20:17:00.310Z`, another strftime format of it with
    the date before the time (`%z` read as the zone), or `%s.%3f`. Envoy formats it in UTC
    (source/common/common/utility.cc, DateFormatter: gmtime_r), so without a zone it is 0."""
    value = value.strip().strip('"[]')
    e = EPOCH_TIME.fullmatch(value)
    if e:
        return float(value), 0.0, 10.0 ** -len(e.group(2)) if e.group(2) else 1.0
    m = ISO_TIME.fullmatch(value)
    if not m:
        return None
    y, mo, d, hh, mm, ss = (int(g) for g in m.groups()[:6])
    try:
        datetime(y, mo, d, hh, mm, ss)
    except ValueError:
        return None
    fraction, zone = m.group(7) or "", 0.0
    when = calendar.timegm((y, mo, d, hh, mm, ss, 0, 0, 0)) + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)
    if m.group(8) and m.group(8) != "Z":
        digits = m.group(8)[1:].replace(":", "")
        zone = (1 if m.group(8)[0] == "+" else -1) * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return float(when), float(zone), 10.0 ** -len(fraction) if fraction else 1.0


def _milliseconds(value: Optional[str]) -> Optional[float]:
    """Seconds of a value Envoy writes in milliseconds (`-`: none)."""
    try:
        return float(value) / 1000 if value not in (None, "", "-") else None
    except ValueError:
        return None


def _address(value: Optional[str]) -> Optional[tuple[str, int]]:
    """(endpoint as the join takes it, port) of an `IP:PORT` or `[IPv6]:PORT` Envoy writes,
    after any `tcp://`; None for `-`, a pipe or a name."""
    if not value:
        return None
    try:
        endpoint = parse(SCHEME.sub("", value.strip()))
    except ValueError:
        return None
    # Port 0: Envoy had no connection to name.
    return (str(endpoint), endpoint.port) if endpoint.port else None


def connect_failure_kind(reason: str) -> str:
    """The kind of a `UF` line from its response code details and transport failure reason
    (`upstream_reset_before_response_started{connection_failure,delayed_connect_error:_111}`,
    `{remote_connection_failure|delayed_connect_error:_Connection_refused}`,
    `{connection_timeout}`): Envoy's reset reasons (source/common/http/utility.cc,
    resetReasonToString) with the connect's errno or its text."""
    said = reason.lower().replace("_", " ")
    if "connection refused" in said or re.search(r"connect error: 111\b", said):
        return "refused"
    if "connection timeout" in said or "timed out" in said or re.search(r"connect error: 110\b", said):
        return "connect_timeout"
    return "connect_failure"


def envoy_kind(flags: set[str], reason: str, upstream_said: bool, response_code: str) -> Optional[str]:
    """The kind (`logs.LogLine.kind`) of a line with these RESPONSE_FLAGS, its response code
    details and transport failure reason in `reason`; None when it says nothing about an upstream:
    a downstream flag alone, no flag and no upstream host (a direct response), or no flag and
    RESPONSE_CODE 0 (the client left before any response began, so the upstream had not answered;
    TCP proxy lines write `-`)."""
    for flag, kind in UPSTREAM_FLAGS.items():
        if flag in flags:
            return connect_failure_kind(reason) if flag == "UF" else kind
    if flags & NO_UPSTREAM_FLAGS:
        return "no_live_upstreams"
    if flags - NEUTRAL_FLAGS - DOWNSTREAM_FLAGS:
        return "other"
    if flags - NEUTRAL_FLAGS:
        return None
    return "answered" if upstream_said and response_code != "0" else None


def _lines(number: int, fields: dict[str, str]) -> Optional[tuple[list[LogLine], float, float]]:
    """(the line's `LogLine`s, zone, resolution) from its fields; None without a readable time."""
    start = start_time(fields.get("start_time", ""))
    if start is None:
        return None
    when, zone, resolution = start
    # Placed when Envoy finished with it: DURATION ends at the last byte sent downstream.
    total = _milliseconds(fields.get("duration"))
    when += total or 0.0
    flags = {f for f in fields.get("response_flags", "-").split(",") if f and f != "-"}
    reason = " ".join(fields.get(k, "") for k in ("response_code_details", "upstream_transport_failure_reason"))
    host = next((fields[k] for k in UPSTREAM_NAMES if fields.get(k, "-") not in ("", "-")), "-")
    code = fields.get("response_code", "-")
    kind = envoy_kind(flags, reason, host not in ("", "-"), code)
    upstream = _address(host)
    if upstream is None and host not in ("", "-") and kind not in (None, "no_live_upstreams"):
        # A pipe or an internal listener: no TCP connection to tie it to.
        kind = None if kind == "answered" else "other"
    if kind is None:
        return [], zone, resolution
    local = _address(fields.get("upstream_local_address"))
    local_port = local[1] if local else None
    port = fields.get("upstream_local_port", "")
    if local_port is None and port.isdigit() and 0 < int(port) < 65536:
        local_port = int(port)
    status = int(code) if code.isdigit() and int(code) != 0 else None
    timings: dict[str, float] = {}
    header = _milliseconds(fields.get("upstream_service_time"))
    if header is None:
        header = _milliseconds(fields.get("response_duration"))
    if header is not None:
        timings["header"] = header
    if total is not None:
        timings["total"] = total
    line = LogLine(number, when, kind, upstream[0] if upstream else None, status,
                   local_port=local_port, timings=timings)
    return [line], zone, resolution


def envoy_line(number: int, text: str, pattern: Optional[re.Pattern[str]] = None) -> Optional[tuple[list[LogLine], float, float]]:
    """(`LogLine`s, zone, resolution) of one Envoy access-log line: of `pattern` when given (a
    format string's, `compile_envoy_format`), else a JSON object with Envoy's keys or a line of
    Envoy's or Istio's default format. None when it is none of them, or its time is unreadable;
    no `LogLine` for a line about no upstream."""
    fields: Optional[dict[str, str]] = None
    if pattern is not None:
        m = pattern.match(text)
        fields = m.groupdict() if m else None
    elif text.lstrip().startswith("{"):
        fields = json_fields(text)
    else:
        m = next((m for p in DEFAULT_PATTERNS if (m := p.match(text))), None)
        fields = m.groupdict() if m else None
    return _lines(number, fields) if fields is not None else None
