"""Envoy's access log read into log lines and tied to the capture's connections
(src/pcapq/evidence/envoy.py, docs/evidence.md "Envoy's access log").

Envoy is not installed here: the lines are its documentation's examples, lines as Envoy and
Istio's proxies write them, and lines of our own for each response flag.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO
from craft import START, Conversation, write_pcap

import pcapq
from pcapq import cli
from pcapq.diagnose import diagnose
from pcapq.diagnose.weigh_evidence import apply
from pcapq.evidence import EvidenceError, read, tie_connections
from pcapq.evidence.envoy import compile_envoy_format, envoy_kind, envoy_line, start_time
from pcapq.evidence.logs import LogError, compile_log_format, read_log
from pcapq.exitcodes import ExitCode

CAPTURES = REPO / "captures"

# The example of Envoy's documentation ("Default Format String").
DOCS_DEFAULT_LINE = (
    '[2016-04-15T20:17:00.310Z] "POST /api/v1/locations HTTP/2" 204 - 154 0 226 100 "10.0.35.28" '
    '"nsq2http" "cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations" "tcp://10.0.2.1:80"'
)
# Istio's default format: a refused connect (the connect's errno in the details), an answer.
ISTIO_REFUSED_LINE = (
    '[2022-06-09T16:06:06.942Z] "GET /hello HTTP/1.1" 503 UF upstream_reset_before_response_started'
    '{connection_failure,delayed_connect_error:_111} - "-" 0 145 0 - "-" "curl/7.68.0" '
    '"ffc1de9a-c7dd-9e0f-b62c-1c12b7a830ff" "10.32.13.107" "10.28.0.19:80" inbound|80|| - '
    '10.28.0.19:80 10.28.0.1:9347 - default'
)
ISTIO_ANSWERED_LINE = (
    '[2026-11-28T20:59:43.123Z] "GET /api HTTP/1.1" 200 - via_upstream - "-" 0 512 35 33 "-" "curl/8.4.0" '
    '"8d1c" "svc" "10.0.0.2:9000" outbound|9000||svc.default.svc.cluster.local 10.0.0.1:40001 '
    '10.0.0.1:8080 10.0.0.9:51000 - default'
)
# Envoy's example JSON format ("Format Dictionaries"): no start time, so no line pcapq can place.
DOCS_JSON_LINE = '{"protocol": "HTTP/1.1", "duration": "123", "my_custom_header": "value_of_MY_CUSTOM_HEADER"}'


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def iso(ms: int) -> str:
    """START_TIME as Envoy writes it by default, of epoch milliseconds."""
    return datetime.fromtimestamp(ms // 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def istio(start_ms: int, code: str, flags: str, details: str, duration: str, host: str, local: str, reason: str = "-") -> str:
    """A line of Istio's default format."""
    return (f'[{iso(start_ms)}] "GET /api HTTP/1.1" {code} {flags} {details} - "{reason}" 0 0 {duration} - "-" '
            f'"curl/8.4.0" "req" "svc" "{host}" outbound|9000||svc {local} 10.0.0.1:8080 10.0.0.9:51000 - default')


# ---------------------------------------------------------------------------------------------
# Tests for the lines


def test_docs_default_format_example() -> None:
    (line,), zone, resolution = envoy_line(7, DOCS_DEFAULT_LINE)
    assert (line.line, line.kind, line.upstream, line.status, line.local_port) == (7, "answered", "10.0.2.1:80", 204, None)
    # START_TIME + DURATION: when Envoy finished with the request.
    assert line.time == pytest.approx(1460751420.310 + 0.226)
    assert line.timings == {"header": 0.1, "total": 0.226}
    assert (zone, resolution) == (0.0, 0.001)


def test_istio_default_format_lines() -> None:
    (refused,), _, _ = envoy_line(1, ISTIO_REFUSED_LINE)
    assert (refused.kind, refused.upstream, refused.status, refused.local_port) == ("refused", "10.28.0.19:80", 503, None)
    (answered,), _, _ = envoy_line(2, ISTIO_ANSWERED_LINE)
    assert (answered.kind, answered.upstream, answered.local_port) == ("answered", "10.0.0.2:9000", 40001)
    assert answered.time == pytest.approx(datetime(2026, 11, 28, 20, 59, 43, 158000, timezone.utc).timestamp())
    assert answered.timings == {"header": 0.033, "total": 0.035}


@pytest.mark.parametrize("flags, details, reason, kind", [
    ("UF", "upstream_reset_before_response_started{connection_failure,delayed_connect_error:_111}", "-", "refused"),
    ("UF,URX", "upstream_reset_before_response_started{remote_connection_failure|delayed_connect_error:_Connection_refused}",
     "-", "refused"),
    ("UF", "upstream_reset_before_response_started{connection_failure}", "delayed_connect_error:_111", "refused"),
    ("UF", "upstream_reset_before_response_started{connection_timeout}", "-", "connect_timeout"),
    ("UF,URX", "upstream_reset_before_response_started{connection_failure}", "-", "connect_failure"),
    ("UF", "upstream_reset_before_response_started{local_connection_failure}", "-", "connect_failure"),
    ("UT", "upstream_response_timeout", "-", "gateway_timeout"),
    ("UC", "upstream_reset_before_response_started{connection_termination}", "-", "upstream_closed"),
    ("UR", "upstream_reset_before_response_started{remote_reset}", "-", "reset"),
    ("URX", "via_upstream", "-", "answered"),
    ("-", "via_upstream", "-", "answered"),
])
def test_flags_that_tie(flags: str, details: str, reason: str, kind: str) -> None:
    (line,), _, _ = envoy_line(1, istio(1_795_000_000_000, "503", flags, details, "12", "10.0.0.2:9000", "-", reason))
    assert (line.kind, line.upstream, line.status) == (kind, "10.0.0.2:9000", 503)


@pytest.mark.parametrize("flags, host, kind", [
    ("UH", "-", "no_live_upstreams"),
    ("NR", "-", "no_live_upstreams"),
    ("NC", "-", "no_live_upstreams"),
    ("UO", "10.0.0.2:9000", "other"),
    ("LR", "10.0.0.2:9000", "other"),
    ("RL", "-", "other"),
    ("UAEX", "-", "other"),
    ("UPE", "10.0.0.2:9000", "other"),
    ("DC,UO", "10.0.0.2:9000", "other"),
])
def test_flags_never_tied(flags: str, host: str, kind: str) -> None:
    (line,), _, _ = envoy_line(1, istio(1_795_000_000_000, "503", flags, "-", "3", host, "-"))
    assert line.kind == kind


@pytest.mark.parametrize("code, flags, host", [
    ("0", "DC", "10.0.0.2:9000"),          # the client left: nothing about the upstream
    ("400", "DPE", "-"),
    ("0", "DC,URX", "10.0.0.2:9000"),
    ("200", "-", "-"),                       # no upstream: a direct response
    ("0", "-", "10.0.0.2:9000"),             # no response began: the upstream had not answered
])
def test_lines_about_no_upstream_give_no_log_line(code: str, flags: str, host: str) -> None:
    assert envoy_line(1, istio(1_795_000_000_000, code, flags, "-", "3", host, "-")) == ([], 0.0, 0.001)


def test_a_pipe_upstream_ties_to_nothing() -> None:
    (line,), _, _ = envoy_line(1, istio(1_795_000_000_000, "503", "UF", "-", "3", "/run/app.sock", "-"))
    assert (line.kind, line.upstream) == ("other", None)
    assert envoy_line(1, istio(1_795_000_000_000, "200", "-", "-", "3", "/run/app.sock", "-")) == ([], 0.0, 0.001)


def test_envoy_kind_takes_the_upstream_flag_first() -> None:
    assert envoy_kind({"URX", "UF"}, "", True, "503") == "connect_failure"
    assert envoy_kind({"DC", "UT"}, "", True, "504") == "gateway_timeout"
    assert envoy_kind({"DI"}, "", True, "200") == "answered"
    assert envoy_kind(set(), "", False, "200") is None


def test_ipv6_upstream_and_local_address() -> None:
    (line,), _, _ = envoy_line(1, istio(1_795_000_000_000, "504", "UT", "upstream_response_timeout", "15000",
                                        "[fd00::2]:9000", "[fd00::1]:40001"))
    assert (line.kind, line.upstream, line.local_port, line.status) == ("gateway_timeout", "[fd00::2]:9000", 40001, 504)
    assert line.time == pytest.approx(1_795_000_000 + 15.0)


@pytest.mark.parametrize("value, expected", [
    ("2026-11-28T20:59:43.123Z", (datetime(2026, 11, 28, 20, 59, 43, 123000, timezone.utc).timestamp(), 0.0, 0.001)),
    ("2022-03-11T09:58:37.960+0000", (datetime(2022, 3, 11, 9, 58, 37, 960000, timezone.utc).timestamp(), 0.0, 0.001)),
    # The clock read as UTC and its zone, as for nginx's `$time_local`.
    ("2026/11/28T21:59:43+0100", (datetime(2026, 11, 28, 21, 59, 43, tzinfo=timezone.utc).timestamp(), 3600.0, 1.0)),
    ("1527590590.528", (1527590590.528, 0.0, 0.001)),
    ("2026-02-30T00:00:00.000Z", None),
    ("-", None),
])
def test_start_time(value: str, expected) -> None:
    got = start_time(value)
    assert got == (pytest.approx(expected) if expected else None)


def test_json_lines_with_envoy_keys() -> None:
    # Istio's JSON keys, string values (`json_format`).
    doc = {"start_time": "2026-11-28T20:59:43.123Z", "method": "GET", "response_code": "503", "response_flags": "UF,URX",
           "response_code_details": "upstream_reset_before_response_started{connection_failure}", "duration": "2001",
           "upstream_service_time": "-", "upstream_host": "10.0.0.2:9000", "upstream_cluster": "outbound|9000||svc",
           "upstream_local_address": "10.0.0.1:40002", "upstream_transport_failure_reason": "delayed_connect_error:_111"}
    (line,), zone, _ = envoy_line(3, json.dumps(doc))
    assert (line.kind, line.upstream, line.local_port, line.status, zone) == ("refused", "10.0.0.2:9000", 40002, 503, 0.0)
    assert line.timings == {"total": 2.001}
    # Keys of its own, numbers and nulls (`typed_json_format`), nested objects.
    typed = {"startTime": "2022-03-11T09:58:37.960+0000", "responseCode": 504, "responseFlags": "UT", "duration": 15000,
             "upstream": {"host": "10.0.0.2:9000", "local_address": None}}
    (line,), _, _ = envoy_line(4, json.dumps(typed))
    assert (line.kind, line.upstream, line.local_port, line.status) == ("gateway_timeout", "10.0.0.2:9000", None, 504)


@pytest.mark.parametrize("text", [
    DOCS_JSON_LINE,                                                        # no start time
    '{"msec": "1795249780.512", "status": "504", "upstream_addr": "10.231.1.2:9000"}',   # nginx's
    '{"start_time": "2026-11-28T20:59:43.123Z", "status": "200"}',        # no flags, no upstream host
    '["start_time", "response_flags"]',
    '{"start_time": "2026-11-28T20:59:43.123Z", "response_flags": "UF"',  # truncated
])
def test_json_that_is_not_envoys(text: str) -> None:
    assert envoy_line(1, text) is None


def test_read_log_finds_each_format(tmp_path: Path) -> None:
    log = read_log(write(tmp_path, "envoy.log", DOCS_DEFAULT_LINE + "\n" + DOCS_DEFAULT_LINE[:70] + "\n"))
    assert (log.format, log.total, log.unreadable, log.zone, log.resolution) == ("envoy", 2, 1, 0.0, 0.001)
    assert [(x.kind, x.upstream) for x in log.lines] == [("answered", "10.0.2.1:80")]
    assert log.lines[0].text == DOCS_DEFAULT_LINE
    log = read_log(write(tmp_path, "istio.log", ISTIO_REFUSED_LINE + "\n" + ISTIO_ANSWERED_LINE + "\n\x01\xfe garbage\n"))
    assert (log.format, log.unreadable) == ("envoy", 1)
    assert [x.kind for x in log.lines] == ["refused", "answered"]
    lines = [json.dumps({"start_time": iso(1_795_000_000_000 + i), "response_code": 200, "response_flags": "-",
                         "upstream_host": "10.0.0.2:9000", "duration": 5}) for i in range(3)]
    log = read_log(write(tmp_path, "envoy.json", "\n".join(lines) + "\n{broken\n"))
    assert (log.format, log.unreadable, len(log.lines)) == ("envoy_json", 1, 3)


def test_nginx_json_lines_stay_nginx(tmp_path: Path) -> None:
    lines = [{"msec": "1795249780.512", "status": "504", "upstream_addr": "10.231.1.2:9000", "upstream_status": "504",
              "upstream_connect_time": "0.000"},
             {"time": "2026-11-21T09:29:40+01:00", "status": "200", "upstream": "10.231.1.2:9000"}]
    log = read_log(write(tmp_path, "access.json", "\n".join(json.dumps(x) for x in lines) + "\n"))
    assert log.format == "json" and [x.kind for x in log.lines] == ["read_timeout", "answered"]


# As in Envoy's configuration, its closing newline written out.
CUSTOM_FORMAT = ('[%START_TIME%] %RESPONSE_CODE% %RESPONSE_FLAGS% %DURATION% up=%UPSTREAM_HOST% '
                 'from=%UPSTREAM_LOCAL_ADDRESS% "%RESPONSE_CODE_DETAILS%" "%REQ(USER-AGENT)%"\\n')


def test_custom_format_string(tmp_path: Path) -> None:
    pattern = compile_log_format(CUSTOM_FORMAT)
    assert pattern.pattern == compile_envoy_format(CUSTOM_FORMAT).pattern
    text = ('[2026-11-28T20:59:43.123Z] 503 UF,URX 1001 up=10.0.0.2:9000 from=- '
            '"upstream_reset_before_response_started{connection_timeout}" "curl/8.4.0 (x86_64-pc-linux-gnu)"')
    (line,), _, _ = envoy_line(1, text, pattern)
    assert (line.kind, line.upstream, line.local_port) == ("connect_timeout", "10.0.0.2:9000", None)
    log = read_log(write(tmp_path, "custom.log", text + "\nnot a line\n"), CUSTOM_FORMAT)
    assert (log.format, log.unreadable, [x.kind for x in log.lines]) == ("log_format", 1, ["connect_timeout"])
    # START_TIME of a format of its own, with a space in it.
    fmt = '%START_TIME(%Y/%m/%d %H:%M:%S.%3f)% %RESPONSE_FLAGS% %UPSTREAM_HOST%'
    (line,), _, _ = envoy_line(1, "2026/11/28 20:59:43.123 UC 10.0.0.2:9000", compile_envoy_format(fmt))
    assert line.kind == "upstream_closed"
    assert line.time == pytest.approx(datetime(2026, 11, 28, 20, 59, 43, 123000, timezone.utc).timestamp())


@pytest.mark.parametrize("fmt, message", [
    ("%RESPONSE_CODE% %RESPONSE_FLAGS% %UPSTREAM_HOST%", "no time"),
    ("[%START_TIME%] %RESPONSE_CODE% %DURATION%", "neither %RESPONSE_FLAGS% nor %UPSTREAM_HOST%"),
    ("[%START_TIME%] %RESPONSE_FLAGS%%UPSTREAM_HOST%", "nothing between them"),
])
def test_custom_format_without_what_is_needed_is_refused(fmt: str, message: str) -> None:
    with pytest.raises(LogError, match=message):
        compile_log_format(fmt)
    with pytest.raises(EvidenceError, match="--log-format"):
        read((), log_format=fmt)


def test_a_line_that_is_no_envoy_line() -> None:
    assert envoy_line(1, DOCS_DEFAULT_LINE[:-20]) is None
    assert envoy_line(1, "\x00\x01\x02 binary") is None
    assert envoy_line(1, DOCS_DEFAULT_LINE.replace("2016-04-15T20:17:00.310Z", "yesterday")) is None


@pytest.mark.parametrize("content", ["hello\n", "\0\1\2binary\n" * 3, "[2016-04-15T20:17:00.310Z] \"POST\n" * 3,
                                     DOCS_JSON_LINE + "\n"])
def test_a_log_of_no_format_is_a_warning(tmp_path: Path, content: str) -> None:
    bad = write(tmp_path, "bad.log", content)
    ev = read((bad,))
    assert not ev.logs and len(ev.warnings) == 1 and "the report goes on without it" in ev.warnings[0]
    r = CliRunner().invoke(cli.cli, ["analyze", "--log", bad, str(CAPTURES / "healthy.pcap")])
    assert r.exit_code == ExitCode.OK, r.output
    assert r.stderr.startswith("pcapq: warning: ") and "Traceback" not in r.output


# ---------------------------------------------------------------------------------------------
# Tests for the join: lines naming the proxy's source port tie to that connection


def _capture(tmp_path: Path) -> str:
    """Two connections from the proxy (10.0.0.1) to 10.0.0.2:9000: from port 40001 answered and
    closed within 0.1 s, from port 40002 (0.2 s on) a SYN sent again at 1.2 s, never answered."""
    packets: list = []
    answered = Conversation(client=("10.0.0.1", 40001), packets=packets)
    answered.handshake(0.0)
    answered.send("client", 0.010, b"GET / HTTP/1.1\r\nHost: svc\r\n\r\n")
    answered.send("server", 0.050, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    answered.close(0.100)
    silent = Conversation(client=("10.0.0.1", 40002), client_isn=7000, packets=packets)
    silent.syn(0.200)
    silent.syn(1.200)
    packets.sort(key=lambda p: p.time)
    return str(write_pcap(tmp_path / "envoy.pcap", packets))


START_MS = int(START * 1000)
# (start after the capture's start in ms, response code, flags, details, duration ms, local address)
JOINED_LINES = [
    (0, "200", "-", "via_upstream", "100", "10.0.0.1:40001"),
    (200, "503", "UF,URX", "upstream_reset_before_response_started{connection_timeout}", "1500", "10.0.0.1:40002"),
    # A port no connection of the capture is from.
    (300, "503", "UF", "upstream_reset_before_response_started{connection_timeout}", "1500", "10.0.0.1:40003"),
    # A line of the next day from the answered connection's port.
    (86_400_000, "200", "-", "via_upstream", "100", "10.0.0.1:40001"),
]


def _log_text(form: str) -> str:
    lines = []
    for at, code, flags, details, duration, local in JOINED_LINES:
        if form == "istio":
            lines.append(istio(START_MS + at, code, flags, details, duration, "10.0.0.2:9000", local))
        elif form == "json":
            lines.append(json.dumps({"start_time": iso(START_MS + at), "response_code": code, "response_flags": flags,
                                     "response_code_details": details, "duration": duration,
                                     "upstream_host": "10.0.0.2:9000", "upstream_local_address": local}))
        else:
            lines.append(f'[{iso(START_MS + at)}] {code} {flags} {duration} up=10.0.0.2:9000 from={local} "{details}" "curl"')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("form, fmt", [("istio", "envoy"), ("json", "envoy_json"), ("custom", "log_format")])
def test_lines_naming_the_source_port_tie_exactly(tmp_path: Path, form: str, fmt: str) -> None:
    pcap = _capture(tmp_path)
    log = write(tmp_path, "envoy.log", _log_text(form))
    analysis = pcapq.analyze([pcap])
    ports = {c["id"]: int(c["client"].rsplit(":", 1)[1]) for c in analysis.connections()}
    d = diagnose(analysis)
    ev = read((log,), log_format=CUSTOM_FORMAT if form == "custom" else None)
    assert not ev.warnings and [x.format for x in ev.logs] == [fmt]
    apply(analysis, d, ev)
    ties = tie_connections(analysis, ev.logs)
    got = {ports[i]: (n["line"], n["kind"], n["exact"], n["status"]) for i, n in ties.by_id.items()}
    assert got == {40001: (1, "answered", True, 200), 40002: (2, "connect_timeout", True, 503)}
    assert ties.by_id[next(i for i, p in ports.items() if p == 40002)]["timings"] == {"total": 1.5}
    f = d.evidence["logs"]["files"][0]
    assert (f["format"], f["lines"], f["upstream_lines"], f["matched"], f["answered_matched"]) == (fmt, 4, 2, 1, 1)
    assert f["untied"] == [{"line": 3, "kind": "connect_timeout", "upstream": "10.0.0.2:9000"}]
    assert f["clock"]["zone"] == 0.0


def test_without_the_source_port_the_line_ties_by_time_and_shape(tmp_path: Path) -> None:
    pcap = _capture(tmp_path)
    # Envoy writes `-` for the local address of a connect that failed.
    text = istio(START_MS + 200, "503", "UF,URX", "upstream_reset_before_response_started{connection_timeout}", "1500",
                 "10.0.0.2:9000", "-")
    log = write(tmp_path, "envoy.log", text + "\n")
    analysis = pcapq.analyze([pcap])
    ev = read((log,))
    ties = tie_connections(analysis, ev.logs)
    ((conn_id, note),) = ties.by_id.items()
    client = next(c["client"] for c in analysis.connections() if c["id"] == conn_id)
    assert client == "10.0.0.1:40002" and note["kind"] == "connect_timeout" and not note["exact"]


def test_the_command_line_notes_the_exact_tie(tmp_path: Path) -> None:
    pcap = _capture(tmp_path)
    log = write(tmp_path, "envoy.log", _log_text("istio"))
    r = CliRunner().invoke(cli.cli, ["analyze", "--format", "json", "--log", log, pcap])
    assert r.exit_code in (ExitCode.OK, ExitCode.PROBLEMS) and not r.stderr, r.output
    doc = json.loads(r.stdout)
    notes = {c["client"]: c["proxy_log"] for c in doc["connections"] if "proxy_log" in c}
    # With a log every connection is kept for the join: the answered one is tied too.
    assert {k: (v["line"], v["kind"], v["exact"]) for k, v in notes.items()} == {
        "10.0.0.1:40001": (1, "answered", True), "10.0.0.1:40002": (2, "connect_timeout", True)}
    assert doc["evidence"]["logs"]["files"][0]["format"] == "envoy"
    r = CliRunner().invoke(cli.cli, ["analyze", "--format", "json", "--log", write(tmp_path, "c.log", _log_text("custom")),
                                     "--log-format", CUSTOM_FORMAT, pcap])
    assert r.exit_code in (ExitCode.OK, ExitCode.PROBLEMS) and not r.stderr, r.output
    notes = {c["client"]: c["proxy_log"] for c in json.loads(r.stdout)["connections"] if "proxy_log" in c}
    assert notes["10.0.0.1:40002"]["exact"] and notes["10.0.0.1:40002"]["line"] == 2
