"""Issue 15: evidence beyond the capture. nginx's logs tied to connections, the upstream's counters
and listeners confirming or contradicting each finding (docs/evidence.md).

See: issue 15 (evidence beyond the capture).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO
from lab_runs import NGINX_ACCESS_LOGS, run_variant

import pcapq
from pcapq import cli
from pcapq.causes.registry import title
from pcapq.diagnose import diagnose
from pcapq.diagnose.weigh_evidence import apply
from pcapq.evidence import EvidenceError, read
from pcapq.evidence.counters import CounterError, listener_for, movement, read_counters, read_ss
from pcapq.evidence.logs import LogError, read_log
from pcapq.exitcodes import ExitCode
from pcapq.lab.namespaces import unavailable_reason
from pcapq.lab.runner import LabResult

CAPTURES = REPO / "captures"
# Each kind of error line and the shape of connection it must be tied to.
RIGHT_SHAPE = {
    "connect_timeout": {"no_handshake", "closed_at_connect"},
    "read_timeout": {"unanswered"},
    "send_timeout": {"unanswered"},
    "refused": {"refused"},
    "reset": {"reset"},
    "premature_close": {"server_closed"},
}


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def invoke(*args: str):
    return CliRunner().invoke(cli.cli, ["analyze", *args])


# ---------------------------------------------------------------------------------------------
# Tests for the error-log parser


ERROR_LINES = """\
2026/11/21 08:29:36 [error] 16251#16251: *7 upstream timed out (110: Connection timed out) while connecting to upstream, client: 127.0.0.1, server: , request: "GET /a HTTP/1.0", upstream: "fastcgi://10.231.1.2:9000", host: "x"
2026/11/21 08:29:40 [error] 16251#16251: *64 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: , request: "GET /a HTTP/1.0", upstream: "http://10.0.0.2:8080/a", host: "x"
2026/11/21 08:29:41 [error] 1#1: *65 upstream timed out (110: Connection timed out) while sending request to upstream, client: 127.0.0.1, server: , request: "POST /a HTTP/1.1", upstream: "http://10.0.0.2:8080/a", host: "x"
2026/11/21 08:29:42 [error] 1#1: *66 connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "http://[fd00::2]:8080/", host: "x"
2026/11/21 08:29:43 [error] 1#1: *67 recv() failed (104: Connection reset by peer) while reading response header from upstream, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "http://10.0.0.2:8080/", host: "x"
2026/11/21 08:29:44 [error] 1#1: *68 upstream prematurely closed connection while reading response header from upstream, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "http://10.0.0.2:8080/", host: "x"
2026/11/21 08:29:45 [error] 1#1: *69 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "http://backend/", host: "x"
2026/11/21 08:29:46 [error] 1#1: *70 connect() to unix:/run/php/php-fpm.sock failed (11: Resource temporarily unavailable) while connecting to upstream, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "fastcgi://unix:/run/php/php-fpm.sock:", host: "x"
2026/11/21 08:29:47 [error] 1#1: *71 connect() to unix:/run/php/php-fpm.sock failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "fastcgi://unix:/run/php/php-fpm.sock:", host: "x"
2026/11/21 08:29:48 [error] 1#1: *72 open() "/usr/share/nginx/html/favicon.ico" failed (2: No such file or directory), client: 127.0.0.1, server: , request: "GET /favicon.ico HTTP/1.1", host: "x"
2026/11/21 08:29:49 [notice] 1#1: signal process started
"""


def test_error_log_reads_every_upstream_kind(tmp_path: Path) -> None:
    log = read_log(write(tmp_path, "error.log", ERROR_LINES))
    assert log.format == "error" and log.total == 11 and log.unreadable == 0
    got = [(line.line, line.kind, line.upstream, line.status, line.socket) for line in log.lines]
    assert got == [
        (1, "connect_timeout", "10.231.1.2:9000", 504, None),
        (2, "read_timeout", "10.0.0.2:8080", 504, None),
        (3, "send_timeout", "10.0.0.2:8080", 504, None),
        (4, "refused", "[fd00::2]:8080", 502, None),
        (5, "reset", "10.0.0.2:8080", 502, None),
        (6, "premature_close", "10.0.0.2:8080", 502, None),
        (7, "no_live_upstreams", None, 502, None),
        (8, "unix_eagain", None, 502, "/run/php/php-fpm.sock"),
        (9, "unix_refused", None, 502, "/run/php/php-fpm.sock"),
    ]
    assert log.lines[0].time == 1795249776.0  # 2026-11-21 08:29:36, read as UTC


def test_error_log_counts_malformed_lines_and_keeps_reading(tmp_path: Path) -> None:
    text = ERROR_LINES.splitlines()[0] + "\n2026/13/45 99:00:00 [error] 1#1: *1 upstream timed out\ngarbage line\n"
    log = read_log(write(tmp_path, "error.log", text))
    assert len(log.lines) == 1 and log.unreadable == 2
    assert [n for n, _ in log.unreadable_examples] == [2, 3]


@pytest.mark.parametrize("content", [b"", b"hello\nworld\n", b"\x00\x01binary", b"root:x:0:0:root:/root:/bin/bash\n"])
def test_a_file_that_is_no_nginx_log_is_refused(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "x.log"
    p.write_bytes(content)
    with pytest.raises(LogError, match=r"x\.log: not"):
        read_log(str(p))


# ---------------------------------------------------------------------------------------------
# Tests for the access-log parser


def test_combined_access_log_gives_status_kinds_without_upstream(tmp_path: Path) -> None:
    log = read_log(str(CAPTURES / "nginx_php_fpm.access.log"))
    assert log.format == "combined" and log.zone == 0.0 and log.unreadable == 0
    kinds = {line.kind for line in log.lines}
    assert kinds == {"answered", "gateway_timeout"}
    assert all(line.upstream is None for line in log.lines)


def test_upstream_access_log_key_values(tmp_path: Path) -> None:
    log = read_log(str(CAPTURES / "nginx_php_fpm_slow.access.log"))
    assert log.format == "combined+upstream"
    assert {(line.kind, line.upstream, line.status) for line in log.lines} == {("read_timeout", "10.231.1.2:9000", 504)}


def test_access_log_time_zone_retries_and_connect_time(tmp_path: Path) -> None:
    text = (
        '10.0.0.9 - - [21/Nov/2026:09:29:36 +0100] "GET / HTTP/1.1" 504 160 "-" "curl" '
        'upstream_addr=10.0.0.2:8080 upstream_status=504 upstream_connect_time=- request_time=2.0\n'
        '10.0.0.9 - - [21/Nov/2026:09:29:37 +0100] "GET / HTTP/1.1" 502 160 "-" "curl" '
        'upstream_addr="10.0.0.2:8080, 10.0.0.3:8080" upstream_status="502, 502" upstream_connect_time="-, -"\n'
        '10.0.0.9 - - [21/Nov/2026:09:29:38 +0100] "GET /static.css HTTP/1.1" 200 10 "-" "curl" upstream_addr=- upstream_status=-\n'
        'not a log line\n'
    )
    log = read_log(write(tmp_path, "access.log", text))
    assert log.zone == 3600.0 and log.unreadable == 1
    got = [(line.line, line.kind, line.upstream, line.status) for line in log.lines]
    assert got == [
        (1, "connect_timeout", "10.0.0.2:8080", 504),
        (2, "bad_gateway", "10.0.0.2:8080", 502),
        (2, "bad_gateway", "10.0.0.3:8080", 502),
    ]


def test_positional_upstream_fields_after_combined(tmp_path: Path) -> None:
    text = '1.2.3.4 - - [21/Nov/2026:08:29:36 +0000] "GET / HTTP/1.1" 502 1 "-" "ua" 10.0.0.2:8080 502 0.001 0.002\n'
    (line,) = read_log(write(tmp_path, "access.log", text)).lines
    assert (line.kind, line.upstream) == ("bad_gateway", "10.0.0.2:8080")


def test_json_access_log(tmp_path: Path) -> None:
    lines = [
        {"msec": "1795249780.512", "status": "504", "upstream_addr": "10.231.1.2:9000", "upstream_status": "504",
         "upstream_connect_time": "0.000"},
        {"time_iso8601": "2026-11-21T09:29:40+01:00", "status": "200", "upstream_addr": "10.231.1.2:9000",
         "upstream_status": "200"},
    ]
    log = read_log(write(tmp_path, "access.json", "\n".join(json.dumps(x) for x in lines) + "\n{broken\n"))
    assert log.format == "json" and log.unreadable == 1
    assert [(line.kind, line.time) for line in log.lines] == [("read_timeout", 1795249780.512), ("answered", 1795249780.0 + 3600)]


# ---------------------------------------------------------------------------------------------
# Tests for the counter and ss parsers

NSTAT_AZ = """\
#kernel
TcpActiveOpens                  10                 0.0
TcpPassiveOpens                 25                 0.0
TcpExtListenOverflows           312                0.0
TcpExtListenDrops               312                0.0
TcpExtTCPReqQFullDrop           0                  0.0
"""

NETSTAT_S = """\
Tcp:
    10 active connection openings
    25 passive connection openings
    3 failed connection attempts
    20 segments retransmitted
    4 resets sent
TcpExt:
    8 SYN cookies sent
    44 SYN cookies received
    312 times the listen queue of a socket overflowed
    312 SYNs to LISTEN sockets dropped
    TCPReqQFullDoCookies: 8
    TCPTimeouts: 7
"""


def test_nstat_az(tmp_path: Path) -> None:
    c = read_counters(write(tmp_path, "n.txt", NSTAT_AZ))
    assert c.format == "nstat" and c.values["TcpExtListenOverflows"] == 312 and c.values["TcpExtTCPReqQFullDrop"] == 0


def test_netstat_s_sentences_become_nstat_names(tmp_path: Path) -> None:
    c = read_counters(write(tmp_path, "n.txt", NETSTAT_S))
    assert c.format == "netstat"
    assert {k: c.values[k] for k in ("TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtSyncookiesSent",
                                     "TcpExtTCPReqQFullDoCookies", "TcpExtTCPTimeouts", "TcpRetransSegs", "TcpOutRsts")} == {
        "TcpExtListenOverflows": 312, "TcpExtListenDrops": 312, "TcpExtSyncookiesSent": 8,
        "TcpExtTCPReqQFullDoCookies": 8, "TcpExtTCPTimeouts": 7, "TcpRetransSegs": 20, "TcpOutRsts": 4}


def test_two_snapshots_are_a_change(tmp_path: Path) -> None:
    before = read_counters(write(tmp_path, "a.txt", NSTAT_AZ))
    after = read_counters(write(tmp_path, "b.txt", NSTAT_AZ.replace("312 ", "400 ")))
    m = movement([before, after])
    assert m.window and m.get("TcpExtListenOverflows") == 88 and m.get("TcpPassiveOpens") == 0


def test_lab_table_lists_what_moved_and_the_rest_stayed() -> None:
    m = movement([read_counters(str(CAPTURES / "firewall_drop.nstat.txt"))])
    assert m.window and m.get("TcpPassiveOpens") == 10 and m.get("TcpExtListenDrops") == 0


@pytest.mark.parametrize("text", ["", "hello world\n", "Tcp:\n    nothing here\n"])
def test_no_counters_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(CounterError, match="no counters"):
        read_counters(write(tmp_path, "n.txt", text))


SS_LNT = """\
State  Recv-Q Send-Q Local Address:Port Peer Address:PortProcess
LISTEN 3      2         10.231.1.2:9000      0.0.0.0:*
LISTEN 0      511          0.0.0.0:80        0.0.0.0:*
LISTEN 0      4096            [::]:22           [::]:*
"""
SS_XL = """\
Netid State  Recv-Q Send-Q Local Address:Port      Peer Address:PortProcess
u_str LISTEN 129    128    /run/php/php-fpm.sock 4123              * 0
"""


def test_ss_listeners_and_wildcards(tmp_path: Path) -> None:
    listeners = read_ss(write(tmp_path, "ss.txt", SS_LNT + SS_XL))
    assert [(x.local, x.recv_q, x.send_q, x.unix) for x in listeners] == [
        ("10.231.1.2:9000", 3, 2, False), ("0.0.0.0:80", 0, 511, False), ("[::]:22", 0, 4096, False),
        ("/run/php/php-fpm.sock", 129, 128, True)]
    assert listener_for(listeners, "10.231.1.2:9000").send_q == 2
    assert listener_for(listeners, "10.0.0.7:80").send_q == 511
    assert listener_for(listeners, "10.0.0.7:81") is None


def test_ss_without_listeners_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CounterError, match="no LISTEN line"):
        read_ss(write(tmp_path, "ss.txt", "State Recv-Q Send-Q\nESTAB 0 0 1.2.3.4:5 6.7.8.9:10\n"))


# ---------------------------------------------------------------------------------------------
# Tests for the join on real nginx -> php-fpm runs (issue 15: at least 95 % tied, of the right kind)


def _join(name: str, ss: bool = False) -> tuple[dict, dict]:
    """The diagnosis's JSON with evidence, and each error line's tie: {line: shape}."""
    base = CAPTURES / name
    analysis = pcapq.analyze([str(base.with_suffix(".pcap"))])
    d = diagnose(analysis)
    ev = read((str(base) + ".error.log", str(base) + ".access.log"), (str(base) + ".nstat.txt",),
              str(base) + ".ss.txt" if ss else None)
    apply(analysis, d, ev)
    error = ev.logs[0]
    items = [x for x in error.lines if x.kind in RIGHT_SHAPE]
    result = analysis.join_log([x.time for x in items], [0] * len(items), [x.upstream for x in items],
                               [None] * len(items), [(None, None)] * len(items), [x.kind for x in items], [1.0], [None])
    shapes = {items[pos].line: (items[pos].kind, shape) for pos, _id, _index, shape, *_timings in result["ties"]}
    return d.to_json(), {"lines": items, "shapes": shapes}


@pytest.mark.parametrize("name", ["nginx_php_fpm", "nginx_php_fpm_slow"])
def test_r15_error_lines_tie_to_connections_of_the_right_kind(name: str) -> None:
    doc, join = _join(name, ss=name == "nginx_php_fpm_slow")
    lines = join["lines"]
    right = sum(1 for x in lines if x.line in join["shapes"] and join["shapes"][x.line][1] in RIGHT_SHAPE[x.kind])
    assert lines and right / len(lines) >= 0.95, (right, len(lines))
    logs = doc["evidence"]["logs"]
    assert logs["matched"] / logs["lines"] >= 0.95
    assert logs["files"][0]["clock_offset"] is not None and abs(logs["files"][0]["clock_offset"]) < 1.5


def test_r15_accept_queue_overflow_confirmed_by_counters_and_logs() -> None:
    doc, _ = _join("nginx_php_fpm")
    (f,) = [f for f in doc["findings"] if f["cause"] == "accept_queue_overflow"]
    assert "nstat: TcpExtListenOverflows +79" in f["confirmed_by"]
    assert any(s.startswith("proxy log: 17 lines") for s in f["confirmed_by"])
    assert f["contradicted_by"] == []
    assert f["logged"]["connect_timeout"] == 15 and f["logged"]["read_timeout"] == 2


def test_r15_slow_script_is_no_overflow() -> None:
    doc, _ = _join("nginx_php_fpm_slow", ss=True)
    causes = {f["cause"] for f in doc["findings"]}
    assert "accept_queue_overflow" not in causes and "slow_server" in causes
    assert doc["evidence"]["logs"]["by_kind"] == {"read_timeout": 32}


def test_r15_firewall_drop_is_turned_away_from_the_listener() -> None:
    analysis = pcapq.analyze([str(CAPTURES / "firewall_drop.pcap")])
    d = diagnose(analysis)
    apply(analysis, d, read(nstat=(str(CAPTURES / "firewall_drop.nstat.txt"),)))
    # The counters clear the listener: the cause, and so the title, is what dropped them before it.
    assert not [f for f in d.findings if f.cause == "listen_drops"]
    (f,) = [f for f in d.findings if f.cause == "syns_filtered"]
    assert title(f.cause) == "SYNs dropped before the listener"
    assert f.confirmed_by == ["nstat: TcpExtListenDrops unchanged: the listener dropped no SYN"] and not f.contradicted_by
    assert "its listener dropped none of them, so a firewall or conntrack before it did" in f.confidence_reason


def test_listen_drops_stays_when_the_listener_counted_them(tmp_path: Path) -> None:
    nstat = tmp_path / "moved.txt"
    nstat.write_text("#kernel\nTcpExtListenDrops 10 0.0\n")
    analysis = pcapq.analyze([str(CAPTURES / "firewall_drop.pcap")])
    d = diagnose(analysis)
    apply(analysis, d, read(nstat=(str(nstat),)))
    (f,) = [f for f in d.findings if f.cause == "listen_drops"]
    assert title(f.cause) == "SYNs dropped by the listener" and not f.contradicted_by


def test_r15_ss_backlog_against_the_estimate(tmp_path: Path) -> None:
    analysis = pcapq.analyze([str(CAPTURES / "nginx_php_fpm.pcap")])
    d = diagnose(analysis)
    apply(analysis, d, read(ss=write(tmp_path, "ss.txt", SS_LNT)))
    (f,) = [f for f in d.findings if f.cause == "accept_queue_overflow"]
    assert f.details["ss_backlog"] == 2
    assert any("estimate 4 is at or above it" in s for s in f.confirmed_by)
    d2 = diagnose(analysis)
    apply(analysis, d2, read(ss=write(tmp_path, "ss2.txt", SS_LNT.replace("3      2 ", "0      64"))))
    (f2,) = [f for f in d2.findings if f.cause == "accept_queue_overflow"]
    assert any("is below it" in s for s in f2.contradicted_by)


def test_r15_unix_socket_failures_make_a_finding(tmp_path: Path) -> None:
    analysis = pcapq.analyze([str(CAPTURES / "healthy.pcap")])
    d = diagnose(analysis)
    apply(analysis, d, read((write(tmp_path, "error.log", ERROR_LINES),), ss=write(tmp_path, "ss.txt", SS_XL)))
    (f,) = [f for f in d.findings if f.server.startswith("unix:")]
    assert f.cause == "unix_socket_overflow" and "ss -xl" in f.advice
    assert "the same failure as a TCP accept queue overflow" in f.confidence_reason
    assert f.confirmed_by == ["ss: /run/php/php-fpm.sock Recv-Q 129, Send-Q 128 (backlog)"]
    logs = d.evidence["logs"]
    assert logs["not_tied_by_nature"] == {"no_live_upstreams": 1, "unix_eagain": 1, "unix_refused": 1}


# ---------------------------------------------------------------------------------------------
# Tests for the command line


def test_r15_json_has_evidence_and_proxy_log_per_connection() -> None:
    base = str(CAPTURES / "nginx_php_fpm")
    r = invoke("--format", "json", "--log", base + ".error.log", "--log", base + ".access.log",
               "--nstat", base + ".nstat.txt", base + ".pcap")
    assert r.exit_code == ExitCode.PROBLEMS, r.output
    doc = json.loads(r.stdout)
    logs = doc["evidence"]["logs"]
    assert logs["lines"] == 34 and logs["matched"] == 34
    assert logs["by_kind"] == {"gateway_timeout": 17, "connect_timeout": 15, "read_timeout": 2}
    tied = [c["proxy_log"] for c in doc["connections"] if "proxy_log" in c]
    first = next(t for t in tied if t["file"] == base + ".error.log" and t["line"] == 1)
    assert first["status"] == 504 and first["kind"] == "connect_timeout" and not first["exact"]
    assert first["text"].startswith("20") and "while connecting to upstream" in first["text"]
    assert sum(1 for t in tied if t["file"].endswith("error.log")) == 17


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_r15_every_report_format_shows_confirmations(fmt: str, tmp_path: Path) -> None:
    out = tmp_path / "r"
    r = invoke("--format", fmt, "-o", str(out), "--nstat", str(CAPTURES / "firewall_drop.nstat.txt"),
               str(CAPTURES / "firewall_drop.pcap"))
    assert r.exit_code == ExitCode.PROBLEMS, r.output
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", out.read_text()))
    assert re.search(r"[Cc]onfirmed by\W+nstat: TcpExtListenDrops unchanged", text), text[:2000]
    assert "SYNs dropped before the listener" in text
    assert "Evidence beyond the capture" in text


@pytest.mark.parametrize("option, content, message", [
    ("--nstat", "hello\n", "no counters in it"),
    ("--ss", "hello\n", "no LISTEN line in it"),
])
def test_bad_evidence_file_is_one_clear_line(tmp_path: Path, option: str, content: str, message: str) -> None:
    bad = write(tmp_path, "bad.txt", content)
    r = invoke(option, bad, str(CAPTURES / "healthy.pcap"))
    assert r.exit_code == ExitCode.USAGE
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("pcapq: ") and message in r.stderr
    assert "Traceback" not in r.output


@pytest.mark.parametrize("content", ["hello\n", "\0\1\2binary\n", "{not json\n" * 3, ""])
def test_a_log_that_cannot_be_read_is_a_warning_and_the_report_goes_on(tmp_path: Path, content: str) -> None:
    bad = write(tmp_path, "bad.log", content)
    r = invoke("--log", bad, str(CAPTURES / "healthy.pcap"))
    assert r.exit_code == ExitCode.OK, r.output
    assert r.stderr.startswith("pcapq: warning: ") and "the report goes on without it" in r.stderr, r.stderr
    assert "No failures found" in r.stdout and "Traceback" not in r.output


def test_a_log_of_another_day_is_a_warning_and_ties_nothing(tmp_path: Path) -> None:
    # The shipped error log moved a day back: no time zone puts it over the capture.
    base = CAPTURES / "nginx_php_fpm"
    lines = (base.with_suffix(".error.log")).read_text().splitlines()
    moved = [re.sub(r"^(\d{4})/(\d\d)/(\d\d)", lambda m: f"{m[1]}/{m[2]}/{int(m[3]) - 1:02d}", x) for x in lines]
    old = write(tmp_path, "old.error.log", "\n".join(moved) + "\n")
    r = invoke("--format", "json", "--log", old, str(base.with_suffix(".pcap")))
    assert r.exit_code == ExitCode.PROBLEMS, r.output
    assert r.stderr.count("\n") == 1 and "none can be about the capture's connections" in r.stderr, r.stderr
    logs = json.loads(r.stdout)["evidence"]["logs"]
    assert logs["matched"] == 0 and logs["files"][0]["warning"].startswith(old)


def test_truncated_and_garbled_lines_are_counted_and_the_rest_tied(tmp_path: Path) -> None:
    base = CAPTURES / "nginx_php_fpm"
    lines = (base.with_suffix(".error.log")).read_text().splitlines()
    mixed = [lines[0][:25], "\x00\x7f\ufffd garbage", *lines[1:], lines[-1][:40]]
    log = write(tmp_path, "mixed.error.log", "\n".join(mixed) + "\n")
    r = invoke("--format", "json", "--log", log, str(base.with_suffix(".pcap")))
    assert r.exit_code == ExitCode.PROBLEMS and "Traceback" not in r.output, r.output
    f = json.loads(r.stdout)["evidence"]["logs"]["files"][0]
    assert f["unreadable"] == 3 and f["matched"] == f["upstream_lines"] == len(lines) - 1, f


def test_missing_evidence_file_and_three_nstat(tmp_path: Path) -> None:
    r = invoke("--log", str(tmp_path / "nope.log"), str(CAPTURES / "healthy.pcap"))
    assert r.exit_code == ExitCode.OK and "cannot read the log" in r.stderr
    n = str(CAPTURES / "healthy.nstat.txt")
    r = invoke("--nstat", n, "--nstat", n, "--nstat", n, str(CAPTURES / "healthy.pcap"))
    assert r.exit_code == ExitCode.USAGE and "one file or two" in r.stderr


# The shipped overflow's access log in the custom formats production nginx configurations use:
# its 17 lines of 504 are the same requests whatever the format.
def _shipped_access_lines() -> list[tuple[str, str, str, str]]:
    """(remote address, time_local, request, status) of each line of the shipped access log."""
    text = (CAPTURES / "nginx_php_fpm.access.log").read_text()
    return re.findall(r'^(\S+) - - \[([^\]]+)\] "([^"]*)" (\d+)', text, re.M)


def _tied(r) -> str:
    return next(line for line in r.stdout.splitlines() if "proxy logs" in line)


def test_key_value_access_log_is_read_without_being_told_its_format(tmp_path: Path) -> None:
    from datetime import datetime

    lines = [
        f"{datetime.strptime(when, '%d/%b/%Y:%H:%M:%S %z').timestamp():.3f} {status} rt=0.500 "
        f"ua=10.231.1.2:9000 us={status} urt={'-' if status == '504' else '0.499'}"
        for _, when, _, status in _shipped_access_lines()
    ]
    log = write(tmp_path, "access.log", "\n".join(lines) + "\n")
    assert read_log(log).format == "key_value"
    r = invoke("--log", log, str(CAPTURES / "nginx_php_fpm.pcap"))
    assert r.exit_code == ExitCode.PROBLEMS and not r.stderr, r.stderr
    assert re.search(r"1[5-7] of 17 upstream error lines tied", _tied(r)), _tied(r)


def test_log_format_given_reads_a_format_of_its_own(tmp_path: Path) -> None:
    fmt = '$remote_addr [$time_local] "$request" $status up=$upstream_addr'
    lines = [f'{addr} [{when}] "{request}" {status} up=10.231.1.2:9000' for addr, when, request, status in _shipped_access_lines()]
    log = write(tmp_path, "access.log", "\n".join(lines) + "\n")
    # Not recognised alone ("up" is no name pcapq knows): a warning, and the report.
    r = invoke("--log", log, str(CAPTURES / "nginx_php_fpm.pcap"))
    assert r.exit_code == ExitCode.PROBLEMS and "give its format with --log-format" in r.stderr
    r = invoke("--log", log, "--log-format", fmt, str(CAPTURES / "nginx_php_fpm.pcap"))
    assert r.exit_code == ExitCode.PROBLEMS and not r.stderr, r.stderr
    assert "17 of 17 upstream error lines tied" in _tied(r), _tied(r)
    # The error log beside it is still read by its own format.
    r = invoke("--log", log, "--log", str(CAPTURES / "nginx_php_fpm.error.log"), "--log-format", fmt,
               str(CAPTURES / "nginx_php_fpm.pcap"))
    assert r.exit_code == ExitCode.PROBLEMS and not r.stderr, r.stderr


def test_log_format_without_a_time_is_a_usage_error() -> None:
    r = invoke("--log", str(CAPTURES / "nginx_php_fpm.access.log"), "--log-format", "$status $upstream_addr",
               str(CAPTURES / "healthy.pcap"))
    assert r.exit_code == ExitCode.USAGE and "--log-format" in r.stderr and "no time" in r.stderr


def test_evidence_error_is_a_value_error() -> None:
    assert issubclass(EvidenceError, ValueError)


# ---------------------------------------------------------------------------------------------
# Tests on a fresh run with the kernel

LAB_NGINX = ("ip", "tcpdump", "tc", "nstat", "ss", "nginx", "ab")


@pytest.mark.kernel
@pytest.mark.skipif(unavailable_reason(LAB_NGINX) is not None, reason=str(unavailable_reason(LAB_NGINX)))
@pytest.mark.parametrize("scenario", ["nginx_php_fpm", "nginx_php_fpm_slow"])
def test_r15_fresh_lab_run_ties_its_logs(tmp_path: Path, scenario: str, request: pytest.FixtureRequest) -> None:
    if scenario == "nginx_php_fpm":
        result = request.getfixturevalue("nginx_lab")
    else:
        result = run_variant(scenario, tmp_path / "ng.pcap")
    assert result.problems == []
    pcap = result.run.pcap
    base = str(pcap.with_suffix(""))
    analysis = pcapq.analyze([str(pcap)])
    d = diagnose(analysis)
    apply(analysis, d, read((base + ".error.log", base + ".access.log"), (base + ".nstat.txt",), base + ".ss.txt"))
    logs = d.evidence["logs"]
    assert logs["lines"] and logs["matched"] / logs["lines"] >= 0.95
    if scenario == "nginx_php_fpm":
        (f,) = [f for f in d.findings if f.cause == "accept_queue_overflow"]
        assert any(s.startswith("nstat: TcpExtListenOverflows +") for s in f.confirmed_by)


@pytest.mark.kernel
@pytest.mark.skipif(unavailable_reason(LAB_NGINX) is not None, reason=str(unavailable_reason(LAB_NGINX)))
@pytest.mark.parametrize("read_as", list(NGINX_ACCESS_LOGS))
def test_real_nginx_access_logs_of_its_own_format_are_tied(nginx_lab: LabResult, read_as: str) -> None:
    # One nginx run wrote the same requests in every format (tests/lab_runs.py).
    assert nginx_lab.problems == []
    pcap = nginx_lab.run.pcap
    base = str(pcap.with_suffix(""))
    analysis = pcapq.analyze([str(pcap)])
    d = diagnose(analysis)
    # key=value and JSON lines are recognised alone; the pipe-separated format is read with the
    # configuration that defines it.
    ev = read((base + ".error.log", f"{base}.{read_as}.access.log"),
              nginx_conf=base + ".nginx.conf" if read_as == "log_format" else None)
    assert not ev.warnings and {log.format for log in ev.logs} == {"error", read_as}
    apply(analysis, d, ev)
    logs = d.evidence["logs"]
    untied = [(Path(x["path"]).name, x["untied"]) for x in logs["files"] if x["untied_count"]]
    assert logs["lines"] and logs["matched"] / logs["lines"] >= 0.95, (untied, logs.get("no_line"))
    (f,) = [f for f in d.findings if f.cause == "accept_queue_overflow"]
    assert any("proxy log" in s for s in f.confirmed_by), f.confirmed_by
    if read_as in ("key_value", "json"):
        # nginx's own connect (and header) times agree with the handshakes (and first bytes) of
        # the connections their lines were tied to: every answered request tied right.
        measures = ("connect", "header") if read_as == "key_value" else ("connect",)
        for measure in measures:
            c = logs["timings"][measure]
            assert c["pairs"] >= 10 and c["agree"] == c["pairs"], (measure, c)
        assert any("connect times agree" in s for s in f.confirmed_by), f.confirmed_by


# HAProxy's log lines, from its configuration manual's examples (8.2.2, 8.2.3) and the states of
# 8.5, syslog-prefixed or raw.
@pytest.mark.parametrize("text, expected", [
    ('Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 '
     '10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"', (14.764, "answered", 200)),
    ("haproxy[14387]: 10.0.1.2:33313 [06/Feb/2009:12:14:12.443] fnt bck/srv1 0/0/5007 212 -- 0/0/0/0/3 0/0",
     (17.450, "answered", None)),
    ('10.0.1.2:33318 [06/Feb/2009:12:14:10.000] http-in app/srv1 0/0/-1/-1/3001 503 212 - - sC-- 1/1/1/1/0 0/0 '
     '"GET / HTTP/1.1"', (13.001, "connect_timeout", 503)),
    ("10.0.1.2:33319 [06/Feb/2009:12:14:10.000] fnt bck/srv1 0/-1/2 0 SC 0/0/0/0/0 0/0", (10.002, "refused", None)),
    ('10.0.1.2:33320 [06/Feb/2009:12:14:10.000] http-in app/srv1 0/0/1/-1/30001 504 194 - - sH-- 1/1/1/1/0 0/0 '
     '"GET / HTTP/1.1"', (40.001, "read_timeout", 504)),
    ('10.0.1.2:33321 [06/Feb/2009:12:14:10.000] http-in app/srv1 0/0/1/-1/5 502 204 - - SH-- 1/1/1/1/0 0/0 '
     '"GET / HTTP/1.1"', (10.005, "upstream_closed", 502)),
    ("10.0.1.2:33322 [06/Feb/2009:12:14:10.000] fnt bck/<NOSRV> 0/-1/0 0 SC 0/0/0/0/0 0/0", (10.0, "no_live_upstreams", None)),
    ("10.0.1.2:33323 [06/Feb/2009:12:14:10.000] fnt bck/srv1 0/1/900 0 CD 0/0/0/0/0 0/0", (10.9, None, None)),
])
def test_haproxy_lines_say_when_and_how_the_upstream_failed(text: str, expected: tuple) -> None:
    import calendar

    from pcapq.evidence.haproxy import haproxy_line

    s = haproxy_line(text)
    assert (round(s.time - calendar.timegm((2009, 2, 6, 12, 14, 0, 0, 0, 0)), 3), s.kind, s.status) == expected


# A custom log-format (8.2.4): the backend connection's source and target, dates with a zone
# or as a timestamp, quoted fields, a syslog prefix.
@pytest.mark.parametrize("log_format, text, expected", [
    ("%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %bi:%bp %si:%sp %{+Q}r",
     'Nov 28 21:10:35 lb haproxy[7]: 127.0.0.1:34262 [28/Nov/2026:21:10:35.696] in app/app1 0/0/-1/-1/2001 503 217 '
     'sC-- 10/10/9/9/0 0/0 10.231.1.1:38284 10.231.1.2:9000 "GET / HTTP/1.0"',
     (37.697, None, "connect_timeout", 503, "10.231.1.2:9000", 38284, {"total": 2.001})),
    ("%Ts.%ms %b/%s %bi:%bp %si:%sp %Tc/%Tr/%Tt %ts %ST",
     "1795900235.100 app/app1 10.0.0.1:40001 10.0.0.2:9000 1/30/31 -- 200",
     (35.131, 0.0, "answered", 200, "10.0.0.2:9000", 40001, {"connect": 0.001, "header": 0.031, "total": 0.031})),
    ("%{+Q}o %T %b %s %si %sp %bp %Tt %ts",
     '"28/Nov/2026:22:10:35 +0100" "app" "app1" "fd00::2" "8080" "40002" "3000" "sD"',
     (35 + 3.0 - 3600 + 3600, 3600.0, "read_timeout", None, "[fd00::2]:8080", 40002, {"total": 3.0})),
])
def test_haproxy_custom_log_format_names_the_connection(log_format: str, text: str, expected: tuple) -> None:
    import calendar

    from pcapq.evidence.haproxy import compile_haproxy_format, haproxy_line

    s = haproxy_line(text, compile_haproxy_format(log_format))
    base = 1795900200 if "Ts" in log_format else calendar.timegm((2026, 11, 28, 21, 10, 0, 0, 0, 0)) + (3600 if "%T " in log_format else 0)
    assert s is not None
    assert (round(s.time - base, 3), s.zone, s.kind, s.status, s.upstream, s.local_port, s.timings) == expected


def test_haproxy_log_format_without_a_date_is_a_usage_error() -> None:
    from pcapq.evidence import EvidenceError

    with pytest.raises(EvidenceError, match="no date"):
        read((), log_format="%ci:%cp %b/%s %ts")


def test_haproxy_cfg_gives_format_servers_and_timeouts(tmp_path: Path) -> None:
    from pcapq.evidence.haproxy_cfg import read_haproxy_cfg

    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(
        "global\n    log stdout format raw local0\n"
        "defaults\n    mode http\n    timeout connect 5000\n    timeout server 30s  # the answer\n"
        'frontend web\n    bind :80\n    log-format "%ci:%cp\\ [%tr] %b/%s %ts %bi:%bp"\n    default_backend app\n'
        "backend app\n    server a1 10.0.0.2:9000 check\n    server a2 [fd00::2]:9000\n    server a3 app3.internal:9000\n"
    )
    got = read_haproxy_cfg(str(cfg))
    assert got.custom_formats() == ["%ci:%cp [%tr] %b/%s %ts %bi:%bp"]
    assert got.servers == {("app", "a1"): "10.0.0.2:9000", ("app", "a2"): "[fd00::2]:9000"}
    assert got.timeouts == {"connect": (5.0, "timeout connect 5000"), "read": (30.0, "timeout server 30s")}


def test_haproxy_cfg_with_two_server_timeouts_states_neither(tmp_path: Path) -> None:
    from pcapq.evidence.haproxy_cfg import read_haproxy_cfg

    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text("defaults\n    option tcplog\nbackend a\n    timeout server 3s\nbackend b\n    timeout server 5s\n")
    assert read_haproxy_cfg(str(cfg)).timeouts == {}
    (tmp_path / "nginx.conf").write_text("events {}\n")
    from pcapq.evidence import EvidenceError
    with pytest.raises(EvidenceError, match="no HAProxy section"):
        read((), haproxy_cfg=str(tmp_path / "nginx.conf"))


@pytest.mark.kernel
@pytest.mark.skipif(unavailable_reason(("ip", "tcpdump", "nstat", "ss", "haproxy")) is not None,
                    reason=str(unavailable_reason(("ip", "tcpdump", "nstat", "ss", "haproxy"))))
@pytest.mark.parametrize("mode", ["tcp", "http"])
def test_real_haproxy_log_is_tied_and_confirms_the_findings(tmp_path: Path, mode: str) -> None:
    # option tcplog, and option httplog in HTTP mode.
    import dataclasses

    from pcapq.lab import scenarios
    from pcapq.lab.catalog import SCENARIOS
    from pcapq.lab.runner import run_scenario

    name = f"haproxy_overflow_{mode}log"
    SCENARIOS[name] = dataclasses.replace(
        SCENARIOS["haproxy_overflow"], name=name,
        run=lambda net, pcap: scenarios.haproxy_overflow(net, pcap, logs=pcap.with_suffix(""), mode=mode))
    pcap = tmp_path / "hp.pcap"
    try:
        result = run_scenario(name, pcap)
    finally:
        del SCENARIOS[name]
    assert result.problems == []
    analysis = pcapq.analyze([str(pcap)])
    d = diagnose(analysis)
    ev = read((str(tmp_path / "hp.haproxy.log"),))
    assert not ev.warnings and [log.format for log in ev.logs] == ["haproxy"]
    apply(analysis, d, ev)
    logs = d.evidence["logs"]
    assert logs["lines"] >= 5 and logs["matched"] / logs["lines"] >= 0.95, logs
    assert d.findings and all(any("proxy log" in s for s in f.confirmed_by) for f in d.findings), \
        [(f.cause, f.confirmed_by) for f in d.findings]


@pytest.mark.kernel
@pytest.mark.skipif(unavailable_reason(("ip", "tcpdump", "nstat", "ss", "haproxy")) is not None,
                    reason=str(unavailable_reason(("ip", "tcpdump", "nstat", "ss", "haproxy"))))
def test_real_haproxy_log_with_source_ports_ties_every_line_exactly(tmp_path: Path) -> None:
    # HTTP mode, a log-format with %bi:%bp: each line names its connection's source port.
    from pcapq.lab.runner import run_scenario

    pcap = tmp_path / "hx.pcap"
    result = run_scenario("haproxy_http_overflow", pcap)
    assert result.problems == []
    analysis = pcapq.analyze([str(pcap)])
    d = diagnose(analysis)
    ev = read((str(tmp_path / "hx.haproxy.log"),), haproxy_cfg=str(tmp_path / "hx.haproxy.cfg"))
    assert not ev.warnings and [log.format for log in ev.logs] == ["haproxy"]
    apply(analysis, d, ev)
    logs = d.evidence["logs"]
    assert logs["lines"] >= 5 and logs["matched"] == logs["lines"] == logs["files"][0]["exact"], logs
    ports = {c["id"]: int(c["client"].rsplit(":", 1)[1]) for c in analysis.connections()}
    said = {line.line: line.local_port for line in ev.logs[0].lines}
    from pcapq.evidence import tie_connections

    tied = tie_connections(pcapq.analyze([str(pcap)]), ev.logs).by_id
    assert len(tied) == logs["lines"] and all(note["exact"] and said[note["line"]] == ports[i] for i, note in tied.items())
    assert d.findings and all(any("proxy log" in s for s in f.confirmed_by) for f in d.findings), \
        [(f.cause, f.confirmed_by) for f in d.findings]


# HAProxy in front of an upstream that refuses (no listener: SC) or resets each request unanswered
# (SO_LINGER 0 after reading it: SD in TCP mode, SH in HTTP mode), with tcplog or the log-format
# that names the source port.
HAPROXY_FAILURES = {
    "refused": (dict(server_options=None), "refused", "closed_port"),
    "reset": (dict(server_options=("--rst-before-reply", "--threads"), accept_delay=0.0, backlog=16), "upstream_closed",
              "server_closed"),
}


@pytest.mark.kernel
@pytest.mark.skipif(unavailable_reason(("ip", "tcpdump", "nstat", "ss", "haproxy")) is not None,
                    reason=str(unavailable_reason(("ip", "tcpdump", "nstat", "ss", "haproxy"))))
@pytest.mark.parametrize("mode", ["tcp", "http"])
@pytest.mark.parametrize("failure", list(HAPROXY_FAILURES))
def test_real_haproxy_refused_and_reset_upstreams_are_tied(tmp_path: Path, failure: str, mode: str) -> None:
    import dataclasses

    from pcapq.lab import scenarios
    from pcapq.lab.catalog import SCENARIOS
    from pcapq.lab.runner import run_scenario

    options, kind, cause = HAPROXY_FAILURES[failure]
    name = f"haproxy_{failure}_{mode}"
    SCENARIOS[name] = dataclasses.replace(
        SCENARIOS["haproxy_overflow"], name=name, client_error=("reset", "closed", "refused", "timed out"),
        run=lambda net, pcap: scenarios.haproxy_overflow(
            net, pcap, logs=pcap.with_suffix(""), mode=mode, connections=5,
            log_format=scenarios.HAPROXY_EXACT_LOG if mode == "http" else None, **options))
    pcap = tmp_path / "hf.pcap"
    try:
        result = run_scenario(name, pcap)
    finally:
        del SCENARIOS[name]
    assert result.problems == []
    r = invoke("--format", "json", "--log", str(tmp_path / "hf.haproxy.log"), "--haproxy-cfg", str(tmp_path / "hf.haproxy.cfg"),
               str(pcap))
    assert r.exit_code == ExitCode.PROBLEMS and not r.stderr, r.output
    doc = json.loads(r.stdout)
    logs = doc["evidence"]["logs"]
    assert logs["by_kind"] == {kind: 5} and logs["matched"] == 5, logs
    assert logs["files"][0]["exact"] == (5 if mode == "http" else 0)
    (f,) = [f for f in doc["findings"] if f["cause"] == cause]
    assert any("5 lines of the kind predicted" in s for s in f["confirmed_by"]) and not f["contradicted_by"], f


# ---------------------------------------------------------------------------------------------
# Tests for refused and reset lines, written from the captures' own RSTs


@pytest.mark.parametrize("capture, kind, message, shape", [
    ("closed_port", "refused", "connect() failed (111: Connection refused) while connecting to upstream", "refused"),
    ("app_reset", "reset", "recv() failed (104: Connection reset by peer) while reading response header from upstream", "reset"),
])
def test_r15_lines_at_the_rst_tie_to_that_connection(tmp_path: Path, capture: str, kind: str, message: str, shape: str) -> None:
    import time as _time

    analysis = pcapq.analyze([str(CAPTURES / f"{capture}.pcap")])
    resets = [c for c in analysis.connections() if c["reset"] and c["reset"]["from"] == "server"]
    assert resets
    # nginx writes local time: here UTC+2, which the join must find.
    lines = [
        _time.strftime("%Y/%m/%d %H:%M:%S", _time.gmtime(int(c["reset"]["time"]) + 7200))
        + f' [error] 7#7: *{i} {message}, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", '
        f'upstream: "http://{c["server"]}/", host: "x"'
        for i, c in enumerate(resets)
    ]
    log = write(tmp_path, "error.log", "\n".join(lines) + "\n")
    d = diagnose(analysis)
    apply(analysis, d, read((log,)))
    f = d.evidence["logs"]["files"][0]
    assert f["matched"] == len(resets) and f["by_kind"] == {kind: len(resets)}
    assert f["clock"]["zone"] == 7200.0 and abs(f["clock_offset"] - 7200.0) <= 1.0


NGINX_CONF_WITH_FORMAT = """\
# an nginx.conf as production has them: a log_format of its own, in parts, and an include
http {
    log_format upstream '$remote_addr [$time_local] "$request" '
                        '$status up=$upstream_addr';
    log_format js escape=json '{"msec":"$msec","status":"$status"}';
    access_log /var/log/nginx/upstream_access.log upstream;
    include conf.d/*.conf;
}
"""
SITE_CONF = """\
server {
    location / {
        fastcgi_pass 10.231.1.2:9000;
        fastcgi_connect_timeout 2s;   # the connect timeout
        fastcgi_read_timeout 1m;
    }
}
"""


def test_nginx_conf_gives_the_access_logs_format_and_the_timeouts(tmp_path: Path) -> None:
    from pcapq.evidence.nginx_conf import read_nginx_conf

    (tmp_path / "conf.d").mkdir()
    write(tmp_path / "conf.d", "site.conf", SITE_CONF)
    conf_path = write(tmp_path, "nginx.conf", NGINX_CONF_WITH_FORMAT)
    conf = read_nginx_conf(conf_path)
    assert conf.formats["upstream"] == '$remote_addr [$time_local] "$request" $status up=$upstream_addr'
    assert conf.json_formats == {"js"}
    assert conf.timeouts == {"connect": (2.0, "fastcgi_connect_timeout 2s"), "read": (60.0, "fastcgi_read_timeout 1m")}
    lines = [f'{addr} [{when}] "{request}" {status} up=10.231.1.2:9000' for addr, when, request, status in _shipped_access_lines()]
    log = write(tmp_path, "upstream_access.log", "\n".join(lines) + "\n")
    r = invoke("--log", log, "--nginx-conf", conf_path, str(CAPTURES / "nginx_php_fpm.pcap"))
    assert r.exit_code == ExitCode.PROBLEMS and not r.stderr, r.stderr
    assert "17 of 17 upstream error lines tied" in _tied(r), _tied(r)
    text = re.sub(r"[│\s]+", " ", r.stdout)
    assert "2 s connect timeout (nginx.conf: fastcgi_connect_timeout 2s)" in text, text[:3000]


def test_nginx_conf_that_cannot_be_read_is_a_usage_error(tmp_path: Path) -> None:
    r = invoke("--nginx-conf", str(tmp_path / "nope.conf"), str(CAPTURES / "healthy.pcap"))
    assert r.exit_code == ExitCode.USAGE and "cannot read the nginx configuration" in r.stderr


# A connect timeout as the SYN-ACK comes: the proxy's connect() gives up after 1 s and closes
# the socket; the server's SYN-ACK, held on the path, comes later to no socket, and the client's
# kernel answers it with RST (Linux v6.6 net/ipv4/tcp_ipv4.c: tcp_v4_rcv() finds no socket,
# tcp_v4_send_reset()). The capture shows a handshake answered, not one without a SYN-ACK; the
# proxy's line must still tie to it. Delays either side of the SYN-ACK re-send's 1 s.
@pytest.mark.kernel
@pytest.mark.parametrize("synack_delay", [1.3, 2.4])
def test_connect_timeout_lines_tie_to_a_synack_that_came_too_late(tmp_path: Path, synack_delay: float) -> None:
    import time

    from pcapq.lab.errors import LabUnavailable
    from pcapq.lab.namespaces import NetnsDelayed
    from pcapq.lab.scenarios import PEERS, PORT, start_server

    pcap = tmp_path / "late.pcap"
    try:
        with NetnsDelayed(tools=("ip", "tcpdump")) as net:
            net.capture_at("client")
            net.start_path(delay_cs=0.005, delay_sc=synack_delay)
            server = start_server(net, "--count", "0", "--deadline", "30")
            try:
                with net.capture(pcap):
                    net.run(net.client_ns, [*PEERS, "client", net.server_ip, str(PORT), "--count", "3", "--timeout", "1",
                                            "--deadline", "15"], timeout=30, check=False)
                    time.sleep(synack_delay + 0.5)
            finally:
                net.stop(server)
                net.stop_path()
            upstream = f"{net.server_ip}:{PORT}"
    except LabUnavailable as e:
        pytest.skip(str(e))
    analysis = pcapq.analyze([str(pcap)])
    conns = analysis.connections()
    # The mechanism happened: each connect answered by a SYN-ACK the client reset.
    assert len(conns) == 3 and all(c["handshake"]["synack_attempts"] >= 1 and c["sides"]["client"]["rst"] for c in conns), conns
    # nginx's line, in the second its 1 s connect timeout ran out.
    times = [float(int(c["handshake"]["syn_time"] + 1.0)) for c in conns]
    result = analysis.join_log(times, [0] * 3, [upstream] * 3, [None] * 3, [(None, None)] * 3, ["connect_timeout"] * 3, [1.0], [0.0])
    tied = {pos: (cid, shape) for pos, cid, _index, shape, *_ in result["ties"]}
    assert sorted(tied) == [0, 1, 2], result
    assert [tied[i] for i in range(3)] == [(c["id"], "closed_at_connect") for c in conns]
