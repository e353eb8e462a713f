"""One line of a proxy's log as pcapq reads it, and the error every log reader raises: shared by
the readers of each proxy's format (logs, envoy, haproxy)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

# nginx's `$variable` (or `${variable}`) in a log_format: how an nginx format string is told from
# Envoy's `%COMMAND%` ones.
VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)\}")


@dataclass
class LogLine:
    line: int
    """1-based line number in its file."""
    time: float
    """Epoch seconds, the log's clock read as UTC (the start of its second)."""
    kind: str
    upstream: Optional[str] = None
    """'10.0.0.2:9000', None when the line does not say (or a unix socket)."""
    status: Optional[int] = None
    socket: Optional[str] = None
    """A unix socket's path."""
    local_port: Optional[int] = None
    """The proxy's source port toward the upstream, when the line says it (HAProxy's `%bp`,
    Envoy's `%UPSTREAM_LOCAL_ADDRESS%`): the tie is then exact."""
    timings: dict[str, float] = field(default_factory=dict)
    """This attempt's seconds as the proxy measured them: `connect` (the upstream's connect()),
    `header` (to the response's first byte, from the attempt's start), `response`, `total`."""
    text: str = ""
    """The line as written (its first `TEXT_KEPT` characters)."""
    start: Optional[float] = None
    """When the attempt began (the proxy's connect()), on the log's clock, when the line says it
    to the millisecond: an access line's time less `$request_time` (its request's only attempt),
    HAProxy's date plus its `%TR` and `%Tw`."""
    request: Optional[str] = None
    """The request line (`GET / HTTP/1.1`), when the line says it."""
    serial: Optional[int] = None
    """nginx's number of the client connection: an error line's `*N`, an access log's `$connection`."""



class LogError(ValueError):
    """A file that is not a proxy log pcapq can read."""
