"""`pcapq explain` once its options are read: one connection told step by step."""

from __future__ import annotations

import sys

from pcapq import _core
from pcapq.exitcodes import ExitCode
from pcapq.output import deliver, fail, refuse_overwriting_inputs, warn
from pcapq.proxy_logs import lines_by_connection, read_logs


def run(
    files: tuple[str, ...], conn: str | None, fmt: str, output: str, logs: tuple[str, ...] = (),
    nginx_conf: str | None = None, log_format: str | None = None, haproxy_cfg: str | None = None,
) -> None:
    """Reads the captures, chooses the connection (or takes --conn's), writes its story."""
    from pcapq.teach import NoSuchConnection
    from pcapq.teach import explain as tell_story
    from pcapq.teach.render import RENDERERS

    refuse_overwriting_inputs(files, output)
    proxy_logs = read_logs(logs, log_format, nginx_conf, haproxy_cfg)
    try:
        # Without --conn the story is one of the connections with a problem: only those are
        # kept (with their events), so memory follows the live connections. A capture with no
        # problem at all is read again keeping every record, for its first healthy connection.
        # Standard input cannot be read twice; the logs' join wants every record, as in analyze.
        every_record = conn is not None or "-" in files or bool(proxy_logs)
        # Two capture points that saw the same connections: the story is told at the one nearer
        # the clients, with where each packet vanished between them (docs/two-points.md).
        from pcapq.two_points import story_point

        two = story_point(list(files), every_record) if len(files) > 1 else None
        result, path, facts = two if two is not None else (_core.analyze(list(files), keep_connections=every_record, keep_events=True), None, None)
        if len(result) == 0 and result.summary()["connections"] > 0:
            two = story_point(list(files), True) if path is not None else None
            result, path, facts = two if two is not None else (_core.analyze(list(files)), None, None)
    except _core.CaptureError as e:
        fail(e.args[0], ExitCode.UNREADABLE)
    for warning in result.warnings():
        warn(warning)
    if result.summary()["tcp_segments"] == 0:
        fail(f"no TCP segments to explain in {', '.join(files)}", ExitCode.NO_TCP)
    tied = lines_by_connection(result, proxy_logs)
    try:
        story = tell_story(result, conn, tied, path, facts)
    except (NoSuchConnection, ValueError) as e:
        fail(str(e.args[0] if e.args else e), ExitCode.USAGE)
    deliver(output, True, lambda out, _colourless: (out.write(RENDERERS[fmt](story)), out.flush()) and None)
    if any(c["read_stop"] in ("corrupt", "io_error") for c in result.captures()):
        sys.exit(int(ExitCode.DAMAGED))
