"""The proxy's timeouts (issue 14, item 2): inferred from when connections gave up (the core's
src/detect/timeouts.rs), stated with --proxy-timeouts, and used for the sizing sentence and the
predicted proxy log, with "probably" where a line is a guess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, run_pcapq
from pcapq.exitcodes import ExitCode
from pcapq.lab.namespaces import unavailable_reason

CAPTURES = REPO / "captures"


def _doc(*args: str) -> dict:
    proc = run_pcapq("analyze", "--format", "json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _aqo(doc: dict) -> dict:
    (finding,) = [f for f in doc["findings"] if f["cause"] == "accept_queue_overflow"]
    return finding


def test_r14_nginx_connect_timeout_is_inferred_from_the_syns_and_said_to_be_a_guess() -> None:
    """nginx_php_fpm: fastcgi_connect_timeout 2s (its nstat header). Give-ups leave no packet: 15
    connections stopped re-sending their SYN between 1 s and the next SYN at 2 s."""
    doc = _doc(str(CAPTURES / "nginx_php_fpm.pcap"))
    assert doc["proxy_timeouts"] == {"connect": {"seconds": 2.0, "connections": 15, "source": "bounded"}}
    finding = _aqo(doc)
    # No request gave up on a read timeout here: the sizing and the 504 line say it is a guess.
    assert "the proxy's read timeout, probably nginx's default 60 s" in finding["details"]["suggestion_note"]
    (read_504,) = [line for line in finding["proxy_log"] if "while reading response header" in line]
    assert read_504.startswith("probably upstream timed out")


def test_r14_read_timeout_is_measured_from_the_clients_that_gave_up() -> None:
    """client_timeout_rst: the client closes 1 s after its request (its nstat header)."""
    doc = _doc(str(CAPTURES / "client_timeout_rst.pcap"))
    assert doc["proxy_timeouts"] == {"read": {"seconds": 1.0, "connections": 3}}


def test_r14_lone_syns_of_a_flood_are_not_a_connect_timeout() -> None:
    doc = _doc(str(CAPTURES / "syn_queue_overflow.pcap"))
    assert "connect" not in doc.get("proxy_timeouts", {})


def test_r14_stated_timeouts_drive_the_sizing_and_the_proxy_log() -> None:
    doc = _doc("--proxy-timeouts", "connect=2,read=3", str(CAPTURES / "nginx_php_fpm.pcap"))
    assert doc["proxy_timeouts"]["read"] == {"seconds": 3.0, "connections": 0, "source": "stated"}
    finding = _aqo(doc)
    details = finding["details"]
    guessed = _aqo(_doc(str(CAPTURES / "nginx_php_fpm.pcap")))["details"]["suggested_backlog"]
    assert details["suggested_backlog"] * 10 < guessed  # 3 s, not 60 s, of answers
    assert "past the proxy's 3 s read timeout (as stated)" in details["suggestion_note"]
    (read_504,) = [line for line in finding["proxy_log"] if "while reading response header" in line]
    assert read_504.endswith("(after the proxy's 3 s read timeout (as stated))")
    assert not read_504.startswith("probably")


@pytest.mark.parametrize("bad", ["read", "write=3", "read=abc", "read=0", ""])
def test_r14_bad_proxy_timeouts_are_a_usage_error(bad: str) -> None:
    proc = run_pcapq("analyze", "--proxy-timeouts", bad, str(CAPTURES / "healthy.pcap"))
    assert proc.returncode == ExitCode.USAGE
    assert b"--proxy-timeouts" in proc.stderr


LAB_NGINX = ("ip", "tcpdump", "ss", "nginx", "ab")


@pytest.mark.kernel
@pytest.mark.skipif(unavailable_reason(LAB_NGINX) is not None, reason=str(unavailable_reason(LAB_NGINX)))
def test_r14_real_nginx_read_timeout_is_found(tmp_path: Path) -> None:
    """nginx with fastcgi_read_timeout 2s in front of php-fpm taking 3 s per request: every
    request gives up after 2 s, and pcapq says so."""
    from pcapq.lab.namespaces import NetnsPair
    from pcapq.lab.scenarios import nginx_php_fpm

    pcap = tmp_path / "ng.pcap"
    with NetnsPair() as net:
        nginx_php_fpm(net, pcap, tmp_path / "ng", backlog=16, children=2, service_time=3.0, requests=8,
                      concurrency=4, connect_timeout=5.0, read_timeout=2.0)
    assert "upstream timed out" in (tmp_path / "ng.error.log").read_text()
    read = _doc(str(pcap))["proxy_timeouts"]["read"]
    assert read["seconds"] == 2.0 and read["connections"] >= 4, read


# ---------------------------------------------------------------------------------------------
# Issue 14, item 3: an estimate only with the evidence it needs


def test_r14_capture_begun_mid_overflow_gives_no_backlog_estimate() -> None:
    """The connections filling the queue began before the capture: none is seen waiting."""
    proc = run_pcapq("analyze", str(CAPTURES / "crafted" / "capture_mid_overflow.pcap"))
    text = proc.stdout.decode()
    assert "effective backlog is about 0" not in text
    assert "no backlog estimate" in text and "began before the capture" in text
    details = _aqo(_doc(str(CAPTURES / "crafted" / "capture_mid_overflow.pcap")))["details"]
    assert "estimated_backlog" not in details and details["waiting_at_first_drop"] == 0


def test_r14_overflow_without_answers_gives_no_sizing() -> None:
    """abort_on_overflow (crafted): the server answered nothing while its queue overflowed."""
    proc = run_pcapq("analyze", str(CAPTURES / "crafted" / "abort_on_overflow.pcap"))
    text = proc.stdout.decode()
    assert "0.0 answers/s" not in text
    assert "no sizing: the server answered 0 connections" in text
    details = _aqo(_doc(str(CAPTURES / "crafted" / "abort_on_overflow.pcap")))["details"]
    assert "suggested_backlog" not in details and "service_rate_per_s" not in details
