"""What the retransmission timings say about the kernels' settings (diagnose/settings.py), on
the catalog's captures: each sentence must name the mechanism the waits really show."""

from __future__ import annotations

import pytest

import pcapq
from pcapq.diagnose import diagnose
from pcapq.diagnose.settings import _first_syn_retry


def _settings(repo, name: str) -> list[str]:
    return diagnose(pcapq.analyze([str(repo / "captures" / name)], keep_connections=False)).settings


@pytest.mark.parametrize(
    "seconds, says",
    [
        (1.01, "the 1 s initial RTO of Linux 3.1+"),
        (3.0, "the 3 s initial RTO of kernels before 3.1"),
        (0.012, "12 ms after the first, sooner than the client's 1 s SYN timer"),
        (2.0, "the first SYN retry came 2.00 s after the SYN (1 SYN series"),
    ],
)
def test_first_syn_retry_names_what_its_wait_shows(seconds, says):
    assert says in _first_syn_retry(seconds, 1)


def test_a_syn_sent_again_after_milliseconds_is_not_called_a_timer(repo):
    # time_wait_reuse: the client's SYN meets TIME-WAIT and is sent again 12 ms later.
    (syn,) = [s for s in _settings(repo, "time_wait_reuse.pcap") if "SYN" in s]
    assert "sooner than the client's 1 s SYN timer" in syn and "Linux 3.1+" not in syn


def test_sub_millisecond_data_resends_are_fast_retransmits(repo):
    # packet_loss: nftables drops segments of a bulk transfer; SACK brings the re-sends at once.
    (data,) = [s for s in _settings(repo, "packet_loss.pcap") if s.startswith("data re-sent")]
    assert data.endswith("a fast retransmit (duplicate ACKs or SACK: tcp_fastretrans_alert(), RACK), not a timer")


def test_resends_after_200_ms_are_timers(repo):
    (data,) = [s for s in _settings(repo, "nginx_php_fpm.pcap") if s.startswith("data re-sent")]
    assert data.endswith("the loss probe / RTO")
    (syn,) = [s for s in _settings(repo, "nginx_php_fpm.pcap") if "SYN" in s]
    assert "the 1 s initial RTO of Linux 3.1+" in syn
