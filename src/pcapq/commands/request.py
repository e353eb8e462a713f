"""What `pcapq analyze` (or `pcapq watch`) was asked: the command line's options, typed, as one
value the phases read (pcapq.commands.analyze). The defaults are analyze's options' defaults
(tests/test_launch.py holds them to click's)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

ReportFormat = Literal["text", "json", "markdown", "html", "parquet"]


@dataclass(frozen=True)
class WatchOptions:
    """What `pcapq watch` adds: the live lines, the span the report covers, and the metrics."""

    # How often to say what happened, in seconds.
    every: float
    # The report covers the last `keep` seconds of capture time, plus the totals since the
    # watch began; None: everything read.
    keep: float | None = None
    # The capture file tcpdump is writing, read as it grows, instead of standard input.
    follow: str | None = None
    # (host, port) to serve Prometheus metrics on (pcapq.metrics), of the `max_listeners`
    # busiest listeners.
    metrics: tuple[str, int] | None = None
    max_listeners: int = 20


@dataclass(frozen=True)
class AnalyzeRequest:
    """The captures to read, the evidence beyond them, and the report to write."""

    files: tuple[str, ...]
    fmt: ReportFormat = "text"
    output: str = "-"
    pretty: bool = False
    no_color: bool = False
    merge: bool = False
    jobs: int = 0
    max_connections: int = 0
    # "connect=S,read=S" as given (pcapq.finding.timeouts.parse reads it).
    proxy_timeouts: str | None = None
    scheduler: str | None = None
    logs: tuple[str, ...] = ()
    log_format: str | None = None
    nginx_conf: str | None = None
    haproxy_cfg: str | None = None
    nstat: tuple[str, ...] = ()
    ss: str | None = None
    watch: WatchOptions | None = None

    @property
    def wants_evidence(self) -> bool:
        return bool(self.logs or self.nstat or self.ss or self.nginx_conf or self.haproxy_cfg)

    @property
    def parquet_dir(self) -> bool:
        """Parquet tables to a directory (-o DIR/) rather than one file of connections."""
        return self.fmt == "parquet" and (self.output.endswith(os.sep) or os.path.isdir(self.output))

    @property
    def follow(self) -> str | None:
        return self.watch.follow if self.watch is not None else None
