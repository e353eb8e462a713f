"""HAProxy's logs: `option httplog`, `option tcplog` and any `log-format`, syslog-prefixed or
not. Each line is one session: when it ended, on which server, from which source port, how
long its connect and response took, and how it ended (HAProxy's configuration manual, "8.2.2
TCP log format", "8.2.3 HTTP log format", "8.2.4 Custom log format", "8.5 Session state at
disconnection")."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Optional

from pcapq.endpoint import Endpoint

# The formats `option httplog` and `option tcplog` stand for (8.2.2, 8.2.3).
HTTPLOG = "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r"
TCPLOG = "%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq"

# The default formats, read loosely: 1.x wrote Tq/Tw/Tc/Tr/Tt where 2.x writes TR/Tw/Tc/Tr/Ta, and
# formats made from httplog's often drop the captured cookies (%CC %CS) or add fields at the end.
HTTP_LINE = re.compile(
    r"(?P<ci>\S+):(?P<cp>\d+) \[(?P<tr>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3})\] (?P<ft>\S+) "
    r"(?P<b>[^/\s]+)/(?P<s>\S+) (?P<timers>-?\d+/-?\d+/-?\d+/-?\d+/\+?-?\d+) (?P<ST>-?\d+) "
    r"\+?\d+ (?:\S+ \S+ )?(?P<tsc>[A-Za-z-]{4}) \d+/\d+/\d+/\d+/(?P<rc>\+?\d+) "
)
TCP_LINE = re.compile(
    r"(?P<ci>\S+):(?P<cp>\d+) \[(?P<t>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3})\] (?P<ft>\S+) "
    r"(?P<b>[^/\s]+)/(?P<s>\S+) (?P<timers>-?\d+/-?\d+/\+?-?\d+) \+?\d+ (?P<ts>[A-Za-z-]{2}) \d+/\d+/\d+/\d+/(?P<rc>\+?\d+) "
)

# A syslog header before the line: `<134>`, `Nov 28 20:59:43 host haproxy[1234]: ` or RFC 5424's
# `2026-11-28T20:59:43.123+00:00 host haproxy 1234 - - `.
SYSLOG_PREFIX = re.compile(
    r"^(?:<\d+>\d?\s?)?(?:\w{3} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\S+) \S+ [\w./-]+(?:\[\d+\]:| \d+ \S+ \S+) "
)

# The session's state at disconnection: who ended it (first letter) in which phase (second).
# A server-side timeout ("s") or abort ("S") is about the upstream; the client's ("c", "C")
# and the proxy's own ("P", "R", "I", "D", "L", "K") are not, or cannot be tied to a TCP
# connection.
SERVER_STATES = {
    "sC": "connect_timeout",   # timeout connect: no SYN-ACK
    "SC": "refused",           # the server refused the connect (RST, or ICMP)
    "sH": "read_timeout",      # timeout server, waiting for the response headers
    "SH": "upstream_closed",   # the server closed or reset before the headers
    "sD": "read_timeout",      # timeout server, during the data
    "SD": "upstream_closed",   # the server closed or reset during the data
}

# ---- custom log-format (8.2.4) ----

DATE_MS = r"\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3}"
DATE_ZONE = r"\d\d/\w{3}/\d{4}:\d\d:\d\d [+-]\d{4}"
IP = r"[0-9A-Fa-f:.]+|-"
NUMBER = r"[+-]?\d+|-"
# What each variable's value looks like; the others (names, headers, the request) are any text.
VALUES = {
    **dict.fromkeys(("t", "tr"), DATE_MS),
    **dict.fromkeys(("T", "Tl", "trg", "trl"), DATE_ZONE),
    **dict.fromkeys(("ci", "bi", "si", "fi"), IP),
    **dict.fromkeys(("cp", "bp", "sp", "fp", "B", "U", "ac", "fc", "bc", "sc", "sq", "bq", "ST", "lc", "pid", "rt", "ms",
                     "Ts", "Ta", "Tc", "Td", "Th", "Ti", "Tq", "TR", "Tr", "Tt", "Tu", "Tw"), NUMBER),
    "rc": r"\+?\d+|-",
    "ts": r"[A-Za-z-]{2}",
    "tsc": r"[A-Za-z-]{4}",
}
# `%var`, `%{flags}var` or `%[sample]`; `%%` is a percent sign.
VARIABLE = re.compile(r"%%|%(?:\{([^}]*)\})?(\[(?:[^\]\\]|\\.)*\]|[A-Za-z]+)")
QUOTED = r'"(?:[^"\\]|\\.)*"'


class FormatError(ValueError):
    """A log-format pcapq cannot place in time."""


def compile_haproxy_format(log_format: str) -> re.Pattern[str]:
    """A regular expression matching the lines HAProxy writes with `log_format`: each variable a
    named group (as HAProxy names it: `%bp` is `bp`), the text between literal.

    Raises:
        FormatError: the format has no date (%t, %tr, %T, %Tl, %trg, %trl, %Ts).
    """
    pattern, names, at, quote_all = "", set(), 0, False
    for m in VARIABLE.finditer(log_format):
        pattern += re.escape(log_format[at:m.start()].replace("\\ ", " "))
        at = m.end()
        if m.group(2) == "o":  # flags for every variable after it; it writes nothing
            quote_all = "+Q" in (m.group(1) or "")
            at += log_format[at:at + 1] == " "
            continue
        if m.group(0) == "%%":
            pattern += "%"
            continue
        flags, name = m.group(1) or "", m.group(2)
        quoted = "+Q" in flags or (quote_all and "-Q" not in flags)
        value = VALUES.get(name, r".*?")
        if quoted:
            value = QUOTED
        if name.startswith("[") or name in names:
            pattern += f"(?:{value})"
        else:
            pattern += f"(?P<{name}>{value})"
            names.add(name)
    pattern += re.escape(log_format[at:].replace("\\ ", " "))
    if not names & {"t", "tr", "T", "Tl", "trg", "trl", "Ts"}:
        raise FormatError("the log-format has no date (%t, %tr, %T, %Tl, %trg, %trl or %Ts): its lines cannot be placed in the capture")
    return re.compile(pattern + "$")


@dataclass
class Session:
    """One HAProxy log line."""
    time: float
    """When the session ended: its date plus its total time, epoch seconds on the log's clock."""
    zone: Optional[float]
    """Log clock minus UTC, seconds, when the date says it (`%T`, `%Tl`, `%Ts`)."""
    resolution: float
    kind: Optional[str]
    """What happened to the upstream (`logs.LogLine.kind`); None: nothing about it."""
    status: Optional[int] = None
    upstream: Optional[str] = None
    """The server's address (`%si:%sp`, or the server named in haproxy.cfg)."""
    local_port: Optional[int] = None
    """`%bp`: the port HAProxy connected from."""
    timings: dict[str, float] = field(default_factory=dict)
    retries: int = 0
    start: Optional[float] = None
    """When its last connect() began: the date plus the waits before it (`%TR` after the
    request's date; `%Th`, `%Ti`, `%TR` after the accept date; `%Tw` in the queue)."""


MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
DATE_PARTS = re.compile(r"(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d)(?:\.(\d{3}))?(?: ([+-])(\d\d)(\d\d))?")


def _date(value: str) -> Optional[tuple[float, Optional[float]]]:
    """(epoch seconds on the log's clock read as UTC, zone or None) of an HAProxy date."""
    m = DATE_PARTS.fullmatch(value)
    if not m or m.group(2) not in MONTHS:
        return None
    day, year, hh, mm, ss = int(m.group(1)), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6))
    try:
        datetime(year, MONTHS[m.group(2)], day, hh, mm, ss)
    except ValueError:
        return None
    when = calendar.timegm((year, MONTHS[m.group(2)], day, hh, mm, ss, 0, 0, 0)) + int(m.group(7) or 0) / 1000
    zone = None
    if m.group(8):
        zone = (1 if m.group(8) == "+" else -1) * (int(m.group(9)) * 3600 + int(m.group(10)) * 60)
    return float(when), (float(zone) if zone is not None else None)


def _ms(fields: dict[str, str], name: str) -> Optional[int]:
    value = fields.get(name, "").lstrip("+")
    return int(value) if value.lstrip("-").isdigit() else None


def _start(fields: dict[str, str]) -> Optional[tuple[float, Optional[float], float, bool]]:
    """(when, zone, resolution, whether it is the HTTP request's date) of the line's date."""
    for name, request in (("tr", True), ("trg", True), ("trl", True), ("t", False), ("T", False), ("Tl", False)):
        if name in fields:
            parsed = _date(fields[name])
            if parsed is None:
                return None
            has_ms = name in ("t", "tr") or "ms" in fields
            extra = (_ms(fields, "ms") or 0) / 1000 if name not in ("t", "tr") else 0.0
            return parsed[0] + extra, parsed[1], 0.001 if has_ms else 1.0, request
    if fields.get("Ts", "").isdigit():
        ms = _ms(fields, "ms")
        return float(fields["Ts"]) + (ms or 0) / 1000, 0.0, 0.001 if ms is not None else 1.0, False
    return None


def _server_endpoint(si: str, sp: str) -> Optional[str]:
    """The server's endpoint of a line's %si and %sp; None when they name none ("-", no IP address)."""
    try:
        return str(Endpoint.of(si, int(sp))) if sp.isdigit() else None
    except ValueError:
        return None


def session(fields: dict[str, str], servers: Optional[dict[tuple[str, str], str]] = None) -> Optional[Session]:
    """The session of a line's fields (named as HAProxy's variables); None when its date cannot
    be read. `servers`: (backend, server name) -> address, from haproxy.cfg."""
    start = _start(fields)
    if start is None:
        return None
    when, zone, resolution, request_date = start
    begun = when
    # The request's date ends Ta later, the accept date Tt later.
    total = _ms(fields, "Ta") if request_date else _ms(fields, "Tt")
    if total is None:
        total = _ms(fields, "Tt") if request_date else _ms(fields, "Ta")
    when += max(total or 0, 0) / 1000
    state = (fields.get("tsc") or fields.get("ts") or "--")[:2]
    server = fields.get("s", "")
    status = _ms(fields, "ST")
    if server == "<NOSRV>":
        kind = "no_live_upstreams" if state[0] not in "cC" else None
    elif state in SERVER_STATES:
        kind = SERVER_STATES[state]
    elif state[0] == "-":
        kind = "answered"
    elif state[0] in "sSPRIDLK":
        kind = "other"
    else:
        kind = None  # the client left or timed out: nothing about the upstream
    upstream = _server_endpoint(fields.get("si", "-"), fields.get("sp", "-"))
    if upstream is None and servers and (fields.get("b"), server) in servers:
        upstream = servers[(fields.get("b", ""), server)]
    bp = fields.get("bp", "-")
    local_port = int(bp) if bp.isdigit() and 0 < int(bp) < 65536 else None
    timings = {}
    connect, response = _ms(fields, "Tc"), _ms(fields, "Tr")
    if connect is not None and connect >= 0:
        timings["connect"] = connect / 1000
        if response is not None and response >= 0:
            timings["header"] = (connect + response) / 1000
    if total is not None and total >= 0:
        timings["total"] = total / 1000
    retries = _ms(fields, "rc") or 0
    connect_start = None
    if resolution < 1 and "Tw" in fields:
        waits = [_ms(fields, name) for name in (("TR", "Tw") if request_date else ("Th", "Ti", "TR", "Tw"))]
        connect_start = begun + sum(w for w in waits if w is not None and w > 0) / 1000
    return Session(when, zone, resolution, kind, status if status and status > 0 else None, upstream, local_port,
                   timings, max(retries, 0), connect_start)


def _default_fields(text: str) -> Optional[dict[str, str]]:
    """The fields of an `option httplog` or `option tcplog` line."""
    m = HTTP_LINE.search(text)
    if m:
        fields = {k: v for k, v in m.groupdict().items() if v is not None}
        timers = fields.pop("timers").split("/")
        fields.update(zip(("TR", "Tw", "Tc", "Tr", "Ta"), timers))
        return fields
    m = TCP_LINE.search(text)
    if m:
        fields = {k: v for k, v in m.groupdict().items() if v is not None}
        fields.update(zip(("Tw", "Tc", "Tt"), fields.pop("timers").split("/")))
        return fields
    return None


def line_fields(text: str, pattern: Optional[re.Pattern[str] | Formats] = None) -> Optional[dict[str, str]]:
    """The fields of one line, in `pattern` (a compiled log-format, or the formats of
    haproxy.cfg's frontends) or the default formats; None when it is not such a line."""
    if pattern is None:
        return _default_fields(text)
    if isinstance(pattern, Formats):
        return pattern.fields(text)
    body = SYSLOG_PREFIX.sub("", text, count=1)
    m = pattern.match(body.lstrip()) or pattern.match(text)
    if not m:
        return None
    return {k: v.strip('"') for k, v in m.groupdict().items() if v is not None}


# The default format, without `option httplog` or `tcplog` (8.2.1): one line when a connection is
# accepted, nothing about the upstream.
PLAIN_LINE = re.compile(r"Connect from (?:[0-9A-Fa-f:.]+|unix):\d* to [0-9A-Fa-f:.]+:\d+ \([^/\s]+/(?:TCP|HTTP)\)$")


def is_plain(text: str) -> bool:
    """Whether a line is HAProxy's default format's (`Connect from ... to ... (frontend/MODE)`)."""
    return PLAIN_LINE.search(text) is not None


@dataclass
class Formats:
    """The formats HAProxy's frontends write, each line read with its own frontend's: the one
    named by the line's `%ft` (or `%f`) where the line matches that frontend's format, else the
    first format that matches it; then httplog's and tcplog's (a frontend that sets none)."""
    patterns: list[tuple[str, re.Pattern[str]]]
    """(log-format, compiled) of each custom format, in the order given."""
    frontends: dict[str, str] = field(default_factory=dict)
    """Frontend name -> its log-format (HTTPLOG, TCPLOG or a custom one), where haproxy.cfg says."""

    @classmethod
    def of(cls, formats: list[str], frontends: Optional[dict[str, str]] = None) -> Formats:
        """Raises FormatError for a format without a date."""
        custom = [f for f in formats if f not in (HTTPLOG, TCPLOG)]
        return cls([(f, compile_haproxy_format(f)) for f in custom], dict(frontends or {}))

    def _own(self, fields: dict[str, str], fmt: str) -> bool:
        """Whether the frontend the line names writes `fmt` (or is not known)."""
        name = (fields.get("ft") or fields.get("f") or "").rstrip("~")
        return self.frontends.get(name, fmt) == fmt

    def fields(self, text: str) -> Optional[dict[str, str]]:
        first: Optional[dict[str, str]] = None
        for fmt, pattern in self.patterns:
            found = line_fields(text, pattern)
            if found is None:
                continue
            if self._own(found, fmt):
                return found
            first = first or found
        default = _default_fields(text)
        if default is not None and (first is None or self._own(default, HTTPLOG if "TR" in default else TCPLOG)):
            return default
        return first


def _tokens(body: str) -> list[str]:
    return re.findall(r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]|\S+', body)


ADDRESS = re.compile(r"^(?:\d{1,3}(?:\.\d{1,3}){3}|\[?[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*\]?):(\d{1,5})$")
SLASHED = re.compile(r"^\+?-?\d+(?:/\+?-?\d+)+$")
NAME_PAIR = re.compile(r"^[^/\s\d\[\]\"][^/\s]*/[^/\s]+$")


def _guess_line(body: str) -> Optional[tuple[list[str], list[tuple[int, int]]]]:
    """The variables of one line by the shapes of its words (`_guess`), and (word, port) of each
    address after the client's; None when the line lacks HAProxy's shapes (a date, `backend/server`,
    timers, a termination state)."""
    words = _tokens(body)
    out: list[str] = []
    extra: list[tuple[int, int]] = []
    seen: set[str] = set()
    for i, word in enumerate(words):
        address = ADDRESS.match(word)
        slashes = word.count("/") if SLASHED.match(word) else 0
        if word.startswith("[") and re.fullmatch(rf"\[{DATE_MS}\]", word) and "date" not in seen:
            var = "date"
        elif address and "date" not in seen and not out:
            var = "%ci:%cp"
        elif address:
            var = "address"
            extra.append((i, int(address.group(1))))
        elif "date" in seen and "frontend" not in seen and not NAME_PAIR.match(word) and not slashes:
            var = "frontend"
        elif NAME_PAIR.match(word) and "%b/%s" not in seen and "date" in seen:
            var = "%b/%s"
        elif slashes in (2, 4) and "timers" not in seen and "%b/%s" in seen:
            var = "timers" if slashes == 4 else "%Tw/%Tc/%Tt"
            seen.add("timers")
        elif slashes == 4 and "timers" in seen and "%ac/%fc/%bc/%sc/%rc" not in seen:
            var = "%ac/%fc/%bc/%sc/%rc"
        elif slashes == 1 and "%ac/%fc/%bc/%sc/%rc" in seen and "%sq/%bq" not in seen:
            var = "%sq/%bq"
        elif re.fullmatch(r"[A-Za-z-]{4}", word) and "timers" in seen and "state" not in seen:
            var = "%tsc"
            seen.add("state")
        elif re.fullmatch(r"[A-Za-z-]{2}", word) and "timers" in seen and "state" not in seen:
            var = "%ts"
            seen.add("state")
        elif re.fullmatch(r"[1-5]\d\d", word) and out and out[-1] == "timers" and "%ST" not in seen:
            var = "%ST"
        elif re.fullmatch(r"\+?\d+", word) and out and out[-1] in ("%ST", "%Tw/%Tc/%Tt") and "%B" not in seen:
            var = "%B"
        elif word.startswith('"'):
            var = "%{+Q}[unknown]"
        else:
            var = "%[unknown]"
        seen.add(var)
        out.append(var)
    if not {"date", "%b/%s", "timers", "state"} <= seen:
        return None
    http = "timers" in out and "%ST" in out
    return [{"date": "[%tr]" if http else "[%t]", "timers": "%TR/%Tw/%Tc/%Tr/%Ta", "frontend": "%ft"}.get(v, v)
            for v in out], extra


GUESS_LINES = 50


@dataclass
class Guess:
    """A log-format guessed from a log's lines (`guess_format`)."""
    log_format: str
    said: str
    """Which addresses were taken for which, in words ("" when there are none)."""


def guess_format(texts: list[str]) -> Optional[Guess]:
    """The log-format of lines that have HAProxy's shapes though no format pcapq was given matches
    them: a client `IP:PORT`, a `[date]` to the millisecond, the frontend, `backend/server`, timers
    (`TR/Tw/Tc/Tr/Ta`, or `Tw/Tc/Tt`), a termination state, `ac/fc/bc/sc/rc`, `sq/bq`; of the
    addresses after the client's, the one whose port changes from line to line is the proxy's
    source (`%bi:%bp`), the one whose port stays the server's (`%si:%sp`). The variables of the
    most lines' guess; None when fewer than half of the first lines have those shapes."""
    guesses: dict[tuple[str, ...], list[list[tuple[int, int]]]] = {}
    sample = [t for t in texts[:GUESS_LINES] if t.strip()]
    for text in sample:
        body = SYSLOG_PREFIX.sub("", text, count=1).strip()
        got = _guess_line(body)
        if got:
            guesses.setdefault(tuple(got[0]), []).append(got[1])
    if not guesses:
        return None
    variables, extras = max(guesses.items(), key=lambda kv: len(kv[1]))
    if len(extras) * 2 < len(sample):
        return None
    names = list(variables)
    addresses = [i for i, v in enumerate(names) if v == "address"]
    varying = [i for i in addresses if len({dict(e).get(i) for e in extras}) > 1]
    steady = [i for i in addresses if i not in varying]
    said = []
    if len(extras) > 1 and len(varying) == 1 and len(steady) <= 1:
        names[varying[0]] = "%bi:%bp"
        said.append("%bi:%bp (the address whose port changes on every line)")
        if steady:
            names[steady[0]] = "%si:%sp"
            said.append("%si:%sp (the one whose port stays)")
    names = [v if v != "address" else "%[unknown]" for v in names]
    log_format = " ".join(names)
    try:
        compile_haproxy_format(log_format)
    except FormatError:
        return None
    return Guess(log_format, "; ".join(said))


def is_haproxy_format(log_format: str) -> bool:
    """Whether a format string is HAProxy's (`%ci:%cp [%tr] ...`), not nginx's (`$msec ...`)
    nor Envoy's (`%START_TIME%`)."""
    if "$" in log_format or re.search(r"%[A-Z_]{2,}(?:\([^)]*\))?(?::\d+)?%", log_format):
        return False
    return any(m.group(2) in VALUES for m in VARIABLE.finditer(log_format) if m.group(2))


def is_haproxy(text: str) -> bool:
    return _default_fields(text) is not None


def haproxy_line(text: str, pattern: Optional[re.Pattern[str] | Formats] = None,
                 servers: Optional[dict[tuple[str, str], str]] = None) -> Optional[Session]:
    """The session of one line (in `pattern`, else the default formats); None when it is not one."""
    fields = line_fields(text, pattern)
    return session(fields, servers) if fields is not None else None
