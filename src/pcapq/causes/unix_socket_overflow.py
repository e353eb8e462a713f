"""Failures on a unix socket, which tcpdump cannot see: from nginx's error log alone
(`pcapq.evidence` calls `finding` with the log's unix-socket lines). EAGAIN on connect() to a unix
stream socket is its listen queue being full (Linux v6.6 net/unix/af_unix.c: unix_stream_connect()
returns -EAGAIN when unix_recvq_full() and the socket is non-blocking), the same failure as a TCP
accept queue overflow."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from pcapq.causes.cause import Always, CaptureCause
from pcapq.causes.unix_socket_failure import CAUSE as FAILURE
from pcapq.causes.unix_socket_failure import no_capture_rule
from pcapq.finding import Finding

if TYPE_CHECKING:
    from pcapq.evidence.counters import Listener
    from pcapq.evidence.log_line import LogLine
    from pcapq.evidence.logs import LogFile


def finding(log: LogFile, lines: list[LogLine], zone: float, listeners: list[Listener]) -> Finding:
    """The finding for the unix-socket lines of one error log (what `pcapq.evidence` calls)."""

    sockets = Counter(line.socket or "?" for line in lines)
    kinds = Counter(line.kind for line in lines)
    socket = sockets.most_common(1)[0][0]
    eagain = kinds.get("unix_eagain", 0)
    said = "; ".join(f"{n} `{k}`" for k, n in kinds.most_common())
    reason = (
        f"{log.path} has {len(lines)} failed connect()s to unix:{socket} ({said}). tcpdump cannot see a unix "
        "socket; EAGAIN (11: Resource temporarily unavailable) on connect() to a unix stream socket is its listen "
        "(accept) queue being full, the same failure as a TCP accept queue overflow"
        if eagain else
        f"{log.path} has {len(lines)} failed connect()s to unix:{socket} ({said}); tcpdump cannot see a unix socket"
    )
    listener = next((x for x in listeners if x.unix and x.local.startswith(socket)), None)
    confirmed = []
    if listener is not None:
        confirmed.append(f"ss: {listener.local} Recv-Q {listener.recv_q}, Send-Q {listener.send_q} (backlog)")
    first = min(line.time for line in lines) - zone
    last = max(line.time for line in lines) - zone
    cause = OVERFLOW if eagain else FAILURE
    f = Finding(
        cause=cause.slug,
        server=f"unix:{socket}",
        confidence=0.8 if eagain else 0.5,
        confidence_reason=reason,
        first=first,
        last=last,
        connections=[],
        evidence=[],
        advice=cause.advice,
        proxy_log=[f"connect() to unix:{socket} failed (11: Resource temporarily unavailable) while connecting to upstream -> 502"],
        count=len(lines),
        rests_on=[f"{len(lines)} lines of {log.path}"],
        disproved_by=list(cause.disproved_by),
        confirmed_by=confirmed,
        checked=True,
    )
    return f


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(felt=False, reason=(
    "read from the proxy's error log: every line is a connect() refused by a full listen queue and a request "
    "answered 502, the unix-socket form of an accept queue overflow"
))

OVERFLOW = CaptureCause(
    slug="unix_socket_overflow",
    title="Unix socket listen queue overflow",
    phrase="a unix socket's listen queue overflowing",
    advice=(
        "Same remedy as for a TCP accept queue: more workers or faster ones (php-fpm pm.max_children), "
        "then the backlog (php-fpm listen.backlog, capped by net.core.somaxconn). See the socket's queue with "
        "`ss -xl` (Recv-Q waiting, Send-Q the backlog) while it fails."
    ),
    scope="evidence",
    precedence=95,
    rule=no_capture_rule,
    materiality=MATERIALITY,
    evidence="nginx error-log lines `connect() to unix:... failed (11: Resource temporarily unavailable)` (read with --log)",
    exclusions=("other unix-socket errors (refused, no such file) are `unix_socket_failure`",),
    disproved_by=("`ss -xl` showing the socket's Recv-Q well below its Send-Q while nginx logs EAGAIN",),
    confidence="0.8",
    kernel="Linux v6.6 net/unix/af_unix.c: unix_stream_connect()",
)

CAUSE = OVERFLOW
