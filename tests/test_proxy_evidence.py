"""Proxy logs on real configurations (docs/evidence.md): HAProxy with several frontends, each log
read in its own frontend's format; a custom HAProxy format recognised without its configuration;
nginx's error lines tied to their own connections through an access log to the millisecond; the
read timeout where FINs were held back behind unacknowledged requests.

The runs were made once by the lab and shipped in captures/ (`pcapq lab haproxy_frontends`,
`pcapq lab nginx_php_fpm_logs`), with what says each line's own connection: the RFC 5424 copy of
each httplog line carrying `%bp` (haproxy_frontends.web.truth), and nginx connecting from its
client's port, logged with `$connection` (nginx_php_fpm_logs.source.access.log). One short fresh
run (the session's nginx run, tests/lab_runs.py) checks the error-line tie again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

import pcapq
from pcapq.evidence import read, tie_connections
from pcapq.evidence.logs import LogFile
from pcapq.lab.namespaces import unavailable_reason
from pcapq.lab.runner import LabResult

CAPTURES = REPO / "captures"
FRONTENDS = CAPTURES / "haproxy_frontends"
NGINX_LOGS = CAPTURES / "nginx_php_fpm_logs"


def client_ports(analysis: pcapq.Analysis) -> dict[int, int]:
    return {c["id"]: int(c["client"].rsplit(":", 1)[1]) for c in analysis.connections()}


# ---------------------------------------------------------------------------------------------
# HAProxy: two frontends in one configuration, each its own log


def test_haproxy_cfg_with_two_frontends_reads_every_line_of_both_logs() -> None:
    ev = read((f"{FRONTENDS}.web.log", f"{FRONTENDS}.api.log"), haproxy_cfg=f"{FRONTENDS}.haproxy.cfg")
    assert not ev.warnings
    assert [log.format for log in ev.logs] == ["haproxy", "haproxy"]
    for log in ev.logs:
        assert log.unreadable == 0 and log.total == len(Path(log.path).read_text().splitlines()) > 0
    web, api = ev.logs
    assert len(web.lines) == web.total and all(line.local_port is None for line in web.lines)
    assert len(api.lines) == api.total and all(line.local_port for line in api.lines)


def test_haproxy_lines_of_each_frontend_tie_to_their_own_connections() -> None:
    analysis = pcapq.analyze([f"{FRONTENDS}.pcap"])
    ev = read((f"{FRONTENDS}.web.log", f"{FRONTENDS}.api.log"), haproxy_cfg=f"{FRONTENDS}.haproxy.cfg")
    web, api = ev.logs
    notes = tie_connections(analysis, ev.logs).by_id
    ports = client_ports(analysis)
    # api's lines name their source port: each tied exactly to it.
    said = {line.line: line.local_port for line in api.lines}
    api_ties = {i: n for i, n in notes.items() if n["file"] == api.path}
    assert len(api_ties) == len(api.lines)
    assert all(n["exact"] and said[n["line"]] == ports[i] for i, n in api_ties.items())
    # web's httplog lines say no port: tied by time, shape and when each connect() began; the
    # RFC 5424 copy of each line says its port.
    truth = dict(line.split() for line in Path(f"{FRONTENDS}.web.truth").read_text().splitlines())
    client_of = {number: text.split()[0].rsplit(":", 1)[1]
                 for number, text in enumerate(Path(web.path).read_text().splitlines(), 1)}
    web_ties = {i: n for i, n in notes.items() if n["file"] == web.path}
    right = sum(int(truth[client_of[n["line"]]]) == ports[i] for i, n in web_ties.items())
    assert len(web_ties) == len(web.lines) and right / len(web.lines) >= 0.95, (right, len(web.lines))


def test_custom_haproxy_format_is_guessed_from_its_lines_and_said() -> None:
    ev = read((f"{FRONTENDS}.api.log",))
    (log,) = ev.logs
    assert log.format == "haproxy" and log.unreadable == 0 and log.guessed is not None
    assert "%bi:%bp" in log.guessed.log_format and "%si:%sp" in log.guessed.log_format
    (warning,) = ev.warnings
    assert "guessed" in warning and "%bi:%bp" in warning and "--log-format" in warning
    analysis = pcapq.analyze([f"{FRONTENDS}.pcap"])
    ports = client_ports(analysis)
    notes = tie_connections(analysis, ev.logs).by_id
    said = {line.line: line.local_port for line in log.lines}
    assert len(notes) == len(log.lines) and all(n["exact"] and said[n["line"]] == ports[i] for i, n in notes.items())


def test_httplog_and_tcplog_lines_are_not_taken_for_a_guessed_format() -> None:
    for name in ("haproxy_overflow", "haproxy_http_overflow"):
        ev = read((str(CAPTURES / f"{name}.haproxy.log"),))
        (log,) = ev.logs
        # httplog's own fields plus %bi:%bp %si:%sp: guessed; tcplog: read as tcplog, nothing guessed.
        assert (log.guessed is not None) == (name == "haproxy_http_overflow"), name
        assert bool(ev.warnings) == (name == "haproxy_http_overflow")


@pytest.mark.parametrize("text", [
    # nginx's key=value lines, an error line, a combined line: not HAProxy's shapes.
    "1796677934.737 200 rt=0.508 ua=10.231.1.2:9000 us=200 uct=0.000 uht=0.502 urt=0.507",
    '2026/12/07 21:12:18 [error] 1#1: *95 upstream timed out (110: Connection timed out) while connecting to upstream',
    '127.0.0.1 - - [07/Dec/2026:21:12:18 +0000] "GET / HTTP/1.0" 504 160 "-" "ab"',
])
def test_other_lines_are_not_guessed_as_haproxys(text: str) -> None:
    from pcapq.evidence.haproxy import guess_format

    assert guess_format([text] * 5) is None


# ---------------------------------------------------------------------------------------------
# nginx: error lines tied to their own connections through an access log to the millisecond


def _truth() -> dict[int, int]:
    """nginx's connection number (an error line's *N) -> the port its upstream connection came from."""
    return {int(n): int(port) for _, n, port, _ in (line.split() for line in Path(f"{NGINX_LOGS}.source.access.log").read_text().splitlines())}


def _error_ties(logs: list[LogFile], analysis: pcapq.Analysis) -> tuple[int, int, int, int]:
    """(error lines tied, tied to their own connection, tied through the access log, ambiguous)."""
    truth, ports = _truth(), client_ports(analysis)
    ties = tie_connections(analysis, logs)
    error = next(log for log in logs if log.format == "error")
    serials = {line.line: line.serial for line in error.lines}
    ids = [(i, n) for i, n in ties.by_id.items() if n["file"] == error.path]
    own = sum(truth.get(serials[n["line"]] or -1) == ports[i] for i, n in ids)
    return len(ids), own, sum("through" in n for _, n in ids), sum("ambiguous_with" in n for _, n in ids)


@pytest.mark.parametrize("access", ["json", "key_value", "iso_ms"])
def test_error_lines_tie_to_their_own_connections_through_the_access_log(access: str) -> None:
    analysis = pcapq.analyze([f"{NGINX_LOGS}.pcap"])
    ev = read((f"{NGINX_LOGS}.error.log", f"{NGINX_LOGS}.{access}.access.log"))
    assert not ev.warnings and ev.logs[1].resolution <= 0.001
    errors = len(ev.logs[0].lines)
    tied, own, through, _ = _error_ties(ev.logs, analysis)
    assert errors >= 100 and tied == errors and through >= 0.95 * errors
    assert own / errors >= 0.95, (own, errors)


def test_error_lines_alone_say_where_their_second_cannot_tell_connections_apart() -> None:
    # Without an access log, 35 lines in one second fit as many connections: tied, and said ambiguous.
    analysis = pcapq.analyze([f"{NGINX_LOGS}.pcap"])
    ev = read((f"{NGINX_LOGS}.error.log",))
    tied, own, through, ambiguous = _error_ties(ev.logs, analysis)
    assert tied == len(ev.logs[0].lines) and through == 0
    assert ambiguous >= tied - own, (tied, own, ambiguous)


# ---------------------------------------------------------------------------------------------
# A fresh run: the session's nginx run, its key=value access log with $request_time

LAB_NGINX = ("ip", "tcpdump", "tc", "nstat", "ss", "nginx", "ab")


@pytest.mark.kernel
@pytest.mark.skipif(unavailable_reason(LAB_NGINX) is not None, reason=str(unavailable_reason(LAB_NGINX)))
def test_fresh_error_lines_tie_to_their_own_connections_through_the_access_log(nginx_lab: LabResult) -> None:
    assert nginx_lab.problems == []
    base = str(nginx_lab.run.pcap.with_suffix(""))
    analysis = pcapq.analyze([str(nginx_lab.run.pcap)])
    ev = read((base + ".error.log", base + ".key_value.access.log"))
    truth = {int(n): int(port) for _, n, port, _ in (line.split() for line in Path(base + ".source.access.log").read_text().splitlines())}
    ports = client_ports(analysis)
    error = ev.logs[0]
    serials = {line.line: line.serial for line in error.lines}
    notes = [(i, n) for i, n in tie_connections(analysis, ev.logs).by_id.items() if n["file"] == error.path]
    own = sum(truth.get(serials[n["line"]] or -1) == ports[i] for i, n in notes)
    assert error.lines and own / len(error.lines) >= 0.95, (own, len(error.lines))


# ---------------------------------------------------------------------------------------------
# The read timeout where nginx's FINs were held back behind unacknowledged requests
# (tests/data/read_timeout/: pcapq.lab.scenarios.nginx_php_fpm_read_timeout at 1, 3 and 5 s, each
# beside the nginx.conf it ran with)

READ_TIMEOUT_RUNS = sorted((REPO / "tests" / "data" / "read_timeout").glob("*.pcap"))


@pytest.mark.parametrize("pcap", READ_TIMEOUT_RUNS, ids=lambda p: p.stem)
def test_read_timeout_inferred_is_the_configured_one_or_a_range_that_holds_it(pcap: Path) -> None:
    from pcapq.evidence.nginx_conf import read_nginx_conf

    configured = read_nginx_conf(str(pcap.with_suffix(".nginx.conf"))).timeouts["read"][0]
    inferred = pcapq.analyze([str(pcap)]).proxy_timeouts()["read"]
    if inferred["range"] is None:
        assert abs(inferred["seconds"] - configured) <= 0.2, inferred
    else:
        above, most = inferred["range"]
        assert above < configured <= most + 0.01 and above < inferred["seconds"] <= most, inferred


def test_read_timeout_runs_are_the_three_timeouts() -> None:
    assert [p.stem for p in READ_TIMEOUT_RUNS] == ["read_timeout_1s", "read_timeout_3s", "read_timeout_5s"]
