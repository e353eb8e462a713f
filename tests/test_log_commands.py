"""The proxy's logs in `pcapq timeline` and `pcapq explain` (--log, --nginx-conf, --log-format):
each connection shown with the line its proxy wrote about it, tied as `pcapq analyze` ties it
(docs/evidence.md), on the shipped real captures and their logs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from conftest import REPO

from pcapq import cli
from pcapq.causes.proxy_log import LINES
from pcapq.exitcodes import ExitCode

CAPTURES = REPO / "captures"
NGINX = str(CAPTURES / "nginx_php_fpm")
NGINX_LOGS = ["--log", NGINX + ".error.log", "--log", NGINX + ".access.log"]
HAPROXY = str(CAPTURES / "haproxy_overflow")
# Wide enough that no text line is wrapped.
WIDE = {"COLUMNS": "2000"}


def invoke(*args: str):
    return CliRunner().invoke(cli.cli, list(args), env=WIDE)


def analyze_notes(capture: str, logs: list[str]) -> dict[int, dict]:
    """Connection id -> its `proxy_log`, as `pcapq analyze --format json` writes them."""
    r = invoke("analyze", "--format", "json", *logs, capture)
    assert r.exit_code in (ExitCode.OK, ExitCode.PROBLEMS), r.stderr
    return {c["id"]: c["proxy_log"] for c in json.loads(r.stdout)["connections"] if "proxy_log" in c}


def timeline_json(*args: str) -> dict:
    r = invoke("timeline", "--format", "json", "--limit", "1000", *args)
    assert r.exit_code == ExitCode.OK, r.stderr
    return json.loads(r.stdout)


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ---------------------------------------------------------------------------------------------
# Tests for the options


@pytest.mark.parametrize("command", ["analyze", "watch", "timeline", "explain"])
def test_every_command_that_reads_logs_has_the_same_options(command: str) -> None:
    params = {p.name: p for p in cli.cli.commands[command].params}
    assert {"logs", "nginx_conf", "log_format"} <= params.keys()
    assert params["logs"].opts == ["--log"] and params["logs"].multiple
    assert params["nginx_conf"].opts == ["--nginx-conf"] and params["log_format"].opts == ["--log-format"]


@pytest.mark.parametrize("command", ["timeline", "explain"])
def test_help_has_an_example_with_log(command: str) -> None:
    r = invoke(command, "--help")
    assert r.exit_code == 0
    assert re.search(rf"\$ pcapq {command} .*--log error\.log", r.stdout), r.stdout
    assert "--nginx-conf FILE" in r.stdout and "--log-format FORMAT" in r.stdout


@pytest.mark.parametrize("command", [["timeline", "--failed"], ["explain"]])
def test_a_log_format_without_a_time_is_a_usage_error(command: list[str]) -> None:
    r = invoke(*command, "--log", NGINX + ".access.log", "--log-format", "$status $upstream_addr", NGINX + ".pcap")
    assert r.exit_code == ExitCode.USAGE and "--log-format" in r.stderr and "no time" in r.stderr


# ---------------------------------------------------------------------------------------------
# Tests for pcapq timeline


def test_timeline_shows_the_error_line_of_each_failed_connection() -> None:
    r = invoke("timeline", "--failed", "--limit", "100", "--log", NGINX + ".error.log", NGINX + ".pcap")
    assert r.exit_code == ExitCode.OK, r.stderr
    tied = re.findall(r"^proxy log  (\S+):(\d+)  (\d+) (\w+)  \"(.*)\"$", r.stdout, re.M)
    # The 17 upstream errors: 15 connect timeouts (no SYN-ACK in time), 2 read timeouts.
    assert len(tied) == 17
    assert sorted(int(line) for _, line, _, _, _ in tied) == list(range(1, 18))
    kinds = [kind for *_, kind, _ in tied]
    assert kinds.count("connect_timeout") == 15 and kinds.count("read_timeout") == 2
    error_log = Path(NGINX + ".error.log").read_text().splitlines()
    for path, line, status, _, text in tied:
        assert path == NGINX + ".error.log" and status == "504" and text == error_log[int(line) - 1]
    # The line is under its connection's header, before the packets.
    header = r.stdout.index("Connection 5: ")
    assert r.stdout.index("proxy log", header) < r.stdout.index("SYN: the client opens", header)


@pytest.mark.parametrize("capture, logs", [
    (NGINX, NGINX_LOGS),
    (HAPROXY, ["--log", HAPROXY + ".haproxy.log"]),
    (str(CAPTURES / "nginx_php_fpm_slow"), ["--log", str(CAPTURES / "nginx_php_fpm_slow.error.log"),
                                            "--log", str(CAPTURES / "nginx_php_fpm_slow.access.log")]),
])
def test_timeline_json_ties_as_analyze_json_does(capture: str, logs: list[str]) -> None:
    expected = analyze_notes(capture + ".pcap", logs)
    assert expected
    # Every connection (--since 0 selects them all), then only those with a problem.
    for selection in (["--since", "0"], ["--failed"]):
        doc = timeline_json(*selection, *logs, capture + ".pcap")
        shown = doc["connections"]
        assert shown and doc["matched"] == len(shown)
        tied = {c["id"]: c["proxy_log"] for c in shown if "proxy_log" in c}
        assert tied == {i: note for i, note in expected.items() if i in {c["id"] for c in shown}}, selection


def test_timeline_markdown_and_html_show_the_line(tmp_path: Path) -> None:
    first = Path(NGINX + ".error.log").read_text().splitlines()[0]
    # The connection the error log's first line is tied to, as analyze ties it.
    tied = next(i for i, note in analyze_notes(NGINX + ".pcap", NGINX_LOGS).items()
                if note["file"].endswith(".error.log") and note["line"] == 1)
    md = invoke("timeline", "--conn", f"#{tied}", "--format", "markdown", *NGINX_LOGS, NGINX + ".pcap")
    assert md.exit_code == ExitCode.OK, md.stderr
    assert "**Proxy log** " in md.stdout and "error.log:1, 504 connect\\_timeout" in md.stdout
    # The log's text is escaped: nothing in it is read as Markdown.
    assert "\\[error\\] 16251#16251: \\*7 upstream timed out" in md.stdout
    out = tmp_path / "t.html"
    html = invoke("timeline", "--conn", f"#{tied}", "--format", "html", "-o", str(out), *NGINX_LOGS, NGINX + ".pcap")
    assert html.exit_code == ExitCode.OK, html.stderr
    page = out.read_text()
    section = page[page.index(f'<section class="ladder" id="ladder-{tied}">'):]
    assert section.index("<th>proxy log</th>") < section.index("<svg")
    assert f"<code>{first.replace(chr(34), '&quot;')}</code>" in section


def test_timeline_sets_the_proxys_times_against_the_capture(tmp_path: Path) -> None:
    # The shipped access log's requests, written as nginx writes $upstream_connect_time and
    # $upstream_header_time.
    text = Path(NGINX + ".access.log").read_text()
    lines = []
    for when, status in re.findall(r'^\S+ - - \[([^\]]+)\] "[^"]*" (\d+)', text, re.M):
        times = "uct=- uht=- urt=2.000" if status == "504" else "uct=0.001 uht=0.499 urt=0.499"
        lines.append(f"[{when}] {status} rt=0.500 ua=10.231.1.2:9000 us={status} {times}")
    logs = ["--log", write(tmp_path, "access.log", "\n".join(lines) + "\n")]
    notes = analyze_notes(NGINX + ".pcap", logs)
    timed = {i: n for i, n in notes.items() if "timings" in n and (n.get("capture") or {}).get("first_byte") is not None}
    assert timed
    conn_id, note = min(timed.items())
    r = invoke("timeline", "--conn", f"#{conn_id}", *logs, NGINX + ".pcap")
    assert r.exit_code == ExitCode.OK, r.stderr
    assert (f"The proxy measured 0.001 s to connect and 0.499 s to the response header; the capture shows the "
            f"handshake done {note['capture']['connect']:.3f} s and the server's first byte "
            f"{note['capture']['first_byte']:.3f} s after the first SYN.") in r.stdout, r.stdout


# ---------------------------------------------------------------------------------------------
# Tests for pcapq explain


def test_explain_ends_what_the_applications_saw_with_the_proxys_line() -> None:
    doc = json.loads(invoke("explain", "--format", "json", *NGINX_LOGS, NGINX + ".pcap").stdout)
    conn_id = doc["connection"]["id"]
    note = analyze_notes(NGINX + ".pcap", NGINX_LOGS)[conn_id]
    assert doc["proxy_log"] == note and doc["proxy_log_agrees"] is True
    r = invoke("explain", *NGINX_LOGS, NGINX + ".pcap")
    assert r.exit_code == ExitCode.OK, r.stderr
    text = " ".join(r.stdout.split())
    said = f"What the proxy logged for this connection ({note['file']}:{note['line']}, {note['status']} {note['kind']}): "
    assert said + f'"{note["text"]}".' in text
    # After what nginx logs in such a case, before the time lost and what to change.
    assert text.index("What nginx logs in such a case") < text.index(said) < text.index("What to change")
    assert "It is the line pcapq predicted above." in text


def test_explain_conn_ties_as_analyze_does() -> None:
    r = invoke("analyze", "--format", "json", *NGINX_LOGS, NGINX + ".pcap")
    tied = [c for c in json.loads(r.stdout)["connections"] if "proxy_log" in c]
    for c in (tied[0], tied[-1]):
        port = c["client"].rsplit(":", 1)[1]
        doc = json.loads(invoke("explain", "--conn", port, "--format", "json", *NGINX_LOGS, NGINX + ".pcap").stdout)
        assert doc["connection"]["id"] == c["id"] and doc["proxy_log"] == c["proxy_log"]


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_explain_every_format_has_the_line(fmt: str) -> None:
    r = invoke("explain", "--format", fmt, "--log", HAPROXY + ".haproxy.log", HAPROXY + ".pcap")
    assert r.exit_code == ExitCode.OK, r.stderr
    assert "What the proxy logged for this connection" in r.stdout
    assert "haproxy_overflow.haproxy.log:" in r.stdout.replace("\\_", "_")
    assert "It is the line pcapq predicted above." in r.stdout


def test_explain_says_when_the_line_is_not_the_one_predicted() -> None:
    from pcapq.teach.narrate import _logged

    conn = {"request": {"answered": None}}
    note = {"file": "error.log", "line": 3, "status": 504, "kind": "connect_timeout", "text": "x", "exact": False}
    refused = SimpleNamespace(proxy_log=[LINES["refused"]])
    lines, agrees = _logged(conn, refused, note)
    assert agrees is False
    assert lines == ['What the proxy logged for this connection (error.log:3, 504 connect_timeout): "x".',
                     "It is not the line pcapq predicted above: the proxy logged a line of kind connect_timeout."]
    assert _logged(conn, SimpleNamespace(proxy_log=[LINES["timed_out"]]), note)[1] is True
    assert _logged(conn, None, note)[1] is None


# ---------------------------------------------------------------------------------------------
# Tests for what does not change


@pytest.mark.parametrize("command", [
    ["timeline", "--failed"], ["timeline", "--format", "json"], ["explain"], ["explain", "--format", "json"],
])
@pytest.mark.parametrize("content", ["hello\n", "\0\1\2binary\n"])
def test_a_log_that_cannot_be_read_is_a_warning_and_the_output_is_as_without_it(
    tmp_path: Path, command: list[str], content: str
) -> None:
    bad = write(tmp_path, "bad.log", content)
    plain = invoke(*command, NGINX + ".pcap")
    r = invoke(*command, "--log", bad, NGINX + ".pcap")
    assert r.exit_code == plain.exit_code == ExitCode.OK
    assert r.stderr.startswith(f"pcapq: warning: {bad}") and "goes on without it" in r.stderr, r.stderr
    assert r.stdout == plain.stdout


@pytest.mark.parametrize("command", [["timeline", "--failed"], ["explain"]])
def test_without_log_no_proxy_line(command: list[str]) -> None:
    text = invoke(*command, NGINX + ".pcap")
    assert "proxy log  " not in text.stdout and "What the proxy logged" not in text.stdout
    doc = json.loads(invoke(*command, "--format", "json", NGINX + ".pcap").stdout)
    records = doc["connections"] if command[0] == "timeline" else [doc]
    assert records and not any("proxy_log" in c for c in records)
