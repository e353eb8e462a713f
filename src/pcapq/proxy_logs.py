"""`--log`, `--nginx-conf`, `--haproxy-cfg` and `--log-format` for `pcapq timeline` and `pcapq explain`: the
proxy's logs read before the capture, then the line tied to each connection (docs/evidence.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcapq.exitcodes import ExitCode
from pcapq.output import fail, warn

if TYPE_CHECKING:
    from pcapq._core import Analysis
    from pcapq.evidence.logs import LogFile, ProxyLogNote


def read_logs(logs: tuple[str, ...], log_format: str | None, nginx_conf: str | None,
              haproxy_cfg: str | None = None) -> list[LogFile]:
    """The logs pcapq can read. Each one it cannot read is a warning on stderr, and the command
    goes on without it; a bad --log-format or --nginx-conf exits 2, as in `pcapq analyze`."""
    if not (logs or nginx_conf or haproxy_cfg):
        return []
    from pcapq.evidence import EvidenceError, read

    try:
        evidence = read(logs, log_format=log_format, nginx_conf=nginx_conf, haproxy_cfg=haproxy_cfg)
    except EvidenceError as e:
        fail(str(e), ExitCode.USAGE)
    for warning in evidence.warnings:
        warn(warning)
    return evidence.logs


def lines_by_connection(analysis: Analysis, logs: list[LogFile]) -> dict[int, ProxyLogNote]:
    """Connection id -> the `proxy_log` note of the line tied to it (`pcapq.evidence.Ties.by_id`).
    `analysis` keeps every connection's record with its events, as `pcapq analyze` does with
    --log: the join then sees the same connections, and ties each line to the same one."""
    if not logs:
        return {}
    from pcapq.evidence import tie_connections

    return tie_connections(analysis, logs).by_id
