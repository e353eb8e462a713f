"""Connects to a unix socket that failed otherwise than with a full queue (refused, no such file),
from nginx's error log alone; `unix_socket_overflow.finding` makes the finding for both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.causes.cause import Always, CaptureCause
from pcapq.finding import Finding

if TYPE_CHECKING:
    from pcapq.causes.context import CaptureContext


# When a finding earns a panel (docs/diagnosis.md, "Materiality").
MATERIALITY = Always(felt=False, reason=(
    "read from the proxy's error log: every line is a connect() that failed and a request answered 502"
))


def no_capture_rule(ctx: CaptureContext) -> list[Finding]:
    """Nothing in a capture shows a unix socket: the finding comes from the proxy's logs."""
    return []


CAUSE = CaptureCause(
    slug="unix_socket_failure",
    title="Unix socket connect failures",
    phrase="failed connects to a unix socket",
    advice=(
        "nginx could not connect to the upstream's unix socket: check that the upstream runs, that the "
        "socket path exists and that nginx may open it (`ss -xl`, `ls -l` on the path)."
    ),
    scope="evidence",
    precedence=96,
    rule=no_capture_rule,
    materiality=MATERIALITY,
    evidence="nginx error-log lines of failed connect()s to `unix:...` other than EAGAIN (read with --log)",
    exclusions=("EAGAIN is `unix_socket_overflow`",),
    disproved_by=("the socket listening (`ss -xl`) at those times",),
    confidence="0.5",
    kernel="Linux v6.6 net/unix/af_unix.c: unix_stream_connect()",
)
