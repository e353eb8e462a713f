"""The settings a capture shows (src/detect/settings, `Analysis.inferred_settings()`), on the
catalog's captures whose settings their README states: each setting shown holds the truth, a
setting the capture cannot show is absent, and the reports carry the block."""

from __future__ import annotations

import json

import pytest

import pcapq
from tests.inprocess import run_main

SERVER = "10.231.1.2:9000"


def _shown(repo, name: str) -> dict:
    return pcapq.analyze([str(repo / "captures" / name)]).inferred_settings()


def _holds(setting: dict, truth: float) -> bool:
    if setting["value"] is not None and setting["value"] != truth:
        return False
    return (setting["low"] is None or setting["low"] <= truth) and (setting["high"] is None or truth <= setting["high"])


def test_php_fpm_two_workers_backlog_two(repo):
    # php-fpm, pm static, 2 workers, listen.backlog 2, under ab: SYNs dropped, cookies answered.
    shown = _shown(repo, "nginx_php_fpm.pcap")[SERVER]
    assert shown["listener"] == SERVER
    assert _holds(shown["backlog"], 2) and _holds(shown["workers"], 2)
    assert shown["backlog"]["high"] == 2
    assert shown["syncookies"]["value"] is True
    assert all(s["evidence"] for key, s in shown.items() if key != "listener")


def test_syn_queue_overflow_synack_retries_ran_out(repo):
    # tcp_synack_retries=1: the half-open requests' series stop after one re-send.
    shown = _shown(repo, "syn_queue_overflow.pcap")[SERVER]
    assert shown["synack_retries"]["value"] == 1
    assert shown["synack_retries"]["low"] == shown["synack_retries"]["high"] == 1


@pytest.mark.parametrize("name", ["healthy.pcap", "firewall_drop.pcap", "packet_loss.pcap"])
def test_no_backlog_without_the_listener_dropping(repo, name):
    # Nothing dropped, a firewall's SYN drops, the path's losses: none is the accept queue's.
    for shown in _shown(repo, name).values():
        assert "backlog" not in shown


def test_one_at_a_time_shows_no_workers(repo):
    assert all("workers" not in s for s in _shown(repo, "healthy.pcap").values())


def test_reports_carry_the_settings_block(repo):
    path = str(repo / "captures" / "nginx_php_fpm.pcap")
    code, out, _ = run_main("analyze", path, "--format", "json")
    document = json.loads(out)
    assert document["inferred_settings"]["listener"] == SERVER
    assert "inferred_settings_by_listener" not in document
    for fmt, says in (("text", "Settings this capture shows"), ("markdown", "## Settings this capture shows"),
                      ("html", 'id="settings"')):
        code, out, _ = run_main("analyze", path, "--format", fmt, "--no-color")
        assert says in out, fmt
