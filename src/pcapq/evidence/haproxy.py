"""HAProxy's logs (`option httplog`, `option tcplog`), syslog-prefixed or raw: when the
session ended, on which backend server, and how, from its timers and termination state
(HAProxy's configuration manual, "8.2.2 TCP log format", "8.2.3 HTTP log format", "8.5
Session state at disconnection")."""

from __future__ import annotations

import calendar
import re
from datetime import datetime
from typing import Optional

# `%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc ...` (1.x: Tq/Tw/Tc/Tr/Tt).
HTTP_LINE = re.compile(
    r"(?P<client>\S+):(?P<cport>\d+) \[(?P<date>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3})\] (?P<frontend>\S+) "
    r"(?P<backend>[^/\s]+)/(?P<server>\S+) (?P<timers>-?\d+/-?\d+/-?\d+/-?\d+/\+?-?\d+) (?P<status>-?\d+) "
    r"\+?\d+ \S+ \S+ (?P<state>[A-Za-z-]{4}) "
)
# `%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts ...`
TCP_LINE = re.compile(
    r"(?P<client>\S+):(?P<cport>\d+) \[(?P<date>\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3})\] (?P<frontend>\S+) "
    r"(?P<backend>[^/\s]+)/(?P<server>\S+) (?P<timers>-?\d+/-?\d+/\+?-?\d+) \+?\d+ (?P<state>[A-Za-z-]{2}) "
)

# The session's state at disconnection: who ended it (first letter) in which phase (second).
# A server-side timeout ("s") or abort ("S") is about the upstream; the client's ("c", "C")
# and the proxy's own ("P", "R", "I", "D", "L", "K") are not, or cannot be tied to a TCP
# connection.
SERVER_STATES = {
    "sC": "connect_timeout",   # timeout connect: no SYN-ACK
    "SC": "refused",           # the server refused the connect (RST, or ICMP)
    "sH": "read_timeout",      # timeout server, waiting for the response headers
    "SH": "premature_close",   # the server closed or reset before the headers
    "sD": "read_timeout",      # timeout server, during the data
    "SD": "premature_close",   # the server closed or reset during the data
}


def is_haproxy(text: str) -> bool:
    return bool(HTTP_LINE.search(text) or TCP_LINE.search(text))


def _end_time(date: str, total_ms: str) -> Optional[float]:
    """When the session ended: its accept date (the host's local time, to the ms) plus its total
    time, in epoch seconds on the log's clock read as UTC."""
    try:
        start = datetime.strptime(date, "%d/%b/%Y:%H:%M:%S.%f")
    except ValueError:
        return None
    return calendar.timegm(start.timetuple()) + start.microsecond / 1e6 + max(int(total_ms.lstrip("+")), 0) / 1000


def haproxy_line(text: str) -> Optional[tuple[float, Optional[str], Optional[int]]]:
    """(when the session ended, what happened to its upstream (`logs.LogLine.kind`; None: not
    about the upstream), the HTTP status or None) of one HAProxy log line; None when it is not
    one."""
    m = HTTP_LINE.search(text)
    http = m is not None
    m = m or TCP_LINE.search(text)
    if m is None:
        return None
    when = _end_time(m.group("date"), m.group("timers").rsplit("/", 1)[1])
    if when is None:
        return None
    state, server = m.group("state")[:2], m.group("server")
    status = int(m.group("status")) if http and m.group("status").isdigit() else None
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
    return when, kind, status
